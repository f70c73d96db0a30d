"""Morton (Z-order) keys of points, array code for NumPy and CuPy alike.

Used to order targets so that neighbouring threads of a GPU warp hold nearby
points (coherent branches in the pair kernels), and by the FMM tree.
"""
from __future__ import annotations

import numpy as np

from .modules import elementwise_kernel, get_function

__all__ = ["morton_keys", "grid_cells", "count_cells", "spread_bits", "bounding_cube",
           "column_range", "column_sums", "cube_edge"]

MAX_BITS = 21   # 3 × 21 = 63 bits fit a uint64


def spread_bits(v, xp):
    """Insert two zero bits between each of the low 21 bits of ``v`` (uint64)."""
    v = v & xp.uint64(0x1FFFFF)
    v = (v | (v << xp.uint64(32))) & xp.uint64(0x1F00000000FFFF)
    v = (v | (v << xp.uint64(16))) & xp.uint64(0x1F0000FF0000FF)
    v = (v | (v << xp.uint64(8))) & xp.uint64(0x100F00F00F00F00F)
    v = (v | (v << xp.uint64(4))) & xp.uint64(0x10C30C30C30C30C3)
    v = (v | (v << xp.uint64(2))) & xp.uint64(0x1249249249249249)
    return v


def grid_cells(points, lo, width, bits, xp):
    """Cell indices (M, 3) int64 of ``points`` on the 2**bits grid of the cube
    ``[lo, lo + width)³``; points outside are clamped to the boundary cells.

    The one cell rule of the tree (through :func:`morton_keys`) and of the FMM's depth
    model, so that both see the same leaves.
    """
    n_cells = 1 << bits
    return xp.clip(xp.floor((points - lo) * (n_cells / width)), 0, n_cells - 1).astype(xp.int64)


def count_cells(points, lo, width, bits, xp):
    """Points per cell (2**bits,)*3 int64 of ``points`` (M, 3) on the grid of
    :func:`grid_cells` (points outside clamped to the boundary cells).  On the GPU one
    kernel (the cells made as ``grid_cells`` makes them from float64 points, counted by
    integer atomics: the same counts in any order) instead of ~10 array operations and a
    ``bincount``.  A point whose cell is NaN (a NaN coordinate; 0 · inf or inf − inf of
    a degenerate cube) is counted nowhere, on either path."""
    side = 1 << bits
    if points.shape[0] == 0:
        return xp.zeros((side,) * 3, dtype=xp.int64)
    if xp is np:
        with np.errstate(invalid="ignore"):      # a NaN cell is no cell: left out first
            nan = np.isnan((points - lo) * (side / width)).any(axis=1)
        if nan.any():
            points = points[~nan]
        cell = grid_cells(points, lo, width, bits, xp)
        flat = (cell[:, 0] * side + cell[:, 1]) * side + cell[:, 2]
        return xp.bincount(flat, minlength=side ** 3).reshape((side,) * 3)
    counts = xp.zeros(side ** 3, dtype=xp.uint64)
    elementwise_kernel("vortexsim_count_cells")(
        xp.ascontiguousarray(points, dtype=xp.float64),
        xp.ascontiguousarray(xp.asarray(lo, dtype=xp.float64).reshape(3)),
        np.float64(side / width), np.float64(side - 1), np.int64(side), counts,
        size=points.shape[0])
    return counts.view(xp.int64).reshape((side,) * 3)


def morton_keys(points, lo, width, bits, xp):
    """Z-order keys (uint64) of ``points`` (M, 3) in the cube ``[lo, lo + width)³``.

    Parameters
    ----------
    points : array (M, 3) [L]
    lo : array (3,) [L], lower corner of the cube
    width : float [L], edge of the cube, > 0
    bits : int, 1 ≤ bits ≤ 21, levels of the octree the keys resolve
    xp : numpy or cupy

    Returns
    -------
    array (M,) uint64; points outside the cube are clamped to its boundary cells.
    """
    if not 1 <= bits <= MAX_BITS:
        raise ValueError(f"bits must be in [1, {MAX_BITS}], got {bits}.")
    if xp is not np:
        # one fused kernel (the cells as grid_cells makes them from float64 points,
        # then interleaved) instead of ~55 array operations over the points; float32
        # points are taken in float64 (keys may then differ at cell edges from
        # grid_cells' float32 arithmetic: only an order of targets depends on them)
        n_cells = 1 << bits
        if points.shape[0] == 0:
            return xp.zeros(0, dtype=xp.uint64)
        return elementwise_kernel("vortexsim_morton_keys")(
            xp.ascontiguousarray(points, dtype=xp.float64),
            xp.asarray(lo, dtype=xp.float64).reshape(3),
            xp.asarray(n_cells / width, dtype=xp.float64).reshape(1),
            np.float64(n_cells - 1), size=points.shape[0])
    cell = grid_cells(points, lo, width, bits, xp).astype(xp.uint64)
    return (spread_bits(cell[:, 0], xp) | (spread_bits(cell[:, 1], xp) << xp.uint64(1))
            | (spread_bits(cell[:, 2], xp) << xp.uint64(2)))


