r"""M4′ transfers between particles and one x-slab of the periodic n³ lattice with its
ghost planes (the slab decomposition of :mod:`vortexsim.geometry.slab`): the slab
counterparts of :mod:`.m4_cpu` (NumPy) and :mod:`.m4_gpu` (CuPy, ``cuda/m4_slab.cu``).

The block of a slab [i0, i1) is the planes [i0 − 1, i1 + 2) of x, not periodic (the
owner's particles reach no further), by all n planes of y and z, periodic: an array
(3, w, n, n), w = i1 − i0 + 3, whose [c, a, j, k] is node (i0 − 1 + a, j, k).  A point
belongs to the slab when its cell ⌊x/h⌋ mod n (the node below it) is in [i0, i1)
(:func:`owned`); it then spreads onto / reads from the block's nodes ⌊x/h⌋ + o,
o ∈ :data:`.remesh.STENCIL`, with :func:`.remesh.m4prime_stencil`'s weights, as the
periodic transfers do on the whole lattice.

* NumPy: the weights of a chunk of points are a sparse matrix W (points × w n²), M2P is
  W F, P2M is Wᵀ α (SciPy's products in a fixed order);
* CuPy: P2M sorts the points by cell (a stable sort) and gives each block node one thread
  summing its 64 cells' points in a fixed order; M2P one thread per point over its 64
  nodes.  No atomics: the same input gives the same bits.  Points outside the slab are
  left out of P2M and get NaN from M2P (NumPy: ValueError).
"""
from __future__ import annotations

import numpy as np

from ..backend import array_namespace
from .m4_cpu import CHUNK
from .remesh import STENCIL, m4prime_stencil

__all__ = ["block_cells", "owned", "slab_weights", "slab_p2m", "slab_m2p"]

CUDA_FILE = "m4_slab.cu"
BLOCK = 128
#: planes of the block below and above the slab
_BELOW, _ABOVE = -STENCIL[0], STENCIL[-1]


def block_cells(points, n, h, i0, xp=None):
    """Cells and fractional positions of ``points`` (M, 3) [L]: s = x/h, τ = s − ⌊s⌋
    (M, 3) float64, and the cells (M, 3) int64: ⌊s⌋ mod n in y and z, in x the block's
    plane ⌊s⌋ mod n − i0 + 1 (in [1, n_x] for the slab's points)."""
    xp = array_namespace(points) if xp is None else xp
    s = xp.asarray(points, dtype=xp.float64) / h
    floor = xp.floor(s)
    tau = s - floor
    cell = floor.astype(xp.int64) % n
    cell[:, 0] += _BELOW - i0
    return cell, tau


def owned(points, n, h, i0, i1):
    """True for each of ``points`` (M, 3) [L] whose node below, ⌊x/h⌋ mod n, lies in the
    x-planes [i0, i1)."""
    xp = array_namespace(points)
    plane = xp.floor(xp.asarray(points[:, 0], dtype=xp.float64) / h).astype(xp.int64) % n
    return (plane >= i0) & (plane < i1)


def _check_owned(cell, n_x, what):
    bad = int(np.count_nonzero((cell[:, 0] < _BELOW) | (cell[:, 0] >= _BELOW + n_x)))
    if bad:
        raise ValueError(f"{bad} of the {cell.shape[0]} {what} lie outside this rank's "
                         "slab (their node below, floor(x/h) mod n, is not one of its "
                         "x-planes): give each rank the points it owns "
                         "(SlabMeshSolve.owner_of).")


def _block_matrix(cell, tau, n, width):
    """The CSR weights (m, width n²) of points with block ``cell`` and ``tau`` (m, 3)."""
    w = [m4prime_stencil(tau[:, a]) for a in range(3)]                     # (m, 4) each
    offsets = np.asarray(STENCIL)
    idx = [cell[:, 0, None] + offsets] + [(cell[:, a, None] + offsets) % n for a in (1, 2)]
    weight = (w[0][:, :, None, None] * w[1][:, None, :, None]) * w[2][:, None, None, :]
    node = (idx[0][:, :, None, None] * n + idx[1][:, None, :, None]) * n \
        + idx[2][:, None, None, :]
    m, nodes = tau.shape[0], width * n * n
    index_type = np.int32 if nodes < 2 ** 31 and 64 * m < 2 ** 31 else np.int64
    import scipy.sparse  # noqa: PLC0415 - kept out of the command's start (GPU runs)
    return scipy.sparse.csr_matrix(
        (weight.reshape(-1), node.reshape(-1).astype(index_type),
         np.arange(0, 64 * m + 1, 64, dtype=index_type)), shape=(m, nodes))


def slab_weights(points, n, h, i0, i1, what="points"):
    """The NumPy weight matrices of ``points`` (M, 3) [L] on the block of the slab
    [i0, i1), one per chunk of :data:`.m4_cpu.CHUNK` points (the ``weights`` of
    :func:`slab_p2m` and :func:`slab_m2p`); ValueError for points outside the slab."""
    points = np.asarray(points, dtype=np.float64)
    out = []
    for lo in range(0, points.shape[0], CHUNK):
        cell, tau = block_cells(points[lo:lo + CHUNK], n, h, i0, np)
        _check_owned(cell, i1 - i0, what)
        out.append(_block_matrix(cell, tau, n, i1 - i0 + _BELOW + _ABOVE))
    return out


