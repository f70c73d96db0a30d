"""Tests of the cutoff kernels (``vortexsim/kernels/cutoff.py``) against ``physics.md``.

Every expected value here is either an analytic formula from ``physics.md``,
an analytic limit derived from it, or an independent evaluation (mpmath,
``scipy.special.erf``, numerical differentiation).
"""
from __future__ import annotations

import math
import pathlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special

from vortexsim.kernels import cutoff
from vortexsim.kernels.cutoff import KERNELS, CutoffKernel, get_kernel, stretching

EPS = np.finfo(np.float64).eps
KERNEL_NAMES = ("singular", "gaussian", "algebraic", "winckelmans", "polynomial",
                "gaussian4", "gaussian6")
SMOOTH = ("gaussian", "algebraic", "winckelmans", "gaussian4", "gaussian6")
BOUNDED = ("gaussian", "algebraic", "winckelmans", "polynomial")   # 0 ≤ q ≤ 1 kernels
WITH_ZETA = ("gaussian", "algebraic", "winckelmans", "gaussian4", "gaussian6")
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

# lim_{ρ→0} q/ρ³ and lim_{ρ→0} f/ρ⁵ (Taylor expansion of the physics.md formulas):
#   gaussian    q = √(2/π)(ρ³/3 − ρ⁵/10 + …),  f = 3q − ρq' = √(2/π)(ρ⁵/5 + …)
#   algebraic   q = ρ³(1 − 3ρ²/2 + …),         f = 3ρ⁵(ρ²+1)^(−5/2)
#   winckelmans q = ρ³(5/2 − 21ρ²/4 + …),      f = ρ⁵(3ρ² + 21/2)(ρ²+1)^(−7/2)
#   gaussian4/6 ζ = (2π)^(−3/2) e^(−ρ²/2) (P0 + P1 ρ² + …): q = √(2/π)(P0 ρ³/3 +
#               (P1 − P0/2) ρ⁵/5 + …), f = −2 √(2/π)(P1 − P0/2) ρ⁵/5;
#               P0, P1 = 5/2, −1/2 (gaussian4) and 35/8, −14/8 (gaussian6)
Q_OVER_RHO3_AT_0 = {"gaussian": SQRT_2_OVER_PI / 3.0, "algebraic": 1.0, "winckelmans": 2.5,
                    "gaussian4": SQRT_2_OVER_PI * 2.5 / 3.0,
                    "gaussian6": SQRT_2_OVER_PI * 35.0 / 24.0}
Q_OVER_RHO3_SLOPE = {"gaussian": -SQRT_2_OVER_PI / 10.0, "algebraic": -1.5, "winckelmans": -5.25,
                     "gaussian4": -SQRT_2_OVER_PI * 7.0 / 20.0,
                     "gaussian6": -SQRT_2_OVER_PI * 63.0 / 80.0}
F_OVER_RHO5_AT_0 = {"gaussian": SQRT_2_OVER_PI / 5.0, "algebraic": 3.0, "winckelmans": 10.5,
                    "gaussian4": SQRT_2_OVER_PI * 7.0 / 10.0,
                    "gaussian6": SQRT_2_OVER_PI * 63.0 / 40.0}


def d4(fun, x, h):
    """Fourth-order central difference of ``fun`` at ``x`` with step ``h``."""
    return (-fun(x + 2 * h) + 8 * fun(x + h) - 8 * fun(x - h) + fun(x - 2 * h)) / (12 * h)


def q_of(name):
    kern = KERNELS[name]
    return lambda rho: kern.q(np.asarray(rho, dtype=float), np)


def f_of(name):
    kern = KERNELS[name]
    return lambda rho: kern.f(np.asarray(rho, dtype=float), np)


# --- independent references (physics.md table) ----------------------------

