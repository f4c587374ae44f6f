"""Deployment: a fitted estimator as one self-contained PyTorch module.

:func:`export_module` writes the whole prediction path of a fitted
estimator, the input encoding (:class:`~sktree_lmc.TabularEncoder`) included,
in plain tensor operations with the fitted constants as buffers. The result
is an ordinary :class:`torch.nn.Module` that :func:`torch.export.export`,
:func:`torch.jit.trace` and :func:`torch.onnx.export` accept, so a model can
be served without scikit-learn, pandas or this package.

Numerical notes. The encoding runs in float64, as the encoder does in NumPy
(the module casts its input to float64 first), and its features are rounded
to float32 like the encoder's; the trees then run in float32, with the
operations of the estimators' inference kernel
(:func:`~sktree_lmc.model._forward.predict_chunked`: one matmul of split logits,
``sigmoid(-z)`` as ``1 - sigmoid(z)``, the routing products of
:func:`~sktree_lmc.model._forward.routing_plan`, one matmul with the leaf values).

- ``"piecewise_linear"``: ``searchsorted(knots, x, side="right") - 1`` is
  written as a count of the knots ``<= x`` (a comparison and a sum, which
  every exporter supports); the hat weights are then ``1 - t`` and ``t`` at
  the interval's two knots, as in :func:`~sktree_lmc.encoding._encoding._hat_features`.
- ``"quantile_normal"``: scikit-learn's
  ``QuantileTransformer._transform_col`` for ``output_distribution="normal"``:
  the mean of :func:`numpy.interp` on ``(quantiles_, references_)`` and of
  the same interpolation on the reversed, negated arrays (which averages
  repeated quantiles), the bounds ``x - 1e-7 < quantiles_[0]`` -> 0 and
  ``x + 1e-7 > quantiles_[-1]`` -> 1, the standard normal quantile function
  and the clipping to ``ppf(1e-7 - eps)``, ``ppf(1 - (1e-7 - eps))``.
  :func:`numpy.interp` is reproduced case by case (below the first point, at
  or above the last one, exactly on a point, else the slope of its
  interval), so that it agrees bit for bit. The normal quantile is
  :func:`torch.special.ndtri`, except while :func:`torch.onnx.export` traces
  the module: ONNX has no such operator, and the module then uses
  :func:`_ndtri_portable`, the same Cephes rational approximations written
  with elementary operations.
- a stacked column (a union encoder's, see :mod:`._common_encoding`): the
  ``"stack"`` form, its sub-encodings' features side by side, then its one
  missing indicator. :func:`export_encoder` exports an encoder alone.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import stats
from sklearn.utils.validation import check_is_fitted
from torch import nn

from ..encoding._column_encodings import missing_mask as _missing_mask, numeric_values as _numeric
from ..model._forward import routing_plan
from .._validation import input_columns

__all__ = ["encode_categories", "encoder_inputs", "export_encoder", "export_module"]

#: scikit-learn's ``BOUNDS_THRESHOLD`` (``sklearn.preprocessing._data``).
BOUNDS_THRESHOLD = 1e-7


# -- the normal quantile function with elementary operations --------------------------
# Cephes ``ndtri`` (S. L. Moshier), the algorithm of torch.special.ndtri and of
# SciPy's ``ndtri``: a rational function of ``y - 0.5`` in the middle
# (``y`` in [exp(-2), 1 - exp(-2)]), else of ``x = sqrt(-2 log y)`` (tail).
_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
       1.39312609387279679503e1, -1.23916583867381258016e0)
_Q0 = (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
       -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
       1.59056225126211695515e1, -1.18331621121330003142e0)
_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
       4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
       -1.40256079171354495875e-1, -3.50424626827848203418e-2, -8.57456785154685413611e-4)
_Q1 = (1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
       1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
       -3.80806407691578277194e-2, -9.33259480895457427372e-4)
_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
       1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
       3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)
_Q2 = (1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
       2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
       2.89247864745380683936e-6, 6.79019408009981274425e-9)
_EXPM2 = 0.13533528323661269189  # exp(-2)
_S2PI = 2.50662827463100050242  # sqrt(2 pi)


def _polevl(x, coefs):
    """Horner's scheme, highest degree first (Cephes ``polevl``)."""
    out = torch.full_like(x, coefs[0])
    for c in coefs[1:]:
        out = out * x + c
    return out