def slab_p2m(x, alpha, n, h, i0, i1, *, scale=1.0, weights=None):
    """``scale`` × Σ_p W(x_n − x_p) α_p at the nodes of the block of the slab [i0, i1) of
    the n³ lattice of spacing h: (3, i1 − i0 + 3, n, n) (planes i0 − 1 … i1 + 1), from the
    slab's particles ``x`` (N, 3) [L] with values ``alpha`` (N, 3); ``weights``:
    :func:`slab_weights` of ``x`` (NumPy)."""
    n, width = int(n), int(i1) - int(i0) + _BELOW + _ABOVE
    xp = array_namespace(x, alpha)
    if xp is not np:
        return _gpu_p2m(x, alpha, n, h, int(i0), width, scale)
    if weights is None:
        weights = slab_weights(x, n, h, i0, i1, "particles")
    out = np.zeros((width * n * n, 3), dtype=np.float64)
    for k, lo in enumerate(range(0, x.shape[0], CHUNK)):
        out += weights[k].T @ np.asarray(alpha[lo:lo + CHUNK], dtype=np.float64)
    out *= scale
    return np.ascontiguousarray(out.T).reshape(3, width, n, n)


def slab_m2p(fields, points, n, h, i0, i1, out=None, weights=None):
    """Three fields on the block of the slab [i0, i1), (3, i1 − i0 + 3, n, n), at the
    slab's ``points`` (M, 3) [L] by M4′ (each point's 64 nodes in a fixed order): into
    ``out`` (M, 3) (rows may be strided; default a new array), returned; ``weights``:
    :func:`slab_weights` of ``points`` (NumPy)."""
    n, width = int(n), int(i1) - int(i0) + _BELOW + _ABOVE
    if tuple(fields.shape) != (3, width, n, n):
        raise ValueError(f"fields has shape {tuple(fields.shape)}; expected (3, {width}, "
                         f"{n}, {n}) (the slab [{i0}, {i1}) and its ghost planes).")
    xp = array_namespace(fields, points)
    if xp is not np:
        return _gpu_m2p(fields, points, n, h, int(i0), width, out)
    if weights is None:
        weights = slab_weights(points, n, h, i0, i1, "targets")
    columns = np.ascontiguousarray(fields.reshape(3, width * n * n).T)     # (w n², 3)
    if out is None:
        out = np.empty((points.shape[0], 3), dtype=np.float64)
    for k, lo in enumerate(range(0, points.shape[0], CHUNK)):
        out[lo:lo + CHUNK] = weights[k] @ columns
    return out


def _grid(count):
    return ((int(count) + BLOCK - 1) // BLOCK,)


def _gpu_p2m(x, alpha, n, h, i0, width, scale):
    """CuPy P2M: the points sorted by block cell (those outside the slab keyed past the
    last cell, and so left out), the cells' CSR offsets, one thread per block node."""
    import cupy as cp  # noqa: PLC0415

    from ..backend import stable_argsort  # noqa: PLC0415
    from ..kernels.modules import get_function  # noqa: PLC0415
    count, nodes = int(x.shape[0]), width * n * n
    if count >= 2 ** 31 - 1:
        raise ValueError(f"the GPU M4' spread supports fewer than 2^31 particles; got {count}.")
    cell, tau = block_cells(x, n, h, i0, cp)
    inside = (cell[:, 0] >= _BELOW) & (cell[:, 0] < width - _ABOVE)
    key = cp.where(inside, (cell[:, 0] * n + cell[:, 1]) * n + cell[:, 2], nodes)
    del cell, inside
    order = stable_argsort(key, cp)
    key = key[order]
    tau = cp.ascontiguousarray(tau[order])
    alpha = cp.ascontiguousarray(alpha[order], dtype=cp.float64)
    del order
    starts = cp.searchsorted(key, cp.arange(nodes + 1, dtype=cp.int64)).astype(cp.int32)
    del key
    out = cp.empty((3, width, n, n), dtype=cp.float64)
    get_function(CUDA_FILE, "m4_slab_p2m")(
        _grid(nodes), (BLOCK,),
        (tau, alpha, starts, np.int64(width), np.int64(n), np.float64(scale), out))
    return out


def _gpu_m2p(fields, points, n, h, i0, width, out):
    import cupy as cp  # noqa: PLC0415

    from ..kernels.modules import get_function  # noqa: PLC0415
    from .m4_gpu import m2p_output  # noqa: PLC0415
    cell, tau = block_cells(points, n, h, i0, cp)
    count = int(points.shape[0])
    out = m2p_output(out, count)
    if count:
        get_function(CUDA_FILE, "m4_slab_m2p")(
            _grid(count), (BLOCK,),
            (cp.ascontiguousarray(tau), cp.ascontiguousarray(cell), np.int64(count),
             np.int64(width), np.int64(n), cp.ascontiguousarray(fields, dtype=cp.float64),
             np.int64(out.strides[0] // 8), out))
    return out
