"""Level-uniform octree over Morton-sorted sources and targets.

The root cube is split ``depth`` times into ``8**depth`` leaf boxes of edge
``width / 2**depth``.  Every box of every level is addressed by its Morton
(Z-order) key at that level, so all boxes of a level form one dense array in
Morton order; empty boxes are kept (their CSR ranges are empty) and are skipped
by later passes.  Key arithmetic follows from the interleaving (x in the lowest
bit): the parent of box ``k`` is ``k >> 3`` and its children are ``8k + c``,
``c = cx + 2 cy + 4 cz`` in 0..7.

The build is array code that runs unchanged on NumPy and CuPy: a Morton key per
point, one stable sort, and one ``searchsorted`` into the dense key range.  All
array sizes depend only on N, M and the depth, so building a tree on the GPU
needs no device-to-host transfer (except to validate a user-supplied root cube).

References: Hu, Gumerov & Duraiswami (shared/papers 000, 003), Sec. "octree on
the GPU"; exafmm ``3d/build_tree.h``.
"""
from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np

from vortexsim.backend import stable_argsort
from vortexsim.kernels.morton import column_range, cube_edge, morton_keys, spread_bits

logger = logging.getLogger(__name__)

__all__ = ["Octree", "build_tree", "with_targets", "root_cube", "choose_depth", "morton_encode",
           "morton_decode", "parent_keys", "child_keys", "neighbor_table", "MAX_DEPTH"]

#: Deepest supported leaf level: 8**10 ≈ 1.07e9 leaves is already far beyond memory.
MAX_DEPTH = 10
_MAX_BITS = 21                     # 3 × 21 bits fit a uint64 key
_SORT_BITS = MAX_DEPTH             # bits per axis of the sort keys (3 × 10 fit a uint32)


# --- Morton keys -----------------------------------------------------------

def _compact_bits(v, xp):
    """Inverse of ``spread_bits``: gather every third bit of ``v`` (uint64) into the low 21."""
    v = v & xp.uint64(0x1249249249249249)
    v = (v ^ (v >> xp.uint64(2))) & xp.uint64(0x10C30C30C30C30C3)
    v = (v ^ (v >> xp.uint64(4))) & xp.uint64(0x100F00F00F00F00F)
    v = (v ^ (v >> xp.uint64(8))) & xp.uint64(0x1F0000FF0000FF)
    v = (v ^ (v >> xp.uint64(16))) & xp.uint64(0x1F00000000FFFF)
    v = (v ^ (v >> xp.uint64(32))) & xp.uint64(0x1FFFFF)
    return v


def _check_bits(bits, name="bits", hi=_MAX_BITS):
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 0 <= bits <= hi:
        raise ValueError(f"{name} must be an integer in [0, {hi}], got {bits!r}.")
    return int(bits)


def morton_encode(ix, iy, iz, xp):
    """Morton keys of integer cell coordinates, x in the lowest bit.

    key = Σ_b (bit_b(ix) << 3b) | (bit_b(iy) << 3b+1) | (bit_b(iz) << 3b+2),
    the same interleaving as :func:`vortexsim.kernels.morton.morton_keys`.

    Parameters
    ----------
    ix, iy, iz : integer arrays (K,), 0 ≤ i < 2**21, cell indices along x, y, z
    xp : numpy or cupy

    Returns
    -------
    array (K,) uint64
    """
    ix, iy, iz = (xp.asarray(a).astype(xp.uint64) for a in (ix, iy, iz))
    return (spread_bits(ix, xp) | (spread_bits(iy, xp) << xp.uint64(1))
            | (spread_bits(iz, xp) << xp.uint64(2)))