def q_reference(name, rho):
    """q(ρ) written from physics.md, for ρ where these forms do not cancel."""
    rho = np.asarray(rho, dtype=float)
    if name == "singular":
        return np.ones_like(rho)
    if name == "gaussian":
        return special.erf(rho / math.sqrt(2.0)) - SQRT_2_OVER_PI * rho * np.exp(-rho**2 / 2)
    if name == "algebraic":
        return rho**3 / (rho**2 + 1.0) ** 1.5
    if name == "winckelmans":
        return rho**3 * (rho**2 + 2.5) / (rho**2 + 1.0) ** 2.5
    if name == "polynomial":
        return np.where(rho <= 1.0, rho**2, 1.0)
    if name in ("gaussian4", "gaussian6"):    # q of ζ_m = Σ_j (−½Δ)^j ζ_2 / j! by hand
        extra = rho**3 * np.exp(-rho**2 / 2) / math.sqrt(2 * math.pi)
        if name == "gaussian6":
            extra = extra * (1.0 + (5.0 - rho**2) / 4.0)
        return q_reference("gaussian", rho) + extra
    raise AssertionError(name)


def mp_gaussian_q(rho, mp):
    r = mp.mpf(rho)
    return mp.erf(r / mp.sqrt(2)) - mp.sqrt(2 / mp.pi) * r * mp.exp(-r * r / 2)


def mp_gaussian_f(rho, mp):
    r = mp.mpf(rho)
    return 3 * mp_gaussian_q(rho, mp) - mp.sqrt(2 / mp.pi) * r**3 * mp.exp(-r * r / 2)


# --- registry -------------------------------------------------------------

def test_registry_names_and_codes():
    assert set(KERNELS) == set(KERNEL_NAMES)
    codes = [k.code for k in KERNELS.values()]
    assert len(set(codes)) == len(codes)
    for name, kern in KERNELS.items():
        assert isinstance(kern, CutoffKernel)
        assert kern.name == name
        assert kern.smooth == (name in SMOOTH)
        assert (kern.zeta is not None) == (name in WITH_ZETA)


def test_kernel_codes_match_cuda_header():
    header = pathlib.Path(cutoff.__file__).with_name("cuda") / "p2p.cuh"
    defines = dict(re.findall(r"#define KERNEL_([A-Z]+) (\d+)", header.read_text()))
    assert {name.upper(): str(k.code) for name, k in KERNELS.items()
            if name not in cutoff.SPECTRAL_ONLY_KERNELS} == defines


def test_get_kernel():
    for name in KERNEL_NAMES:
        assert get_kernel(name) is KERNELS[name]
        assert get_kernel(KERNELS[name]) is KERNELS[name]
    with pytest.raises(ValueError, match=r"Unknown kernel 'gausian'.*Did you mean 'gaussian'\?"):
        get_kernel("gausian")
    with pytest.raises(ValueError, match=r"Unknown kernel 'winkelman'.*Did you mean 'winckelmans'"):
        get_kernel("winkelman")
    with pytest.raises(ValueError, match=r"Unknown kernel 'xyz'; expected one of \["):
        get_kernel("xyz")
    with pytest.raises(ValueError, match="Unknown kernel None"):
        get_kernel(None)


def test_erf_helper_matches_math_erf():
    z = np.linspace(-6.0, 6.0, 241)
    np.testing.assert_allclose(cutoff.erf(z, np), [math.erf(v) for v in z], rtol=2 * EPS, atol=0)


# --- values ---------------------------------------------------------------

@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_q_matches_physics_md_formula(name):
    # ρ ≥ 1: no cancellation in the closed forms, the reference is accurate to a few ulp
    rho = np.concatenate([np.linspace(1.0, 12.0, 111), [20.0, 50.0, 1e3]])
    q = KERNELS[name].q(rho, np)
    np.testing.assert_allclose(q, q_reference(name, rho), rtol=1e-15, atol=0)
    assert q.shape == rho.shape and q.dtype == np.float64


@pytest.mark.parametrize("name", ("algebraic", "winckelmans"))
def test_f_matches_closed_form(name):
    # f = 3q − ρq' with q' computed by hand from the physics.md q (see module docstring)
    rho = np.geomspace(1e-3, 1e3, 121)
    s = rho**2
    if name == "algebraic":
        expected = 3.0 * rho**5 * (s + 1.0) ** -2.5
    else:
        expected = rho**5 * (3.0 * s + 10.5) * (s + 1.0) ** -3.5
    np.testing.assert_allclose(KERNELS[name].f(rho, np), expected, rtol=1e-14, atol=0)


