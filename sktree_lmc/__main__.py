"""The main job: train two ensembles, align and merge them, report the barrier.

Run as ``sktree-lmc`` or ``python -m sktree_lmc``; ``--help`` lists the options.
By default it uses the dataset bundled with the package, so it needs nothing
else; ``--dataset NAME`` reads a Tabular-Benchmark dataset from
``$SKTREE_LMC_DATA`` instead.
"""

from __future__ import annotations

import argparse
import sys
import time

from . import (
    ARCHITECTURES,
    ModelAligner,
    SoftTreeEnsembleClassifier,
    interpolation_curve,
    merge_estimators,
)
from .datasets import (
    PAPER_TRAINING,
    TABULAR_BENCHMARK,
    load_magic_small,
    load_tabular_benchmark,
    make_paper_preprocessor,
    paper_split,
)

#: The paper's protocol (with its external preprocessing), as ``--protocol paper`` runs it.
PAPER_SETTINGS = dict(PAPER_TRAINING, depth=2, max_epochs=50, learning_rate=1e-2)


def _parser():
    p = argparse.ArgumentParser(
        prog="sktree-lmc",
        description="Train two soft tree ensembles from different seeds, align them modulo "
        "tree symmetries, merge them and measure the linear mode connectivity barrier.",
    )
    p.add_argument("--dataset", default="magic_small",
                   choices=["magic_small", *sorted(TABULAR_BENCHMARK)],
                   help="bundled 'magic_small' (default) or a Tabular-Benchmark dataset")
    p.add_argument("--protocol", default="default", choices=["default", "paper"],
                   help="'default': raw features and the package's defaults (input encoding, "
                   "training recipe); 'paper': the paper's preprocessing and settings (depth "
                   "2, 50 epochs, constant learning rate, last weights, all features)")
    p.add_argument("--arch", default="oblivious", choices=sorted(ARCHITECTURES))
    p.add_argument("--depth", type=int, default=None,
                   help="tree depth (default: 4, or 2 with --protocol paper)")
    p.add_argument("--n-estimators", type=int, default=256)
    p.add_argument("--max-epochs", type=int, default=None,
                   help="most epochs (default: 150 with early stopping, or 50 with --protocol "
                   "paper)")
    p.add_argument("--learning-rate", type=float, default=None,
                   help="Adam's learning rate (default: the classifier's, or the paper's 1e-2 "
                   "with --protocol paper)")
    p.add_argument("--method", default="wm", choices=["wm", "am"])
    p.add_argument("--seeds", type=int, nargs=2, default=(1, 2), metavar=("SEED_A", "SEED_B"))
    p.add_argument("--device", default="auto")
    return p


def main(argv=None):
    """Entry point of the ``sktree-lmc`` command.

    Parameters
    ----------
    argv : list of str, default=None
        Command-line arguments (``sys.argv[1:]`` when None).

    Returns
    -------
    status : int
        0 on success.
    """
    args = _parser().parse_args(argv)
    if args.dataset == "magic_small":
        X, y = load_magic_small(return_X_y=True)
    else:
        X, y = load_tabular_benchmark(args.dataset, return_X_y=True)
    X_train, X_test, y_train, y_test = paper_split(X, y, random_state=0)
    settings = {}
    if args.protocol == "paper":
        pre = make_paper_preprocessor().fit(X_train)
        X_train, X_test = pre.transform(X_train), pre.transform(X_test)
        settings = dict(PAPER_SETTINGS)
    for name in ("depth", "max_epochs", "learning_rate"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    print(f"dataset {args.dataset}: {len(X_train)} train / {len(X_test)} test rows, "
          f"{X.shape[1]} features ({'raw' if args.protocol == 'default' else 'paper'} "
          "features)")

    models = []
    for seed in args.seeds:
        t0 = time.perf_counter()
        est = SoftTreeEnsembleClassifier(
            arch=args.arch, n_estimators=args.n_estimators, device=args.device,
            random_state=seed, **settings,
        )
        if seed == args.seeds[0]:
            print(f"model: arch={args.arch} depth={est.depth} n_estimators={est.n_estimators} "
                  f"max_epochs={est.max_epochs} lr={est.learning_rate} "
                  f"encoding={est.numeric_encoding} schedule={est.lr_schedule} "
                  f"averaging={est.averaging} teacher_weight={est.teacher_weight}")
        est.fit(X_train, y_train)
        print(f"  seed {seed}: fit {time.perf_counter() - t0:5.1f} s on {est.device_}, "
              f"train acc {100 * est.score(X_train, y_train):.2f}, "
              f"test acc {100 * est.score(X_test, y_test):.2f}, epochs {est.n_iter_} "
              f"(kept {est.best_epoch_})")
        models.append(est)
    a, b = models

    print(f"\nmerging with {args.method.upper()} (lambda = 0.5) and the barrier over 25 lambdas:")
    print(f"  {'invariances':<12} {'merged test acc':>16} {'test barrier':>13} {'align s':>8}")
    for inv in ("none", "perm", "all"):
        aligner = ModelAligner(method=args.method, invariances=inv, random_state=0)
        t0 = time.perf_counter()
        merged = merge_estimators(a, b, lam=0.5, aligner=aligner, X=X_train)
        elapsed = time.perf_counter() - t0
        curve = interpolation_curve(a, b, X_test, y_test, aligner=aligner, X_align=X_train)
        print(f"  {inv:<12} {100 * merged.score(X_test, y_test):16.2f} "
              f"{curve.barrier('accuracy'):13.3f} {elapsed:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