def morton_decode(keys, bits, xp):
    """Integer cell coordinates of Morton keys at level ``bits`` (inverse of :func:`morton_encode`).

    Parameters
    ----------
    keys : integer array (K,), 0 ≤ key < 8**bits (higher bits are ignored)
    bits : int, 0 ≤ bits ≤ 21, level of the keys (cells per axis = 2**bits)
    xp : numpy or cupy

    Returns
    -------
    ix, iy, iz : arrays (K,) int64 in [0, 2**bits)
    """
    bits = _check_bits(bits)
    k = xp.asarray(keys).astype(xp.uint64) & xp.uint64((1 << (3 * bits)) - 1)
    return tuple(_compact_bits(k >> xp.uint64(axis), xp).astype(xp.int64) for axis in range(3))


def parent_keys(keys):
    """Keys of the parents (one level up) of boxes ``keys`` (K,): ``keys >> 3``, same dtype."""
    return keys >> keys.dtype.type(3)


def child_keys(keys, xp):
    """Keys (K, 8) of the children (one level down) of boxes ``keys`` (K,): ``8k + c``, c = 0..7.

    Child ``c`` occupies octant ``(c & 1, (c >> 1) & 1, (c >> 2) & 1)`` (x, y, z) of its parent.
    """
    keys = xp.asarray(keys)
    return keys[:, None] * keys.dtype.type(8) + xp.arange(8, dtype=keys.dtype)[None, :]


def neighbor_table(level, radius, xp, periodic=False):
    """Keys of the (2r+1)³ boxes around every box of a level, −1 outside the grid (or,
    with ``periodic``, the box the offset reaches on the periodic grid: index mod 2**level
    per axis).

    Parameters
    ----------
    level : int, 0 ≤ level ≤ 10; the grid has 2**level boxes per axis, 8**level in all
    radius : int ≥ 0, stencil half-width r in boxes (r = 1: the 27 near neighbours)
    xp : numpy or cupy

    Returns
    -------
    array (8**level, (2r+1)**3) int64. Row k belongs to the box with Morton key k;
    column s to the offset (dx, dy, dz) = (s // (2r+1)², s // (2r+1) % (2r+1), s % (2r+1)) − r,
    i.e. offsets in lexicographic order with dx slowest and dz fastest, so column
    ((2r+1)³ − 1) / 2 is the box itself. Entries whose box would lie outside
    [0, 2**level)³ are −1 (wrapped with ``periodic``). Memory: 8**level × (2r+1)³ × 8 bytes.
    """
    level = _check_bits(level, "level", MAX_DEPTH)
    if isinstance(radius, bool) or not isinstance(radius, (int, np.integer)) or radius < 0:
        raise ValueError(f"radius must be a non-negative integer, got {radius!r}.")
    n = 1 << level
    side = 2 * int(radius) + 1
    ix, iy, iz = morton_decode(xp.arange(8 ** level, dtype=xp.uint64), level, xp)
    s = xp.arange(side ** 3, dtype=xp.int64)
    offsets = (s // (side * side) - radius, (s // side) % side - radius, s % side - radius)
    coords = [i[:, None] + d[None, :] for i, d in zip((ix, iy, iz), offsets)]
    if periodic:
        return morton_encode(*(c % n for c in coords), xp).astype(xp.int64)
    inside = ((coords[0] >= 0) & (coords[0] < n) & (coords[1] >= 0) & (coords[1] < n)
              & (coords[2] >= 0) & (coords[2] < n))
    keys = morton_encode(*(xp.clip(c, 0, n - 1) for c in coords), xp).astype(xp.int64)
    return xp.where(inside, keys, xp.int64(-1))


# --- the tree --------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Octree:
    """A level-uniform octree: root cube, depth, and sources/targets sorted by leaf.

    Attributes
    ----------
    lo : array (3,) float64 [L], lower corner of the root cube
    width : float or 0-d array [L], edge of the root cube. A Python float when the
        caller supplied the cube; a 0-d float64 array of the tree's namespace when
        :func:`build_tree` computed it (turning it into a float would cost a
        device-to-host sync). Both behave as scalars in array arithmetic.
    depth : int, leaf level L (root = level 0); 8**L leaves of edge width / 2**L
    src_order : array (N,) int64, sources sorted by leaf, and within a leaf by the
        Morton key of the 2**10 grid (ties stable): ``sources[src_order]`` is the sorted set
    tgt_order : array (M,) int64, the same for the targets
    src_start : array (8**L + 1,) int64, CSR offsets: the sorted sources of leaf k are
        ``src_order[src_start[k]:src_start[k + 1]]``; src_start[0] = 0, src_start[-1] = N
    tgt_start : array (8**L + 1,) int64, the same for the targets
    """

    lo: object
    width: object
    depth: int
    src_order: object
    tgt_order: object
    src_start: object
    tgt_start: object

    @property
    def n_leaves(self) -> int:
        """Number of leaf boxes, 8**depth."""
        return 8 ** self.depth

    def box_width(self, level):
        """Edge [L] of the boxes at ``level`` (0 ≤ level ≤ depth): ``width / 2**level``."""
        level = _check_bits(level, "level", self.depth)
        return self.width / float(1 << level)

    def box_centers(self, level, xp):
        """Centres [L] of all boxes of ``level``: array (8**level, 3), row k = Morton key k."""
        level = _check_bits(level, "level", self.depth)
        ijk = xp.stack(morton_decode(xp.arange(8 ** level, dtype=xp.uint64), level, xp), axis=1)
        return self.lo + (ijk + 0.5) * self.box_width(level)


def _check_points(a, name, count, xp):
    """Return ``a`` as an (n, 3) floating array of ``xp``; None means no points."""
    a = xp.zeros((0, 3)) if a is None else xp.asarray(a)
    if a.ndim != 2 or a.shape[1] != 3 or not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"{name} has shape {tuple(a.shape)} and dtype {a.dtype}; expected "
                         f"({count}, 3) float positions [L]. Pass an empty (0, 3) array "
                         "for no points.")
    return a


