"""Tree diagrams for the documentation, drawn from the package's architecture tables.

Nothing here is hand-drawn: the shape of every tree comes from
``TreeArchitecture.code`` (which leaves lie left or right of which node), the
fixed-zero leaf from ``free_leaves``, node weights from ``node_weights`` and the
effect of a symmetry from the ``(perm, sign, leaf_perm)`` rows of
``TreeArchitecture.ops``. The ``.. plot::`` directives of the user guide call the
``plot_*`` functions below at build time.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch

from sktree_lmc import get_architecture

NAMES = {
    "non_oblivious": "non-oblivious (perfect)",
    "oblivious": "oblivious",
    "decision_list": "decision list",
    "decision_list_modified": "modified decision list",
}

_NODE_COLORS = plt.get_cmap("tab10").colors
_LEAF_COLOR = "#f2f2f2"


# ----------------------------------------------------------------------------
# Layout: recover the tree shape from the routing table
# ----------------------------------------------------------------------------


def _build(code, leaves, used):
    """Nested tuples ``("node", n, left, right)`` / ``("leaf", l)`` from ``code``.

    The split at the top of a set of leaves is the lowest-numbered node, not yet
    used on the path, that lies on the path of all of them.
    """
    if len(leaves) == 1:
        return ("leaf", leaves[0])
    sub = code[leaves]
    cands = [n for n in range(code.shape[1]) if n not in used and (sub[:, n] != 0).all()]
    n = min(cands)
    left = [leaf for leaf in leaves if code[leaf, n] == 1]
    right = [leaf for leaf in leaves if code[leaf, n] == -1]
    return ("node", n, _build(code, left, used | {n}), _build(code, right, used | {n}))


def layout(arch):
    """Positions of the drawn nodes and leaves of one tree of ``arch``.

    Returns
    -------
    nodes : list of (node_index, x, y)
        One entry per drawn split (oblivious trees draw a shared split once per
        position).
    leaves : list of (leaf_index, x, y)
        Structural leaves, left to right.
    edges : list of ((x0, y0), (x1, y1), side)
        Parent-to-child segments, ``side`` is ``"L"`` or ``"R"``.
    """
    tree = _build(arch.code, list(range(arch.n_leaves)), frozenset())
    nodes, leaves, edges = [], [], []
    counter = [0]

    def place(t, depth):
        if t[0] == "leaf":
            x = counter[0]
            counter[0] += 1
            leaves.append((t[1], x, -depth))
            return x
        xl = place(t[2], depth + 1)
        xr = place(t[3], depth + 1)
        x = (xl + xr) / 2
        nodes.append((t[1], x, -depth))
        edges.append(((x, -depth), (xl, -depth - 1), "L"))
        edges.append(((x, -depth), (xr, -depth - 1), "R"))
        return x

    place(tree, 0)
    return nodes, leaves, edges


# ----------------------------------------------------------------------------
# Drawing
# ----------------------------------------------------------------------------


def draw_tree(ax, arch, *, op=None, title=None, show_weights=False, show_sides=False,
              font_size=14):
    """Draw one tree of ``arch`` on ``ax``, optionally after a symmetry op.

    Parameters
    ----------
    ax : matplotlib Axes
    arch : TreeArchitecture
    op : tuple (perm, sign, leaf_perm), optional
        A row of ``arch.ops``. Position ``n`` of the drawn tree then holds the
        split ``sign[n] * (w, b)[perm[n]]`` of the original tree and free leaf
        ``l`` holds the original value ``pi[leaf_perm[l]]``. Colours follow the
        original node, so moved splits keep their colour.
    show_weights : bool
        Annotate each split with the number of leaves it affects.
    show_sides : bool
        Label edges with ``σ(z)`` (left) and ``1-σ(z)`` (right).
    """
    nodes, leaves, edges = layout(arch)
    if op is None:
        perm = np.arange(arch.n_nodes)
        sign = np.ones(arch.n_nodes)
        leaf_perm = np.arange(arch.n_free_leaves)
    else:
        perm, sign, leaf_perm = (np.asarray(v) for v in op)
    free_pos = {int(leaf): i for i, leaf in enumerate(arch.free_leaves)}

    for (x0, y0), (x1, y1), side in edges:
        ax.plot([x0, x1], [y0, y1], color="#555555", lw=1.2, zorder=1)
        if show_sides:
            text = r"$\sigma(z)$" if side == "L" else r"$1-\sigma(z)$"
            ax.text((x0 + x1) / 2 + (-0.12 if side == "L" else 0.12), (y0 + y1) / 2 + 0.05,
                    text, ha="right" if side == "L" else "left", va="center",
                    fontsize=font_size - 2, color="#555555")

    for n, x, y in nodes:
        src = int(perm[n])
        neg = sign[n] < 0
        label = ("$-$" if neg else "") + f"$n_{{{src}}}$"
        color = _NODE_COLORS[src % len(_NODE_COLORS)]
        ax.text(x, y, label, ha="center", va="center", fontsize=font_size, zorder=3,
                color="white", fontweight="bold",
                bbox=dict(boxstyle="circle,pad=0.35" if not neg else "round,pad=0.35",
                          fc=color, ec="black" if neg else color, lw=2.0 if neg else 1.0))
        if show_weights:
            w = int(arch.node_weights[n])
            ax.text(x + 0.28, y + 0.12, f"weight {w}", ha="left", va="bottom",
                    fontsize=font_size - 2, color="#222222", zorder=4,
                    bbox=dict(boxstyle="round,pad=0.2", fc="#fff6d5", ec="#d9b300", lw=0.8))

    for leaf, x, y in leaves:
        if leaf in free_pos:
            src = int(leaf_perm[free_pos[leaf]])
            ax.text(x, y, rf"$\pi_{{{src}}}$", ha="center", va="center", fontsize=font_size,
                    zorder=3, bbox=dict(boxstyle="square,pad=0.4", fc=_LEAF_COLOR, ec="#333333"))
        else:
            ax.text(x, y, "0", ha="center", va="center", fontsize=font_size, zorder=3,
                    color="#888888",
                    bbox=dict(boxstyle="square,pad=0.45", fc="white", ec="#888888", ls="--"))

    xs = [x for _, x, _ in leaves]
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(min(y for *_, y in leaves) - 0.6, 0.6)
    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=font_size + 1)
    return ax


def _find_op(arch, perm=None, sign=None):
    """The row of ``arch.ops`` with the given node permutation and signs."""
    ops = arch.ops
    mask = np.ones(len(ops), dtype=bool)
    if perm is not None:
        mask &= (ops.perm == np.asarray(perm)).all(axis=1)
    if sign is not None:
        mask &= (ops.sign == np.asarray(sign)).all(axis=1)
    (idx,) = np.flatnonzero(mask)[:1]
    return ops.perm[idx], ops.sign[idx], ops.leaf_perm[idx]


def _arrow(fig, ax_from, ax_to, text):
    a = ax_from.get_position()
    b = ax_to.get_position()
    y = (a.y0 + a.y1) / 2
    arrow = FancyArrowPatch((a.x1 - 0.01, y), (b.x0 + 0.01, y), transform=fig.transFigure,
                            arrowstyle="-|>", mutation_scale=18, lw=1.5, color="#333333")
    fig.patches.append(arrow)
    fig.text((a.x1 + b.x0) / 2, y + 0.05, text, ha="center", va="bottom", fontsize=14)


# ----------------------------------------------------------------------------
# The figures of the user guide
# ----------------------------------------------------------------------------


def plot_architectures(depth=3):
    """The four architectures at one depth, two per row, with their sizes."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.6))
    for ax, name in zip(axes.ravel(), NAMES):
        arch = get_architecture(name, depth)
        draw_tree(ax, arch, font_size=16)
        if arch.n_leaves < 8:  # keep the scale of the perfect trees
            ax.set_xlim(-2.2, 5.9)
        ax.set_title(f"{NAMES[name]}: {arch.n_nodes} split rows, {arch.n_free_leaves} leaf values",
                     fontsize=16)
    fig.tight_layout(h_pad=2.0)
    return fig


