"""verbose: what the fit prints before its first epoch (or round), and the elapsed time."""

import re

from _helpers import X_TR, X_VA, Y_TR, Y_VA, X, Y, clf

from sktree_lmc import ShardedSoftTreeEnsemble


def test_sharded_verbose_says_what_came_before_the_first_round(capsys):
    """The sharded fit's first line: the encoding and the teacher, with its
    bytes and times; the elapsed time counts them."""
    ShardedSoftTreeEnsemble(clf(teacher_weight=0.5), n_shards=2, n_rounds=2, random_state=0,
                            teacher="shared", verbose=2).fit(X_TR, Y_TR)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in lines[:8]] == [
        f"ShardedSoftTreeEnsemble teacher tree {m}/8" for m in range(1, 9)]
    assert "MB_received" in lines[0] and "left <=" in lines[0]
    lines = lines[8:]
    assert re.match(r"ShardedSoftTreeEnsemble: encoded 300 rows in 2 shards into 5 features "
                    r"\(.*s\); the shared teacher: 8 boosted trees grown over 2 shards "
                    r"\([0-9,]+ kB of histograms received\) \(.*s\)$", lines[0]), lines[0]
    # the averaged teacher (the default of a one-shot merge): one exchange of the shards'
    # trees, no line per tree
    ShardedSoftTreeEnsemble(clf(teacher_weight=0.5), n_shards=2, n_rounds=2, random_state=0,
                            teacher="averaged", verbose=2).fit(X_TR, Y_TR)
    first = capsys.readouterr().err.splitlines()[0]
    assert re.match(r"ShardedSoftTreeEnsemble: encoded 300 rows in 2 shards into 5 features "
                    r"\(.*s\); the teacher: the average of the 2 shards' own \([0-9]+ boosted "
                    r"trees, [0-9,]+ kB of trees received\) \(.*s\)$", first), first
    assert lines[1].startswith("ShardedSoftTreeEnsemble round 1/2")


def test_verbose_says_what_came_before_the_first_epoch(capsys, monkeypatch):
    import time

    import sktree_lmc.training._fit as est_module

    real_grow = est_module.grow_oblivious_trees

    def slow(*args, **kw):  # a teacher that takes a visible time
        time.sleep(0.3)
        return real_grow(*args, **kw)

    monkeypatch.setattr(est_module, "grow_oblivious_trees", slow)
    est = clf(max_epochs=2, verbose=1, teacher_weight=0.5, early_stopping=True).fit(X, Y)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == est.n_iter_ + 2
    first = lines[0]
    assert first.startswith("SoftTreeEnsembleClassifier: encoded 400 rows (40 held out for "
                            "early stopping) of 5 columns into ")
    assert "grew the teacher: " in first
    teacher_seconds = float(re.search(r"grew the teacher[^(]*(?:\([^)]*\)[^(]*)?\((\d+\.\d)s\)",
                                      first).group(1))
    assert teacher_seconds >= 0.3
    assert lines[1].startswith("SoftTreeEnsembleClassifier epoch 1/2")
    closing = float(re.search(r"\((\d+\.\d)s\)$", lines[-1]).group(1))
    assert closing >= teacher_seconds  # the elapsed time counts the steps before training
    clf(max_epochs=1, verbose=1).fit(X_TR, Y_TR, X_val=X_VA, y_val=Y_VA)
    assert "encoded 300 training rows and 100 validation rows" in capsys.readouterr().err
