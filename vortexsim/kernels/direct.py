r"""Direct (all-pairs) summation of the regularized Biot–Savart law.

Two backends of one computation (``physics.md``)::

    u_i        = (1/4π) Σ_p A(r, σ_p) α_p × d,           d = y_i − x_p
    ∇u_i       = (1/4π) Σ_p [ A ε_acb α_c − B (α_p × d)_a d_b ]

with the pair factors A = q/r³, B = f/r⁵ of :mod:`vortexsim.kernels.cutoff`.

* :func:`direct_sum_numpy` — blocked NumPy; memory O(N + M) (blocks of at most
  ``pairs_per_block`` pairs, never an N×M array).  This is the specification.
* :func:`direct_sum_cuda` — CUDA kernel ``cuda/p2p_direct.cu`` through CuPy,
  sources streamed through shared memory.

Both take arrays already validated and converted by
:func:`vortexsim.summation.induced_velocity` (the public API).
"""
from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np

from ..backend import array_namespace
from .cutoff import CutoffKernel
from .morton import bounding_cube, morton_keys

logger = logging.getLogger(__name__)

INV_4PI = 1.0 / (4.0 * math.pi)


def _accumulate_block(kernel, d, alpha_blk, sigma_blk, mask, gradient, u, w, g,
                      singular_from=None):
    """Add the contribution of one (targets × sources) block; d = y − x (Bt, Bs, 3).

    ``singular_from`` (FMM near field, smooth kernels): pairs with (r/σ)² ≥ it take the
    singular factors 1/r³, 3/r⁵ (the FMM's reach, where the kernel equals them to
    tol/10), and the kernel's own factors are evaluated on the other pairs only."""
    r2 = np.einsum("tsk,tsk->ts", d, d)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if singular_from is None:
            a, b = kernel.factors(r2, sigma_blk[None, :], np)
        else:
            sig = np.broadcast_to(sigma_blk[None, :], r2.shape)
            near = r2 < singular_from * (sig * sig)
            ir2 = 1.0 / r2
            a = ir2 * np.sqrt(ir2)
            b = 3.0 * a * ir2
            a[near], b[near] = kernel.factors(r2[near], sig[near], np)
    if mask is not None:
        a = np.where(mask, 0.0, a)
        b = np.where(mask, 0.0, b)
    cr = _cross_sources(alpha_blk, d)                    # (Bt, Bs, 3): α × d
    u += np.einsum("ts,tsk->tk", a, cr)
    if gradient:
        w += a @ alpha_blk                                # Σ A α
        g += np.matmul((cr * b[..., None]).transpose(0, 2, 1), d)   # Σ B (α×d) ⊗ d


def _cross_sources(alpha, d):
    """α_s × d_ts (Bt, Bs, 3) for the sources' α (Bs, 3) and d (Bt, Bs, 3): NumPy's
    ``cross`` product by component, the same products and differences (bitwise its
    result) without its broadcast copies (``numpy.cross`` was a third of a near-field
    block's time)."""
    out = np.empty(d.shape, dtype=np.result_type(alpha, d))
    for k, (i, j) in enumerate(((1, 2), (2, 0), (0, 1))):
        np.multiply(alpha[:, i], d[..., j], out=out[..., k])
        out[..., k] -= alpha[:, j] * d[..., i]
    return out


#: the block sum of :func:`direct_sum_numpy`, public for the FMM's near field
#: (:mod:`vortexsim.fmm.near`); the direct sum looks ``_accumulate_block`` up at call time
accumulate_block = _accumulate_block