def root_cube(sources, targets, xp):
    """Smallest axis-aligned cube (slightly enlarged) holding sources ∪ targets.

    Parameters
    ----------
    sources : array (N, 3) [L]
    targets : array (M, 3) [L]; N + M ≥ 1
    xp : numpy or cupy

    Returns
    -------
    lo : array (3,) float64 [L]
    width : 0-d float64 array [L], > 0 even when all points coincide (then it is
        2**-40 max|lo|, or 1e-290 at the origin, so that cells stay representable).

    No device-to-host transfer; call ``float(width)`` yourself when a host value is
    needed (e.g. for :func:`choose_depth`).
    """
    parts = [p for p in (sources, targets) if p.shape[0] > 0]
    if not parts:
        raise ValueError("sources and targets are both empty; need at least one point "
                         "to place the root cube.")
    if len(parts) == 2 and parts[0] is parts[1]:
        parts = parts[:1]
    ranges = [column_range(p.astype(xp.float64, copy=False), xp) for p in parts]
    lo, hi = ranges[0]
    for plo, phi in ranges[1:]:
        lo, hi = xp.minimum(lo, plo), xp.maximum(hi, phi)
    width = xp.maximum(cube_edge(lo, hi), xp.abs(lo).max() * 2.0 ** -40 + 1e-290)
    return lo, width


