r"""A deterministic periodic non-uniform FFT in 3D (types 1 and 2) on NumPy or CuPy.

For points θ_p ∈ [0, 2π)³ (t_p = θ_p n/2π in grid units) and the modes |m_i| ≤ m_max:

    type 1:  F(m) = Σ_p c_p e^{−i m·θ_p},        type 2:  f(θ_q) = Σ_m f̂(m) e^{i m·θ_q},

through a fine periodic grid of n³ points (n ≥ 2 (2 m_max + 1), the upsampling 2, an
even 2^a 3^b 5^c), the "exponential of semicircle" kernel of FINUFFT (Barnett, Magland
& af Klinteberg, SIAM J. Sci. Comput. 41 (2019) C479):

    φ(x) = exp(β (√(1 − (2x/w)²) − 1))  for |x| < w/2 grid points, else 0,

of width w = ⌈log10(10/ε)⌉ (2 ≤ w ≤ 16) and β = 2.30 w (2.20, 2.26, 2.38 for w = 2, 3, 4),
FINUFFT's choice for the precision ε at upsampling 2.  A point at t reaches the w grid
points l₀ + j (l₀ = ⌈t − w/2⌉, j = 0 … w − 1) of each axis, periodically.

* **Type 1** spreads b(l) = Σ_p c_p Π_d φ(l_d − t_{p,d}), takes its real FFT B(m) and
  deconvolves: F(m) = B(m) / Π_d φ̂(2π m_d/n), φ̂ the kernel's Fourier transform (by
  Gauss–Legendre quadrature, once).
* **Type 2** deconvolves f̂(m) / Π_d φ̂, sets it on the fine grid's spectrum (zero
  elsewhere), inverse real FFT, and interpolates f(θ_q) = Σ_l g(l) Π_d φ(l_d − t_{q,d}).

The values c are real and f̂ Hermitian (f real): the transforms are real FFTs and the
modes are kept as a half cube (:meth:`PeriodicNufft.mode_numbers`): m_0, m_1 in FFT order
(0 … m_max, −m_max … −1), m_2 = 0 … m_max; the modes m_2 < 0 are the conjugates.

**Determinism.** On the GPU (:data:`vortexsim/kernels/cuda/nufft.cu`) the spread has no
atomics: the elements are sorted by grid cell (a stable sort), and every grid point
*gathers* the elements of the cells within the kernel's reach in one fixed order (cell
by cell, each cell's elements in sorted order); the interpolation is a gather by
nature, each target one thread with a fixed stencil order; cuFFT is deterministic.
The same input gives the same bits; a permutation of the input changes the sums'
order only (round-off).  On NumPy the spread is the same sum, element by element
(``numpy.bincount``, sequential): the specification of the CUDA kernels, used as the
reference in the tests (the CPU production path is FINUFFT, :mod:`vortexsim.summation.spectral`).

Cost: O(N w³) for the spread and interpolation, O(n³ log n) for the FFTs.  Memory: K
real grids of n³ float64 and one half spectrum (n² (n/2 + 1) complex128) per call, plus
the cell CSR (n³ + 1 int32) of the GPU spread.
"""
from __future__ import annotations

import math

import numpy as np

from ..backend import array_namespace, stable_argsort

__all__ = ["PeriodicNufft", "kernel_width", "kernel_beta", "es_kernel", "kernel_fourier",
           "fine_grid_size", "UPSAMPLING", "MAX_WIDTH", "TILE"]

#: the fine grid's upsampling factor (over the 2 m_max + 1 modes per axis)
UPSAMPLING = 2
#: the widest kernel (grid points per axis); precision ~1e-15
MAX_WIDTH = 16
#: the edge of the CUDA spread's tiles (grid points; one thread per point)
TILE = 8
#: the CUDA kernels' source (vortexsim/kernels/cuda/)
CUDA_FILE = "nufft.cu"
#: points per chunk of the NumPy spread and interpolation (N w³ terms per chunk ≤ this)
_CHUNK_TERMS = 1 << 21


def kernel_width(eps):
    """The kernel's width w (grid points) for the precision ``eps`` at upsampling 2:
    ⌈log10(10/ε)⌉, between 2 and :data:`MAX_WIDTH` (FINUFFT's rule)."""
    if not 0 < eps < 1:
        raise ValueError(f"the NUFFT precision must be in (0, 1), got {eps!r}.")
    return int(min(MAX_WIDTH, max(2, math.ceil(-math.log10(eps / 10.0)))))