def _ndtri_portable(y):
    """The standard normal quantile function with elementary tensor operations.

    The Cephes algorithm of :func:`torch.special.ndtri`, written with
    ``where``, ``log``, ``sqrt`` and polynomials so that exporters without a
    quantile operator (ONNX) accept it: ``-inf`` at 0, ``inf`` at 1, NaN
    outside [0, 1]. Agrees with :func:`torch.special.ndtri` to a few float64
    ulps (tested).
    """
    # the upper tail through the symmetry ndtri(y) = -ndtri(1 - y)
    upper = y > 1.0 - _EXPM2
    yy = torch.where(upper, 1.0 - y, y)
    # middle
    ym = yy - 0.5
    y2 = ym * ym
    middle = (ym + ym * (y2 * _polevl(y2, _P0) / _polevl(y2, _Q0))) * _S2PI
    # tails: x = sqrt(-2 log y); two approximations split at x = 8
    safe = torch.where(yy > 0, yy, torch.ones_like(yy))
    x = torch.sqrt(-2.0 * torch.log(safe))
    x0 = x - torch.log(x) / x
    z = 1.0 / x
    x1 = torch.where(x < 8.0, z * _polevl(z, _P1) / _polevl(z, _Q1),
                     z * _polevl(z, _P2) / _polevl(z, _Q2))
    tail = x1 - x0  # negative: the lower tail of yy
    tail = torch.where(upper, -tail, tail)
    out = torch.where(yy > _EXPM2, middle, tail)
    out = torch.where(y == 0, torch.full_like(y, -float("inf")), out)
    out = torch.where(y == 1, torch.full_like(y, float("inf")), out)
    return torch.where((y < 0) | (y > 1) | torch.isnan(y), torch.full_like(y, float("nan")), out)


def _is_tracing():
    """Whether :func:`torch.jit.trace` is recording (False without TorchScript)."""
    jit = getattr(torch, "jit", None)
    return bool(getattr(jit, "is_tracing", lambda: False)())


def _ndtri(p):
    if torch.onnx.is_in_onnx_export():
        return _ndtri_portable(p)
    return torch.special.ndtri(p)


def _interp(x, xp, fp, slope):
    """:func:`numpy.interp` of ``x`` on the sorted points ``(xp, fp)``, case by
    case as NumPy computes it: ``fp[0]`` below ``xp[0]``, ``fp[-1]`` at or
    above ``xp[-1]``, ``fp[j]`` at ``x == xp[j]``, else
    ``slope[j] * (x - xp[j]) + fp[j]`` for the last ``j`` with
    ``xp[j] <= x``. ``xp`` has at least two points."""
    n = xp.shape[0]
    j = (xp.unsqueeze(0) <= x.unsqueeze(1)).to(torch.int64).sum(dim=1) - 1
    jc = j.clamp(0, n - 2)
    x0, f0 = xp[jc], fp[jc]
    out = slope[jc] * (x - x0) + f0
    out = torch.where(x == x0, f0, out)
    out = torch.where(j >= n - 1, fp[n - 1], out)
    return torch.where(j < 0, fp[0], out)


def _interp_tables(xp, fp):
    """``(xp, fp, slopes)`` as float64 tensors for :func:`_interp` (a single
    point is doubled; slopes of empty intervals, never used, are 0)."""
    xp = np.asarray(xp, dtype=np.float64)
    fp = np.asarray(fp, dtype=np.float64)
    if xp.size == 1:
        xp, fp = np.repeat(xp, 2), np.repeat(fp, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (fp[1:] - fp[:-1]) / (xp[1:] - xp[:-1])  # NumPy's own formula
    slope = np.where(np.isfinite(slope), slope, 0.0)
    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in (xp, fp, slope))


