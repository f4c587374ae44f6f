"""The documentation: docstring examples, the user guide's examples, the API listing, the build.

- every public function and class has an ``Examples`` section whose doctests pass, or appears in
  a gallery example (``examples/plot_*.py``);
- the docstring examples of every public object and of its methods run;
- the ``>>>`` examples of ``docs/*.rst`` and ``docs/user_guide/*.rst`` run;
- ``docs/api.rst`` lists every public name;
- when Sphinx and the docs extras are installed, ``python -m sphinx -W -b html docs <tmp>``
  succeeds (marked ``slow``: it runs the gallery).
"""

import doctest
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sktree_lmc
from sktree_lmc import datasets

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"

OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

PUBLIC = [(sktree_lmc, name) for name in sktree_lmc.__all__] + [
    (datasets, name) for name in datasets.__all__
]
PUBLIC_CALLABLES = [(mod, name) for mod, name in PUBLIC if callable(getattr(mod, name))]

# Docstring examples that need something the test environment may lack.
NEEDS = {
    "load_tabular_benchmark": "tabular_data_home",  # reads the shared Tabular-Benchmark data
}


def _has(module):
    return importlib.util.find_spec(module) is not None


def _gallery_sources():
    return "\n".join(p.read_text() for p in sorted(EXAMPLES.glob("plot_*.py")))


def _id(param):
    mod, name = param
    return f"{mod.__name__}.{name}"


def _run_doctests(obj, name, globs=None):
    finder = doctest.DocTestFinder(recurse=True)
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    tests = [t for t in finder.find(obj, name, globs=globs or {}) if t.examples]
    for test in tests:
        runner.run(test, out=lambda text: sys.stdout.write(text))
    return runner.summarize(verbose=False), tests


@pytest.mark.parametrize("param", PUBLIC_CALLABLES, ids=[_id(p) for p in PUBLIC_CALLABLES])
def test_public_callable_has_runnable_example(param):
    """An ``Examples`` section with at least one doctest that is not skipped, or a gallery use."""
    mod, name = param
    obj = getattr(mod, name)
    doc = inspect.getdoc(obj) or ""
    assert doc, f"{name} has no docstring"
    has_section = "\nExamples\n--------\n" in doc
    runnable = has_section and any(
        not ex.options.get(doctest.SKIP, False)
        for test in doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
        for ex in test.examples
    )
    in_gallery = name in _gallery_sources()
    assert has_section, f"{name}: no Examples section in its docstring"
    assert runnable or in_gallery, (
        f"{name}: its Examples are all skipped and no gallery example uses it"
    )



#: The public objects whose doctests run here: those of ``sktree_lmc.datasets`` run in
#: tests/test_datasets.py (with the data they need), so they are not collected twice.
DOCTESTED = [p for p in PUBLIC_CALLABLES if p[0] is not datasets]


@pytest.mark.parametrize("param", DOCTESTED, ids=[_id(p) for p in DOCTESTED])
def test_docstring_examples_run(param, request):
    """The doctests of every public object and of its methods."""
    mod, name = param
    if name in NEEDS:
        request.getfixturevalue(NEEDS[name])
    obj = getattr(mod, name)
    if name == "InterpolationCurveDisplay" and not _has("matplotlib"):
        pytest.skip("needs matplotlib")
    results, _ = _run_doctests(obj, name)
    assert results.failed == 0, f"{results.failed} failing example(s) in {name}; see stdout"


GUIDE_PAGES = sorted(
    p for p in [*DOCS.glob("*.rst"), *DOCS.glob("user_guide/*.rst")]
    if any(line.lstrip().startswith(">>> ") for line in p.read_text().splitlines())
)


#: Pages whose examples need a newer scikit-learn than the package's minimum (1.6):
#: HistGradientBoosting's ``fit(..., X_val=, y_val=)`` arrived in 1.7.
PAGE_NEEDS_SKLEARN = {"validation_and_losses.rst": "1.7"}


@pytest.mark.parametrize("page", GUIDE_PAGES, ids=[str(p.relative_to(DOCS)) for p in GUIDE_PAGES])
def test_documentation_page_examples_run(page):
    """Every ``>>>`` example of the hand-written pages runs (they are doctests)."""
    needed = PAGE_NEEDS_SKLEARN.get(page.name)
    if needed:
        import sklearn
        from sklearn.utils.fixes import parse_version

        if parse_version(sklearn.__version__) < parse_version(needed):
            pytest.skip(f"{page.name} needs scikit-learn >= {needed}")
    results = doctest.testfile(str(page), module_relative=False, optionflags=OPTIONFLAGS,
                               verbose=False, report=True, encoding="utf-8")
    assert results.attempted > 0
    assert results.failed == 0, f"{results.failed} failing example(s) in {page.name}"


