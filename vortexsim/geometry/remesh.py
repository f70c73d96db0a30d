r"""Remeshing: the elements' strengths interpolated onto a regular lattice with M4′.

``physics.md``, "Remeshing".  Each element spreads its strength α_p [L³/T] onto the 4×4×4
lattice nodes around it with the weight W(Δx/h) W(Δy/h) W(Δz/h) of Monaghan's M4′ kernel

    W(r) = 1 − (5/2) r² + (3/2) |r|³      |r| < 1,
    W(r) = ½ (2 − |r|)² (1 − |r|)         1 ≤ |r| < 2,     0 beyond,

    α_n = Σ_p W((x_n − x_p)/h) W((y_n − y_p)/h) W((z_n − z_p)/h) α_p.

The new elements sit on the nodes with σ = overlap × h and V = h³.

The lattice
-----------
Nodes at ``origin + (i, j, k) h`` with integer i, j, k.  In the periodic box [0, L)³
the origin is 0 and the nodes are ``(i, j, k) h``, i, j, k = 0 … n−1, h = L/n (the
lattice of the Taylor–Green and turbulence initial conditions).  An element with
s = (x − origin)/h spreads onto the nodes ⌊s⌋ − 1 … ⌊s⌋ + 2 of each axis, at distances
1 + τ, τ, 1 − τ, 2 − τ with τ = s − ⌊s⌋ ∈ [0, 1) (exact in floating point).

* free space (``box_length=None``): of the nodes of the elements' stencils, those with
  |α_n| > threshold × max_n |α_n| (default ``DEFAULT_THRESHOLD``; never a node with
  α_n = 0); the dropped strength is reported (``Remeshed.dropped_alpha``,
  ``dropped_abs``, ``n_dropped``).
* periodic box (``box_length=L``): every one of the n³ nodes (zeros included), each
  element spread with its node indices taken modulo n, so that positions outside
  [0, L) act as their wrapped images.  L/h must be an integer n ≥ 4.

Output order: by lattice index, lexicographically (i slowest, k fastest), the key
``(i·n_y + j)·n_z + k``; in the periodic box node (i, j, k) is row ``(i·n + j)·n + k``.
``Remeshed.index`` holds the integer (i, j, k) of every node.  Labelled groups (rings)
onto one lattice, and the ground plane by images: :mod:`vortexsim.physics.remesh_groups`.

Conservation
------------
M4′ reproduces the polynomials of degree ≤ 2: Σ_n W(x_n − x_p) x_n^m = x_p^m for m ≤ 2
(and per axis, so for every product x^a y^b z^c of degree ≤ 2 per axis).  Hence the
total strength Ω = Σ α, the linear impulse P = ½ Σ x × α and the angular impulse
A = ⅓ Σ x × (x × α) are conserved to round-off when the threshold drops nothing (free
space).  The periodic remesh is the free-space remesh of the same elements (lattice at
0) folded modulo n: Ω is conserved to round-off; the impulses are conserved with the
nodes at their unfolded positions, so exactly as computed in the box for elements whose
stencils do not cross its faces (s ∈ [1, n − 2) on each axis); a stencil that crosses a
face moves the strength it puts beyond it by ±L, changing P and A by the corresponding
moment of that strength (P and A of a periodic field are defined modulo those moves).
The error on a smooth field is O(h³) (third order; M4′'s third moment does not vanish),
provided the elements represent the field: volumes V_p consistent with their spacing, as
on a lattice moved by a smooth map (V_p = h³ det ∂x/∂ξ).  Elements jittered at random
with equal volumes do not represent it, and their remesh does not converge.

Determinism (no floating-point atomics)
---------------------------------------
The elements are first put in a canonical order: by their cell ⌊s⌋, then by τ, then by
α (lexicographic, through stable sorts).  Each node sums, in a fixed order, over the 64
stencil offsets o (lexicographic), the cell sums S_o(c) = Σ_{p ∈ c} w_o(p) α_p of the
cell c = node − o, each summed sequentially over the cell's elements in canonical
order:

    α_n = (…((S_{o₀}(n − o₀) + S_{o₁}(n − o₁)) + …) + S_{o₆₃}(n − o₆₃)).

The cell sums are vectorized over the cells: the elements are laid out rank-major (the
first element of every cell, then the second of every cell with two or more, …), so that
the r-th term of every cell sum is one contiguous slice.  The cell sums of one offset
land on distinct nodes (a shift is injective), so the accumulation ``out[node] += S_o``
needs no atomics.  On NumPy the result is the same bits for the same input and for any
permutation of it (the canonical order does not depend on the input order).  Memory:
O(N) floats and at most 64 integers per occupied cell for the free-space node set (a
dense box of at most 64 nodes per cell, else a sort of the 64 candidate nodes of each
cell), never O(N × n³).

On the GPU the same ``xp`` code runs on CuPy in free space (stable radix sorts, unique,
slices and scatters with distinct indices), with no atomics, so that it too gives the
same bits from run to run.  The periodic box on the GPU takes the fused gather of
:mod:`vortexsim.geometry.m4_gpu`: one thread per node loops over the 64 offsets and the
elements of each cell (sorted by cell alone, in their input order), also without atomics;
it agrees with the NumPy result to round-off.

References: J. J. Monaghan, J. Comput. Phys. 60 (1985) 253; G.-H. Cottet and
P. Koumoutsakos, *Vortex Methods: Theory and Practice* (2000); P. Koumoutsakos,
J. Comput. Phys. 138 (1997) 821.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import math

import numpy as np

from ..backend import array_namespace, to_host
from .periodic import MIN_PERIODIC_NODES, periodic_nodes, positive_finite

logger = logging.getLogger(__name__)

__all__ = ["Remeshed", "remesh", "m4prime", "m4prime_stencil", "periodic_nodes",
           "check_threshold", "threshold_nodes", "key_index", "DEFAULT_THRESHOLD",
           "DEFAULT_OVERLAP", "MIN_PERIODIC_NODES",
           "STENCIL"]

#: free space: nodes with |α| ≤ DEFAULT_THRESHOLD × max|α| are dropped
DEFAULT_THRESHOLD = 1e-6
#: σ of the new elements in units of h
DEFAULT_OVERLAP = 1.0
#: node offsets of a stencil per axis, relative to the cell ⌊(x − origin)/h⌋
STENCIL = (-1, 0, 1, 2)

#: |x − origin|/h must stay below this (cells as exact integers, τ with bits to spare)
_MAX_CELL = 2.0 ** 50
#: the free-space node keys must stay below this (int64)
_MAX_KEY = 2 ** 62
#: free space: node sets in boxes of at most this many nodes per cell are found densely
_DENSE_NODES_PER_CELL = 64


def m4prime(r):
    """Monaghan's M4′ kernel W(r), dimensionless.

    W(r) = 1 − (5/2) r² + (3/2) |r|³ for |r| < 1, ½ (2 − |r|)² (1 − |r|) for
    1 ≤ |r| < 2, 0 beyond.  W(0) = 1, W(±1) = W(±2) = 0; C¹, support (−2, 2).

    Parameters
    ----------
    r : array (any shape) or float, distance in units of h

    Returns
    -------
    array of the shape of ``r`` (NumPy or CuPy like ``r``)
    """
    xp = array_namespace(r)
    a = xp.abs(xp.asarray(r)) + 0.0                    # integers to float
    inner = 1.0 - 0.5 * a * a * (5.0 - 3.0 * a)
    outer = 0.5 * (2.0 - a) ** 2 * (1.0 - a)
    return xp.where(a < 1.0, inner, xp.where(a < 2.0, outer, 0.0))


def m4prime_stencil(tau):
    """The four M4′ weights of an element at fractional position τ within its cell.

    Nodes at offsets ``STENCIL`` = (−1, 0, 1, 2) from the cell, at distances 1 + τ, τ,
    1 − τ, 2 − τ; with u = 1 − τ:

        W(1 + τ) = −½ τ u²,  W(τ) = 1 − ½ τ² (5 − 3τ),
        W(1 − τ) = 1 − ½ u² (5 − 3u),  W(2 − τ) = −½ τ² u.

    Parameters
    ----------
    tau : array (...), in [0, 1)

    Returns
    -------
    array (..., 4), the weights; they sum to 1 and reproduce τ and τ² (to round-off).
    """
    xp = array_namespace(tau)
    u = 1.0 - tau
    return xp.stack([-0.5 * tau * u * u,
                     1.0 - 0.5 * tau * tau * (5.0 - 3.0 * tau),
                     1.0 - 0.5 * u * u * (5.0 - 3.0 * u),
                     -0.5 * tau * tau * u], axis=-1)


@dataclasses.dataclass(frozen=True, slots=True)
class Remeshed:
    """The elements of a remeshing, and what the threshold dropped.

    Attributes
    ----------
    x : array (N', 3) [L], the nodes, sorted by lattice index (i slowest, k fastest)
    alpha : array (N', 3) [L³/T]
    sigma : array (N',) [L], overlap × h
    volume : array (N',) [L³], h³
    h : float [L], the lattice spacing (L/n in a periodic box)
    n_nodes : int, nodes before the threshold (free space: the nodes of the elements'
        stencils; periodic box: n³)
    n_dropped : int, nodes dropped by the threshold (0 in a periodic box)
    dropped_alpha : array (3,) [L³/T], Σ α of the dropped nodes (device array)
    dropped_abs : array () [L³/T], Σ |α| of the dropped nodes (device array)
    index : array (N', 3) int64, the nodes' lattice indices (i, j, k): x = origin + (i, j, k) h
    group : array (N',) int64 or None, the nodes' group labels
        (:func:`vortexsim.physics.remesh_groups.remesh_groups`; None from :func:`remesh`)
    """

    x: object
    alpha: object
    sigma: object
    volume: object
    h: float
    n_nodes: int
    n_dropped: int
    dropped_alpha: object
    dropped_abs: object
    index: object = None
    group: object = None

    def __len__(self):
        return int(self.x.shape[0])

    @property
    def elements(self):
        """(x, alpha, sigma, volume), the arguments of ``Simulation.replace_elements``."""
        return self.x, self.alpha, self.sigma, self.volume


def remesh(x, alpha, h, *, box_length=None, origin=None, threshold=None,
           overlap=DEFAULT_OVERLAP):
    r"""Interpolate the elements' strengths onto the lattice of spacing h (M4′).

    α_n = Σ_p W((x_n − x_p)/h) W((y_n − y_p)/h) W((z_n − z_p)/h) α_p, the new elements at
    the nodes x_n with σ = overlap × h, V = h³ (module docstring: lattice, order,
    conservation, determinism).

    Parameters
    ----------
    x : array (N, 3) [L], positions (NumPy or CuPy, float64 or float32)
    alpha : array (N, 3) [L³/T], vector strengths, same namespace and dtype as ``x``
    h : float [L] > 0, the lattice spacing
    box_length : float [L] or None; None: free space; L: the periodic box [0, L)³ with
        n = L/h nodes per side (an integer ≥ ``MIN_PERIODIC_NODES``), positions outside
        wrapped
    origin : (3,) [L] or None, free space only: a node of the lattice (default 0)
    threshold : float in [0, 1) or None, free space only: keep the nodes with
        |α_n| > threshold × max|α_n| (default ``DEFAULT_THRESHOLD`` = 1e-6); 0 keeps
        every node with α_n ≠ 0
    overlap : float > 0, σ/h of the new elements (default 1)

    Returns
    -------
    Remeshed : x (N', 3), alpha (N', 3), sigma (N',), volume (N',) in the namespace and
        dtype of ``x``, sorted by lattice index; the dropped strength.  N' = n³ in the
        periodic box.

    Raises
    ------
    ValueError : bad shapes, non-finite values, h ≤ 0, L/h not an integer ≥ 4, a
        threshold or origin with a periodic box, positions beyond 2⁵⁰ h of the origin.
    TypeError : mixed NumPy/CuPy, non-float arrays, different dtypes.

    References: Monaghan, J. Comput. Phys. 60 (1985) 253; Koumoutsakos, J. Comput.
    Phys. 138 (1997) 821.
    """
    xp = array_namespace(x, alpha)
    n_particles = _check_arrays(x, alpha)
    h = positive_finite("h", h)
    overlap = positive_finite("overlap", overlap)
    periodic = box_length is not None
    if periodic:
        if origin is not None:
            raise ValueError("origin applies to free space only: the periodic box's lattice "
                             "has its nodes at (i, j, k) h from 0. Leave origin=None.")
        if threshold is not None:
            raise ValueError("threshold applies to free space only: a periodic box keeps all "
                             "n³ nodes. Leave threshold=None.")
        n = periodic_nodes(box_length, h)
        h = float(box_length) / n
        origin = np.zeros(3)
    else:
        origin = _origin(origin)
        threshold = DEFAULT_THRESHOLD if threshold is None else check_threshold(threshold)
    dtype = x.dtype

    if n_particles == 0:
        lo, shape = np.zeros(3, dtype=np.int64), (n, n, n) if periodic else (1, 1, 1)
        keys = xp.arange(n ** 3 if periodic else 0, dtype=xp.int64)
        out = xp.zeros((keys.shape[0], 3), dtype=dtype)
        return _finish(xp, keys, out, lo, shape, origin, h, overlap, None)

    s = (x - xp.asarray(origin, dtype=dtype)) / dtype.type(h)
    reach = float(to_host(xp.max(xp.abs(s))))
    if periodic and xp is not np and reach < _MAX_CELL:
        # the fused gather of geometry.m4_gpu (one thread per node, same weights)
        from .m4_gpu import periodic_p2m  # noqa: PLC0415
        out = periodic_p2m(x, alpha, n, h).astype(dtype, copy=False)
        return _finish(xp, xp.arange(n ** 3, dtype=xp.int64), out, np.zeros(3, dtype=np.int64),
                       (n, n, n), origin, h, overlap, None)
    if not reach < _MAX_CELL:
        raise ValueError(f"positions reach {reach * h:g} from the lattice origin, beyond "
                         f"2^50 h (h = {h:g}); remesh with a larger h or move the origin.")
    floor = xp.floor(s)
    tau = s - floor                                    # exact, in [0, 1)
    if periodic:
        floor = xp.remainder(floor, n)                 # exact on integers: cells wrapped
    cell = floor.astype(xp.int64)

    if periodic:
        lo, shape = np.zeros(3, dtype=np.int64), (n, n, n)
    else:
        lo = to_host(xp.min(cell, axis=0)).astype(np.int64) + STENCIL[0]
        hi = to_host(xp.max(cell, axis=0)).astype(np.int64) + STENCIL[-1]
        shape = tuple(int(e) for e in hi - lo + 1)
        if math.prod(shape) >= _MAX_KEY:
            raise ValueError(f"the elements span {shape} lattice nodes at h = {h:g}, more than "
                             "2^62 node keys; remesh with a larger h.")
    local = cell - xp.asarray(lo)
    cell_key = (local[:, 0] * shape[1] + local[:, 1]) * shape[2] + local[:, 2]

    # canonical order: cell, then τ, then α (the primary key last, as in numpy.lexsort)
    order = _lexsort([alpha[:, 2], alpha[:, 1], alpha[:, 0],
                      tau[:, 2], tau[:, 1], tau[:, 0], cell_key], xp)
    cell_key, local, tau, alpha = cell_key[order], local[order], tau[order], alpha[order]

    layout = _RankMajor(cell_key, xp)
    tau, alpha = tau[layout.perm], alpha[layout.perm]
    head = layout.perm[layout.first]                   # one element per cell, layout order
    cells = local[head]                                # (cells, 3)
    # per axis (4, N): the weights of the offsets STENCIL, contiguous per offset
    weights = [xp.ascontiguousarray(m4prime_stencil(tau[:, axis]).T) for axis in range(3)]

    offsets = list(itertools.product(STENCIL, repeat=3))
    if periodic:
        keys, rows = _periodic_rows(cells, offsets, n, xp)
    else:
        keys, rows = _free_nodes(cell_key[head], offsets, shape, xp)

    # component-major (3, N) and (3, nodes): contiguous rows for the products and scatters
    alpha = xp.ascontiguousarray(alpha.T)
    out = xp.zeros((3, keys.shape[0]), dtype=dtype)
    k = 0
    for a in range(len(STENCIL)):
        for b in range(len(STENCIL)):
            w_ab = weights[0][a] * weights[1][b]
            for c in range(len(STENCIL)):
                sums = layout.cell_sums(alpha * (w_ab * weights[2][c]))
                target = rows(k)                      # distinct nodes within one offset
                for component in range(3):
                    out[component, target] += sums[component]
                k += 1
    return _finish(xp, keys, xp.ascontiguousarray(out.T), lo, shape, origin, h, overlap,
                   None if periodic else threshold)


class _RankMajor:
    """Elements sorted by cell, laid out rank-major for sequential cell sums.

    ``perm`` takes the sorted elements to the layout: block r (``bounds[r]`` …
    ``bounds[r + 1]``) holds the r-th element of every cell with more than r elements,
    the cells ordered by decreasing count (stable), so that block r is the first rows of
    block 0's cells.  ``first`` indexes block 0 in the layout (one element per cell).
    """

    def __init__(self, sorted_keys, xp):
        n = sorted_keys.shape[0]
        new_cell = xp.ones(n, dtype=bool)
        new_cell[1:] = sorted_keys[1:] != sorted_keys[:-1]
        starts = xp.flatnonzero(new_cell)
        counts = xp.diff(xp.concatenate([starts, xp.asarray([n], dtype=starts.dtype)]))
        by_count = xp.argsort(-counts, kind="stable")
        place = xp.empty_like(by_count)
        place[by_count] = xp.arange(by_count.shape[0], dtype=by_count.dtype)
        counts_host = to_host(counts)
        histogram = np.bincount(counts_host)
        # cells with more than r elements, r = 0 … max count − 1
        widths = counts_host.shape[0] - np.cumsum(histogram)[:-1]
        self.bounds = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
        cell_of = xp.cumsum(new_cell) - 1
        rank = xp.arange(n, dtype=starts.dtype) - starts[cell_of]
        destination = xp.asarray(self.bounds[:-1])[rank] + place[cell_of]
        self.perm = xp.empty_like(destination)
        self.perm[destination] = xp.arange(n, dtype=destination.dtype)
        self.first = slice(0, int(widths[0]))

    def cell_sums(self, values):
        """Σ over each cell's elements (3, N) → (3, cells), sequentially in rank order."""
        b = self.bounds
        sums = values[:, b[0]:b[1]].copy()
        for r in range(1, len(b) - 1):
            sums[:, :b[r + 1] - b[r]] += values[:, b[r]:b[r + 1]]
        return sums


def _periodic_rows(cells, offsets, n, xp):
    """All n³ node keys and, per offset k, the rows (i·n + j)·n + k of the shifted cells.

    The wrapped index of each axis and stencil offset is computed once; a row is then the
    sum of three of them.
    """
    scale = (n * n, n, 1)
    part = {(axis, o): ((cells[:, axis] + o) % n) * scale[axis]
            for axis in range(3) for o in STENCIL}

    def rows(k):
        a, b, c = offsets[k]
        return part[0, a] + part[1, b] + part[2, c]

    return xp.arange(n ** 3, dtype=xp.int64), rows


def _free_nodes(cell_keys, offsets, shape, xp):
    """The free-space nodes that the cells' stencils reach, and each offset's rows there.

    Parameters
    ----------
    cell_keys : array (cells,) int64, distinct keys (i·n_y + j)·n_z + k in the box
        ``shape`` (which holds every stencil)
    offsets : list of 64 (a, b, c) stencil offsets

    Returns
    -------
    keys : array (nodes,) int64, sorted
    rows : function k → array (cells,), the rows in ``keys`` of ``cell_keys`` + offset k

    A box of at most ``_DENSE_NODES_PER_CELL`` nodes per cell is marked and indexed
    densely (O(box) memory, no sort); a sparser one goes through a sort of the 64 × cells
    candidate keys.
    """
    size = math.prod(shape)
    steps = [(a * shape[1] + b) * shape[2] + c for a, b, c in offsets]
    if size <= _DENSE_NODES_PER_CELL * cell_keys.shape[0]:
        mark = xp.zeros(size, dtype=bool)
        for step in steps:
            mark[cell_keys + step] = True
        keys = xp.flatnonzero(mark).astype(xp.int64)
        row = xp.zeros(size, dtype=xp.int64)
        row[keys] = xp.arange(keys.shape[0], dtype=xp.int64)
        return keys, lambda k: row[cell_keys + steps[k]]
    candidates = cell_keys[None, :] + xp.asarray(steps, dtype=xp.int64)[:, None]
    keys, inverse = xp.unique(candidates.ravel(), return_inverse=True)
    inverse = inverse.reshape(len(steps), -1)
    return keys, lambda k: inverse[k]


def _finish(xp, keys, alpha, lo, shape, origin, h, overlap, threshold):
    """Positions of the node keys, the threshold (free space), σ and V."""
    n_nodes = int(keys.shape[0])
    dropped_alpha = xp.zeros(3, dtype=alpha.dtype)
    dropped_abs = xp.zeros((), dtype=alpha.dtype)
    n_dropped = 0
    if threshold is not None:
        keep, dropped_alpha, dropped_abs = threshold_nodes(alpha, threshold, xp)
        keys, alpha = keys[keep], alpha[keep]
        n_dropped = n_nodes - int(keys.shape[0])
    index = key_index(keys, shape, lo, xp)
    x = index.astype(alpha.dtype) * alpha.dtype.type(h) + xp.asarray(origin, dtype=alpha.dtype)
    m = keys.shape[0]
    return Remeshed(x=x, alpha=alpha, sigma=xp.full(m, overlap * h, dtype=alpha.dtype),
                    volume=xp.full(m, h ** 3, dtype=alpha.dtype), h=h, n_nodes=n_nodes,
                    n_dropped=n_dropped, dropped_alpha=dropped_alpha, dropped_abs=dropped_abs,
                    index=index)


def threshold_nodes(alpha, threshold, xp):
    """Which nodes of strengths ``alpha`` (n, 3) the free-space threshold keeps (|α| above
    ``threshold`` × max|α|; none with α = 0), and Σ α and Σ |α| of those it drops
    (device arrays): ``(keep (n,) bool, dropped_alpha (3,), dropped_abs ())``."""
    magnitude = xp.sqrt(xp.sum(alpha * alpha, axis=1))
    limit = threshold * (xp.max(magnitude) if alpha.shape[0] else 0.0)
    keep = magnitude > limit
    drop = ~keep
    return keep, xp.sum(alpha[drop], axis=0), xp.sum(magnitude[drop])


def key_index(keys, shape, lo, xp):
    """The integer lattice indices (n, 3) of node keys (i·n_y + j)·n_z + k in a box of
    ``shape`` whose first node is ``lo`` (3,)."""
    ny, nz = int(shape[1]), int(shape[2])
    index = xp.stack([keys // (ny * nz), (keys // nz) % ny, keys % nz], axis=1)
    return index + xp.asarray(lo)


def _lexsort(keys, xp):
    """Indices sorting by ``keys`` lexicographically, the last key primary (stable sorts)."""
    order = xp.argsort(keys[0], kind="stable")
    for key in keys[1:]:
        order = order[xp.argsort(key[order], kind="stable")]
    return order


def _check_arrays(x, alpha):
    """Shapes, dtypes and finiteness of x and alpha; returns N."""
    for name, a in (("x", x), ("alpha", alpha)):
        if getattr(a, "ndim", None) != 2 or a.shape[1] != 3:
            raise ValueError(f"{name} has shape {getattr(a, 'shape', None)}; expected (N, 3).")
        if a.dtype.kind != "f":
            raise TypeError(f"{name} has dtype {a.dtype}; expected float64 or float32.")
    if alpha.shape != x.shape:
        raise ValueError(f"alpha has shape {alpha.shape}; expected {x.shape} to match x. "
                         "Pass vector strengths (vorticity × volume), one per position.")
    if alpha.dtype != x.dtype:
        raise TypeError(f"x is {x.dtype} but alpha is {alpha.dtype}; pass one dtype.")
    xp = array_namespace(x, alpha)
    for name, a in (("x", x), ("alpha", alpha)):
        if a.size and not bool(to_host(xp.all(xp.isfinite(a)))):
            raise ValueError(f"{name} has non-finite values (NaN or inf); remesh a finite "
                             "state (the run should have stopped at the non-finite step).")
    return int(x.shape[0])


def check_threshold(value, nodes="nodes"):
    """``value`` as a float in [0, 1), the relative threshold of |α| below which the
    ``nodes`` of a free-space remeshing are dropped (TypeError, ValueError otherwise)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"threshold must be a number, got {value!r}.") from None
    if not (math.isfinite(value) and 0 <= value < 1):
        raise ValueError(f"threshold must be in [0, 1) (relative to max|alpha| of the "
                         f"{nodes}), got {value!r}.")
    return value


def _origin(origin):
    if origin is None:
        return np.zeros(3)
    o = np.asarray(to_host(origin), dtype=float)
    if o.shape != (3,) or not np.all(np.isfinite(o)):
        raise ValueError(f"origin must be 3 finite coordinates, got {origin!r}.")
    return o