# -- one input column ------------------------------------------------------------------
class _Column(nn.Module):
    """Encodes one input column (float64, NaN = missing) into its block of
    features, the missing indicator last when ``has_missing``."""

    def __init__(self, has_missing):
        super().__init__()
        self.has_missing = bool(has_missing)

    def features(self, x, missing):  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x):
        missing = torch.isnan(x)
        blocks = []
        feats = self.features(x, missing)
        if feats is not None:
            # a missing value: zeros in the column's features
            blocks.append(torch.where(missing.unsqueeze(1), torch.zeros_like(feats), feats))
        if self.has_missing:
            blocks.append(missing.to(x.dtype).unsqueeze(1))
        if not blocks:
            return x.new_zeros((x.shape[0], 0))
        return torch.cat(blocks, dim=1) if len(blocks) > 1 else blocks[0]


class _EmptyColumn(_Column):
    """A column without features (one knot, or only missing values in fit)."""

    def features(self, x, missing):
        return None


class _AffineColumn(_Column):
    """``(x - center) / scale``: ``"standard"``, and ``"none"`` with (0, 1)."""

    def __init__(self, center, scale, has_missing):
        super().__init__(has_missing)
        self.center, self.scale = float(center), float(scale)

    def features(self, x, missing):
        return ((x - self.center) / self.scale).unsqueeze(1)


class _HatColumn(_Column):
    """The degree-1 B-spline ("hat") basis on the column's knots."""

    def __init__(self, knots, has_missing):
        super().__init__(has_missing)
        knots = np.asarray(knots, dtype=np.float64)
        self.register_buffer("knots", torch.from_numpy(knots.copy()))
        self.register_buffer("positions", torch.arange(len(knots), dtype=torch.int64))
        self.lo, self.hi, self.n_knots = float(knots[0]), float(knots[-1]), len(knots)

    def features(self, x, missing):
        x = torch.where(missing, torch.full_like(x, self.lo), x)
        xc = x.clamp(self.lo, self.hi)
        # the interval [k_i, k_{i+1}] holding each value, the last one closed:
        # searchsorted(knots, xc, side="right") - 1, clipped to [0, T - 2]
        i = (self.knots.unsqueeze(0) <= xc.unsqueeze(1)).to(torch.int64).sum(dim=1) - 1
        i = i.clamp(0, self.n_knots - 2)
        k0, k1 = self.knots[i], self.knots[i + 1]
        t = ((xc - k0) / (k1 - k0)).unsqueeze(1)
        i = i.unsqueeze(1)
        left = (self.positions.unsqueeze(0) == i).to(x.dtype)
        right = (self.positions.unsqueeze(0) == i + 1).to(x.dtype)
        return (1.0 - t) * left + t * right


class _QuantileNormalColumn(_Column):
    """scikit-learn's ``QuantileTransformer(output_distribution="normal")``."""

    def __init__(self, transformer, has_missing):
        super().__init__(has_missing)
        q = np.asarray(transformer.quantiles_, dtype=np.float64)[:, 0]
        r = np.asarray(transformer.references_, dtype=np.float64)
        for name, (xp, fp) in {"fwd": (q, r), "bwd": (-q[::-1], -r[::-1])}.items():
            xp, fp, slope = _interp_tables(xp, fp)
            self.register_buffer(f"{name}_x", xp)
            self.register_buffer(f"{name}_y", fp)
            self.register_buffer(f"{name}_slope", slope)
        self.lower, self.upper = float(q[0]), float(q[-1])
        eps = np.spacing(1)
        self.clip_min = float(stats.norm.ppf(BOUNDS_THRESHOLD - eps))
        self.clip_max = float(stats.norm.ppf(1 - (BOUNDS_THRESHOLD - eps)))

    def features(self, x, missing):
        x = torch.where(missing, torch.full_like(x, self.lower), x)
        # the mean of the interpolations in both directions (repeated quantiles)
        p = 0.5 * (_interp(x, self.fwd_x, self.fwd_y, self.fwd_slope)
                   - _interp(-x, self.bwd_x, self.bwd_y, self.bwd_slope))
        p = torch.where(x + BOUNDS_THRESHOLD > self.upper, torch.ones_like(p), p)
        p = torch.where(x - BOUNDS_THRESHOLD < self.lower, torch.zeros_like(p), p)
        return _ndtri(p).clamp(self.clip_min, self.clip_max).unsqueeze(1)


