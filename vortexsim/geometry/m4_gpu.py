r"""M4′ transfers between particles and the periodic n³ lattice on CuPy (``cuda/m4prime.cu``).

* :func:`periodic_p2m`: Σ_p W(x_n − x_p) α_p at every node (the periodic remeshing of
  :func:`vortexsim.geometry.remesh.remesh`, the mesh solve's P2M);
* :func:`periodic_m2p`: three lattice fields interpolated at points by the same W (the
  mesh solve's M2P, the adjoint of P2M).

Node (i, j, k) at (i, j, k) h, row (i·n + j)·n + k; the weights are
:func:`vortexsim.geometry.remesh.m4prime_stencil`'s.  P2M sorts the particles by cell
(a stable radix sort) and gives each node one thread that sums its 64 cells' particles in
a fixed order; M2P gives each point one thread over its 64 nodes.  No atomics: the same
input gives the same bits on every run.  The sum's order differs from the NumPy remesh's
(which orders each cell's elements by τ and α as well), so the two agree to round-off,
not bitwise.  Memory of P2M: O(N) (keys, order, sorted τ and α: 64 bytes per particle)
plus n³ + 1 int32 cell starts.  Fewer than 2³¹ particles.
"""
from __future__ import annotations

import numpy as np

from ..backend.device import stable_argsort
from ..kernels.modules import get_function

__all__ = ["periodic_p2m", "periodic_m2p", "m2p_output"]

CUDA_FILE = "m4prime.cu"
BLOCK = 128


def _grid(count):
    return ((int(count) + BLOCK - 1) // BLOCK,)


def periodic_p2m(x, alpha, n, h, *, scale=1.0, component_major=False):
    """``scale`` × Σ_p W(x_n − x_p) α_p at the n³ nodes of spacing h (box n h).

    Parameters
    ----------
    x : cupy array (N, 3) float64 [L], positions (any; wrapped into the box)
    alpha : cupy array (N, 3) float64, the values spread (strengths [L³/T])
    n : int, nodes per side; h : float [L], the spacing
    scale : float, a factor on the result (1/h³: vorticity [1/T] from strengths)
    component_major : False: (n³, 3) rows of nodes; True: (3, n, n, n)

    Returns
    -------
    cupy float64 array (n³, 3) or (3, n, n, n)
    """
    import cupy as cp  # noqa: PLC0415
    n, count = int(n), int(x.shape[0])
    if count >= 2 ** 31 - 1:
        raise ValueError(f"the GPU M4' spread supports fewer than 2^31 particles; got {count}.")
    x = cp.ascontiguousarray(x, dtype=cp.float64)
    key = cp.empty(count, dtype=cp.int64)
    tau = cp.empty((count, 3), dtype=cp.float64)
    if count:
        get_function(CUDA_FILE, "m4_cells")(_grid(count), (BLOCK,),
                                           (x, np.int64(count), np.float64(h), np.int64(n),
                                            key, tau))
    order = stable_argsort(key, cp)
    key = key[order]
    tau = tau[order]
    alpha = cp.ascontiguousarray(alpha[order], dtype=cp.float64)
    del order
    starts = cp.empty(n ** 3 + 1, dtype=cp.int32)
    get_function(CUDA_FILE, "cell_starts")(_grid(count + 1), (BLOCK,),
                                          (key, np.int64(count), np.int64(n ** 3), starts))
    del key
    nodes = n ** 3
    if component_major:
        out = cp.empty((3, n, n, n), dtype=cp.float64)
        strides = (1, nodes)
    else:
        out = cp.empty((nodes, 3), dtype=cp.float64)
        strides = (3, 1)
    get_function(CUDA_FILE, "m4_p2m")(_grid(nodes), (BLOCK,),
                                     (tau, alpha, starts, np.int64(n), np.float64(scale),
                                      np.int64(strides[0]), np.int64(strides[1]), out))
    return out


def periodic_m2p(fields, points, n, h, out=None):
    """Three fields (3, n, n, n) (float64) at ``points`` (M, 3) [L] by M4′, each point's 64
    nodes summed in a fixed order: into ``out`` (M, 3) float64 (rows may be strided, e.g.
    ``grad[:, a, :]`` of an (M, 3, 3) array; default a new array), returned."""
    import cupy as cp  # noqa: PLC0415
    n = int(n)
    if fields.shape != (3, n, n, n):
        raise ValueError(f"fields has shape {fields.shape}; expected (3, {n}, {n}, {n}).")
    points = cp.ascontiguousarray(points, dtype=cp.float64)
    count = int(points.shape[0])
    out = m2p_output(out, count)
    if count:
        get_function(CUDA_FILE, "m4_m2p")(
            _grid(count), (BLOCK,),
            (points, np.int64(count), np.float64(h), np.int64(n),
             cp.ascontiguousarray(fields, dtype=cp.float64), np.int64(out.strides[0] // 8),
             out))
    return out


def m2p_output(out, count):
    """The (count, 3) float64 CuPy array an M2P writes (rows may be strided, each row
    contiguous): ``out`` checked, or a new one."""
    import cupy as cp  # noqa: PLC0415
    if out is None:
        return cp.empty((count, 3), dtype=cp.float64)
    if out.shape != (count, 3) or out.dtype != cp.float64 or out.strides[1] != 8:
        raise ValueError(f"out must be float64 (M, 3) with contiguous rows; got {out.shape}, "
                         f"{out.dtype}, strides {out.strides}.")
    return out
