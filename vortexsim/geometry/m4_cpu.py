r"""M4′ transfers between particles and the periodic n³ lattice on NumPy, the CPU twin of
:mod:`vortexsim.geometry.m4_gpu` (same functions, same results to round-off).

The weights of a chunk of points form a sparse matrix W (points × n³, 64 entries per
row: :func:`vortexsim.geometry.remesh.m4prime_stencil` per axis, the nodes modulo n);
M2P is W F, P2M is Wᵀ α summed chunk after chunk.  SciPy's sparse products run in a
fixed order, so the same input gives the same bits (the order of the input enters the
sums, unlike :func:`vortexsim.geometry.remesh.remesh`'s canonical order; the two agree to
round-off).  Memory: one chunk's matrix (``CHUNK`` points, 12 bytes per entry) at a time.
"""
from __future__ import annotations

import numpy as np

from .remesh import STENCIL, m4prime_stencil

__all__ = ["periodic_p2m", "periodic_m2p", "periodic_weights"]

#: points per sparse weight matrix (2^16 × 64 entries: 50 MB)
CHUNK = 1 << 16
#: points per block of :func:`_weights`' products (64 × 2^11 float64: 1 MB, in cache)
BLOCK = 1 << 11


def periodic_weights(points, n, h):
    """The weight matrices of ``points`` (M, 3) [L], one per chunk of ``CHUNK`` points
    (the ``weights`` argument of :func:`periodic_p2m` and :func:`periodic_m2p` when both
    act on the same points)."""
    return [_weights(points[lo:lo + CHUNK], n, h) for lo in range(0, points.shape[0], CHUNK)]


def _chunks(points, n, h, weights):
    """(slice, matrix) of each chunk of ``points``, from ``weights`` when given."""
    for k, lo in enumerate(range(0, points.shape[0], CHUNK)):
        yield slice(lo, lo + CHUNK), (weights[k] if weights is not None
                                      else _weights(points[lo:lo + CHUNK], n, h))


def _weights(points, n, h):
    """The M4′ weights of ``points`` (m, 3) [L] on the periodic n³ lattice of spacing h:
    a CSR matrix (m, n³).  Node indices in int32 where they fit.  Each axis's part is
    made on (4, m) and the products over the stencil on (4, 4, b) and (64, b) for blocks
    of b = :data:`BLOCK` points along the fast axis (NumPy's inner loops over 4 entries
    were twice as slow), each block transposed into the matrix's (m, 64) rows while it
    is in cache; the same products in the same order."""
    s = np.asarray(points, dtype=np.float64) / h
    cell = np.floor(s)
    tau = s - cell
    m = s.shape[0]
    index_type = np.int32 if n ** 3 < 2 ** 31 and 64 * m < 2 ** 31 else np.int64
    cell = cell.astype(index_type)
    stencil = np.asarray(STENCIL, dtype=index_type)[:, None]
    w = [np.ascontiguousarray(m4prime_stencil(tau[:, a]).T) for a in range(3)]  # (4, m)
    i = [(cell[:, a] + stencil) % n for a in range(3)]                         # (4, m)
    i[0] *= n * n
    i[1] *= n
    weight = np.empty((m, 64), dtype=np.float64)
    node = np.empty((m, 64), dtype=index_type)
    for lo in range(0, m, BLOCK):
        b = slice(lo, lo + BLOCK)
        wb = (w[0][:, None, b] * w[1][None, :, b]).reshape(16, -1)
        weight[b] = (wb[:, None, :] * w[2][None, :, b]).reshape(64, -1).T
        nb = (i[0][:, None, b] + i[1][None, :, b]).reshape(16, -1)
        node[b] = (nb[:, None, :] + i[2][None, :, b]).reshape(64, -1).T
    import scipy.sparse  # noqa: PLC0415 - kept out of the command's start (GPU runs)
    return scipy.sparse.csr_matrix(
        (weight.reshape(-1), node.reshape(-1),
         np.arange(0, 64 * m + 1, 64, dtype=index_type)), shape=(m, n ** 3))


def periodic_p2m(x, alpha, n, h, *, scale=1.0, component_major=False, weights=None):
    """``scale`` × Σ_p W(x_n − x_p) α_p at the n³ nodes of spacing h: (n³, 3), or
    (3, n, n, n) with ``component_major`` (as :func:`vortexsim.geometry.m4_gpu.periodic_p2m`);
    ``weights``: :func:`periodic_weights` of ``x``, when already made."""
    n = int(n)
    out = np.zeros((n ** 3, 3), dtype=np.float64)
    for part, w in _chunks(x, n, h, weights):
        out += w.T @ np.asarray(alpha[part], dtype=np.float64)
    out *= scale
    return np.ascontiguousarray(out.T).reshape(3, n, n, n) if component_major else out


def periodic_m2p(fields, points, n, h, out=None, weights=None):
    """Three fields (3, n, n, n) at ``points`` (M, 3) [L]: into ``out`` (M, 3) (rows may be
    strided; default a new array), returned (as :func:`vortexsim.geometry.m4_gpu.periodic_m2p`);
    ``weights``: :func:`periodic_weights` of ``points``, when already made."""
    n = int(n)
    if fields.shape != (3, n, n, n):
        raise ValueError(f"fields has shape {fields.shape}; expected (3, {n}, {n}, {n}).")
    columns = np.ascontiguousarray(fields.reshape(3, n ** 3).T)           # (n³, 3)
    if out is None:
        out = np.empty((points.shape[0], 3), dtype=np.float64)
    for part, w in _chunks(points, n, h, weights):
        out[part] = w @ columns
    return out