class _CategoryColumn(_Column):
    """One-hot of the category code (index into ``categories_``); another
    value is an unseen category (the infrequent feature, if any)."""

    def __init__(self, n_categories, has_infrequent, has_missing):
        super().__init__(has_missing)
        self.register_buffer("codes", torch.arange(n_categories, dtype=torch.float64))
        self.has_infrequent = bool(has_infrequent)
        self.n_categories = int(n_categories)

    def features(self, x, missing):
        if self.n_categories == 0 and not self.has_infrequent:
            return None
        hits = x.unsqueeze(1) == self.codes.unsqueeze(0)  # NaN matches nothing
        out = hits.to(x.dtype)
        if self.has_infrequent:
            unseen = ~(hits.any(dim=1) | missing)
            out = torch.cat([out, unseen.to(x.dtype).unsqueeze(1)], dim=1)
        return out


class _StackColumn(_Column):
    """A stacked column (a union encoder's): its sub-encodings' features side
    by side, then the column's one missing indicator."""

    def __init__(self, forms, has_missing):
        super().__init__(has_missing)
        self.parts = nn.ModuleList([_FORMS[form](*args, False) for form, args in forms])

    def features(self, x, missing):
        blocks = [part.features(x, missing) for part in self.parts]
        blocks = [block for block in blocks if block is not None]
        if not blocks:
            return None
        return torch.cat(blocks, dim=1) if len(blocks) > 1 else blocks[0]


#: The module of each form of ColumnEncoding.export_form (sktree_lmc/_column_encodings.py):
#: it takes the form's arguments, then whether the column has a missing indicator.
_FORMS = {"empty": _EmptyColumn, "one_hot": _CategoryColumn, "hat": _HatColumn,
          "quantile_normal": _QuantileNormalColumn, "affine": _AffineColumn,
          "stack": _StackColumn}


def _column_encoders(encoder):
    cols = []
    for j in range(encoder.n_features_in_):
        form, args = encoder._column_export(j)
        cols.append(_FORMS[form](*args, bool(encoder.has_missing_[j])))
    return nn.ModuleList(cols)


class _ExportedEncoder(nn.Module):
    """Raw columns ``(n, n_features_in_)`` -> an encoder's float32 features."""

    def __init__(self, encoder):
        super().__init__()
        self.n_features_in = int(encoder.n_features_in_)
        self.columns = _column_encoders(encoder)

    def forward(self, X):
        X = X.reshape(X.shape[0], self.n_features_in).to(torch.float64)
        blocks = [col(X[:, j]) for j, col in enumerate(self.columns)]
        return torch.cat(blocks, dim=1).to(torch.float32)


def export_encoder(encoder):
    """Return a fitted encoder alone as a self-contained PyTorch module.

    The input encoding of :func:`export_module`, without the trees: for an
    encoder that no estimator holds yet, such as the union of several
    models' encoders (:func:`~sktree_lmc.encoding._common_encoding.common_encoder`,
    whose stacked columns export as their sub-encodings side by side).

    Parameters
    ----------
    encoder : TabularEncoder
        A fitted encoder.

    Returns
    -------
    module : torch.nn.Module
        In eval mode. It maps a float tensor of shape
        ``(n, n_features_in_)`` (numeric values, categorical columns as
        category codes, see :func:`encoder_inputs`; NaN for a missing
        value) to the float32 features ``encoder.transform`` gives, shape
        ``(n, n_features_out_)``.

    See Also
    --------
    export_module : The whole estimator.
    encoder_inputs : Column arrays to the module's input.
    """
    module = _ExportedEncoder(encoder)
    module.requires_grad_(False)
    return module.eval()