def test_polynomial_and_singular_values():
    rho = np.array([0.0, 0.25, 0.5, 1.0, 1.0 + 1e-12, 2.0, 1e6])
    poly = KERNELS["polynomial"]
    np.testing.assert_array_equal(poly.q(rho, np), [0.0, 0.0625, 0.25, 1.0, 1.0, 1.0, 1.0])
    # f = 3q − ρq' = 3ρ² − 2ρ² = ρ² inside, 3 outside
    np.testing.assert_array_equal(poly.f(rho, np), [0.0, 0.0625, 0.25, 1.0, 3.0, 3.0, 3.0])
    sing = KERNELS["singular"]
    np.testing.assert_array_equal(sing.q(rho, np), np.ones_like(rho))
    np.testing.assert_array_equal(sing.f(rho, np), np.full_like(rho, 3.0))


def test_gaussian_against_mpmath_everywhere():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 100   # the references cancel ~50 digits at ρ = 1e-8
    rho = np.concatenate([np.geomspace(1e-8, 0.49, 40), np.linspace(0.51, 12.0, 60)])
    kern = KERNELS["gaussian"]
    q = kern.q(rho, np)
    f = kern.f(rho, np)
    q_ref = np.array([float(mp_gaussian_q(r, mp)) for r in rho])
    f_ref = np.array([float(mp_gaussian_f(r, mp)) for r in rho])
    series = rho**2 < cutoff.GAUSSIAN_SERIES_S
    # series branch: accurate to a few ulp relative, even where q ~ ρ³ ~ 1e-24
    np.testing.assert_allclose(q[series], q_ref[series], rtol=1e-15, atol=0)
    np.testing.assert_allclose(f[series], f_ref[series], rtol=1e-15, atol=0)
    # closed form: erf(ρ/√2) − √(2/π)ρe^{−ρ²/2} has absolute round-off of a few ulp of 1
    np.testing.assert_allclose(q[~series], q_ref[~series], rtol=0, atol=1e-15)
    np.testing.assert_allclose(f[~series], f_ref[~series], rtol=0, atol=3e-15)
    # and where there is no cancellation (ρ ≥ 2) it is relatively accurate too
    far = rho >= 2.0
    np.testing.assert_allclose(q[far], q_ref[far], rtol=1e-15, atol=0)
    np.testing.assert_allclose(f[far], f_ref[far], rtol=1e-15, atol=0)


def test_gaussian_series_and_closed_form_agree_across_switch():
    sw = cutoff.GAUSSIAN_SERIES_S                 # ρ² where the kernel switches
    s = np.linspace(0.6 * sw, 1.4 * sw, 401)
    rho = np.sqrt(s)
    series_q = SQRT_2_OVER_PI * rho * s * cutoff._horner(cutoff.GAUSSIAN_Q_SERIES, s)
    series_f = SQRT_2_OVER_PI * rho * s * s * cutoff._horner(cutoff.GAUSSIAN_F_SERIES, s)
    closed_q = special.erf(rho / math.sqrt(2.0)) - SQRT_2_OVER_PI * rho * np.exp(-s / 2)
    closed_f = 3.0 * closed_q - SQRT_2_OVER_PI * rho**3 * np.exp(-s / 2)
    np.testing.assert_allclose(series_q, closed_q, rtol=0, atol=1e-15)
    np.testing.assert_allclose(series_f, closed_f, rtol=0, atol=2e-15)
    # the kernel switches between them: continuous to round-off at the switch
    kern = KERNELS["gaussian"]
    rs = math.sqrt(sw)
    below = np.nextafter(rs, 0.0)
    q_lo, q_hi = kern.q(np.array([below, rs]), np)
    f_lo, f_hi = kern.f(np.array([below, rs]), np)
    assert abs(q_hi - q_lo) <= 1e-15
    assert abs(f_hi - f_lo) <= 2e-15
    # pair factors too (A = q/r³, B = f/r⁵ with σ = 1)
    (a_lo, a_hi), (b_lo, b_hi) = kern.factors(np.array([below**2, sw]), 1.0, np)
    assert abs(a_hi - a_lo) <= 1e-15 / rs**3
    assert abs(b_hi - b_lo) <= 2e-15 / rs**5


