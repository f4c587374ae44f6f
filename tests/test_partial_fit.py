"""partial_fit: the pass count (n_iter_), the warning about the input encoding, and
partial_fit after fit."""

import warnings

import pytest
from _helpers import X, Y, clf, reg

from sktree_lmc import TabularEncoder
from sktree_lmc.encoding._encoding import encoders_differ


def test_partial_fit_counts_passes_and_warns_once_about_the_encoding():
    est = clf()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for start in range(0, 400, 100):
            est.partial_fit(X[start:start + 100], Y[start:start + 100], classes=[0, 1])
            assert est.n_iter_ == start // 100 + 1
    ours = [w for w in caught if "input encoding" in str(w.message)]
    assert len(ours) == 1 and ours[0].category is UserWarning
    assert ours[0].filename == __file__  # points at the caller
    assert "encoder=TabularEncoder" in str(ours[0].message)
    assert est.n_epochs_ == 4
    r = reg()
    with pytest.warns(UserWarning, match="input encoding"):
        r.partial_fit(X[:100], X[:100, 0])
    r.partial_fit(X[100:200], X[100:200, 0])
    assert r.n_iter_ == 2


def test_partial_fit_with_a_given_encoder_does_not_warn():
    encoder = TabularEncoder(numeric_encoding="quantile_normal").fit(X)
    est = clf(encoder=encoder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.partial_fit(X[:100], Y[:100], classes=[0, 1]).partial_fit(X[100:], Y[100:])
    assert est.n_iter_ == 2 and encoders_differ(est.encoder_, encoder) is None


def test_partial_fit_after_fit_adds_to_n_iter():
    est = clf(max_epochs=3, early_stopping=False).fit(X, Y)
    assert est.n_iter_ == 3
    est.partial_fit(X[:100], Y[:100])
    assert est.n_iter_ == 4
