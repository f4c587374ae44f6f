"""Sphinx configuration of the sktree_lmc documentation.

Build (from the repository root, with ``pip install -e ".[docs]"``)::

    python -m sphinx -W -b html docs docs/_build/html

The build runs the gallery (``examples/plot_*.py``) and the ``.. plot::``
diagrams, validates the public docstrings with numpydoc, and treats every
warning as an error (``-W``). It needs no network: links to the documentation
of NumPy, scikit-learn, PyTorch, ... (intersphinx) are only resolved when the
environment variable ``SKTREE_LMC_DOCS_INTERSPHINX=1`` is set, because fetching
their inventories offline would fail the ``-W`` build.
"""

import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "sphinxext"))

import torch  # noqa: E402
from docutils import nodes  # noqa: E402

import sktree_lmc  # noqa: E402

# The gallery's models are tiny: one thread runs them as fast as several, and is
# not slowed down several times over by oversubscription on a busy machine.
torch.set_num_threads(int(os.environ.get("SKTREE_LMC_DOCS_THREADS", "1")))

# -- Project -------------------------------------------------------------------
project = "sktree_lmc"
author = "the sktree_lmc developers"
copyright = "2025, the sktree_lmc developers"
release = sktree_lmc.__version__
version = release

# -- General -------------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "matplotlib.sphinxext.plot_directive",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "_static",
    "_templates",
    "sphinxext",
    "generated/backreferences",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.json",
    "auto_examples/*.md5",
    "**/README.md",
]
default_role = "literal"
nitpicky = False

# -- Markdown pages (benchmarks, sharded training, the changelog) -------------
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

#: Markdown pages written alongside the code; those that ``index.rst`` does not
#: list itself (``sharded`` is in the main navigation) are listed in its
#: toctree (placeholder ``.. optional-pages``) when they exist.
OPTIONAL_PAGES = {
    "sharded": "Sharded and federated training",
    "benchmarks": "Benchmarks: reproducing the paper",
}


def _optional_pages(app, docname, source):
    """Replace the ``.. optional-pages`` placeholder by the pages that exist."""
    if docname != "index":
        return
    present = [name for name in OPTIONAL_PAGES if (HERE / f"{name}.md").exists()
               and f"   {name}\n" not in source[0]]  # not already in the toctree
    lines = "".join(f"   {name}\n" for name in present)
    source[0] = source[0].replace("   .. optional-pages\n", lines)


# -- API reference (autodoc, autosummary, numpydoc) -------------------------------
autosummary_generate = True
# Inherited members are documented, except torch.nn.Module's (SoftTreeEnsembleModule).
autodoc_default_options = {"members": True, "inherited-members": "Module"}
autodoc_typehints = "none"
add_module_names = False

numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False
# Checks run on every docstring rendered by autodoc ("all" followed by the
# codes left out); a failing check is a warning, hence an error under -W. Left
# out: no extended summary (ES01), no See Also (SA01), no Examples on methods
# (EX01; tests/test_docs.py checks that every public function and class has
# one), summaries starting with a plural noun read as a third-person verb
# (SS05), and "name : type" first lines in Returns sections, as scikit-learn
# writes them (RT02).
numpydoc_validation_checks = {"all", "ES01", "SA01", "EX01", "SS05", "RT02"}
numpydoc_validation_exclude = {
    # inherited from scikit-learn, validated there
    r"\.get_params$",
    r"\.set_params$",
    r"\.set_\w+_request$",
    r"\.get_metadata_routing$",
    r"\.score$",
    r"\.__init__$",
    # dunders (dataclass-generated ones have no numpydoc docstring)
    r"\.__\w+__$",
    # a class-level default of a fitted attribute, documented in the class docstring
    r"\.TabularEncoder\.column_kinds_$",
    # inherited from BaseException, documented by Python
    r"\.(WorkerLostError|MergeQualityWarning)\.(add_note|with_traceback)$",
    # TabularEncoder's column-list methods, used inside fit and predict (the public
    # fit/transform are scikit-learn's and validated); their docstrings say so, with no
    # example of their own (the class has one)
    r"\.TabularEncoder\.(transform_columns|encode_chunks|identity|to_dict|from_dict"
    r"|is_identity|ramp_directions|from_summaries)$",
    # inherited from scikit-learn's TransformerMixin
    r"\.fit_transform$",
    r"\.set_output$",
}
numpydoc_validation_overrides = {
    # TreeArchitecture's private ``_cache`` field shows in its dataclass signature.
    "PR01": [r"^The table that defines one tree architecture"],
}