def kernel_beta(w):
    """The kernel's shape β for the width ``w`` (FINUFFT's values at upsampling 2)."""
    return {2: 2.20, 3: 2.26, 4: 2.38}.get(int(w), 2.30) * w


def es_kernel(x, w, beta, xp=np):
    """φ(x) = exp(β (√(1 − (2x/w)²) − 1)) for |x| < w/2, else 0 (x in grid units)."""
    z = x / (0.5 * w)
    s = 1.0 - z * z
    return xp.where(s > 0.0, xp.exp(beta * (xp.sqrt(xp.maximum(s, 0.0)) - 1.0)), 0.0)


def kernel_fourier(w, beta, xi):
    """φ̂(ξ) = ∫ φ(x) e^{−iξx} dx = 2 ∫₀^{w/2} φ(x) cos(ξx) dx at the frequencies ``xi``
    [radians per grid point] (host float64 array), by Gauss–Legendre quadrature."""
    nodes, weights = np.polynomial.legendre.leggauss(max(64, 8 * int(w)))
    x = 0.25 * w * (nodes + 1.0)                       # [0, w/2]
    f = es_kernel(x, w, beta) * weights * (0.25 * w)
    return 2.0 * np.cos(np.outer(np.asarray(xi, dtype=np.float64), x)) @ f


def fine_grid_size(m_max, w):
    """The fine grid's points per axis: the smallest even 2^a 3^b 5^c at least
    :data:`UPSAMPLING` (2 m_max + 1), 2w and TILE + w + 1 (a CUDA tile's cells must not
    wrap onto themselves)."""
    n = max(UPSAMPLING * (2 * int(m_max) + 1), 2 * int(w), TILE + int(w) + 1)
    while True:
        if n % 2 == 0:
            r = n
            for p in (2, 3, 5):
                while r % p == 0:
                    r //= p
            if r == 1:
                return n
        n += 1