def test_gaussian_series_coefficients():
    # q/ρ³ = √(2/π) Σ (−1)^k s^k / (2^k k! (2k+3)); truncation below 1e-17 for s < 0.25
    cq, cf = cutoff.GAUSSIAN_Q_SERIES, cutoff.GAUSSIAN_F_SERIES
    assert len(cq) == len(cf) == cutoff.GAUSSIAN_SERIES_TERMS
    for k, c in enumerate(cq):
        assert c == pytest.approx((-1) ** k / (2**k * math.factorial(k) * (2 * k + 3)), rel=1e-15)
    for k, c in enumerate(cf):   # f/ρ⁵: from f = Σ −2k c_k ρ^{2k+3}
        c_next = (-1) ** (k + 1) / (2 ** (k + 1) * math.factorial(k + 1) * (2 * k + 5))
        assert c == pytest.approx(-2 * (k + 1) * c_next, rel=1e-15)
    n = cutoff.GAUSSIAN_SERIES_TERMS
    first_dropped = 0.25**n / (2**n * math.factorial(n) * (2 * n + 3))
    assert first_dropped < 1e-17


# --- limits ---------------------------------------------------------------

@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_far_field_is_singular(name):
    rho = np.array([50.0, 100.0, 1e4])
    q = KERNELS[name].q(rho, np)
    f = KERNELS[name].f(rho, np)
    if name in ("singular", "polynomial"):
        np.testing.assert_array_equal(q, 1.0)
        np.testing.assert_array_equal(f, 3.0)
    elif name in ("gaussian", "gaussian4", "gaussian6"):
        assert np.all(np.abs(1.0 - q) < 1e-15)
        assert np.all(np.abs(3.0 - f) < 1e-15)
        # physics.md: 1 − q < 1e-16 beyond ρ ≈ 9 (the Gaussian; the high-order ones
        # carry ρ⁵ e^{−ρ²/2}-sized tails there)
        q9 = KERNELS[name].q(np.linspace(9.0 if name == "gaussian" else 10.5, 12.0, 31), np)
        assert np.all(np.abs(1.0 - q9) <= (1e-16 if name == "gaussian" else 1e-15))
    else:
        assert np.all((q < 1.0) & (q > 0.99))
        assert np.all((f < 3.0) & (f > 2.99))


@pytest.mark.parametrize(
    "name, power, q_coeffs, f_coeffs",
    [
        # 1 − q = a1/ρ^p + a2/ρ^(p+2) + O(ρ^−(p+4)),  3 − f = b1/ρ^p + b2/ρ^(p+2) + …
        # algebraic:   q = (1+1/ρ²)^(−3/2),            f = 3(1+1/ρ²)^(−5/2)
        ("algebraic", 2, (1.5, -1.875), (7.5, -13.125)),
        # winckelmans: q = (1+5/(2ρ²))(1+1/ρ²)^(−5/2), f = (3+21/(2ρ²))(1+1/ρ²)^(−7/2)
        ("winckelmans", 4, (1.875, -4.375), (13.125, -39.375)),
    ],
)
def test_algebraic_tails(name, power, q_coeffs, f_coeffs):
    rho = np.array([20.0, 30.0, 50.0, 70.0])
    q = KERNELS[name].q(rho, np)
    f = KERNELS[name].f(rho, np)
    for value, (c1, c2) in ((1.0 - q, q_coeffs), (3.0 - f, f_coeffs)):
        scaled = value * rho**power            # → c1 with a c2/ρ² correction
        # next term c3/ρ⁴ (|c3| ≤ 81.2, winckelmans f); round-off of 1 − q is ~ε ρ^power
        bound = 100.0 / rho**4 + 16 * EPS * rho**power
        np.testing.assert_array_less(np.abs(scaled - (c1 + c2 / rho**2)), bound)
    # the physics.md summary values
    if name == "algebraic":
        assert (1.0 - q[2]) * 50.0**2 == pytest.approx(1.5, rel=1e-3)
    else:
        assert (1.0 - q[2]) * 50.0**4 == pytest.approx(1.875, rel=2e-3)