def encoder_inputs(encoder, columns):
    """Column arrays as the float input of the modules of an encoder.

    Numeric columns keep their values (missing values as NaN); categorical
    columns become the index of the value in ``encoder.categories_[j]``,
    ``-1`` for another category and NaN for a missing value.

    Parameters
    ----------
    encoder : TabularEncoder
        A fitted encoder.
    columns : list of ndarray
        The input's columns (see ``TabularEncoder.transform_columns``).

    Returns
    -------
    codes : ndarray of float64 of shape (n_samples, n_features_in_)
        The input of :func:`export_encoder`'s module (and of
        :func:`export_module`'s for an estimator holding ``encoder``).
    """
    enc = encoder
    n = len(columns[0]) if columns else 0
    out = np.empty((n, enc.n_features_in_), dtype=np.float64)
    for j, col in enumerate(columns):
        if not enc.categorical_[j]:
            out[:, j] = _numeric(np.asarray(col), enc._name(j))
            continue
        values = np.asarray(col, dtype=object)
        missing = _missing_mask(values)
        lookup = {c: i for i, c in enumerate(enc.categories_[j].tolist())}
        codes = np.full(n, np.nan)
        present = np.flatnonzero(~missing)
        codes[present] = [lookup.get(v, -1) for v in values[present].tolist()]
        out[:, j] = codes
    return out


# -- the trees ---------------------------------------------------------------------------
class _Trees(nn.Module):
    """The ensemble on encoded float32 features, ``(B, F) -> (B, C)``, with
    the operations of the inference kernel and no in-place writes."""

    def __init__(self, arch, params):
        super().__init__()
        W = np.asarray(params.split_weight, dtype=np.float32)
        b = np.asarray(params.split_bias, dtype=np.float32)
        leaf = np.asarray(params.leaf_value, dtype=np.float32)
        M, N, F = W.shape
        L, C = leaf.shape[1:]
        self.n_trees, self.n_nodes, self.n_leaves = M, N, L
        self.steps = tuple(tuple(int(v) for v in step) for step in routing_plan(arch))
        # node-major rows (n * M + m), leaf-major columns (l * M + m), as in the kernel
        self.register_buffer("weight", torch.from_numpy(
            np.ascontiguousarray(W.transpose(1, 0, 2).reshape(N * M, F))))
        self.register_buffer("bias", torch.from_numpy(
            np.ascontiguousarray(b.T.reshape(N * M, 1))))
        self.register_buffer("leaf", torch.from_numpy(
            np.ascontiguousarray(leaf.transpose(1, 0, 2).reshape(L * M, C).T)))

    def forward(self, X):
        z = torch.addmm(self.bias, self.weight, X.T).reshape(self.n_nodes, self.n_trees, -1)
        s = torch.sigmoid(z)
        sides = torch.cat([s, 1.0 - s], dim=0)  # sigmoid(z), then sigmoid(-z)
        pos, mu = [], [None] * self.n_leaves
        for parent, sig, leaf in self.steps:
            p = sides[sig] if parent < 0 else pos[parent] * sides[sig]
            pos.append(p)
            if leaf >= 0:
                mu[leaf] = p
        mu = torch.stack(mu, dim=0).reshape(self.n_leaves * self.n_trees, -1)
        return (self.leaf @ mu).T


