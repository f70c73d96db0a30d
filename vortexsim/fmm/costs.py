r"""What each target costs a level-uniform FMM evaluation, leaf by leaf: the weights by
which the ranks of a distributed sum cut their shares of the targets
(:func:`vortexsim.summation.distributed.share_targets`).

A target in leaf ℓ costs the near field one pair per source in ℓ's (2r + 1)³ stencil
(r: the evaluator's near radius), and the L2P a fixed amount; each leaf holding targets
costs the far field (its M2L from every level's interaction list, its L2L) a fixed
amount whatever its count.  In units of one near-field pair:

    cost(ℓ) = T(ℓ) · (S_stencil(ℓ) + PAIRS_PER_TARGET) + PAIRS_PER_LEAF  (T(ℓ) > 0)

Equal counts of targets are not equal work: where the points fill part of the root cube
(the blobs of a run; the root is stretched so that the leaves are as wide as the reach),
a leaf on the cloud's surface holds fewer targets, each with a half-empty stencil, but
costs the far field as much as a full one.  Shares of equal target counts cut on the
FMM's leaves gave one rank of two the dense interior (2 × H200, 2^24 blobs: near fields
of 312 and 272 ms; ``benchmarks/RESULTS.md``).  The counts are integers, so that every
rank cuts at the same targets whatever the order of its sums.
"""
from __future__ import annotations

import typing

import numpy as np

from ..kernels.morton import count_cells
from .tree import morton_decode

__all__ = ["LeafCosts", "leaf_costs", "leaf_keys", "stencil_sums", "target_costs",
           "PAIRS_PER_LEAF", "PAIRS_PER_TARGET"]

#: the far field's cost of a leaf that holds targets (its M2L at every level and its
#: L2L), in near-field pairs: one H200, float64, 2^24 Gaussian blobs at tol 1e-6 (order
#: 16), where a quarter share's M2L and L2L took 80 ms for its 17 200 leaves (4.7 µs a
#: leaf) and the one-GPU near field 543 ms for 1.12e11 pairs (4.8 ps a pair)
PAIRS_PER_LEAF = 1_000_000
#: the L2P's cost of a target, in near-field pairs (the same run: 10 ms for a quarter
#: share's 4.2M targets)
PAIRS_PER_TARGET = 500


class LeafCosts(typing.NamedTuple):
    """The leaves' costs of one evaluation (:func:`leaf_costs`).

    Attributes
    ----------
    depth : int, the tree's leaf level
    stencil : int64 array (8**depth,) of the evaluation's namespace, in Morton order of
        the leaves: the sources in each leaf's near-field stencil
    per_leaf, per_target : int, :data:`PAIRS_PER_LEAF` and :data:`PAIRS_PER_TARGET`
    """

    depth: int
    stencil: object
    per_leaf: int = PAIRS_PER_LEAF
    per_target: int = PAIRS_PER_TARGET


def stencil_sums(grid, radius, xp):
    """Per cell of ``grid`` (s, s, s) the sum over the (2·radius + 1)³ cells around it (a
    separable box filter; cells beyond the grid count zero), same dtype."""
    side = grid.shape[0]
    box = xp.pad(grid, radius)
    for axis in range(3):
        sl = [slice(None)] * 3
        acc = None
        for k in range(2 * radius + 1):
            sl[axis] = slice(k, k + side)
            part = box[tuple(sl)]
            acc = part if acc is None else acc + part
        box = acc
    return box


def leaf_costs(x, lo, width, depth, radius, xp):
    """:class:`LeafCosts` of the sources x (N, 3) [L] on the level-uniform tree of
    ``depth`` in the cube (lo (3,), width) [L] with near-field stencils of half-width
    ``radius`` leaves.  O(N + 8^depth), no host transfer."""
    side = 1 << depth
    sums = stencil_sums(count_cells(x, lo, width, depth, xp), radius, xp)
    ix, iy, iz = morton_decode(xp.arange(side ** 3, dtype=xp.uint64), depth, xp)
    return LeafCosts(depth, sums.reshape(-1)[(ix * side + iy) * side + iz])


def target_costs(keys, bits, costs, xp):
    """The costs (M,) int64 of targets whose Morton keys ``keys`` (M,) at ``bits`` ≥
    ``costs.depth`` bits per axis (the cube of the tree) are sorted ascending: each its
    stencil's sources plus ``per_target``, and the first target of each leaf also its
    leaf's ``per_leaf`` (so that a run of whole leaves costs what its leaves cost)."""
    leaf = leaf_keys(keys, bits, costs.depth, xp)
    w = costs.stencil[leaf.astype(xp.int64)] + costs.per_target
    if leaf.shape[0]:
        first = xp.ones(leaf.shape[0], dtype=bool)
        first[1:] = leaf[1:] != leaf[:-1]
        w = w + first.astype(xp.int64) * costs.per_leaf
    return w


def leaf_keys(keys, bits, depth, xp):
    """The Morton keys of the leaves at level ``depth`` of keys at ``bits`` bits per
    axis (the same cube): the keys without their last 3·(bits − depth) bits."""
    if depth > bits:
        raise ValueError(f"leaves at depth {depth} are finer than keys of {bits} bits.")
    return keys >> keys.dtype.type(3 * (bits - depth))