@pytest.mark.parametrize("name", SMOOTH)
def test_q_is_order_rho_cubed_near_zero(name):
    kern = KERNELS[name]
    rho = np.array([1e-1, 1e-2, 1e-3, 1e-5, 1e-8, 1e-12])
    q_over = kern.q(rho, np) / rho**3
    f_over = kern.f(rho, np) / rho**5
    lim_q, slope = Q_OVER_RHO3_AT_0[name], Q_OVER_RHO3_SLOPE[name]
    # q/ρ³ = L + slope ρ² + O(ρ⁴)
    np.testing.assert_array_less(np.abs(q_over - (lim_q + slope * rho**2)),
                                 10 * rho**4 + 8 * EPS * lim_q)
    np.testing.assert_allclose(f_over[2:], F_OVER_RHO5_AT_0[name], rtol=1e-5)
    np.testing.assert_allclose(f_over[3:], F_OVER_RHO5_AT_0[name], rtol=1e-9)
    assert kern.q(np.array([0.0]), np)[0] == 0.0
    assert kern.f(np.array([0.0]), np)[0] == 0.0


@pytest.mark.parametrize("name", ("singular", "polynomial"))
def test_non_smooth_kernels_are_not_order_rho_cubed(name):
    # q/ρ³ unbounded as ρ → 0: these kernels have unbounded A = q/r³ at r = 0
    rho = np.array([1e-2, 1e-4])
    q_over = KERNELS[name].q(rho, np) / rho**3
    assert q_over[1] > 50 * q_over[0]


# --- pair factors ---------------------------------------------------------

@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_factors_consistent_with_q_and_f(name, rng):
    kern = KERNELS[name]
    sigma = rng.uniform(0.05, 3.0, size=400)
    rho = np.concatenate([np.geomspace(1e-6, 1e3, 300), rng.uniform(0.0, 5.0, 100)])
    rho = rho[(rho > 0) & (np.abs(rho - 1.0) > 1e-9)]   # r = 0 handled below; the kink ρ = 1
    sigma = sigma[: rho.size]
    r = rho * sigma
    a, b = kern.factors(r * r, sigma, np)
    # independent ρ from r (and not r²/σ² as inside factors) → allow a few ulp in ρ
    np.testing.assert_allclose(a, kern.q(rho, np) / r**3, rtol=1e-13, atol=0)
    np.testing.assert_allclose(b, kern.f(rho, np) / r**5, rtol=1e-13, atol=0)


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_factors_at_r_zero(name):
    sigma = np.array([0.1, 1.0, 7.0])
    a, b = KERNELS[name].factors(np.zeros(3), sigma, np)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    if name in SMOOTH:
        np.testing.assert_allclose(a, Q_OVER_RHO3_AT_0[name] / sigma**3, rtol=1e-15)
        np.testing.assert_allclose(b, F_OVER_RHO5_AT_0[name] / sigma**5, rtol=1e-15)
    else:   # documented convention: a pair at exactly r = 0 contributes nothing
        np.testing.assert_array_equal(a, 0.0)
        np.testing.assert_array_equal(b, 0.0)


def test_factors_broadcast():
    r2 = np.linspace(0.0, 4.0, 12).reshape(3, 4)
    sigma = np.array([0.3, 0.6, 1.1, 2.0])
    for kern in KERNELS.values():
        a, b = kern.factors(r2, sigma[None, :], np)
        assert a.shape == b.shape == (3, 4)
        a1, b1 = kern.factors(r2[1:2, 2:3], sigma[2], np)
        assert a[1, 2] == a1.item() and b[1, 2] == b1.item()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_factors_float32(name, rng):
    kern = KERNELS[name]
    rho = np.linspace(0.02, 6.0, 600)
    if name == "polynomial":
        rho = rho[np.abs(rho - 1.0) > 1e-3]
    sigma = rng.uniform(0.1, 3.0, size=rho.size).astype(np.float32)
    r2 = (rho * sigma) ** 2
    r2 = r2.astype(np.float32)
    a, b = kern.factors(r2, sigma, np)
    assert a.dtype == b.dtype == np.float32
    # reference: float64 arithmetic on the same (float32-rounded) inputs
    a64, b64 = kern.factors(r2.astype(np.float64), sigma.astype(np.float64), np)
    np.testing.assert_allclose(a, a64, rtol=1e-5, atol=0)   # ~80 ulp of float32
    np.testing.assert_allclose(b, b64, rtol=1e-5, atol=0)


