"""The vectorized forward pass of a soft tree ensemble (one code path for all architectures).

The whole ensemble is three tensor contractions (in the spirit of NODE's ODST):

1. all split logits of all trees at once, one matmul:
   ``z = X @ W.T + b`` with ``W`` of shape ``(M * N, F)``;
2. log leaf probabilities from the architecture's constant routing table ``R``
   (``(2N, L)``, see :meth:`TreeArchitecture.routing_matrix`):
   ``log mu = [logsigmoid(z), logsigmoid(-z)] @ R``;
3. the leaf values: ``out = mu.reshape(B, M * L) @ pi.reshape(M * L, C)``.

Working in log space keeps the product of sigmoids stable, and computing both
``logsigmoid(z)`` and ``logsigmoid(-z)`` from the same call makes a subtree flip
(``z -> -z``) exactly symmetric.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._params import TreeParams

__all__ = ["SoftTreeEnsembleModule"]


class SoftTreeEnsembleModule(nn.Module):
    """PyTorch module computing the sum of ``M`` soft trees of one architecture.

    Parameters
    ----------
    arch : TreeArchitecture
        Architecture table (routing code, free leaves).
    n_trees : int
        Number of trees ``M``.
    n_features : int
        Number of input features ``F``.
    n_outputs : int
        Output dimension ``C`` (classes, or regression targets).
    generator : torch.Generator, optional
        Generator for the initialization. Parameters are drawn on the CPU so
        that initialization does not depend on the device.

    Notes
    -----
    Initialization follows a fully connected layer (as in the paper):
    split weights and biases ``U(-1/sqrt(F), 1/sqrt(F))``, leaf values
    ``U(-1/sqrt(L), 1/sqrt(L))`` with ``L`` the number of free leaves.
    """

    def __init__(self, arch, n_trees, n_features, n_outputs, generator=None):
        super().__init__()
        self.arch = arch
        N, L = arch.n_nodes, arch.n_free_leaves
        bound = 1.0 / math.sqrt(n_features)
        lbound = 1.0 / math.sqrt(L)

        def uniform(shape, b):
            return (torch.rand(shape, generator=generator) * 2 - 1) * b

        self.split_weight = nn.Parameter(uniform((n_trees, N, n_features), bound))
        self.split_bias = nn.Parameter(uniform((n_trees, N), bound))
        self.leaf_value = nn.Parameter(uniform((n_trees, L, n_outputs), lbound))
        self.register_buffer("routing", torch.from_numpy(arch.routing_matrix()))

    def leaf_probabilities(self, X):
        """Routing probabilities ``mu`` of shape ``(B, M, L)`` (free leaves)."""
        M, N, Fdim = self.split_weight.shape
        z = torch.addmm(self.split_bias.reshape(-1), X, self.split_weight.reshape(M * N, Fdim).T)
        z = z.view(X.shape[0], M, N)
        log_mu = F.logsigmoid(torch.cat([z, -z], dim=-1)) @ self.routing
        return torch.exp(log_mu)

    def tree_outputs(self, X):
        """Per-tree outputs of shape ``(B, M, C)`` (Eq. 3)."""
        mu = self.leaf_probabilities(X)
        return torch.einsum("bml,mlc->bmc", mu, self.leaf_value)

    def forward(self, X):
        """Ensemble output of shape ``(B, C)``: the sum of the trees (Eq. 4)."""
        mu = self.leaf_probabilities(X)
        M, L, C = self.leaf_value.shape
        return mu.reshape(X.shape[0], M * L) @ self.leaf_value.reshape(M * L, C)

    # -- conversion to and from arrays -----------------------------------------
    def to_params(self):
        """Copy the parameters to a CPU :class:`TreeParams`."""
        with torch.no_grad():
            return TreeParams(
                self.split_weight.detach().cpu().numpy().copy(),
                self.split_bias.detach().cpu().numpy().copy(),
                self.leaf_value.detach().cpu().numpy().copy(),
            )

    @classmethod
    def from_params(cls, arch, params, device="cpu"):
        """Build a module holding ``params`` on ``device``."""
        module = cls.__new__(cls)
        nn.Module.__init__(module)
        module.arch = arch
        module.split_weight = nn.Parameter(torch.from_numpy(np.array(params.split_weight)))
        module.split_bias = nn.Parameter(torch.from_numpy(np.array(params.split_bias)))
        module.leaf_value = nn.Parameter(torch.from_numpy(np.array(params.leaf_value)))
        module.register_buffer("routing", torch.from_numpy(arch.routing_matrix()))
        return module.to(device)


def reference_forward(arch, params, X):
    """Slow, obviously-correct NumPy forward (loop over trees and leaves).

    Used by the tests and by the benchmark as the baseline of the vectorized
    kernel. Returns per-tree outputs of shape ``(n_samples, M, C)``.
    """
    X = np.asarray(X, dtype=np.float64)
    M = params.n_trees
    out = np.zeros((X.shape[0], M, params.n_outputs))
    for m in range(M):
        z = X @ params.split_weight[m].T.astype(np.float64) + params.split_bias[m]
        s = 1.0 / (1.0 + np.exp(-z))
        for j, leaf in enumerate(arch.free_leaves):
            mu = np.ones(X.shape[0])
            for n in range(arch.n_nodes):
                c = arch.code[leaf, n]
                if c == 1:
                    mu = mu * s[:, n]
                elif c == -1:
                    mu = mu * (1.0 - s[:, n])
            out[:, m] += mu[:, None] * params.leaf_value[m, j][None, :]
    return out