class _Additive(nn.Module):
    """The additive term (``additive_bins``): every column's table row, as
    :meth:`TabularEncoder.additive_codes` finds it, summed over the columns.
    A numeric value's bin is the count of its column's edges ``<= x``
    (``searchsorted(edges, x, side="right")``); a categorical column gets the
    category code of :func:`encode_categories`."""

    def __init__(self, encoder, table):
        super().__init__()
        self.register_buffer("table", torch.from_numpy(np.asarray(table, dtype=np.float32)))
        self.specs = []
        # one code column per input column and resolution (additive_sources_)
        for c, j in enumerate(int(v) for v in encoder.additive_sources_):
            first, end = (int(v) for v in encoder.additive_offsets_[c: c + 2])
            if encoder.categorical_[j]:
                n_cats = len(encoder.categories_[j])
                unseen = first + n_cats if encoder.has_infrequent_[j] else end - 1
                self.register_buffer(f"cats_{c}", torch.arange(n_cats, dtype=torch.float64))
                self.specs.append((j, "categorical", first, end - 2, unseen))
            else:
                edges = np.asarray(encoder.additive_edges_[c], dtype=np.float64)
                self.register_buffer(f"edges_{c}", torch.from_numpy(edges.copy()))
                self.specs.append((j, "numeric", first, end - 1, None))

    def forward(self, X):
        rows = []
        for c, (j, kind, first, missing_row, unseen) in enumerate(self.specs):
            x = X[:, j]
            missing = torch.isnan(x)
            if kind == "numeric":
                edges = getattr(self, f"edges_{c}")
                idx = first + (edges.unsqueeze(0) <= x.unsqueeze(1)).to(torch.int64).sum(dim=1)
            else:
                hits = x.unsqueeze(1) == getattr(self, f"cats_{c}").unsqueeze(0)
                code = hits.to(torch.int64).argmax(dim=1)
                idx = torch.where(hits.any(dim=1), first + code, torch.full_like(code, unseen))
            rows.append(torch.where(missing, torch.full_like(idx, missing_row), idx))
        return self.table[torch.stack(rows, dim=1)].sum(dim=1)


class _ExportedEnsemble(nn.Module):
    """Raw columns ``(n, n_features_in_)`` -> the estimator's decision values."""

    def __init__(self, estimator, kind):
        super().__init__()
        self.n_features_in = int(estimator.encoder_.n_features_in_)
        self.columns = _column_encoders(estimator.encoder_)
        self.trees = _Trees(estimator.architecture_, estimator.tree_params_)
        additive = estimator.tree_params_.additive
        self.additive = None if additive is None else _Additive(estimator.encoder_, additive)
        self.kind = kind
        if kind == "regressor":
            self.register_buffer("y_scale", torch.tensor(
                np.asarray(estimator.y_scale_, dtype=np.float32)))
            self.register_buffer("y_mean", torch.tensor(
                np.asarray(estimator.y_mean_, dtype=np.float32)))
            self.squeeze = bool(estimator.objective_.one_dimensional)
            self.link = estimator.objective_.loss.link

    def check_input(self, X):
        """``X``, refused unless it is a 2-D tensor of ``n_features_in`` columns.

        The number of dimensions and of columns are static in a graph
        (:func:`torch.export.export` and ``torch.onnx.export`` make only the
        rows dynamic), so the check is resolved while exporting and the
        exported graph keeps a fixed number of columns. While
        :func:`torch.jit.trace` records the module, sizes are traced values
        that a Python comparison would freeze (with a ``TracerWarning``):
        ``X`` is then reshaped to ``(rows, n_features_in)`` instead, which
        fails in the traced graph on another number of columns.

        Parameters
        ----------
        X : torch.Tensor of shape (n, n_features_in)
            The raw columns.

        Returns
        -------
        X : torch.Tensor of shape (n, n_features_in)
            ``X`` itself (a view of it while tracing).

        Raises
        ------
        TypeError
            If ``X`` is not a :class:`torch.Tensor`.
        ValueError
            If ``X`` is not 2-D, or its number of columns is not the
            estimator's ``n_features_in_``.
        """
        n = self.n_features_in
        if not isinstance(X, torch.Tensor):
            raise TypeError(
                f"The exported module takes a torch.Tensor of shape (n_samples, {n}), got "
                f"{type(X).__name__}; convert it first, e.g. torch.as_tensor(X).")
        if X.dim() != 2:
            raise ValueError(
                f"The exported module takes a 2-D tensor of shape (n_samples, {n}), got "
                f"{X.dim()} dimension(s), shape {tuple(X.shape)}.")
        if _is_tracing():
            return X.reshape(X.shape[0], n)
        if X.shape[1] != n:
            raise ValueError(
                f"X has {X.shape[1]} column(s), but the exported module expects {n}: the "
                f"estimator was fitted on n_features_in_={n} columns (shape (n_samples, {n})).")
        return X

    def encode(self, X):
        """The encoded features (float32), as the estimator's ``encoder_``."""
        return self._encode(self.check_input(X))

    def _encode(self, X):
        """:meth:`encode` of a checked ``X``."""
        X = X.to(torch.float64)
        blocks = [col(X[:, j]) for j, col in enumerate(self.columns)]
        return torch.cat(blocks, dim=1).to(torch.float32)

    def forward(self, X):
        X = self.check_input(X)
        out = self.trees(self._encode(X))
        if self.additive is not None:
            out = out + self.additive(X.to(torch.float64))
        if self.kind == "binary":
            return out[:, 1] - out[:, 0]
        if self.kind == "regressor":
            out = self.link.inverse(out, torch) * self.y_scale + self.y_mean
            return out[:, 0] if self.squeeze else out
        return out


