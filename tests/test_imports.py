"""The package's modules import each other only downward: no import cycle,
function-level imports included (read from the source with :mod:`ast`)."""

import ast
from pathlib import Path

import pytest

import sktree_lmc

PACKAGE = Path(sktree_lmc.__file__).parent


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _internal_imports(path):
    """``sktree_lmc`` modules imported anywhere in ``path`` (any nesting level)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [target]
            if node.module is None:  # from . import x: x may be a module
                targets = [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t.split(".")[0] == "sktree_lmc")
    return found


def _graph():
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        edges = set()
        for target in _internal_imports(path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges.add(target)
        graph[name] = edges
    return graph


def _find_cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt, stack + [nxt])
                if cycle:
                    return cycle
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [node])
            if cycle:
                return cycle
    return None


def test_no_import_cycle():
    # the package __init__ imports everything; it is the top, not part of a cycle
    graph = {k: {t for t in v if t != "sktree_lmc"} for k, v in _graph().items()}
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph))


def test_cycle_finder_finds_a_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize(
    "low, high",
    [
        ("sktree_lmc._estimators", "sktree_lmc.merging._bridge"),
        ("sktree_lmc.merging._bridge", "sktree_lmc.merging._merge"),
        ("sktree_lmc.merging._nway", "sktree_lmc.merging._merge"),
        ("sktree_lmc.merging._merge", "sktree_lmc.federation._sharded"),
        ("sktree_lmc.merging._merge", "sktree_lmc.merging._metrics"),
        # one dask layer, below the federated rounds and the federated refit
        ("sktree_lmc.federation._dask", "sktree_lmc.federation._federated"),
        ("sktree_lmc.federation._dask", "sktree_lmc.merging._refit"),
        ("sktree_lmc.merging._matching", "sktree_lmc.federation._federated"),
    ],
)
def test_layers_import_downward(low, high):
    graph = _graph()
    assert low in _reachable(graph, high)
    assert high not in _reachable(graph, low)


def _reachable(graph, start):
    """The modules that ``start`` imports, directly or not. The package
    ``__init__`` is the top, as in :func:`test_no_import_cycle`: a module
    that reads a name of it (``from . import __version__``, in a function)
    does not import the layers above it."""
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - {"sktree_lmc"}:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


@pytest.mark.parametrize("module", ["sktree_lmc.merging._merge", "sktree_lmc.merging._refit"])
def test_merge_and_refit_do_not_reach_the_federated_rounds(module):
    """The merge and the (federated) leaf refit sit below the rounds that use
    them: what they share with the rounds is in ``_matching`` and ``_dask``."""
    assert "sktree_lmc.federation._federated" not in _reachable(_graph(), module)


def test_the_dask_layer_imports_no_other_module():
    assert _graph()["sktree_lmc.federation._dask"] == set()


def test_benchmarks_use_only_public_names():
    """No private ``sktree_lmc`` module or name is imported under ``benchmarks/``, except by the
    one-off experiment scripts of ``benchmarks/oneoff/``, which patch internals on purpose (its
    README says so) and are not maintained as the benchmarks are."""
    private = []
    for path in sorted((PACKAGE.parent / "benchmarks").rglob("*.py")):
        if "oneoff" in path.relative_to(PACKAGE.parent / "benchmarks").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sktree_lmc"):
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("sktree_lmc")]
            else:
                continue
            private += [f"{path.name}: {n}" for n in names
                        if any(part.startswith("_") for part in n.split("."))]
    assert not private, private