def _row_blocks(points):
    """(head, tail) of a tall (M, c) array: ``head`` (k, M // k, c) in k = 1024 blocks of
    rows (k = 1 below 2^16 rows), ``tail`` the M mod k rows left over (None when none).
    CuPy reduces a tall array over axis 0 with one thread block per column (~1–2 ms at
    2^20 rows on an H100); reducing ``head`` over axis 1 first spreads it over k blocks."""
    m = points.shape[0]
    k = 1024 if m >= 1 << 16 else 1
    head = points[: m - m % k].reshape(k, -1, points.shape[1])
    return head, (points[m - m % k:] if m % k else None)


def column_range(points, xp):
    """Per-column minimum and maximum (3,), (3,) of ``points`` (M ≥ 1, 3), in the points'
    dtype (a NaN in a column makes its minimum and maximum NaN).  On the GPU, float32 or
    float64 points (M, 3): one kernel of per-block ranges (``cuda/column_range.cu``),
    then their range; otherwise two passes over blocks of rows (:func:`_row_blocks`).
    Minima and maxima are exact: every path gives the same values (but for the sign of
    a zero where −0 and +0 tie, which no cell depends on)."""
    if xp is not np and points.ndim == 2 and points.shape[1] == 3 and \
            points.shape[0] > 0 and points.dtype in (np.float32, np.float64):
        return _column_range_gpu(points, xp)
    head, tail = _row_blocks(points)
    lo, hi = head.min(axis=1).min(axis=0), head.max(axis=1).max(axis=0)
    if tail is not None:
        lo, hi = xp.minimum(lo, tail.min(axis=0)), xp.maximum(hi, tail.max(axis=0))
    return lo, hi


#: threads per block, and the most blocks, of the GPU's column ranges
RANGE_THREADS, RANGE_BLOCKS = 256, 1024


def _column_range_gpu(points, cp):
    """:func:`column_range` of CuPy points (M ≥ 1, 3), float32 or float64."""
    p = cp.ascontiguousarray(points)
    m = p.shape[0]
    blocks = max(1, min(RANGE_BLOCKS, -(-m // RANGE_THREADS)))
    ctype = "double" if p.dtype == np.float64 else "float"
    part = cp.empty((blocks, 6), p.dtype)
    get_function("column_range.cu", f"column_range_blocks<{ctype}, {RANGE_THREADS}>")(
        (blocks,), (RANGE_THREADS,), (p, np.int64(m), part))
    if blocks == 1:
        return part[0, :3], part[0, 3:]
    return part[:, :3].min(axis=0), part[:, 3:].max(axis=0)


def column_sums(values):
    """Per-column sums (c,) of a tall (M ≥ 1, c) array, reduced in two passes over blocks
    of rows (:func:`_row_blocks`): a fixed order of the additions, so deterministic, but
    not ``sum(axis=0)``'s (they differ in round-off)."""
    head, tail = _row_blocks(values)
    total = head.sum(axis=1).sum(axis=0)
    return total if tail is None else total + tail.sum(axis=0)


def bounding_cube(points, xp):
    """Lower corner (3,) and edge length of a cube that contains ``points`` (M ≥ 1)."""
    lo, hi = column_range(points, xp)
    return lo, cube_edge(lo, hi)


def cube_edge(lo, hi):
    """Edge of a cube from corner ``lo`` that holds the box [lo, hi] (slightly enlarged)."""
    return (hi - lo).max() * (1.0 + 1e-12) + np.finfo(np.float64).tiny
