"""The package's layout stays a thin front over its parts: short signatures, a small estimator
base class, and few private names of the estimators used elsewhere (read with :mod:`ast`)."""

import ast
import re
from pathlib import Path

import sktree_lmc

PACKAGE = Path(sktree_lmc.__file__).parent
ESTIMATORS = PACKAGE / "_estimators.py"


def _functions():
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path, node


def test_no_function_takes_more_than_six_positional_parameters():
    """``self``/``cls`` not counted, keyword-only parameters free, ``__init__`` exempt."""
    over = []
    for path, node in _functions():
        if node.name == "__init__":
            continue
        names = [a.arg for a in node.args.posonlyargs + node.args.args]
        if names and names[0] in ("self", "cls"):
            names = names[1:]
        if len(names) > 6:
            over.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({len(names)})")
    assert over == []


def _estimator_classes():
    tree = ast.parse(ESTIMATORS.read_text())
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def test_the_estimators_base_class_is_at_most_500_lines():
    base = _estimator_classes()["_BaseSoftTreeEnsemble"]
    assert base.end_lineno - base.lineno + 1 <= 500


def test_other_modules_use_at_most_three_private_names_of_the_estimators():
    private = set()
    for cls in _estimator_classes().values():
        for node in cls.body:
            names = ([node.name] if isinstance(node, ast.FunctionDef)
                     else [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)])
            private.update(n for n in names if n.startswith("_") and not n.startswith("__"))
    used = set()
    for path in PACKAGE.rglob("*.py"):
        if path != ESTIMATORS:
            text = path.read_text()
            used.update(n for n in private if re.search(rf"\.{re.escape(n)}\b", text))
    assert len(used) <= 3, sorted(used)