def _fitted_ensemble(estimator):
    """The soft tree ensemble behind ``estimator`` (a sharded meta-estimator's
    merged model), checked fitted."""
    from .._estimators import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor
    from ..federation._sharded import ShardedSoftTreeEnsemble

    if isinstance(estimator, ShardedSoftTreeEnsemble):
        check_is_fitted(estimator, "merged_")
        estimator = estimator.merged_
    if not isinstance(estimator, (SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor)):
        raise TypeError(
            "export_module takes a fitted SoftTreeEnsembleClassifier, "
            "SoftTreeEnsembleRegressor or ShardedSoftTreeEnsemble, got "
            f"{type(estimator).__name__}. For a Pipeline, export its final step and apply "
            "the preprocessing before the module."
        )
    check_is_fitted(estimator, "tree_params_")
    return estimator


def export_module(estimator):
    """Return a fitted estimator as a self-contained PyTorch module.

    The module computes the estimator's decision values from raw inputs: the
    input encoding of ``encoder_`` (piecewise-linear, quantile-normal or
    standard numeric features, one-hot categories, missing indicators) is
    part of it, written in tensor operations with its fitted constants as
    buffers, followed by the trees. It needs neither scikit-learn nor pandas
    at prediction time, and :func:`torch.export.export`,
    :func:`torch.jit.trace` and :func:`torch.onnx.export` accept it.

    Parameters
    ----------
    estimator : SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor or \
            ShardedSoftTreeEnsemble
        A fitted estimator (of a sharded meta-estimator, its merged model
        ``merged_`` is exported).

    Returns
    -------
    module : torch.nn.Module
        On the CPU, in eval mode, its parameters float32. It maps a float
        tensor ``X`` of shape ``(n, n_features_in_)`` to

        - a classifier's :meth:`~SoftTreeEnsembleClassifier.decision_function`:
          shape ``(n,)``, the logit of ``classes_[1]``, for two classes, else
          ``(n, n_classes)`` scores (``softmax`` of them is ``predict_proba``,
          their ``argmax`` indexes ``classes_``);
        - a regressor's :meth:`~SoftTreeEnsembleRegressor.predict`, in the
          units of ``y``: shape ``(n,)`` or ``(n, n_outputs)``,

        as float32. The columns of ``X`` are those of the estimator's input:
        numeric columns hold their raw values, categorical columns the
        float *category code*: ``k`` for the ``k``-th category of
        ``encoder_.categories_[j]`` (``0 <= k < len(categories_[j])``), any
        other value (e.g. ``-1``) for a category unseen in ``fit`` (encoded
        like one: the "infrequent" feature, or none). ``NaN`` is a missing
        value in any column. :func:`encode_categories` turns raw rows (a
        DataFrame, an object array) into this array. Another number of
        columns (or dimensions) is a ValueError naming both counts, and an
        input that is not a tensor a TypeError; both are checked on the
        static shape, so the exported graphs keep the check as a fixed
        number of columns.

    See Also
    --------
    encode_categories : Raw rows to the module's input.
    SoftTreeEnsembleModule : The trees alone, on encoded features, trainable.

    Notes
    -----
    The encoding runs in float64 (``X`` is cast to float64, so a float64
    input keeps its precision) and its features are rounded to float32, as
    in the estimator; the trees run in float32. Outputs agree with the
    estimator's to about 1e-6 (the tests check 1e-5 on every architecture
    and encoding). The quantile-normal encoding reimplements scikit-learn's
    :class:`~sklearn.preprocessing.QuantileTransformer`; the normal quantile
    function is :func:`torch.special.ndtri`, replaced while exporting to
    ONNX (which has no such operator) by the same algorithm in elementary
    operations.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> import torch
    >>> from sktree_lmc import SoftTreeEnsembleClassifier, encode_categories, export_module
    >>> X = pd.DataFrame({
    ...     "size": [1.0, 2.5, np.nan, 4.0, 5.5, 6.0, 7.5, 9.0],
    ...     "color": ["red", "blue", "red", None, "green", "blue", "red", "green"],
    ... })
    >>> y = [0, 0, 0, 1, 1, 1, 1, 0]
    >>> clf = SoftTreeEnsembleClassifier(n_estimators=4, max_epochs=2,
    ...                                  random_state=0).fit(X, y)
    >>> module = export_module(clf)

    Categorical columns enter as codes into ``encoder_.categories_``; ``-1``
    (or any other value) is an unseen category, ``NaN`` a missing value:

    >>> clf.encoder_.categories_[1].tolist()
    ['blue', 'green', 'red']
    >>> codes = encode_categories(clf, X)
    >>> codes[:4]
    array([[1. , 2. ],
           [2.5, 0. ],
           [nan, 2. ],
           [4. , nan]])
    >>> with torch.no_grad():
    ...     scores = module(torch.tensor(codes, dtype=torch.float32))
    >>> scores.shape
    torch.Size([8])
    >>> bool(np.allclose(scores.numpy(), clf.decision_function(X), atol=1e-5))
    True

    The module exports as a graph, e.g. with a dynamic number of rows:

    >>> batch = torch.export.Dim("batch")
    >>> program = torch.export.export(
    ...     module, (torch.tensor(codes, dtype=torch.float32),),
    ...     dynamic_shapes=({0: batch},))
    >>> program.module()(torch.tensor(codes[:3], dtype=torch.float32)).shape
    torch.Size([3])
    """
    est = _fitted_ensemble(estimator)
    if hasattr(est, "classes_"):
        kind = "binary" if len(est.classes_) == 2 else "multiclass"
    else:
        kind = "regressor"
    module = _ExportedEnsemble(est, kind)
    module.requires_grad_(False)
    return module.eval()