# --- derivative identities ------------------------------------------------

def _rho_grid(name):
    rho = np.geomspace(0.05, 30.0, 200)
    if name == "polynomial":      # q' jumps at ρ = 1
        rho = rho[np.abs(rho - 1.0) > 0.01]
    return rho


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_f_equals_3q_minus_rho_dq(name):
    rho = _rho_grid(name)
    h = 1e-3 * rho
    dq = d4(q_of(name), rho, h)
    f_numeric = 3.0 * KERNELS[name].q(rho, np) - rho * dq
    f = KERNELS[name].f(rho, np)
    # scale of the identity's terms: 3q and ρq'; truncation (h/ρ)⁴ ~ 1e-12, round-off ~ ε/1e-3
    scale = 3.0 * np.abs(KERNELS[name].q(rho, np)) + np.abs(rho * dq)
    np.testing.assert_array_less(np.abs(f_numeric - f), 1e-10 * scale)


@pytest.mark.parametrize("name", WITH_ZETA)
def test_zeta_is_the_derivative_of_q(name):
    kern = KERNELS[name]
    rho = _rho_grid(name)
    lhs = d4(q_of(name), rho, 1e-3 * rho)
    rhs = 4.0 * math.pi * rho**2 * kern.zeta(rho, np)
    scale = np.abs(kern.q(rho, np)) / rho + np.abs(rhs)
    np.testing.assert_array_less(np.abs(lhs - rhs), 1e-10 * scale)
    # exactly, from the kernel's own f: ρ q' = 3q − f
    rho = np.geomspace(1e-4, 20.0, 300)
    q, f = kern.q(rho, np), kern.f(rho, np)
    rhs = 4.0 * math.pi * rho**3 * kern.zeta(rho, np)
    np.testing.assert_array_less(np.abs((3.0 * q - f) - rhs), 1e-14 * (3.0 * q + f) + 1e-300)


@pytest.mark.parametrize("name", WITH_ZETA)
def test_zeta_normalized(name):
    # ∫ ζ d³x = ∫ 4πρ² ζ dρ = q(∞) = 1, and q(ρ) = ∫_0^ρ 4πt²ζ(t) dt
    zeta = KERNELS[name].zeta
    total, err = integrate.quad(lambda t: 4 * math.pi * t * t * zeta(np.float64(t), np),
                                0.0, np.inf, epsabs=1e-14, epsrel=1e-13, limit=200)
    assert total == pytest.approx(1.0, rel=1e-10)
    for r in (0.3, 1.0, 2.5):
        partial, _ = integrate.quad(lambda t: 4 * math.pi * t * t * zeta(np.float64(t), np),
                                    0.0, r, epsabs=1e-15, epsrel=1e-13)
        assert partial == pytest.approx(float(KERNELS[name].q(np.float64(r), np)), rel=1e-11)


# --- stretching -----------------------------------------------------------