def plot_node_weights(depth=3):
    """Node weighting (Section 3.2): the number of leaves each split affects."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw=dict(width_ratios=[2, 1]))
    for ax, name in zip(axes, ["non_oblivious", "decision_list"]):
        arch = get_architecture(name, depth)
        draw_tree(ax, arch, show_weights=True, title=NAMES[name], font_size=14)
    fig.tight_layout()
    return fig


def plot_single_split():
    """A depth-1 soft tree: one split, two leaves."""
    fig, ax = plt.subplots(figsize=(3.6, 2.2))
    draw_tree(ax, get_architecture("non_oblivious", 1), show_sides=True)
    ax.set_xlim(-0.9, 1.9)
    fig.tight_layout()
    return fig


def plot_symmetry(name, depth, *, perm=None, sign=None, label=""):
    """A tree of ``name`` before and after one of its symmetry ops."""
    arch = get_architecture(name, depth)
    op = _find_op(arch, perm, sign)
    width = 4.2 if arch.n_leaves <= 4 else 6.0
    fig, axes = plt.subplots(1, 2, figsize=(2 * width + 1.0, 2.6 + 0.4 * depth))
    draw_tree(axes[0], arch, title="original")
    draw_tree(axes[1], arch, op=op, title="transformed (same function)")
    fig.tight_layout(w_pad=6.0)
    _arrow(fig, axes[0], axes[1], label)
    return fig


def plot_flip():
    """Subtree flip at the root of a depth-2 perfect tree."""
    return plot_symmetry("non_oblivious", 2, sign=[-1, 1, 1], label="flip the root")


def plot_level_swap():
    """Splitting-order swap of a depth-2 oblivious tree."""
    return plot_symmetry("oblivious", 2, perm=[1, 0], sign=[1, 1], label="swap the levels")


def plot_decision_list_flip():
    """The one flip a decision list has: its terminal split."""
    return plot_symmetry("decision_list", 3, sign=[1, 1, -1], label="flip the last split")


# ----------------------------------------------------------------------------
# Ordering of the gallery
# ----------------------------------------------------------------------------

GALLERY_ORDER = [
    "plot_interpolation_curves.py",
    "plot_skewed_splits.py",
    "plot_grid_search_architectures.py",
    "plot_depth.py",
]


class GalleryOrder:
    """Sort key of sphinx-gallery's ``within_subsection_order``: the list above first."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename):
        if filename in GALLERY_ORDER:
            return (0, GALLERY_ORDER.index(filename), filename)
        return (1, 0, filename)

    def __repr__(self):
        return f"<{type(self).__name__}>"
