"""Rows summed in another order put back in the caller's order: out[order[j]] = rows[j].

The distributed sum gathers the ranks' shares in share order and puts u (M, 3) and ∇u
(M, 3, 3) back in the caller's order (:mod:`vortexsim.summation.distributed`).  On the
GPU that runs as a gather through the inverse permutation, one thread per value with the
row width a compile-time constant: coalesced writes and whole rows read, 2.8 ms for u
and ∇u of 2^24 targets with the inverse made once (one H200), where CuPy's indexed
assignment (a scatter) took 3.7 ms (``benchmarks/tools/profile_share_overhead.py``).
NumPy keeps the indexed assignment.  Both paths copy values only: the same bits.
"""
from __future__ import annotations

import functools

import numpy as np

__all__ = ["inverse_permutation", "unpermute_rows"]


def inverse_permutation(order, xp):
    """inv (M,) int64 with inv[order[j]] = j, for a permutation ``order`` (M,) of 0..M − 1."""
    inv = xp.empty(order.shape[0], dtype=xp.int64)
    inv[order] = xp.arange(order.shape[0], dtype=xp.int64)
    return inv


def unpermute_rows(rows, order, xp, inv=None):
    """out (M, ...) with out[order[j]] = rows[j], for ``rows`` (M, ...) and a permutation
    ``order`` (M,) of 0..M − 1; ``inv``: its :func:`inverse_permutation` when the caller
    has it (GPU; made here otherwise)."""
    if xp is np or rows.shape[0] == 0:
        out = xp.empty_like(rows)
        out[order] = rows
        return out
    if inv is None:
        inv = inverse_permutation(order, xp)
    src = xp.ascontiguousarray(rows)
    width = int(np.prod(rows.shape[1:], dtype=np.int64))
    out = xp.empty(rows.shape, dtype=rows.dtype)
    _take_rows(width)(src.reshape(-1), inv, out.reshape(-1))
    return out


@functools.lru_cache(maxsize=None)
def _take_rows(width):
    """The CuPy kernel dst[i] = src[inv[i / width] · width + i % width] (one thread per
    value; ``width`` a literal, so that the division compiles to a multiplication)."""
    from ..backend import import_cupy  # noqa: PLC0415
    cp = import_cupy()
    return cp.ElementwiseKernel(
        "raw T src, raw int64 inv", "T dst",
        f"dst = src[inv[i / {width}] * {width} + i % {width}]",
        f"vortexsim_take_rows_{width}")