def direct_sum_numpy(kernel: CutoffKernel, x, alpha, sigma, targets, *, gradient=True,
                     exclude_self=False, pairs_per_block=1 << 17):
    """Blocked NumPy direct sum.

    Parameters
    ----------
    kernel : CutoffKernel
    x, alpha : ndarray (N, 3) [L], [L³/T], one floating dtype
    sigma : ndarray (N,) [L], > 0
    targets : ndarray (M, 3) [L]
    gradient : bool
    exclude_self : bool
        Targets are the sources (same order): skip the pairs i == p.
    pairs_per_block : int
        Work-array size; memory stays O(N + M + pairs_per_block).

    Returns
    -------
    u : ndarray (M, 3) [L/T];  grad_u : ndarray (M, 3, 3) [1/T] or None
    """
    dtype = x.dtype
    n, m = x.shape[0], targets.shape[0]
    u = np.zeros((m, 3), dtype)
    grad_u = np.zeros((m, 3, 3), dtype) if gradient else None
    if n == 0 or m == 0:
        return u, grad_u
    bs = max(1, min(n, int(math.sqrt(pairs_per_block))))
    bt = max(1, min(m, pairs_per_block // bs))
    for t0 in range(0, m, bt):
        t1 = min(m, t0 + bt)
        ub = np.zeros((t1 - t0, 3), dtype)
        wb = np.zeros((t1 - t0, 3), dtype)
        gb = np.zeros((t1 - t0, 3, 3), dtype)
        for s0 in range(0, n, bs):
            s1 = min(n, s0 + bs)
            mask = None
            if exclude_self and s0 < t1 and t0 < s1:
                mask = np.arange(t0, t1)[:, None] == np.arange(s0, s1)[None, :]
            d = targets[t0:t1, None, :] - x[None, s0:s1, :]
            _accumulate_block(kernel, d, alpha[s0:s1], sigma[s0:s1], mask, gradient, ub, wb, gb)
        u[t0:t1] = INV_4PI * ub
        if gradient:
            grad_u[t0:t1] = INV_4PI * (skew(wb) - gb)
    return u, grad_u


def direct_sum_at_elements(kernel: CutoffKernel, x, alpha, sigma, indices, *, gradient=True):
    """u and ∇u at the elements ``x[indices]``, each without its own contribution.

    NumPy arrays use :func:`direct_sum_numpy`, CuPy arrays :func:`direct_sum_cuda`
    (same dtype as the inputs; pass float64 for a reference).

    The reference for accuracy checks on sampled targets: equal to rows ``indices``
    of ``direct_sum_numpy(kernel, x, alpha, sigma, x, exclude_self=True)`` at the cost
    of len(indices) × N pairs.  The self pair (r = 0) adds nothing to u and
    (1/4π) A(0) α × · to ∇u (smooth kernels; A(0) := 0 for the others), which is
    subtracted here.
    """
    xp = array_namespace(x)
    indices = xp.asarray(indices)
    direct = direct_sum_numpy if xp is np else direct_sum_cuda
    u, grad_u = direct(kernel, x, alpha, sigma, x[indices], gradient=gradient)
    if gradient:
        with np.errstate(divide="ignore", invalid="ignore"):
            a0, _ = kernel.factors(xp.zeros(len(indices), x.dtype), sigma[indices], xp)
        a0 = xp.where(xp.isfinite(a0), a0, 0.0)
        subtract_skew(grad_u, INV_4PI * (a0[:, None] * alpha[indices]))
    return u, grad_u


def subtract_skew(g, w):
    """``g`` (…, 3, 3) −= S(w) (the matrices of :func:`skew`), in place: only the six
    off-diagonal entries are touched, no (…, 3, 3) temporary.  Returns ``g``."""
    w = w.astype(g.dtype, copy=False)
    g[..., 0, 1] += w[..., 2]
    g[..., 0, 2] -= w[..., 1]
    g[..., 1, 0] -= w[..., 2]
    g[..., 1, 2] += w[..., 0]
    g[..., 2, 0] += w[..., 1]
    g[..., 2, 1] -= w[..., 0]
    return g


def skew(w):
    """Matrices S (…, 3, 3) with S v = w × v, i.e. S[a, b] = ε_acb w_c."""
    xp = array_namespace(w)
    s = xp.zeros(w.shape[:-1] + (3, 3), w.dtype)
    s[..., 0, 1] = -w[..., 2]
    s[..., 0, 2] = w[..., 1]
    s[..., 1, 0] = w[..., 2]
    s[..., 1, 2] = -w[..., 0]
    s[..., 2, 0] = -w[..., 1]
    s[..., 2, 1] = w[..., 0]
    return s



def source_parameters(kernel: CutoffKernel, sigma, xp):
    """Per-source parameters (N, 2) = (p, p2) of the CUDA pair kernel (``cuda/p2p.cuh``).

    gaussian: (1/σ², 1/σ³); algebraic, winckelmans: (σ², 0); polynomial: (1/σ², 0);
    singular: (0, 0).
    """
    name = kernel.name
    zero = xp.zeros_like(sigma)
    if name == "gaussian":
        p, p2 = 1.0 / (sigma * sigma), 1.0 / (sigma * sigma * sigma)
    elif name in ("algebraic", "winckelmans"):
        p, p2 = sigma * sigma, zero
    elif name == "polynomial":
        p, p2 = 1.0 / (sigma * sigma), zero
    else:
        p, p2 = zero, zero
    return xp.ascontiguousarray(xp.stack([p, p2], axis=1))


@dataclasses.dataclass(frozen=True, slots=True)
class DirectLaunchConfig:
    """Launch shape of the CUDA direct sum: threads per block and targets per thread."""

    block: int = 256
    targets_per_thread: int = 1

    def __post_init__(self):
        if self.block not in (64, 128, 256):
            raise ValueError(f"block must be 64, 128 or 256, got {self.block}.")
        if self.targets_per_thread not in (1, 2, 4):
            raise ValueError(f"targets_per_thread must be 1, 2 or 4, got {self.targets_per_thread}.")


#: Default launch shapes per (kernel, precision), chosen from ``bench_direct.py --sweep``
#: on an H100 (benchmarks/RESULTS.md); everything else uses DirectLaunchConfig().
DEFAULT_LAUNCH = {
    ("gaussian", "float64"): DirectLaunchConfig(256, 2),
    ("algebraic", "float64"): DirectLaunchConfig(256, 2),
}


def direct_sum_cuda(kernel: CutoffKernel, x, alpha, sigma, targets, *, gradient=True,
                    exclude_self=False, launch: DirectLaunchConfig | None = None):
    """CUDA direct sum on CuPy arrays (same contract as :func:`direct_sum_numpy`)."""
    from ..backend import import_cupy  # noqa: PLC0415
    from .modules import CTYPES, get_function  # noqa: PLC0415
    cp = import_cupy()
    dtype = x.dtype
    n, m = x.shape[0], targets.shape[0]
    u = cp.zeros((m, 3), dtype)
    grad_u = cp.zeros((m, 3, 3), dtype) if gradient else None
    if m == 0 or n == 0:
        return u, grad_u
    if n >= 2**31 or m >= 2**31:
        raise ValueError(f"direct_sum_cuda supports fewer than 2^31 sources and targets; "
                         f"got N = {n}, M = {m}.")
    if launch is None:
        launch = DEFAULT_LAUNCH.get((kernel.name, dtype.name), DirectLaunchConfig())
    ctype = CTYPES[dtype.name]
    grad_flag = "true" if gradient else "false"
    name = (f"p2p_direct<{ctype},{kernel.code},{grad_flag},{launch.block},"
            f"{launch.targets_per_thread}>")
    fn = get_function("p2p_direct.cu", name)
    param = source_parameters(kernel, sigma, cp).astype(dtype)
    # Z-order the targets: a warp then holds nearby targets and the kernel's
    # branches (series / erf / tail / far) stay coherent.  With self exclusion
    # the sources get the same order, so that pair i == j is still "same index".
    lo, width = bounding_cube(targets, cp)
    order = cp.argsort(morton_keys(targets, lo, width, 10, cp))
    targets_sorted = cp.ascontiguousarray(targets[order])
    if exclude_self:
        x, alpha, param = targets_sorted, cp.ascontiguousarray(alpha[order]), param[order]
    param = cp.ascontiguousarray(param)
    per_block = launch.block * launch.targets_per_thread
    grid = ((m + per_block - 1) // per_block,)
    u_sorted = cp.empty((m, 3), dtype)
    grad_sorted = cp.empty((m, 3, 3), dtype) if gradient else u_sorted
    fn(grid, (launch.block,),
       (cp.ascontiguousarray(x), cp.ascontiguousarray(alpha), param, np.int32(n),
        targets_sorted, np.int32(m), np.int32(1 if exclude_self else 0),
        u_sorted, grad_sorted))
    u[order] = u_sorted
    if gradient:
        grad_u[order] = grad_sorted
    return u, grad_u
