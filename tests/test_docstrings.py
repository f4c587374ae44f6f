"""Docstrings are reference, not lab notebooks.

- the classifier's docstring is no longer than scikit-learn's
  HistGradientBoostingClassifier's, and no public docstring is;
- no public docstring (of the objects in ``sktree_lmc.__all__`` and of their public
  methods and properties) quotes a benchmark result or narrates history: measurements live
  in ``docs/benchmarks.md``, ``docs/sharded.md`` and the user guide, history in
  ``CHANGELOG.md``, and the docstrings link to them;
- every ``__init__`` parameter of the estimators and of ``ShardedSoftTreeEnsemble`` is
  documented in its Parameters section, and nothing else is.
"""

import inspect
import re

import pytest
from sklearn.ensemble import HistGradientBoostingClassifier

import sktree_lmc
from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
)

HGB_LINES = len(HistGradientBoostingClassifier.__doc__.splitlines())

#: What a quoted measurement or a piece of history looks like. A default (``0.5``), a range
#: (``[0, 1)``), a split such as ``80%/20%`` or "percentage points" are not matched.
BENCHMARK_PATTERNS = {
    "a measurement": r"\b[Mm]easured\b",
    "a percentage": r"(?<![/\d.])\d+(\.\d+)? ?%(?!/)",
    "a gain in points": r"\d+\.\d+ points\b",
    "a signed gain": r"(?<![\w.+-])\+\d+\.\d+\b",
    "a comparison of numbers": r"\b(against|versus|vs\.?) [-+\u2212]?\d",
    "CPU seconds": r"\bCPU s(econds)?\b",
    "a timing": r"\b\d+(\.\d+)? s (on|for) ",
    "a speed-up": r"\b\d+(\.\d+)?x\b",
    "a tally of datasets": r"\b\d+ of (the )?\d+ (datasets?|cells?|pairs?)\b",
    "history": r"\buntil then\b|\bbefore version\b|\bthe default before\b|\bat first\)",
}


def _public_objects():
    """(name, object) of every public object and of its public methods and properties."""
    for name in sktree_lmc.__all__:
        obj = getattr(sktree_lmc, name)
        if not (inspect.isclass(obj) or inspect.isroutine(obj)):
            continue  # constants such as ARCHITECTURES
        yield name, obj
        if not inspect.isclass(obj):
            continue
        for attr in dir(obj):
            if attr.startswith("_"):
                continue
            member = inspect.getattr_static(obj, attr)
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            func = member.fget if isinstance(member, property) else member
            if inspect.isfunction(func) and func.__module__.startswith("sktree_lmc"):
                yield f"{name}.{attr}", member


PUBLIC = list(_public_objects())


def _doc(obj):
    return (obj.__doc__ if not isinstance(obj, property) else obj.fget.__doc__) or ""


def test_classifier_docstring_is_no_longer_than_histgradientboosting():
    n_lines = len(SoftTreeEnsembleClassifier.__doc__.splitlines())
    assert n_lines <= HGB_LINES, (
        f"SoftTreeEnsembleClassifier's docstring has {n_lines} lines, "
        f"HistGradientBoostingClassifier's {HGB_LINES}"
    )


def test_no_public_docstring_is_longer_than_histgradientboosting():
    long = {name: len(_doc(obj).splitlines()) for name, obj in PUBLIC
            if len(_doc(obj).splitlines()) > HGB_LINES}
    assert not long, f"docstrings longer than HistGradientBoostingClassifier's: {long}"


@pytest.mark.parametrize("pattern", list(BENCHMARK_PATTERNS.values()),
                         ids=list(BENCHMARK_PATTERNS))
def test_patterns_catch_what_they_are_meant_to(pattern):
    """Each pattern matches a line of the kind it forbids (the old docstrings had them)."""
    examples = [
        "Measured on the seven Tabular-Benchmark datasets",
        "averaged 75.71, 75.76, 75.85 and 75.79 % test accuracy",
        "their test barrier was 2.18 points against 0.48",
        "electricity +0.61",
        "(77.8 vs 75.4)",
        "2-6 CPU s",
        "(0.6 s for 256 pairs of depth 7 on one core)",
        "fits 10,000-row samples 3x faster",
        "better on 3 of 4 datasets",
        "It was 1e-2 until then",
    ]
    assert any(re.search(pattern, line) for line in examples)


@pytest.mark.parametrize("text", [
    "Held-out fraction, default=0.1", "float in [0, 1), default=0.75", "80%/20% and 20%/80%",
    "barriers in percentage points", "``U(+-1/sqrt(L))``", "256 x 256 trees",
    "The default is 3e-2 (was 1e-2).", "a ValueError beyond 15 min on one core",
])
def test_patterns_leave_reference_text_alone(text):
    assert not [name for name, p in BENCHMARK_PATTERNS.items() if re.search(p, text)]


@pytest.mark.parametrize("name, obj", PUBLIC, ids=[name for name, _ in PUBLIC])
def test_docstring_quotes_no_benchmark(name, obj):
    found = [
        f"{what}: {line.strip()!r}"
        for line in _doc(obj).splitlines()
        for what, pattern in BENCHMARK_PATTERNS.items()
        if re.search(pattern, line)
    ]
    assert not found, (
        f"{name}'s docstring quotes measurements or history; move them to docs/benchmarks.md "
        "(or docs/sharded.md, the user guide, CHANGELOG.md) and link there:\n" + "\n".join(found)
    )


def _documented_parameters(cls):
    """The names listed in the Parameters section of ``cls``'s docstring."""
    doc = inspect.cleandoc(cls.__doc__)
    match = re.search(r"^Parameters\n-+\n(.*?)(?=^\S[^\n]*\n-+\n|\Z)", doc, re.M | re.S)
    assert match, f"{cls.__name__} has no Parameters section"
    names = []
    for line in match.group(1).splitlines():
        entry = re.match(r"^(\w+(?:, \w+)*) :", line)
        if entry:
            names += entry.group(1).split(", ")
    return names


@pytest.mark.parametrize("cls", [SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor,
                                 ShardedSoftTreeEnsemble], ids=lambda c: c.__name__)
def test_every_init_parameter_is_documented(cls):
    params = [name for name in inspect.signature(cls.__init__).parameters if name != "self"]
    documented = _documented_parameters(cls)
    assert not set(params) - set(documented), (
        f"{cls.__name__}: undocumented parameters {sorted(set(params) - set(documented))}"
    )
    assert not set(documented) - set(params), (
        f"{cls.__name__}: documented but not parameters {sorted(set(documented) - set(params))}"
    )
    assert len(documented) == len(set(documented)), f"{cls.__name__}: a parameter twice"
