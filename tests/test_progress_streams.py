"""The progress display never ends a fit: a stream whose ``isatty()`` raises (any error) is
treated as not a terminal, and the fit writes plain lines to it."""

import io
import sys

import numpy as np
import pytest

from sktree_lmc import SoftTreeEnsembleClassifier


class _RaisingIsatty(io.StringIO):
    def __init__(self, error):
        super().__init__()
        self.error = error

    def isatty(self):
        raise self.error


@pytest.mark.parametrize("error", [OSError("bad fd"), RuntimeError("detached"),
                                   TypeError("odd"), ValueError("closed")])
def test_fit_with_verbose_on_a_stream_whose_isatty_raises(monkeypatch, error):
    X = np.random.default_rng(0).normal(size=(60, 2))
    y = (X[:, 0] > 0).astype(int)
    stream = _RaisingIsatty(error)
    monkeypatch.setattr(sys, "stderr", stream)
    clf = SoftTreeEnsembleClassifier(n_estimators=4, depth=2, max_epochs=2, verbose=1,
                                     random_state=0).fit(X, y)
    assert clf.n_iter_ == 2
    assert "epoch 2/2" in stream.getvalue()  # plain lines, not a bar