class PeriodicNufft:
    """Types 1 and 2 between real point values and the half cube of modes |m_i| ≤
    ``m_max``, at precision ``eps``, on ``xp`` (numpy or cupy: the arrays' device).

    Attributes: ``m_max``, ``eps``, ``w`` (kernel width), ``beta``, ``n`` (fine grid
    points per axis), ``shape`` (the half cube (2 m_max + 1, 2 m_max + 1, m_max + 1)).
    """

    def __init__(self, m_max, eps, xp=np):
        self.m_max, self.eps, self.xp = int(m_max), float(eps), xp
        if self.m_max < 1:
            raise ValueError(f"m_max must be an integer >= 1, got {m_max!r}.")
        self.w = kernel_width(self.eps)
        self.beta = kernel_beta(self.w)
        self.n = fine_grid_size(self.m_max, self.w)
        self.shape = (2 * self.m_max + 1, 2 * self.m_max + 1, self.m_max + 1)
        phi_hat = kernel_fourier(self.w, self.beta,
                                 2.0 * math.pi * np.arange(self.m_max + 1) / self.n)
        # 1/φ̂ along the half cube's axes (FFT order on axes 0, 1)
        inv = 1.0 / phi_hat
        full = np.concatenate([inv, inv[:0:-1]])
        self._deconv = tuple(xp.asarray(a) for a in (full.reshape(-1, 1, 1),
                                                     full.reshape(1, -1, 1),
                                                     inv.reshape(1, 1, -1)))

    def mode_numbers(self):
        """(m_0, m_1, m_2): host int64 mode numbers of the half cube's axes (FFT order
        on axes 0 and 1, 0 … m_max on axis 2)."""
        m = self.m_max
        full = np.concatenate([np.arange(0, m + 1), np.arange(-m, 0)])
        return full, full.copy(), np.arange(0, m + 1)

    def coordinates(self, theta):
        """Grid coordinates t = θ n/2π ∈ [0, n) (3, N) float64 of the angles ``theta``
        (N, 3) ∈ [0, 2π] (a value that rounds to n maps to 0)."""
        xp = self.xp
        t = xp.ascontiguousarray(theta.T, dtype=xp.float64) * (self.n / (2.0 * math.pi))
        return xp.where(t >= self.n, t - self.n, t)

    # -- type 1 ------------------------------------------------------------------------
    def type1(self, t, c):
        """F (K, *shape) complex128: Σ_p c_{k,p} e^{−i m·θ_p} on the half cube, from grid
        coordinates ``t`` (3, N) and real values ``c`` (K, N)."""
        xp = self.xp
        c = xp.ascontiguousarray(c, dtype=xp.float64)
        grids = self.spread(t, c)
        out = xp.empty((c.shape[0],) + self.shape, dtype=xp.complex128)
        d0, d1, d2 = self._deconv
        for k in range(c.shape[0]):
            spectrum = xp.fft.rfftn(grids[k])
            out[k] = self._cube(spectrum) * d0 * d1 * d2
            del spectrum
        return out

    def _cube(self, spectrum):
        """The half cube of a real FFT's half spectrum (n, n, n/2 + 1)."""
        xp, m, n = self.xp, self.m_max, self.n
        rows = xp.concatenate([spectrum[:m + 1], spectrum[n - m:]], axis=0)
        return xp.concatenate([rows[:, :m + 1, :m + 1], rows[:, n - m:, :m + 1]], axis=1)

    def spread(self, t, c):
        """The fine grids b_k(l) = Σ_p c_{k,p} Π_d φ(l_d − t_{p,d}) (K, n, n, n) float64."""
        if self.xp is np:
            return spread_numpy(t, c, self.n, self.w, self.beta)
        return _spread_cuda(t, c, self.n, self.w, self.beta)

    # -- type 2 ------------------------------------------------------------------------
    def type2(self, t, f_hat):
        """f_k(θ_q) = Σ_m f̂_k(m) e^{i m·θ_q} (K, M) float64 at grid coordinates ``t``
        (3, M) of the Hermitian modes ``f_hat`` (K, *shape) complex (the half cube; the
        result is real)."""
        xp, n, m = self.xp, self.n, self.m_max
        k_count = f_hat.shape[0]
        grids = xp.empty((k_count, n, n, n), dtype=xp.float64)
        d0, d1, d2 = self._deconv
        scale = float(n) ** 3                              # irfftn divides by n³
        for k in range(k_count):
            g = f_hat[k] * (d0 * d1 * d2 * scale)
            spectrum = xp.zeros((n, n, n // 2 + 1), dtype=xp.complex128)
            # the half cube's rows (FFT order) → the fine spectrum's: m ≥ 0, then m < 0
            halves = ((slice(0, m + 1), slice(0, m + 1)), (slice(m + 1, None), slice(n - m, n)))
            for a, sa in halves:
                for b, sb in halves:
                    spectrum[sa, sb, :m + 1] = g[a, b]
            del g
            grids[k] = xp.fft.irfftn(spectrum, s=(n, n, n), axes=(0, 1, 2))
            del spectrum
        return self.interpolate(t, grids)

    def interpolate(self, t, grids):
        """f_k(t_q) = Σ_l g_k(l) Π_d φ(l_d − t_{q,d}) (K, M) from ``grids`` (K, n, n, n)."""
        if self.xp is np:
            return interpolate_numpy(t, grids, self.n, self.w, self.beta)
        return _interpolate_cuda(t, grids, self.n, self.w, self.beta)


# -- the NumPy specification -----------------------------------------------------------
def _stencil(t, n, w, beta, xp):
    """Per axis d: the wrapped grid indices (N, w) int64 and weights (N, w) of the points
    at grid coordinates t (3, N)."""
    j = xp.arange(w)
    out = []
    for d in range(3):
        l0 = xp.ceil(t[d] - 0.5 * w)
        x = (l0[:, None] + j) - t[d][:, None]
        out.append((xp.remainder(l0.astype(xp.int64)[:, None] + j, n),
                    es_kernel(x, w, beta, xp)))
    return out


def _stencil_chunks(t, n, w, beta):
    """Chunks of the points at grid coordinates t (3, N) (NumPy): (slice of the points,
    their w³ flat grid indices (k, w, w, w) int64, their weights (k, w, w, w))."""
    step = max(1, _CHUNK_TERMS // w ** 3)
    for lo in range(0, t.shape[1], step):
        sl = slice(lo, lo + step)
        (i0, f0), (i1, f1), (i2, f2) = _stencil(t[:, sl], n, w, beta, np)
        idx = (i0[:, :, None, None] * n + i1[:, None, :, None]) * n + i2[:, None, None, :]
        yield sl, idx, f0[:, :, None, None] * f1[:, None, :, None] * f2[:, None, None, :]


def spread_numpy(t, c, n, w, beta):
    """The type-1 spread on NumPy: (K, n, n, n) float64 (see :class:`PeriodicNufft`).
    Each element adds its w³ stencil, the elements in input order (``numpy.bincount``
    sums sequentially): deterministic."""
    c = np.atleast_2d(np.asarray(c, dtype=np.float64))
    k_count = c.shape[0]
    grids = np.zeros((k_count, n ** 3))
    for sl, idx, f in _stencil_chunks(t, n, w, beta):
        for k in range(k_count):
            grids[k] += np.bincount(idx.ravel(), (c[k, sl, None, None, None] * f).ravel(),
                                    minlength=n ** 3)
    return grids.reshape(k_count, n, n, n)


def interpolate_numpy(t, grids, n, w, beta):
    """The type-2 interpolation on NumPy: (K, M) float64 (see :class:`PeriodicNufft`)."""
    k_count = grids.shape[0]
    flat = grids.reshape(k_count, -1)
    out = np.zeros((k_count, t.shape[1]))
    for sl, idx, f in _stencil_chunks(t, n, w, beta):
        for k in range(k_count):
            out[k, sl] = (flat[k][idx] * f).sum(axis=(1, 2, 3))
    return out


# -- CUDA --------------------------------------------------------------------------------
def _cell_keys(t, n, xp):
    cell = xp.floor(t).astype(xp.int64)
    cell = xp.minimum(cell, n - 1)              # t < n; guard a rounding to n
    return (cell[0] * n + cell[1]) * n + cell[2]


def _spread_cuda(t, c, n, w, beta):
    """The type-1 spread on CuPy by gathering (``nufft.cu``: ``nufft_spread``)."""
    from .modules import get_function  # noqa: PLC0415
    xp = array_namespace(t, c)
    k_count, count = c.shape
    grids = xp.zeros((k_count, n, n, n), dtype=xp.float64)
    if count == 0:
        return grids
    if count >= 2 ** 31 - 1:
        raise ValueError(f"the GPU NUFFT supports fewer than 2^31 points; got {count}.")
    keys = _cell_keys(t, n, xp)
    order = stable_argsort(keys, xp)
    keys = xp.ascontiguousarray(keys[order])
    t_sorted = xp.ascontiguousarray(t[:, order])
    c_sorted = xp.ascontiguousarray(c[:, order])
    del order
    starts = xp.empty(n ** 3 + 1, dtype=xp.int32)
    block = 256
    get_function(CUDA_FILE, "cell_starts")(
        ((count + 1 + block - 1) // block,), (block,),
        (keys, np.int64(count), np.int64(n ** 3), starts))
    del keys
    tiles = (n + TILE - 1) // TILE
    # three values at once (a vector), else one at a time
    groups = [slice(0, 3)] if k_count == 3 else [slice(k, k + 1) for k in range(k_count)]
    for sl in groups:
        kk = sl.stop - sl.start
        get_function(CUDA_FILE, f"nufft_spread<{kk},{TILE}>")(
            (tiles ** 3,), (TILE ** 3,),
            (t_sorted, xp.ascontiguousarray(c_sorted[sl]), np.int64(count), starts,
             np.int32(n), np.int32(w), np.float64(beta), grids[sl]))
    return grids


def _interpolate_cuda(t, grids, n, w, beta):
    """The type-2 interpolation on CuPy (``nufft.cu``: ``nufft_interpolate``); the
    targets run in cell order (a warp reads nearby grid points), the results return to
    the input order."""
    from .modules import get_function  # noqa: PLC0415
    xp = array_namespace(t, grids)
    k_count, count = grids.shape[0], t.shape[1]
    out = xp.empty((k_count, count), dtype=xp.float64)
    if count == 0:
        return out
    order = stable_argsort(_cell_keys(t, n, xp), xp)
    t_sorted = xp.ascontiguousarray(t[:, order])
    block = 128
    groups = [slice(0, 3)] if k_count == 3 else [slice(k, k + 1) for k in range(k_count)]
    for sl in groups:
        kk = sl.stop - sl.start
        res = xp.empty((kk, count), dtype=xp.float64)
        get_function(CUDA_FILE, f"nufft_interpolate<{kk}>")(
            ((count + block - 1) // block,), (block,),
            (t_sorted, np.int64(count), xp.ascontiguousarray(grids[sl]), np.int32(n),
             np.int32(w), np.float64(beta), res))
        out[sl, order] = res
    return out