def test_stretching_schemes_match_einsum(rng):
    n = 17
    alpha = rng.normal(size=(n, 3))
    grad_u = rng.normal(size=(n, 3, 3))
    classical = stretching(alpha, grad_u, "classical")
    transpose = stretching(alpha, grad_u, "transpose")
    np.testing.assert_allclose(classical, np.einsum("pab,pb->pa", grad_u, alpha), rtol=1e-14,
                               atol=1e-14)
    np.testing.assert_allclose(transpose, np.einsum("pba,pb->pa", grad_u, alpha), rtol=1e-14,
                               atol=1e-14)
    # transpose of grad_u swaps the two schemes
    np.testing.assert_allclose(stretching(alpha, grad_u.transpose(0, 2, 1), "classical"),
                               transpose, rtol=1e-14, atol=1e-14)
    np.testing.assert_array_equal(stretching(alpha, grad_u), transpose)   # default
    # symmetric grad_u: both schemes agree
    sym = grad_u + grad_u.transpose(0, 2, 1)
    np.testing.assert_allclose(stretching(alpha, sym, "classical"),
                               stretching(alpha, sym, "transpose"), rtol=1e-14, atol=1e-14)
    assert classical.shape == transpose.shape == (n, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gpu_stretching_kernel_matches_numpy(rng, dtype):
    """The GPU's stretching (cuda/stretching.cuh, one thread per element) = the NumPy
    specification, both schemes, both precisions, a strided ∇u included."""
    cp = pytest.importorskip("cupy")
    n = 1001
    alpha = rng.normal(size=(n, 3)).astype(dtype)
    grad_u = rng.normal(size=(n, 3, 3)).astype(dtype)
    tol = 1e-14 if dtype == "float64" else 2e-6
    for scheme in ("classical", "transpose"):
        want = stretching(alpha, grad_u, scheme)
        got = stretching(cp.asarray(alpha), cp.asarray(grad_u), scheme)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(cp.asnumpy(got), want, rtol=tol, atol=tol)
    strided = cp.asarray(grad_u).transpose(0, 2, 1)
    np.testing.assert_allclose(
        cp.asnumpy(stretching(cp.asarray(alpha), strided, "classical")),
        stretching(alpha, grad_u, "transpose"), rtol=tol, atol=tol)


def test_subtract_skew_is_minus_the_skew_matrix_in_place(rng):
    """subtract_skew(g, w): g − S(w) (S v = w × v) without a (…, 3, 3) temporary, on a
    view of a larger array too."""
    from vortexsim.kernels.direct import skew, subtract_skew
    g = rng.normal(size=(9, 3, 3))
    w = rng.normal(size=(5, 3))
    want = g.copy()
    want[2:7] -= skew(w)
    out = subtract_skew(g[2:7], w)
    assert np.shares_memory(out, g)
    np.testing.assert_array_equal(g, want)


def test_stretching_unknown_scheme():
    with pytest.raises(ValueError, match="Unknown stretching scheme 'clasical'"):
        stretching(np.zeros((1, 3)), np.zeros((1, 3, 3)), "clasical")


# --- property-based -------------------------------------------------------

rho_values = st.floats(min_value=0.0, max_value=50.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=30, deadline=None)
@given(rho=rho_values, name=st.sampled_from(BOUNDED))
def test_property_q_in_unit_interval(rho, name):
    q = float(KERNELS[name].q(np.float64(rho), np))
    assert 0.0 <= q <= 1.0


@settings(max_examples=30, deadline=None)
@given(r1=rho_values, r2=rho_values, name=st.sampled_from(BOUNDED))
def test_property_q_nondecreasing(r1, r2, name):
    lo, hi = sorted((r1, r2))
    q_lo, q_hi = KERNELS[name].q(np.array([lo, hi]), np)
    assert q_lo <= q_hi


@settings(max_examples=30, deadline=None)
@given(rho=st.floats(min_value=0.05, max_value=30.0), name=st.sampled_from(KERNEL_NAMES))
def test_property_f_identity(rho, name):
    if name == "polynomial" and abs(rho - 1.0) < 0.01:
        rho += 0.05
    rho = np.float64(rho)
    h = 1e-3 * rho
    dq = float(d4(q_of(name), rho, h))
    q = float(KERNELS[name].q(rho, np))
    f = float(KERNELS[name].f(rho, np))
    assert abs(3.0 * q - rho * dq - f) <= 1e-10 * (3.0 * abs(q) + abs(rho * dq))


def test_gaussian_table_matches_specification():
    """The piecewise polynomial table the CUDA double kernel evaluates (cutoff.gaussian_table)."""
    s = np.concatenate([np.linspace(0.0, cutoff.GAUSS_TABLE_SMAX, 20001)[:-1],
                        [cutoff.GAUSSIAN_SERIES_S * (1 - 1e-12), cutoff.GAUSSIAN_SERIES_S,
                         cutoff.GAUSS_TABLE_SMAX * (1 - 1e-15)]])
    fa, fb = cutoff.gaussian_table_eval(s)
    ra, rb = cutoff.gaussian_reduced_factors(s, np)
    # error budget: the spec's closed form is accurate to 4.5e-15 relative just above
    # the series switch (cancellation in f), the table to 2e-15 against exact values
    np.testing.assert_allclose(fa, ra, rtol=1e-14, atol=0)
    np.testing.assert_allclose(fb, rb, rtol=1e-14, atol=0)
    # beyond the table the kernels use q = 1, f = 3: check that this is exact to 2e-17
    rho = np.sqrt(cutoff.GAUSS_TABLE_SMAX)
    assert 1.0 - cutoff.KERNELS["gaussian"].q(np.array(rho), np) < 2e-17
    assert 1.0 - cutoff.KERNELS["gaussian"].f(np.array(rho), np) / 3.0 < 1e-15


def test_gaussian_field_table_matches_specification():
    """The table of the fields pass's Gaussian factors (cutoff.gaussian_field_table,
    read by CUDA p2p_fields): g = erf(ρ/√2)/ρ and (2π)^(−3/2) e^{−s/2} of
    blob_pair_factors' specification, over the whole table (every reach in use lies
    inside it: ρ_f(1e-9)² < GAUSS_TABLE_SMAX)."""
    from vortexsim.fmm.near import gaussian_field_rho
    assert gaussian_field_rho(1e-9) ** 2 < cutoff.GAUSS_TABLE_SMAX
    s = np.concatenate([np.linspace(0.0, cutoff.GAUSS_TABLE_SMAX, 20001)[:-1],
                        [1e-12, 1e-6 * (1 - 1e-12), 1e-6, cutoff.GAUSS_TABLE_SMAX * (1 - 1e-15)]])
    g, zeta = cutoff.gaussian_table_eval(s, cutoff.gaussian_field_table())
    # the specification's factors at σ_pq = 1 (e = g, z = ζ)
    e, z = cutoff.blob_pair_factors("gaussian", s, np.ones_like(s))
    np.testing.assert_allclose(g, e, rtol=1e-14, atol=0)
    np.testing.assert_allclose(zeta, z, rtol=3e-14, atol=0)      # 2.1e-14 at s → 81
    used = s <= gaussian_field_rho(1e-9) ** 2                    # the reaches in use
    np.testing.assert_allclose(zeta[used], z[used], rtol=2e-14, atol=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gaussian_factors_numpy_subset_path_equals_the_select_path(dtype):
    """NumPy evaluates the series only where ρ < 1; the select path (CuPy's) evaluates
    both branches everywhere.  Same values, bitwise, on both sides of the switch."""
    from vortexsim.kernels.cutoff import (GAUSSIAN_SERIES_S, _gaussian_reduced_where,
                                          gaussian_reduced_factors)
    rng = np.random.default_rng(16)
    s = (rng.random((64, 50)) * 7.0) ** 2
    s[0, :5] = [0.0, GAUSSIAN_SERIES_S, np.nextafter(GAUSSIAN_SERIES_S, 0), 1e-300, 900.0]
    s = s.astype(dtype)
    a, b = gaussian_reduced_factors(s, np)
    a_ref, b_ref = _gaussian_reduced_where(s, np)
    assert a.dtype == dtype and a.shape == s.shape
    assert np.array_equal(a, a_ref) and np.array_equal(b, b_ref)
    a0, b0 = gaussian_reduced_factors(dtype(0.25), np)               # 0-d input
    assert np.array_equal(a0, _gaussian_reduced_where(np.asarray(dtype(0.25)), np)[0])


def test_cuda_sources_share_one_generated_header(monkeypatch):
    """The generated header (series and Gaussian tables) is made once per process and
    opens every CUDA module's source: a module's first use inside a run (the diagnostics
    rows' fields pass) does not rebuild the tables (~0.2 s)."""
    from vortexsim.kernels import modules
    modules.generated_header.cache_clear()
    modules.cuda_source.cache_clear()
    built = []
    real = cutoff._chebyshev_table
    monkeypatch.setattr(cutoff, "_chebyshev_table", lambda f: built.append(1) or real(f))
    sources = [modules.cuda_source(name) for name in ("fmm.cu", "fields.cu", "pse.cu")]
    assert len(built) == 2                  # the velocity's and the fields' tables, once
    assert all(src.startswith(modules.generated_header()) for src in sources)