# -- Cross-project links (intersphinx) -------------------------------------------
# Enabled only on demand: the inventories come from the network, and a failed
# fetch is a warning, i.e. an error under -W.
if os.environ.get("SKTREE_LMC_DOCS_INTERSPHINX", "0") not in ("", "0"):
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable/", None),
        "scipy": ("https://docs.scipy.org/doc/scipy/", None),
        "sklearn": ("https://scikit-learn.org/stable/", None),
        "torch": ("https://docs.pytorch.org/docs/stable/", None),
        "matplotlib": ("https://matplotlib.org/stable/", None),
        "joblib": ("https://joblib.readthedocs.io/en/stable/", None),
    }
else:
    intersphinx_mapping = {}
intersphinx_timeout = 10

# -- Gallery (sphinx-gallery) ---------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "tree_diagrams.GalleryOrder",
    "doc_module": ("sktree_lmc",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"sktree_lmc": None},
    "remove_config_comments": True,
    "download_all_examples": False,
    "show_memory": False,
    "min_reported_time": 1,
    "capture_repr": ("_repr_html_", "__repr__"),
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "write_computation_times": False,
}

# -- Diagrams (matplotlib plot directive, code in sphinxext/tree_diagrams.py) ---
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 110)]
plot_rcparams = {"savefig.bbox": "tight"}
plot_apply_rcparams = True
plot_pre_code = "import matplotlib.pyplot as plt\nimport tree_diagrams\n"

# -- HTML ---------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "sktree_lmc"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "navbar_align": "left",
    "header_links_before_dropdown": 5,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
# No section navigation on pages without siblings, nor on the gallery's pages,
# whose code (100-character lines) needs the width.
html_sidebars = {
    "index": [],
    "getting_started": [],
    "development": [],
    "changelog": [],
    "benchmarks": [],
    "benchmarks_archive": [],
    "sharded": [],
    "auto_examples/*": [],
}
toc_object_entries_show_parents = "hide"
html_show_sourcelink = False


_ROLE = re.compile(r":(?:ref|term|doc):`(?:([^`<]*?)\s*<[^`>]*>|([^`]*))`")


def _plain_sklearn_roles(app, what, name, obj, options, lines):
    """Offline, turn the scikit-learn cross-references of inherited methods into text.

    ``score``, ``set_params`` and the metadata-routing methods come with their
    scikit-learn docstrings, whose ``:ref:`` and ``:term:`` targets live in the
    scikit-learn documentation; without intersphinx they would fail the -W build.
    """
    if intersphinx_mapping or not getattr(obj, "__module__", "").startswith("sklearn"):
        return
    lines[:] = [_ROLE.sub(lambda m: f"*{(m.group(1) or m.group(2)).strip()}*", line)
                for line in lines]


def _optional_doc_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``:optional-doc:`benchmarks```: a ``:doc:`` link when the page exists, else its title."""
    target = text.strip()
    if (HERE / f"{target}.md").exists() or (HERE / f"{target}.rst").exists():
        doc_role = inliner.document.settings.env.get_domain("std").role("doc")
        return doc_role("doc", f":doc:`/{target}`", f"/{target}", lineno, inliner,
                        options or {}, content or [])
    return [nodes.emphasis(rawtext, OPTIONAL_PAGES.get(target, target))], []


#: Pages that list or link the optional pages, re-read on every build so that
#: a page that appears (or disappears) is picked up.
_REREAD = ["index", "user_guide/merging", "user_guide/barrier",
           "user_guide/encoding_and_training"]


def _always_reread(app, env, added, changed, removed):
    return [doc for doc in _REREAD if doc in env.found_docs]


def setup(app):
    app.connect("source-read", _optional_pages)
    app.connect("env-get-outdated", _always_reread)
    app.add_role("optional-doc", _optional_doc_role)
    app.connect("autodoc-process-docstring", _plain_sklearn_roles)