def build_tree(sources, targets, depth, xp, lo=None, width=None, check=True):
    """Sort sources and targets into the leaves of a level-uniform octree.

    Each point gets the Morton key of its leaf, ``morton_keys(x, lo, width, depth)``
    (all keys 0 at depth 0); the points are stably sorted by key, and the CSR offsets
    are ``searchsorted(sorted_keys, 0 .. 8**depth)``. Points on the upper faces of
    the root cube fall into the last cell along that axis.

    Parameters
    ----------
    sources : array (N, 3) [L], float64 or float32; N may be 0
    targets : array (M, 3) [L]; M may be 0 (not both N and M)
    depth : int, 0 ≤ depth ≤ 10, leaf level
    xp : numpy or cupy, namespace of the inputs
    lo, width : optional root cube, array-like (3,) [L] and float [L] > 0, given together.
        Default: :func:`root_cube` of sources ∪ targets. A supplied cube must contain
        every point (checked, which costs one device-to-host sync on the GPU).
    check : bool, default True. False skips that containment check, for callers that
        built the cube around the points themselves (points outside would be clamped
        into the boundary leaves — correct near field, wrong expansion centres).

    Returns
    -------
    Octree

    Cost: O((N + M) log(N + M) + 8**depth) time (one sort each), O(N + M + 8**depth) memory.
    The dense CSR offsets alone take 2 × 8**depth × 8 bytes (plus as much transient):
    34 MB at depth 7, 268 MB at 8, 2.1 GB at 9, 17 GB at 10.
    """
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) \
            or not 0 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be an integer in [0, {MAX_DEPTH}], got {depth!r}. "
                         "Use choose_depth() to pick one from the number of points.")
    depth = int(depth)
    sources = _check_points(sources, "sources", "N", xp)
    targets = _check_points(targets, "targets", "M", xp)
    if (lo is None) != (width is None):
        raise ValueError("pass the root cube as both lo and width, or neither "
                         f"(got lo={lo!r}, width={width!r}).")
    if width is None:
        lo, width = root_cube(sources, targets, xp)
    elif check:
        lo, width = check_cube(sources, targets, lo, width, xp)
    else:
        lo, width = xp.asarray(lo, dtype=xp.float64), float(width)

    src_order, src_start = _sort_into_leaves(sources, lo, width, depth, xp)
    if targets is sources:                   # one set (sources = targets): sort it once
        tgt_order, tgt_start = src_order, src_start
    else:
        tgt_order, tgt_start = _sort_into_leaves(targets, lo, width, depth, xp)
    return Octree(lo=lo, width=width, depth=depth, src_order=src_order, tgt_order=tgt_order,
                  src_start=src_start, tgt_start=tgt_start)


def with_targets(tree, targets, xp, check=False):
    """The same tree (root cube, depth, sorted sources) with another target set.

    Used when one evaluation has several target sets (e.g. elements, which need ∇u,
    and tracers, which need u only): each set gets its own leaf order and CSR offsets.

    Parameters
    ----------
    tree : Octree
    targets : array (M, 3) [L] of the tree's namespace
    xp : numpy or cupy
    check : bool, default False. True verifies that every target lies in the root cube
        (one device-to-host sync on the GPU), as :func:`build_tree` does for a
        user-supplied cube.

    Returns
    -------
    Octree with ``tgt_order`` (M,) and ``tgt_start`` (8**depth + 1,) of ``targets``.
    """
    targets = _check_points(targets, "targets", "M", xp)
    if check:
        check_cube(xp.zeros((0, 3)), targets, tree.lo, tree.width, xp)
    order, start = _sort_into_leaves(targets, tree.lo, tree.width, tree.depth, xp)
    return dataclasses.replace(tree, tgt_order=order, tgt_start=start)


def check_cube(sources, targets, lo, width, xp):
    """Validate a user-supplied root cube; returns (lo array (3,) float64, width float)."""
    lo = xp.asarray(lo, dtype=xp.float64)
    if lo.shape != (3,):
        raise ValueError(f"lo has shape {tuple(lo.shape)}; expected (3,), the lower corner [L].")
    width = float(width)
    if not (math.isfinite(width) and width > 0.0):
        raise ValueError(f"width must be a finite positive edge length [L], got {width!r}.")
    for name, pts in (("sources", sources), ("targets", targets)):
        if pts.shape[0] == 0:
            continue
        outside = ~xp.all((pts >= lo) & (pts <= lo + width), axis=1)   # NaN counts as outside
        n_out = int(outside.sum())                                      # host sync (user cube only)
        if n_out:
            raise ValueError(
                f"{n_out} of {pts.shape[0]} {name} lie outside the root cube "
                f"lo={lo.tolist()}, width={width} (their bounding box is "
                f"{pts.min(axis=0).tolist()} .. {pts.max(axis=0).tolist()}). "
                "Enlarge the cube or omit lo/width to fit it to the points.")
    return lo, width