def test_api_reference_lists_every_public_name():
    api = (DOCS / "api.rst").read_text()
    listed = {line.strip() for line in api.splitlines()}
    listed |= {line.split("::", 1)[1].strip() for line in api.splitlines() if ".. data::" in line}
    missing = [f"{mod.__name__}.{name}" for mod, name in PUBLIC if name not in listed]
    assert not missing, f"docs/api.rst does not list {missing}"


def test_gallery_examples_are_cells():
    """Gallery scripts: a title docstring and ``# %%`` cells."""
    scripts = sorted(EXAMPLES.glob("plot_*.py"))
    assert scripts
    for script in scripts:
        text = script.read_text()
        assert text.startswith('"""'), f"{script.name} must start with its title docstring"
        assert "\n# %%\n" in text, f"{script.name} has no '# %%' cells"


DOCS_EXTRAS = ["sphinx", "numpydoc", "sphinx_gallery", "pydata_sphinx_theme", "myst_parser",
               "matplotlib"]


@pytest.mark.slow
@pytest.mark.skipif(not all(_has(m) for m in DOCS_EXTRAS),
                    reason="needs the docs extras: pip install -e '.[docs]'")
@pytest.mark.skipif(os.environ.get("SKTREE_LMC_CI_BUILDS_DOCS") == "1",
                    reason=".ci/run builds the documentation itself, with -W, after the tests")
def test_sphinx_build_with_warnings_as_errors(tmp_path):
    """The documented build command, warnings as errors, entirely in a temporary folder.

    The sources (``docs/``, ``examples/``, ``CHANGELOG.md``) are copied there first, so that
    the generated API pages and the gallery (``generated/``, ``auto_examples/``) are written
    beside the copy, never into the source tree.
    """
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("_build", "auto_examples", "generated", "__pycache__")
    shutil.copytree(DOCS, src / "docs", ignore=ignore)
    shutil.copytree(EXAMPLES, src / "examples", ignore=ignore)
    shutil.copy(ROOT / "CHANGELOG.md", src / "CHANGELOG.md")
    before = sorted(p.name for p in DOCS.iterdir())
    env = dict(os.environ, MPLBACKEND="Agg")
    env.pop("SKTREE_LMC_DOCS_INTERSPHINX", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
           "-d", str(tmp_path / "doctrees"), str(src / "docs"), str(tmp_path / "html")]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-10000:]
    html = tmp_path / "html"
    for page in ["index.html", "getting_started.html", "api.html", "changelog.html",
                 "user_guide/barrier.html", "auto_examples/plot_interpolation_curves.html"]:
        assert (html / page).is_file(), page
    assert "sphx_glr_plot_interpolation_curves_001.png" in (
        html / "user_guide" / "barrier.html").read_text()
    assert sorted(p.name for p in DOCS.iterdir()) == before  # nothing written into docs/


def test_user_guide_pages_are_in_the_toctree():
    """Every user-guide page is listed in ``docs/user_guide/index.rst``, and the labels that
    docstrings and pages link to exist."""
    index = (DOCS / "user_guide" / "index.rst").read_text()
    listed = {line.strip() for line in index.split(".. toctree::", 1)[1].splitlines()}
    pages = {p.stem for p in (DOCS / "user_guide").glob("*.rst")} - {"index"}
    assert pages <= listed, f"not in the user guide's toctree: {sorted(pages - listed)}"
    labels = "".join(p.read_text() for p in (DOCS / "user_guide").glob("*.rst"))
    for label in ["encoding_and_training", "validation_and_losses", "additive_per_column"]:
        assert f".. _{label}:" in labels, label


# -- the README names every extra; the guide shows the paper's settings ----------------------
def test_readme_extras_and_the_paper_settings_in_the_docs():
    readme = (ROOT / "README.md").read_text()
    extras = re.search(r"Other extras: (.*?)\n\n", readme, re.S).group(1)
    for extra in ("export", "tests", "plot", "progress", "distributed", "docs", "benchmarks"):
        assert f"`{extra}`" in extras
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert set(declared) <= {m for m in re.findall(r"`(\w+)`", extras)}
    assert "version 0.2" not in (ROOT / "docs" / "sharded.md").read_text()
    guide = (ROOT / "docs" / "user_guide" / "encoding_and_training.rst").read_text()
    paper = guide[guide.index(">>> PAPER = dict("):]
    paper = paper[:paper.index(">>> X_train")]
    for setting in ("teacher_weight=0", "additive_bins=None", "learning_rate=1e-2"):
        assert setting in paper