def encode_categories(estimator, X):
    """Raw rows as the float input of the module of :func:`export_module`.

    Numeric columns keep their values (missing values as ``NaN``);
    categorical columns become category codes: the index of the value in
    ``encoder_.categories_[j]``, ``-1`` for a category unseen in ``fit`` and
    ``NaN`` for a missing value (``None``, ``NaN``, ``pd.NA``, ``pd.NaT``).
    ``X`` is checked against the fit as in ``predict`` (number of columns,
    and names for a DataFrame).

    Parameters
    ----------
    estimator : SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor or \
            ShardedSoftTreeEnsemble
        The fitted estimator that was exported.
    X : array-like or pandas DataFrame of shape (n_samples, n_features)
        Raw rows, as given to ``predict``.

    Returns
    -------
    codes : ndarray of float64 of shape (n_samples, n_features)
        The module's input (convert with ``torch.tensor(codes)``; the codes
        are exact in float32 too).

    See Also
    --------
    export_module : The module that takes this array.

    Examples
    --------
    >>> import pandas as pd
    >>> from sktree_lmc import SoftTreeEnsembleRegressor, encode_categories
    >>> X = pd.DataFrame({"x": [0.5, 1.5, 2.5, 3.5],
    ...                   "city": pd.Categorical(["Oslo", "Rome", "Oslo", None])})
    >>> reg = SoftTreeEnsembleRegressor(n_estimators=2, max_epochs=1,
    ...                                 random_state=0).fit(X, [1.0, 2.0, 3.0, 4.0])
    >>> encode_categories(reg, pd.DataFrame({"x": [1.0, 2.0],
    ...                                      "city": ["Rome", "Paris"]}))
    array([[ 1.,  1.],
           [ 2., -1.]])
    """
    est = _fitted_ensemble(estimator)
    return encoder_inputs(est.encoder_, input_columns(est, X))
