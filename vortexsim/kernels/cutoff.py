r"""Cutoff (smoothing) kernels of the regularized Biot–Savart law.

This module is the specification: the CUDA sources in ``cuda/`` implement the
same formulas and are tested against these.  Conventions (``physics.md``):
with r = x − x_p, r = |r|, ρ = r/σ_p,

    u(x)          = (1/4π) Σ_p q(ρ) α_p × r / r³
    ∂u_a/∂x_b     = (1/4π) Σ_p [ q(ρ)/r³ ε_acb α_c − f(ρ)/r⁵ r_b (α_p × r)_a ]
    f(ρ)          = 3 q(ρ) − ρ q'(ρ)

Summation codes do not evaluate q and f separately; they use the *pair
factors*

    A(r, σ) = q(ρ)/r³   [1/L³]          B(r, σ) = f(ρ)/r⁵   [1/L⁵]

computed in forms that stay accurate (and finite, for the smooth kernels) as
r → 0.  For ``singular`` and ``polynomial``, A and B are unbounded at r = 0; a
pair at exactly r = 0 contributes nothing there (documented convention).

Kernels
-------
=============  ===============================  ===========================
name           q(ρ)                             ζ(ρ)
=============  ===============================  ===========================
singular       1                                point vortex
gaussian       erf(ρ/√2) − √(2/π) ρ e^{−ρ²/2}   (2π)^{−3/2} e^{−ρ²/2}
algebraic      ρ³ (ρ²+1)^{−3/2}                 (3/4π)(ρ²+1)^{−5/2}
winckelmans    ρ³ (ρ²+5/2)(ρ²+1)^{−5/2}         (15/8π)(ρ²+1)^{−7/2}
polynomial     ρ² (ρ ≤ 1), 1 (ρ > 1)            –
gaussian4      q_gaussian + ρ³e^{−ρ²/2}/√(2π)    (2π)^{−3/2} (5/2 − ρ²/2) e^{−ρ²/2}
gaussian6      q_gaussian4 + ρ³(5 − ρ²)e^{−ρ²/2}/(4√(2π))
                                                (2π)^{−3/2} (35 − 14ρ² + ρ⁴)/8 e^{−ρ²/2}
=============  ===============================  ===========================

``gaussian4`` and ``gaussian6`` are the high-order Gaussian kernels of Beale & Majda
(J. Comput. Phys. 58, 1985): ζ_m = Σ_{j<m/2} (−½Δ)^j ζ_gaussian / j!, smoothing error
O(σ^m), Fourier transform e^{−x}(1 + x) and e^{−x}(1 + x + x²/2) with x = |k|²σ²/2
(:func:`gaussian_blob_transform`).  Only the periodic spectral sum evaluates them
(:data:`SPECTRAL_ONLY_KERNELS`, :func:`check_general_kernel`); q, f, ζ and the pair
factors here are the host reference.

References: Winckelmans & Leonard, J. Comput. Phys. 109 (1993);
Hu, Gumerov & Duraiswami (shared/papers) for the ``polynomial`` cutoff.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from .._names import did_you_mean
from ..backend.device import array_namespace

__all__ = ["CutoffKernel", "KERNELS", "get_kernel", "stretching", "erf", "GAUSSIAN_ORDERS",
           "SPECTRAL_ONLY_KERNELS", "GAUSSIAN_ZETA0_RATIO", "check_general_kernel",
           "gaussian_blob_transform",
           "gaussian_reduced_factors", "gaussian_table", "gaussian_table_eval",
           "stream_factor", "blob_pair_factors"]

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

#: ρ² below which the Gaussian kernel is evaluated by its Taylor series
#: (avoids the cancellation of erf(ρ/√2) − √(2/π) ρ e^{−ρ²/2} ~ ρ³).
GAUSSIAN_SERIES_S = 1.0
#: number of series terms: the truncation error is < 1e-18 for ρ² < 1
GAUSSIAN_SERIES_TERMS = 17


def erf(z, xp):
    """Error function for NumPy (``scipy.special``) or CuPy (``cupyx.scipy.special``)."""
    if xp is np:
        from scipy.special import erf as _erf  # noqa: PLC0415
    else:
        from cupyx.scipy.special import erf as _erf  # noqa: PLC0415
    return _erf(z)


def _gaussian_series_coefficients(n_terms=GAUSSIAN_SERIES_TERMS):
    """Taylor coefficients in s = ρ² of q/ρ³ and f/ρ⁵ (without the √(2/π) factor).

    q/ρ³ = √(2/π) Σ_k c_k s^k,           c_k = (−1)^k / (2^k k! (2k+3))
    f/ρ⁵ = √(2/π) Σ_k (−2(k+1)) c_{k+1} s^k
    """
    c = [(-1) ** k / (2.0 ** k * math.factorial(k) * (2 * k + 3)) for k in range(n_terms + 1)]
    cq = c[:n_terms]
    cf = [-2.0 * (k + 1) * c[k + 1] for k in range(n_terms)]
    return tuple(cq), tuple(cf)


GAUSSIAN_Q_SERIES, GAUSSIAN_F_SERIES = _gaussian_series_coefficients()


def _horner(coeffs, s):
    acc = coeffs[-1] + 0.0 * s
    for c in coeffs[-2::-1]:
        acc = acc * s + c
    return acc


# --- q(ρ) and f(ρ) --------------------------------------------------------

def _q_singular(rho, xp):
    return xp.ones_like(rho)


def _f_singular(rho, xp):
    return 3.0 * xp.ones_like(rho)


def _q_gaussian(rho, xp):
    rho = xp.asarray(rho)
    s = rho * rho
    closed = erf(rho / math.sqrt(2.0), xp) - SQRT_2_OVER_PI * rho * xp.exp(-0.5 * s)
    series = SQRT_2_OVER_PI * rho * s * _horner(GAUSSIAN_Q_SERIES, s)
    return xp.where(s < GAUSSIAN_SERIES_S, series, closed)


def _f_gaussian(rho, xp):
    rho = xp.asarray(rho)
    s = rho * rho
    closed = 3.0 * _q_gaussian(rho, xp) - SQRT_2_OVER_PI * rho * s * xp.exp(-0.5 * s)
    series = SQRT_2_OVER_PI * rho * s * s * _horner(GAUSSIAN_F_SERIES, s)
    return xp.where(s < GAUSSIAN_SERIES_S, series, closed)


def _q_algebraic(rho, xp):
    s = rho * rho
    return rho * s * (s + 1.0) ** -1.5


def _f_algebraic(rho, xp):
    s = rho * rho
    return 3.0 * rho * s * s * (s + 1.0) ** -2.5


def _q_winckelmans(rho, xp):
    s = rho * rho
    return rho * s * (s + 2.5) * (s + 1.0) ** -2.5


def _f_winckelmans(rho, xp):
    s = rho * rho
    return rho * s * s * (3.0 * s + 10.5) * (s + 1.0) ** -3.5


def _q_polynomial(rho, xp):
    return xp.where(rho <= 1.0, rho * rho, 1.0 + 0.0 * rho)


def _f_polynomial(rho, xp):
    return xp.where(rho <= 1.0, rho * rho, 3.0 + 0.0 * rho)


# --- the high-order Gaussians (Beale & Majda): ζ = Σ_j (−½Δ)^j/j! of the Gaussian -----
#: order of the smoothing error of each Gaussian kernel: ζ_m = Σ_{j<m/2} (−½Δ_ρ)^j ζ_2 / j!,
#: whose Fourier transform is e^{−x} Σ_{j<m/2} x^j/j!, x = |k|²σ²/2
#: (:func:`gaussian_blob_transform`)
GAUSSIAN_ORDERS = {"gaussian": 2, "gaussian4": 4, "gaussian6": 6}
#: kernels that only the periodic spectral sum evaluates (their CUDA and FMM code is not built)
SPECTRAL_ONLY_KERNELS = ("gaussian4", "gaussian6")
# q_m = q_2 + ρ³ e^{−ρ²/2} Pq(ρ²)/√(2π), f_m = f_2 + ρ⁵ e^{−ρ²/2} Pf(ρ²)/√(2π),
# ζ_m = (2π)^{−3/2} e^{−ρ²/2} Pζ(ρ²): the polynomials (coefficients of s⁰, s¹, s²)
_HIGH_ORDER = {4: ((1.0,), (1.0,), (2.5, -0.5)),
               6: ((2.25, -0.25), (2.75, -0.25), (35.0 / 8.0, -14.0 / 8.0, 1.0 / 8.0))}
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
#: ζ_m(0)/ζ_gaussian(0) of each order (the constant terms of Pζ: 5/2 and 35/8): the blob's
#: own gradient at its centre scales with it (:func:`vortexsim.summation.spectral.self_gradient`)
GAUSSIAN_ZETA0_RATIO = {2: 1.0, **{m: p[2][0] for m, p in _HIGH_ORDER.items()}}


def gaussian_blob_transform(x, order, xp=np):
    """The Fourier transform ζ̂(k) = e^{−x} Σ_{j<order/2} x^j/j! of the Gaussian kernel of
    ``order`` 2, 4 or 6 at x = |k|²σ²/2 (1 at k = 0; the series of the periodic sum)."""
    x = xp.asarray(x)
    total, term = 1.0 + 0.0 * x, 1.0 + 0.0 * x
    for j in range(1, order // 2):
        term = term * x / j
        total = total + term
    return xp.exp(-x) * total


def _high_order(order):
    pq, pf, pz = _HIGH_ORDER[order]

    def q(rho, xp):
        s = rho * rho
        return _q_gaussian(rho, xp) + _INV_SQRT_2PI * rho * s * xp.exp(-0.5 * s) \
            * _horner(pq, s)

    def f(rho, xp):
        s = rho * rho
        return _f_gaussian(rho, xp) + _INV_SQRT_2PI * rho * s * s * xp.exp(-0.5 * s) \
            * _horner(pf, s)

    def zeta(rho, xp):
        s = rho * rho
        return (2.0 * math.pi) ** -1.5 * xp.exp(-0.5 * s) * _horner(pz, s)

    def factors(r2, sigma, xp):
        a, b = _factors_gaussian(r2, sigma, xp)
        inv_sigma = 1.0 / sigma
        s = r2 * inv_sigma * inv_sigma
        e = _INV_SQRT_2PI * xp.exp(-0.5 * s) * inv_sigma ** 3
        return a + e * _horner(pq, s), b + e * inv_sigma * inv_sigma * _horner(pf, s)

    return q, f, zeta, factors


# --- ζ(ρ) ------------------------------------------------------------------

def _zeta_gaussian(rho, xp):
    return (2.0 * math.pi) ** -1.5 * xp.exp(-0.5 * rho * rho)


def _zeta_algebraic(rho, xp):
    return 3.0 / (4.0 * math.pi) * (rho * rho + 1.0) ** -2.5


def _zeta_winckelmans(rho, xp):
    return 15.0 / (8.0 * math.pi) * (rho * rho + 1.0) ** -3.5


# --- pair factors A = q/r³, B = f/r⁵ --------------------------------------

def _safe_inverse_r(r2, xp):
    """1/r with 1/0 := 0 (the r = 0 convention of the singular kernels)."""
    zero = r2 == 0
    inv_r = 1.0 / xp.sqrt(xp.where(zero, 1.0, r2))
    return xp.where(zero, 0.0, inv_r)


def _factors_singular(r2, sigma, xp):
    inv_r = _safe_inverse_r(r2, xp)
    a = inv_r * inv_r * inv_r
    return a, 3.0 * a * inv_r * inv_r


def gaussian_reduced_factors(s, xp):
    """q/ρ³ and f/ρ⁵ of the Gaussian kernel as functions of s = ρ² ≥ 0 (finite at 0).

    Series for s < GAUSSIAN_SERIES_S, closed form beyond.  A = (q/ρ³)/σ³ and
    B = (f/ρ⁵)/σ⁵.
    """
    s = xp.asarray(s)
    if xp is np:
        # NumPy: the series only on the (few) small arguments; its 34 array passes over
        # every pair were 80 % of a near-field block.  Same values per element.
        small = np.nonzero(s.reshape(-1) < GAUSSIAN_SERIES_S)[0]
        a, b = _gaussian_reduced_branch(np.where(s < GAUSSIAN_SERIES_S, 1.0, s).astype(
            s.dtype, copy=False), False, np)
        a, b = np.asarray(a), np.asarray(b)
        if small.size:
            a_s, b_s = _gaussian_reduced_branch(s.reshape(-1)[small], True, np)
            a.reshape(-1)[small], b.reshape(-1)[small] = a_s, b_s
        return a, b
    return _gaussian_reduced_where(s, xp)


def _gaussian_reduced_where(s, xp):
    """:func:`gaussian_reduced_factors` on every element by both branches and a select
    (array code without data-dependent shapes: the CuPy path, free of host syncs)."""
    # up to ρ = 1 the series avoids the cancellation of f = 3q − √(2/π)ρ³e
    # (relative error 5e-14 in double, 4e-5 in float32 at ρ = 0.5 otherwise)
    small = s < GAUSSIAN_SERIES_S
    a_series, b_series = _gaussian_reduced_branch(s, True, xp)
    a, b = _gaussian_reduced_branch(xp.where(small, 1.0, s), False, xp)
    return xp.where(small, a_series, a), xp.where(small, b_series, b)


def _gaussian_reduced_branch(s, series, xp):
    """q/ρ³, f/ρ⁵ by the series (all s < GAUSSIAN_SERIES_S) or the closed form (all
    s ≥ it): the two branches of :func:`gaussian_reduced_factors`, same arithmetic."""
    if series:
        return (SQRT_2_OVER_PI * _horner(GAUSSIAN_Q_SERIES, s),
                SQRT_2_OVER_PI * _horner(GAUSSIAN_F_SERIES, s))
    rho = xp.sqrt(s)
    e = xp.exp(-0.5 * s)
    q = erf(rho * (1.0 / math.sqrt(2.0)), xp) - SQRT_2_OVER_PI * rho * e
    f = 3.0 * q - SQRT_2_OVER_PI * rho * s * e
    inv_rho2 = 1.0 / s
    inv_rho3 = inv_rho2 / rho
    return q * inv_rho3, f * inv_rho3 * inv_rho2


def _factors_gaussian(r2, sigma, xp):
    inv_sigma = 1.0 / sigma
    inv_s2 = inv_sigma * inv_sigma
    fa, fb = gaussian_reduced_factors(r2 * inv_s2, xp)
    inv_s3 = inv_s2 * inv_sigma
    return fa * inv_s3, fb * inv_s3 * inv_s2


#: Piecewise polynomial table of the Gaussian pair factors used by the CUDA
#: kernels in double precision: intervals of s = ρ² on [0, GAUSS_TABLE_SMAX).
GAUSS_TABLE_SMAX = 81.0
GAUSS_TABLE_INTERVALS = 64          # 64 × degree 9: as accurate as 32 × 12, 23% fewer
GAUSS_TABLE_DEGREE = 9              # coefficient reads per pair (the near field's limit)


def gaussian_table():
    """Coefficients (NI, DEG + 1, 2) of q/ρ³ and f/ρ⁵ on each interval of s.

    Interval k covers s ∈ [k h, (k+1) h), h = SMAX/NI; with t = 2 s/h − (2k + 1)
    ∈ [−1, 1], q/ρ³ ≈ Σ_j c[k, j, 0] t^j and f/ρ⁵ ≈ Σ_j c[k, j, 1] t^j
    (Chebyshev interpolation of :func:`gaussian_reduced_factors`, converted to
    monomials; relative error ≤ 5e-15, checked in tests/kernels/test_cutoff.py).
    Beyond SMAX (ρ > 9), 1 − q < 2e-17 and the kernels use q = 1, f = 3.
    """
    return _chebyshev_table((lambda s: gaussian_reduced_factors(s, np)[0],
                             lambda s: gaussian_reduced_factors(s, np)[1]))


def _chebyshev_table(functions):
    """Coefficients (NI, DEG + 1, len(functions)) of the functions of s on the
    GAUSS_TABLE_INTERVALS intervals of [0, GAUSS_TABLE_SMAX), degree GAUSS_TABLE_DEGREE in
    t (Chebyshev interpolation at DEG + 1 nodes, converted to monomials)."""
    from numpy.polynomial import chebyshev  # noqa: PLC0415
    ni, deg = GAUSS_TABLE_INTERVALS, GAUSS_TABLE_DEGREE
    h = GAUSS_TABLE_SMAX / ni
    nodes = np.cos(np.pi * (np.arange(deg + 1) + 0.5) / (deg + 1))
    table = np.zeros((ni, deg + 1, len(functions)))
    for k in range(ni):
        s = h * (k + 0.5 * (nodes + 1.0))
        for col, func in enumerate(functions):
            mono = chebyshev.cheb2poly(chebyshev.chebfit(nodes, func(s), deg))
            table[k, :len(mono), col] = mono
    return table


def gaussian_field_table():
    """Coefficients (NI, DEG + 1, 2) of the Gaussian blob-pair factors of the fields
    pass (:func:`blob_pair_factors`) as functions of s = ρ² = r²/σ_pq², on the intervals
    of :func:`gaussian_table`: column 0 g(ρ) = erf(ρ/√2)/ρ (e = g/σ_pq), column 1
    (2π)^(−3/2) e^{−s/2} (z = that/σ_pq³).  The CUDA ``p2p_fields`` reads them instead
    of calling erf and exp (relative error ≤ 2e-14 for the reaches in use, s ≤ ρ_f(1e-9)²;
    tests/kernels/test_cutoff.py)."""
    def g(s):
        return stream_factor("gaussian", np.sqrt(s), np)

    def zeta(s):
        return (2.0 * math.pi) ** -1.5 * np.exp(-0.5 * s)

    return _chebyshev_table((g, zeta))


def gaussian_table_eval(s, table=None):
    """Evaluate the table (NumPy, as the CUDA kernel does): (q/ρ³, f/ρ⁵) at s < SMAX."""
    table = gaussian_table() if table is None else table
    ni = table.shape[0]
    k = np.minimum((s * (ni / GAUSS_TABLE_SMAX)).astype(int), ni - 1)
    t = s * (2.0 * ni / GAUSS_TABLE_SMAX) - (2.0 * k + 1.0)
    fa = table[k, -1, 0]
    fb = table[k, -1, 1]
    for j in range(table.shape[1] - 2, -1, -1):
        fa = fa * t + table[k, j, 0]
        fb = fb * t + table[k, j, 1]
    return fa, fb


def _factors_algebraic(r2, sigma, xp):
    t = 1.0 / xp.sqrt(r2 + sigma * sigma)  # (r² + σ²)^(−1/2)
    a = t * t * t
    return a, 3.0 * a * t * t


def _factors_winckelmans(r2, sigma, xp):
    sig2 = sigma * sigma
    t2 = 1.0 / (r2 + sig2)
    t = xp.sqrt(t2)
    t5 = t2 * t2 * t
    a = (r2 + 2.5 * sig2) * t5
    b = (3.0 * r2 + 10.5 * sig2) * t5 * t2
    return a, b


def _factors_polynomial(r2, sigma, xp):
    inv_r = _safe_inverse_r(r2, xp)
    inside = r2 <= sigma * sigma
    inv_s2 = 1.0 / (sigma * sigma)
    a = xp.where(inside, inv_s2 * inv_r, inv_r * inv_r * inv_r)
    b = xp.where(inside, inv_s2 * inv_r * inv_r * inv_r, 3.0 * inv_r ** 5)
    return a, b


@dataclasses.dataclass(frozen=True)
class CutoffKernel:
    """One cutoff kernel of the regularized Biot–Savart law.

    Attributes
    ----------
    name : str
    code : int
        Identifier shared with the CUDA sources (``KERNEL_*`` in ``cuda/p2p.cuh``).
    smooth : bool
        True when q(ρ) = O(ρ³) as ρ → 0 (A and B finite at r = 0).
    q, f, zeta : callables ``(rho, xp) -> array``
        q(ρ), f(ρ) = 3q − ρq', and the smoothing function ζ(ρ) (None where undefined).
    factors : callable ``(r2, sigma, xp) -> (A, B)``
        A = q/r³ [1/L³] and B = f/r⁵ [1/L⁵] from r² [L²] and σ [L] (broadcasting).
    """

    name: str
    code: int
    smooth: bool
    q: Callable
    f: Callable
    zeta: Callable | None
    factors: Callable


KERNELS: dict[str, CutoffKernel] = {
    k.name: k for k in (
        CutoffKernel("singular", 0, False, _q_singular, _f_singular, None, _factors_singular),
        CutoffKernel("gaussian", 1, True, _q_gaussian, _f_gaussian, _zeta_gaussian,
                     _factors_gaussian),
        CutoffKernel("algebraic", 2, True, _q_algebraic, _f_algebraic, _zeta_algebraic,
                     _factors_algebraic),
        CutoffKernel("winckelmans", 3, True, _q_winckelmans, _f_winckelmans,
                     _zeta_winckelmans, _factors_winckelmans),
        CutoffKernel("polynomial", 4, False, _q_polynomial, _f_polynomial, None,
                     _factors_polynomial),
        CutoffKernel("gaussian4", 5, True, *_high_order(4)),
        CutoffKernel("gaussian6", 6, True, *_high_order(6)),
    )
}


def check_general_kernel(kernel, where):
    """Raise ValueError when ``kernel`` (a :class:`CutoffKernel`) is one of
    :data:`SPECTRAL_ONLY_KERNELS` and ``where`` (e.g. "the FMM") would evaluate it."""
    if kernel.name in SPECTRAL_ONLY_KERNELS:
        raise ValueError(f"kernel={kernel.name!r} is evaluated only by the periodic spectral "
                         f"sum (boundary='periodic', method='spectral'), not by {where}; use "
                         "kernel='gaussian' there.")


def get_kernel(kernel) -> CutoffKernel:
    """Look a kernel up by name (or pass a :class:`CutoffKernel` through).

    Raises ``ValueError`` naming the known kernels and the closest match.
    """
    if isinstance(kernel, CutoffKernel):
        return kernel
    if isinstance(kernel, str) and kernel in KERNELS:
        return KERNELS[kernel]
    raise ValueError(f"Unknown kernel {kernel!r}; expected one of {sorted(KERNELS)}."
                     f"{did_you_mean(kernel, KERNELS)}")


# --- pairs of blobs: the energy and enstrophy of the smoothed field ---------------

def stream_factor(kernel, rho, xp=np):
    """g(ρ) = ∫_ρ^∞ q(t)/t² dt of a kernel: G_σ(r) = g(r/σ)/(4πσ) is its regularized
    Green's function (−∇²G_σ = ζ_σ).

    singular 1/ρ (∞ at 0); gaussian erf(ρ/√2)/ρ (series below ρ = 1e-3); algebraic
    (ρ²+1)^(−1/2); winckelmans (ρ² + 3/2)(ρ²+1)^(−3/2); polynomial 2 − ρ (ρ ≤ 1), 1/ρ.
    """
    name = get_kernel(kernel).name
    rho = xp.asarray(rho)
    s = rho * rho
    if name == "gaussian":
        small = rho < 1e-3
        rc = xp.where(small, 1.0, rho)
        series = SQRT_2_OVER_PI * (1.0 - s / 6.0 + s * s / 40.0)
        return xp.where(small, series, erf(rc / math.sqrt(2.0), xp) / rc)
    if name == "algebraic":
        return 1.0 / xp.sqrt(s + 1.0)
    if name == "winckelmans":
        return (s + 1.5) * (s + 1.0) ** -1.5
    with np.errstate(divide="ignore"):
        inv = xp.where(rho > 0, 1.0 / xp.where(rho > 0, rho, 1.0), xp.inf)
    if name == "polynomial":
        return xp.where(rho <= 1.0, 2.0 - rho, inv)
    return inv                                                     # singular


def blob_pair_factors(kernel, r2, s2, xp=np, far_from=None):
    """The energy and enstrophy factors of blob pairs at distance² r2 [L²] whose core
    radii combine to σ_pq² = s2 [L²] (σ_p² + σ_q²: the blobs convolved):

        e = g(r/σ_pq)/σ_pq   [1/L]    (4π × the regularized Green's function G_σpq)
        z = ζ(r/σ_pq)/σ_pq³  [1/L³]   (None for kernels without ζ)

    so that E = (1/8π) Σ_pq (α_p·α_q) e and Ω₂ = Σ_pq (α_p·α_q) z
    (:mod:`vortexsim.diagnostics`).  Non-finite factors (the singular kernels' r = 0)
    are 0.  ``far_from`` (the FMM's near field, Gaussian): pairs with ρ² ≥ it take the
    far field's factors e = 1/r, z = 0.  Arrays broadcast; the CUDA twin is
    ``blob_fields`` in ``cuda/fields.cu``.
    """
    k = get_kernel(kernel)
    s = xp.sqrt(s2)
    rho2 = r2 / s2
    rho = xp.sqrt(rho2)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = stream_factor(k, rho, xp) / s
        if far_from is not None:
            e = xp.where(rho2 >= far_from, 1.0 / xp.sqrt(r2), e)
    e = xp.where(xp.isfinite(e), e, 0.0)
    z = None if k.zeta is None else k.zeta(rho, xp) / (s2 * s)
    if z is not None and far_from is not None:
        z = xp.where(rho2 >= far_from, 0.0, z)
    return e, z


def stretching(alpha, grad_u, scheme="transpose"):
    r"""Vortex-stretching right-hand side dα_p/dt.

    classical:  dα_p/dt = (α_p·∇) u(x_p),  i.e. Σ_b grad_u[p, a, b] α_p,b
    transpose:  dα_p/dt = (∇u(x_p))ᵀ α_p,  i.e. Σ_b grad_u[p, b, a] α_p,b
                (conserves Σ_p α_p exactly in the discrete system)

    Parameters
    ----------
    alpha : array (N, 3) [L³/T]
    grad_u : array (N, 3, 3) [1/T], grad_u[p, a, b] = ∂u_a/∂x_b
    scheme : {"transpose", "classical"}

    Returns
    -------
    array (N, 3) [L³/T²]
    """
    if scheme not in ("classical", "transpose"):
        raise ValueError(f"Unknown stretching scheme {scheme!r}; expected 'transpose' or "
                         "'classical'.")
    xp = array_namespace(alpha, grad_u)
    if xp is not np:                   # one thread per element (cuda/stretching.cuh)
        from .modules import elementwise_kernel  # noqa: PLC0415
        dtype = xp.result_type(alpha, grad_u)
        g = xp.ascontiguousarray(grad_u, dtype=dtype)
        a = xp.ascontiguousarray(alpha, dtype=dtype)
        rate = xp.empty(a.shape, dtype=dtype)
        if a.shape[0]:
            elementwise_kernel("vortexsim_stretching")(
                g, a, np.int32(scheme == "transpose"), rate, size=a.shape[0])
        return rate
    if scheme == "classical":
        return (grad_u * alpha[:, None, :]).sum(axis=2)
    if scheme == "transpose":
        return (grad_u * alpha[:, :, None]).sum(axis=1)
    raise ValueError(f"Unknown stretching scheme {scheme!r}; expected 'transpose' or 'classical'.")