def _sort_into_leaves(points, lo, width, depth, xp):
    """Leaf order (n,) int64 and CSR offsets (8**depth + 1,) int64 of ``points`` (n, 3).

    Points are sorted by their Morton key on a fine grid (2**10 cells per axis, the
    deepest leaf level; stable for ties), so that within a leaf they come in Z-order
    too: consecutive points (a GPU warp, a shared-memory tile of sources) are spatially
    compact, which keeps the near-field kernel's branches coherent.  The leaf of a point
    is its fine key shifted right by 3 (10 − depth) bits, which is exactly its key at
    ``depth`` (the cells of :func:`grid_cells` scale by powers of two without rounding).
    """
    # 10 bits per axis: 30-bit keys sort as uint32 (half the radix passes of uint64)
    keys = morton_keys(points, lo, width, _SORT_BITS, xp).astype(xp.uint32)
    order = stable_argsort(keys, xp).astype(xp.int64)
    leaf = keys[order] >> xp.uint32(3 * (_SORT_BITS - depth))
    bounds = xp.arange(8 ** depth + 1, dtype=xp.uint32)
    start = xp.searchsorted(leaf, bounds, side="left").astype(xp.int64)
    return order, start


# --- depth selection -------------------------------------------------------

def choose_depth(n_sources, n_targets, leaf_size, min_leaf_width=None, width=None,
                 max_depth=MAX_DEPTH):
    """Leaf level for ~``leaf_size`` points per leaf of a uniform distribution.

    Rule: L = max(0, round(log8(max(N, M) / leaf_size))), then lowered until the
    leaf edge ``width / 2**L`` is ≥ ``min_leaf_width`` (when given; L = 0 if even the
    root is narrower), then capped at ``max_depth``. Non-uniform distributions get
    fuller leaves in their dense parts; the level stays uniform.

    Parameters
    ----------
    n_sources, n_targets : int ≥ 0, N and M
    leaf_size : float > 0, target number of points per leaf
    min_leaf_width : float [L] > 0, optional. The smallest admissible leaf edge, e.g.
        ρ*·σ / radius so that the near-field stencil of ``radius`` boxes reaches ρ*·σ.
    width : float [L] > 0, edge of the root cube; required with ``min_leaf_width``
        (a host float, e.g. ``float(root_cube(...)[1])``).
    max_depth : int, 0 ≤ max_depth ≤ 10

    Returns
    -------
    int in [0, max_depth]
    """
    for name, n in (("n_sources", n_sources), ("n_targets", n_targets)):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {n!r}.")
    if not (isinstance(leaf_size, (int, float, np.integer, np.floating)) and leaf_size > 0):
        raise ValueError(f"leaf_size must be a positive number of points, got {leaf_size!r}.")
    max_depth = _check_bits(max_depth, "max_depth", MAX_DEPTH)
    n = max(int(n_sources), int(n_targets))
    depth = 0 if n <= leaf_size else max(0, round(math.log(n / leaf_size, 8)))
    depth = min(depth, max_depth)
    if min_leaf_width is not None:
        if width is None or not (math.isfinite(width) and width > 0):
            raise ValueError(f"min_leaf_width needs the root cube edge `width` > 0 [L], "
                             f"got width={width!r}.")
        if not (math.isfinite(min_leaf_width) and min_leaf_width > 0):
            raise ValueError(f"min_leaf_width must be a finite positive length [L], "
                             f"got {min_leaf_width!r}.")
        while depth > 0 and width / 2 ** depth < min_leaf_width:
            depth -= 1
    return depth
