r"""The boxes that lead to targets: where the M2L and the L2L must put locals.

When the targets fill only part of the cube (a rank's Morton share of them in the
distributed summation, :mod:`vortexsim.summation.distributed`; tracers), the boxes
whose subtrees hold no target need no local expansion.  :func:`target_boxes` lists,
per level, the boxes that do; the dense 1/r M2L (:meth:`vortexsim.fmm.m2l.M2L.level`)
runs each parity class's GEMMs over those target boxes only, against all source boxes
(the sources, and the upward pass, stay whole), and the L2L
(:meth:`vortexsim.fmm.downward.Downward.to_leaves`) starts from those parents only.
For half (a quarter) of a uniform cube that is about half (a quarter) of every level,
so the M2L's and the L2L's cost follow the targets.  The listed boxes get the same
sums as before, up to round-off (GEMMs of other widths); the others get zero locals,
which no L2L carries to a target.  Targets in every box list nothing, and the
evaluation is the unrestricted one.  A level that would take the GPU's sparse M2L (few
boxes hold sources: the blobs of a run fill part of the root cube, whose leaves are as
wide as the near field's reach) takes the dense M2L into its listed boxes instead where
they are fewer than its source boxes (:meth:`vortexsim.fmm.m2l.M2L.sparsity`): the
sparse M2L translates from every source box whatever the targets.
"""
from __future__ import annotations

import typing

import numpy as np

from ..backend import stable_argsort

__all__ = ["TargetBoxes", "target_boxes"]


class TargetBoxes(typing.NamedTuple):
    """The boxes of one level whose subtrees hold targets (:func:`target_boxes`):
    ``boxes`` (k,) int64 ascending, and per parity class p the rows (k_p,) int64 of its
    gather table (:meth:`~vortexsim.fmm.m2l.M2L.classes`: row j is box p + 8j), on the
    tree's device."""

    boxes: object
    rows: list


def target_boxes(tgt_start, depth, xp, top=1):
    """Per level ``top``..``depth`` the boxes whose subtrees hold targets: {level:
    :class:`TargetBoxes`, or None where every box of the level holds targets}.

    ``tgt_start`` (8^depth + 1,): a tree's target CSR offsets, of namespace ``xp``.  The
    counts per level and parity class cross to the host in one transfer (GPU; they size
    the GEMMs), the lists are made on the device (a prefix sum and a scatter, no
    further transfer).

    Why: the M2L and the L2L only need locals in boxes that lead to targets.  When the
    targets fill part of the cube (a rank's Morton share of them, the distributed
    summation; tracers), the dense M2L then runs each class's GEMMs over those boxes
    only (a gathered subset of its rows: the sources stay whole) and the L2L over those
    parents only, so their cost follows the targets: half of every level for half of a
    uniform cube.  A list rather than a box range: a share cut along the Morton curve of
    another cube (the shares' bounding cube, not the FMM's stretched root cube) crosses
    the FMM's box planes, and its few targets beyond them would stretch a range over
    most of the grid, while they add only one layer of boxes to the list.
    """
    flags = {depth: tgt_start[1:] > tgt_start[:-1]}
    for level in range(depth, max(top, 1), -1):
        flags[level - 1] = flags[level].reshape(-1, 8).any(axis=1)
    levels = list(range(max(top, 1), depth + 1))
    if not levels:
        return {}
    counts = xp.stack([flags[level].reshape(-1, 8).sum(axis=0) for level in levels])
    counts = counts if xp is np else counts.get()              # one transfer

    def listed(mask, k):               # the indices of mask's True entries (k of them)
        if xp is np:
            return np.flatnonzero(mask)
        pos = xp.cumsum(mask) - 1
        buf = xp.empty(k + 1, dtype=xp.int64)               # slot k: the others' bin
        buf[xp.where(mask, pos, k)] = xp.arange(mask.shape[0], dtype=xp.int64)
        return buf[:k]
    out = {}
    for row, level in enumerate(levels):
        n = np.array([int(c) for c in counts[row]])
        if n.sum() == 8 ** level:
            out[level] = None
            continue
        boxes = listed(flags[level], int(n.sum()))
        # the rows j = box >> 3 grouped by parity class p = box & 7, each group in
        # ascending order (a stable sort by class): one sort instead of a list per class
        grouped = boxes[stable_argsort(boxes & 7, xp)] >> 3
        ends = np.cumsum(n)
        out[level] = TargetBoxes(boxes, [grouped[e - c:e] for c, e in zip(n, ends)])
    return out
