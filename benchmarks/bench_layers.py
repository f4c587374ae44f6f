"""How often the data climbs back up the package's layers: the house metric of the layout.

Follows one argument through the calls of one public entry point and counts how often it climbs
back up to a module it had left. The layers, lowest first, are the subpackages in the order their
docstrings give (``utils``, ``model``, ``encoding``, ``training``, the front: ``_estimators``,
``_validation`` and ``_persistence``, ``merging``, ``federation``, ``export``). A call *carries* the
argument when one of its arguments is the argument itself or an array, tensor or frame returned
by a call that carried it (the argument in its forms: rows validated, encoded, batched; taint
by identity, through returned tuples and lists; ``self`` of a method counts only when it is the
argument itself). A **climb** is a distinct call site (caller
function, callee function, both in the package; decorators' wrappers are skipped, as callers
and as callees: the climb is the call of the function they wrap) where a call
carries the argument from one module into another: its return climbs back up to the caller, and
the argument comes back to a module it had left. A front that hands its argument to a few
collaborators, each doing its whole job, has few; a hub whose helpers keep handing the argument
back and forth has many. Among them the script marks the *callbacks*: calls up the layers, or
back into a module already on the call stack below the caller. The script prints the counts
for each entry point (with ``--verbose``, the call sites); ``--by subpackage`` counts only the
climbs between subpackages (the front's modules as one unit).

    python -m benchmarks.bench_layers            # fit, merge_estimators, sharded fit
    python -m benchmarks.bench_layers --smoke    # fewer epochs (CI)

Followed: ``SoftTreeEnsembleClassifier().fit(X, y)`` (X), ``merge_estimators(a, b)`` (a), and
``ShardedSoftTreeEnsemble(...).fit(X, y)`` (X), on 600 rows of ``make_classification`` with 6
features, 2 epochs.
"""

from __future__ import annotations

import argparse
import sys

LAYERS = ["utils", "model", "encoding", "training", "front", "merging", "federation", "export"]


def layer_of(module):
    """The layer index of a module name of ``sktree_lmc``, or None outside the package."""
    parts = module.split(".")
    if parts[0] != "sktree_lmc" or len(parts) < 2:
        return None
    if parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    if parts[1] == "datasets":
        return None
    return LAYERS.index("front")


def unit_of(module, by):
    """The unit a climb crosses into: the module itself (``by="module"``) or its subpackage,
    the front's modules counting as one (``by="subpackage"``)."""
    if by == "module":
        return module
    layer = layer_of(module)
    return None if layer is None else LAYERS[layer]


def follow(call, argument, by="module"):
    """Run ``call()`` and follow ``argument``: returns (climbs, callbacks) as sorted lists of
    ``"caller -> callee"`` call sites: every site that carries the argument into another module
    (its return climbs back up), and those among them that go up the layers or back into a
    module already on the stack."""
    tainted = {id(argument)}
    keep = [argument]
    stack = []
    climbs = set()
    callbacks = set()

    def taint(obj, depth=0):
        # the argument in its forms: arrays, tensors and frames (not plans, models or scalars)
        if type(obj).__name__ in ("ndarray", "Tensor", "DataFrame", "Series"):
            if id(obj) not in tainted:
                tainted.add(id(obj))
                keep.append(obj)
        elif depth < 2 and isinstance(obj, (tuple, list)):
            for item in obj:
                taint(item, depth + 1)

    def profiler(frame, event, arg):
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            code = frame.f_code
            n = code.co_argcount + code.co_kwonlyargcount
            names = code.co_varnames[:n]
            carries = False
            for i, name in enumerate(names):
                value = frame.f_locals.get(name)
                if i == 0 and name == "self" and value is not argument:
                    continue
                if id(value) in tainted:
                    carries = True
                    break
            caller = next((f for f in reversed(stack)  # decorators' wrappers are skipped
                           if layer_of(f[0]) is not None and f[1] != "wrapper"), None)
            stack.append((module, code.co_name, carries))
            wrapper = code.co_name == "wrapper"  # its call of the wrapped function counts
            if carries and layer_of(module) is not None and caller is not None and not wrapper:
                c_module, c_name, _ = caller
                if unit_of(c_module, by) != unit_of(module, by):
                    site = f"{c_module}.{c_name} -> {module}.{code.co_name}"
                    climbs.add(site)
                    below = {f[0] for f in stack[:-2]}  # on the stack under the caller
                    if layer_of(module) > layer_of(c_module) or module in below:
                        callbacks.add(site)
        elif event == "return":
            if stack:
                module, name, carries = stack.pop()
                if carries:
                    taint(arg)

    sys.setprofile(profiler)
    try:
        call()
    finally:
        sys.setprofile(None)
    return sorted(climbs), sorted(callbacks)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="fewer epochs (CI)")
    parser.add_argument("--verbose", action="store_true", help="list every climb")
    parser.add_argument("--by", choices=["module", "subpackage"], default="module",
                        help="count crossings between modules (default) or between subpackages "
                             "(the front's modules as one)")
    args = parser.parse_args(argv)
    import numpy as np
    from sklearn.datasets import make_classification

    from sktree_lmc import ShardedSoftTreeEnsemble, SoftTreeEnsembleClassifier, merge_estimators

    X, y = make_classification(n_samples=600, n_features=6, random_state=0)
    X = np.asarray(X, dtype=np.float64)
    epochs = 1 if args.smoke else 2
    make = lambda s: SoftTreeEnsembleClassifier(max_epochs=epochs, n_estimators=16, random_state=s)
    a, b = make(0).fit(X, y), make(1).fit(X, y)
    entries = {
        "SoftTreeEnsembleClassifier.fit (X)": lambda: (X, lambda: make(2).fit(X, y)),
        "merge_estimators (first model)": lambda: (a, lambda: merge_estimators(a, b)),
        "ShardedSoftTreeEnsemble.fit (X)": lambda: (X, lambda: ShardedSoftTreeEnsemble(
            make(3), n_shards=2, random_state=0).fit(X, y)),
    }
    results = {}
    for label, entry in entries.items():
        argument, call = entry()
        climbs, callbacks = follow(call, argument, by=args.by)
        results[label] = len(climbs)
        print(f"{label}: {len(climbs)} climbs, {len(callbacks)} of them calls up the layers "
              "or back into a caller's module")
        if args.verbose:
            for c in climbs:
                print(("  * " if c in callbacks else "    ") + c)
    return results


if __name__ == "__main__":
    main()
