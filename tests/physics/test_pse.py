"""Particle strength exchange (vortexsim.physics.pse), kernels of order 2 and 4: the
kernels' moments, a naive all-pairs reference, conservation, the Laplacian of a Gaussian
blob, the heat kernel in free space, a Taylor–Green mode's decay in the periodic box,
and the input checks.

Two exact statements check the constants.  η_ε is the heat kernel at time ε², so the
continuous operator is ν (e^{ε²∇²} − 1)/ε²: on a Gaussian G_s (variance s² per axis) it
gives ν (G_{s'} − G_s)/ε² with s'² = s² + 2ε², and its flow for a time T is the Poisson
mixture Σ_n P(n; νT/ε²) G_{√(s² + 2nε²)}.  On a lattice of spacing h (ε = 0.8 h) the
discrete operator matches the first to ~1e-6 (the cut, tol = 1e-6), the RK4 solution the
second to ~1e-3 (one RK4 step).  Against ν∇²ω and the heat kernel the error is PSE's
O(ε²); observed orders (ε/h fixed): 1.58, 1.76, 1.86, 1.90, 1.94 for the rate at
h = 1/2, 1/3, 1/4, 1/5, 1/6, 1/8 of the blob's width, 1.84 for the heat kernel at
h = 1/3 → 1/4, 1.87 for the Taylor–Green decay rate at n = 16 → 24.  The fourth-order
kernel's continuous operator is ν ((2 + ε²k²) e^{−ε²k²} − 2)/ε² (on G_s:
ν (2 G_{s'} − ε² ∇²G_{s'} − 2 G_s)/ε²); its observed orders: 3.77 for the rate (h = 1/4
→ 1/6), 3.53 for the heat kernel (h = 1/3 → 1/4, pre-asymptotic), 3.80 for the
Taylor–Green decay rate (n = 16 → 24).
"""
import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import gammaincc
from scipy.stats import poisson

from vortexsim.physics.pse import (PSE_TOL, pse_cutoff, pse_kernel, pse_rate, pse_reach)

OVERLAP = 0.8                       # ε / h
C = np.array([0.3, -0.5, 1.0])      # the blob's vorticity direction and amplitude
X0 = np.array([0.1, -0.2, 0.05])    # its centre, off the lattice's symmetry points


def _reference(x, alpha, volume, epsilon, nu, box=None, tol=PSE_TOL, order=2):
    """All pairs at once (N² memory; small N only), minimum image in the box."""
    d = x[:, None, :] - x[None, :, :]
    if box is not None:
        d -= box * np.round(d / box)
    r2 = np.einsum("pqk,pqk->pq", d, d)
    eta = pse_kernel(np.sqrt(r2) / epsilon, order=order) / epsilon ** 3
    eta[r2 >= pse_reach(epsilon, tol, order) ** 2] = 0.0
    v = np.broadcast_to(volume, (len(x),))
    return nu / epsilon ** 2 * (v[:, None] * (eta @ alpha) - alpha * (eta @ v)[:, None])


def _random_elements(rng, n, size):
    x = rng.random((n, 3)) * size
    return x, rng.normal(size=(n, 3)), rng.uniform(0.5, 1.5, n) * 0.01


def _gaussian(x, s2):
    """G(x) = s⁻³ e^{−|x − X0|²/(2 s²)} (its heat flow for a time t: s² → s² + 2νt)."""
    r2 = np.einsum("pk,pk->p", x - X0, x - X0)
    return s2 ** -1.5 * np.exp(-0.5 * r2 / s2)


def _ball_lattice(h, radius):
    """Lattice points of spacing h within ``radius`` of X0."""
    m = int(math.ceil(radius / h)) + 1
    g = np.arange(-m, m + 1) * h
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    return x[np.linalg.norm(x - X0, axis=1) < radius]


# --- the kernel ----------------------------------------------------------------------

def test_kernel_moments_and_cut():
    # ∫ η d³z = 1, ∫ z_i z_j η d³z = 2 δ_ij (radially: ∫ 4πρ² η = 1, ∫ 4πρ² ρ²/3 η = 2)
    m0 = quad(lambda r: 4 * math.pi * r * r * pse_kernel(r), 0, np.inf)[0]
    m2 = quad(lambda r: 4 * math.pi * r ** 4 / 3 * pse_kernel(r), 0, np.inf)[0]
    assert m0 == pytest.approx(1.0, abs=1e-12)
    assert m2 == pytest.approx(2.0, abs=1e-12)
    for tol in (1e-4, 1e-6, 1e-10):
        rho = pse_cutoff(tol)
        lost = quad(lambda r: 4 * math.pi * r ** 4 / 3 * pse_kernel(r), rho, np.inf)[0] / 2
        assert lost == pytest.approx(tol, rel=1e-6)
        assert gammaincc(2.5, rho * rho / 4) == pytest.approx(tol, rel=1e-9)
    assert pse_cutoff(1e-6) == pytest.approx(8.472, abs=1e-3)
    assert pse_reach(0.5, 1e-6) == pytest.approx(0.5 * pse_cutoff(1e-6))


def test_fourth_order_kernel_moments_and_cut():
    """η₄ = (7/2 − ρ²/4) η₂: ∫ η₄ = 2, second moments 2 δ_ij, and the fourth moments
    vanish (isotropic: ∫ ρ⁴ η₄ = 0), so η̂(κ) − η̂(0) = −κ² + O(κ⁶); the cut loses the
    fraction tol of ∫ |z|² |η₄|."""
    def radial(f, a=0.0, b=np.inf):
        # split at √14, where η₄ changes sign
        pts = sorted({a, min(max(math.sqrt(14.0), a), b), b})
        return sum(quad(f, lo, hi, limit=200)[0] for lo, hi in zip(pts[:-1], pts[1:]))

    def eta(r):
        return pse_kernel(r, order=4)
    assert radial(lambda r: 4 * math.pi * r * r * eta(r)) == pytest.approx(2.0, abs=1e-12)
    assert radial(lambda r: 4 * math.pi * r ** 4 / 3 * eta(r)) == pytest.approx(2.0, abs=1e-12)
    assert abs(radial(lambda r: 4 * math.pi * r ** 6 * eta(r))) < 1e-10
    assert radial(lambda r: 4 * math.pi * r ** 8 * eta(r)) != pytest.approx(0.0, abs=1.0)
    assert eta(math.sqrt(14.0)) == pytest.approx(0.0, abs=1e-15)
    total = radial(lambda r: 4 * math.pi * r ** 4 * abs(eta(r)))
    for tol in (1e-4, 1e-6, 1e-10):
        rho = pse_cutoff(tol, order=4)
        lost = radial(lambda r: 4 * math.pi * r ** 4 * abs(eta(r)), rho) / total
        assert lost == pytest.approx(tol, rel=1e-6)
    assert pse_cutoff(1e-6, order=4) == pytest.approx(9.070, abs=1e-3)
    assert pse_reach(0.5, 1e-6, 4) == pytest.approx(0.5 * pse_cutoff(1e-6, 4))
    assert pse_cutoff(1e-6, 2) == pse_cutoff(1e-6)


# --- against the naive sum; conservation -----------------------------------------------

@pytest.mark.parametrize("box,epsilon", [
    (None, 0.15),       # many cells
    (None, 0.5),        # one cell holds all
    (3.0, 0.17),        # two cells per axis: a cell at two images in the stencil
    (3.0, 0.12),        # two cells per axis
    (3.0, 0.09),        # three cells per axis
    (3.0, 0.05),        # seven cells per axis
])
@pytest.mark.parametrize("order", [2, 4])
def test_matches_all_pairs(rng, box, epsilon, order):
    epsilon *= pse_cutoff() / pse_cutoff(order=order)       # the same reach, the same cells
    x, alpha, volume = _random_elements(rng, 500, 3.0)
    got = pse_rate(x, alpha, volume, epsilon, 0.3, box=box, order=order)
    want = _reference(x, alpha, volume, epsilon, 0.3, box, order=order)
    assert got.dtype == np.float64 and got.shape == (500, 3)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())


@pytest.mark.parametrize("box,epsilon,order", [(None, 0.1, 2), (None, 0.02, 2), (3.0, 0.17, 2),
                                               (3.0, 0.06, 2), (None, 0.1, 4), (3.0, 0.15, 4)])
def test_total_strength_conserved(rng, box, epsilon, order):
    x, alpha, volume = _random_elements(rng, 2000, 3.0)
    rate = pse_rate(x, alpha, volume, epsilon, 0.3, box=box, order=order)
    assert np.abs(rate).max() > 0
    np.testing.assert_allclose(rate.sum(axis=0), 0.0, atol=1e-15 * np.abs(rate).sum())


def test_wrapping_translation_and_linearity(rng):
    x, alpha, volume = _random_elements(rng, 400, 3.0)
    base = pse_rate(x, alpha, volume, 0.12, 0.3, box=3.0)
    moved = x + 3.0 * rng.integers(-2, 3, size=x.shape)        # other images of the same box
    np.testing.assert_allclose(pse_rate(moved, alpha, volume, 0.12, 0.3, box=3.0), base,
                               rtol=0, atol=1e-10 * np.abs(base).max())
    shifted = np.mod(x + [1.3, -0.4, 2.9], 3.0)               # the periodic sum is invariant
    np.testing.assert_allclose(pse_rate(shifted, alpha, volume, 0.12, 0.3, box=3.0), base,
                               rtol=0, atol=1e-12 * np.abs(base).max())
    free = pse_rate(x, alpha, volume, 0.12, 0.3)
    np.testing.assert_allclose(pse_rate(x + [1e3, -50.0, 7.0], alpha, volume, 0.12, 0.3),
                               free, rtol=0, atol=1e-9 * np.abs(free).max())
    np.testing.assert_allclose(pse_rate(x, alpha, volume, 0.12, 0.6), 2 * free, rtol=1e-14)
    assert not pse_rate(x, alpha, volume, 0.12, 0.0).any()


def test_distant_groups_do_not_exchange(rng):
    # free space, the cell list keeps only occupied cells: two clusters 1e5 reaches apart
    x, alpha, volume = _random_elements(rng, 300, 1.0)
    far = x + [2e4, 0.0, -1e4]
    both = pse_rate(np.concatenate([x, far]), np.concatenate([alpha, alpha]),
                    np.concatenate([volume, volume]), 0.05, 0.2)
    one = pse_rate(x, alpha, volume, 0.05, 0.2)
    np.testing.assert_allclose(both[:300], one, rtol=0, atol=1e-13 * np.abs(one).max())
    np.testing.assert_allclose(both[300:], one, rtol=0, atol=1e-8 * np.abs(one).max())


# --- the Laplacian of a Gaussian blob ----------------------------------------------------

def test_gaussian_blob_laplacian_second_order():
    """α_p = ω(x_p) h³ of ω = C G_1 on a lattice, ε = 0.8 h: dα/dt / V equals the
    continuous PSE ν (G_{s'} − G_1)/ε² C (s'² = 1 + 2ε²) to the cut's 1e-6, and
    approaches ν∇²ω = ν (|x − X0|² − 3) G_1 C at second order.  The measure is the
    largest error within 2.5 of the centre, where every element has all its partners
    (the lattice extends one reach beyond)."""
    nu, inner, errors = 0.7, 2.5, []
    hs = (0.25, 1.0 / 6.0)
    for h in hs:
        epsilon = OVERLAP * h
        x = _ball_lattice(h, inner + 1.01 * pse_reach(epsilon))
        w = _gaussian(x, 1.0)
        rate = pse_rate(x, w[:, None] * C * h ** 3, h ** 3, epsilon, nu) / h ** 3
        r2 = np.einsum("pk,pk->p", x - X0, x - X0)
        lap = nu * ((r2 - 3.0) * w)[:, None] * C
        smoothed = nu * ((_gaussian(x, 1.0 + 2 * epsilon ** 2) - w) / epsilon ** 2)[:, None] * C
        scale = np.abs(lap).max()
        mask = r2 < inner ** 2
        assert np.abs(rate - smoothed)[mask].max() < 2e-6 * scale
        errors.append(np.abs(rate - lap)[mask].max() / scale)
    order = math.log(errors[0] / errors[1]) / math.log(hs[0] / hs[1])
    assert errors[1] < 0.05                                      # 0.043
    assert order > 1.8, (errors, order)                          # 1.88


def test_gaussian_blob_laplacian_fourth_order():
    """The same with the fourth-order kernel: dα/dt / V equals its continuous operator
    ν (2 G_{s'} − ε² ∇²G_{s'} − 2 G_1)/ε² C (∇²G_s = (|x − X0|²/s⁴ − 3/s²) G_s) to the
    cut's 1e-6, and approaches ν∇²ω at fourth order: the relative error is
    ε⁴k⁴/6 (1 − ε²k²/2 + …) per mode, so the observed order climbs to 4 as εk → 0
    (3.53 from h = 1/3 to 1/4, 3.77 from 1/4 to 1/6)."""
    nu, inner, errors = 0.7, 2.5, []
    hs = (0.25, 1.0 / 6.0)
    for h in hs:
        epsilon = OVERLAP * h
        x = _ball_lattice(h, inner + 1.01 * pse_reach(epsilon, order=4))
        w = _gaussian(x, 1.0)
        rate = pse_rate(x, w[:, None] * C * h ** 3, h ** 3, epsilon, nu, order=4) / h ** 3
        r2 = np.einsum("pk,pk->p", x - X0, x - X0)
        lap = nu * ((r2 - 3.0) * w)[:, None] * C
        s2 = 1.0 + 2 * epsilon ** 2
        g2 = _gaussian(x, s2)
        smoothed = nu * ((2 * g2 - epsilon ** 2 * (r2 / s2 ** 2 - 3 / s2) * g2 - 2 * w)
                         / epsilon ** 2)[:, None] * C
        scale = np.abs(lap).max()
        mask = r2 < inner ** 2
        assert np.abs(rate - smoothed)[mask].max() < 2e-6 * scale
        errors.append(np.abs(rate - lap)[mask].max() / scale)
    order = math.log(errors[0] / errors[1]) / math.log(hs[0] / hs[1])
    assert errors[1] < 2e-3                                      # 1.69e-3 (order 2: 0.043)
    assert order > 3.6, (errors, order)                          # 3.77


# --- free space: the heat kernel -----------------------------------------------------------

def _rk4(rate, a, dt, steps):
    for _ in range(steps):
        k1 = rate(a)
        k2 = rate(a + 0.5 * dt * k1)
        k3 = rate(a + 0.5 * dt * k2)
        k4 = rate(a + dt * k3)
        a = a + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return a


def test_gaussian_blob_follows_heat_kernel():
    """dω/dt = ν∇²ω from ω = C G_1 for νT = 0.1 (one RK4 step of PSE on the lattice
    within 4.5 of the centre): the exact solution is C G_{s} with s² = 1 + 2νT.  The
    error, relative to the largest change of ω, falls at second order in h; the
    solution matches the continuous PSE flow (a Poisson mixture of Gaussians) to 3e-3
    (the RK4 step and the lattice's edge), and Σα is conserved."""
    nu, t_end, errors = 0.5, 0.2, []
    hs = (1.0 / 3.0, 0.25)
    for h in hs:
        epsilon, v = OVERLAP * h, h ** 3
        x = _ball_lattice(h, 4.5)
        a0 = _gaussian(x, 1.0)[:, None] * C * v
        a = _rk4(lambda a: pse_rate(x, a, v, epsilon, nu, tol=1e-4), a0, t_end, 1)
        exact = _gaussian(x, 1.0 + 2 * nu * t_end)[:, None] * C
        change = np.abs(exact - a0 / v).max()
        lam = nu * t_end / epsilon ** 2
        mixture = sum(poisson.pmf(n, lam) * _gaussian(x, 1.0 + 2 * n * epsilon ** 2)
                      for n in range(int(lam + 12 * math.sqrt(lam) + 20)))[:, None] * C
        assert np.abs(a / v - mixture).max() < 3e-3 * change
        np.testing.assert_allclose(a.sum(axis=0), a0.sum(axis=0), rtol=1e-12)
        errors.append(np.abs(a / v - exact).max() / change)
    order = math.log(errors[0] / errors[1]) / math.log(hs[0] / hs[1])
    assert errors[1] < 0.07                                      # 0.065
    assert order > 1.8, (errors, order)                          # 1.84


def test_gaussian_blob_follows_heat_kernel_fourth_order():
    """The fourth-order kernel from ω = C G_1 for νT = 0.05 (one RK4 step; its own error
    is ~1e-5 of the change here, the spatial error ~1e-2): the error against the exact
    C G_s, s² = 1 + 2νT, is 0.006 of the change at h = 1/4 (order 2: 0.065 at twice
    νT) and falls at order 3.5 from h = 1/3 to 1/4 (pre-asymptotic, as the Laplacian's
    3.53 there; 3.77 from 1/4 to 1/6); Σα is conserved."""
    nu, t_end, errors = 0.5, 0.1, []
    hs = (1.0 / 3.0, 0.25)
    for h in hs:
        epsilon, v = OVERLAP * h, h ** 3
        x = _ball_lattice(h, 4.5)
        a0 = _gaussian(x, 1.0)[:, None] * C * v
        a = _rk4(lambda a: pse_rate(x, a, v, epsilon, nu, order=4), a0, t_end, 1)
        exact = _gaussian(x, 1.0 + 2 * nu * t_end)[:, None] * C
        change = np.abs(exact - a0 / v).max()
        np.testing.assert_allclose(a.sum(axis=0), a0.sum(axis=0), rtol=1e-12)
        errors.append(np.abs(a / v - exact).max() / change)
    order = math.log(errors[0] / errors[1]) / math.log(hs[0] / hs[1])
    assert errors[1] < 0.0065                                    # 0.0060
    assert order > 3.4, (errors, order)                          # 3.53


# --- the periodic box: a Taylor–Green mode decays as e^{−3νt} --------------------------------

def _taylor_green(n):
    h = 2 * math.pi / n
    g = (np.arange(n) + 0.25) * h
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    s, c = np.sin(x), np.cos(x)
    w = np.stack([-c[:, 0] * s[:, 1] * s[:, 2], -s[:, 0] * c[:, 1] * s[:, 2],
                  2 * s[:, 0] * s[:, 1] * c[:, 2]], axis=1)
    return x, w * h ** 3, h


@pytest.mark.parametrize("order", [2, 4])
def test_taylor_green_decay_rate_periodic(order):
    """The Taylor–Green vorticity (|k|² = 3) on an n³ lattice of [0, 2π)³ is an exact
    eigenvector of the periodic PSE sum, eigenvalue −λ_h = −(ν/ε²) Σ_r h³ η_ε(r)
    (1 − cos r_x cos r_y cos r_z) over the lattice vectors within the reach: one RK4
    step of dt scales α by R(−λ_h dt) (to round-off).  The decay rate −ln(α(T)/α(0))/T
    is the continuous PSE's to 1e-4, ν(1 − e^{−3ε²})/ε² at order 2 and
    ν(2 − (2 + 3ε²) e^{−3ε²})/ε² at order 4, and approaches e^{−3νt}'s 3ν at that order:
    1 − rate/3ν = 0.063 and 0.0027 at n = 24 (orders 1.87 and 3.80 from n = 16; ε = 0.8 h)."""
    nu, t_end, errors = 0.1, 1.0, []
    ns = (16, 24)
    for n in ns:
        x, a0, h = _taylor_green(n)
        epsilon, box = OVERLAP * h, 2 * math.pi
        a = _rk4(lambda a: pse_rate(x, a, h ** 3, epsilon, nu, box=box, order=order), a0,
                 t_end, 1)
        # the eigenvalue from the lattice vectors within the reach
        reach = pse_reach(epsilon, order=order)
        m = int(reach / h) + 1
        r = np.stack(np.meshgrid(*(np.arange(-m, m + 1) * h,) * 3, indexing="ij"), -1)
        r = r.reshape(-1, 3)
        inside = np.linalg.norm(r, axis=1) < reach
        eta = pse_kernel(np.linalg.norm(r, axis=1) / epsilon, order=order) / epsilon ** 3
        eta *= inside
        lam_h = nu / epsilon ** 2 * np.sum(h ** 3 * eta * (1 - np.prod(np.cos(r), axis=1)))
        z = -lam_h * t_end
        np.testing.assert_allclose(a, (1 + z + z * z / 2 + z ** 3 / 6 + z ** 4 / 24) * a0,
                                   rtol=0, atol=1e-12 * np.abs(a0).max())
        rate = -math.log(np.vdot(a, a0) / np.vdot(a0, a0)) / t_end
        s = 3 * epsilon ** 2
        continuous = (1 - math.exp(-s) if order == 2 else 2 - (2 + s) * math.exp(-s))
        assert rate == pytest.approx(nu * continuous / epsilon ** 2, rel=1e-4)
        errors.append(abs(rate - 3 * nu) / (3 * nu))
    got = math.log(errors[0] / errors[1]) / math.log(ns[1] / ns[0])
    if order == 2:
        assert errors[1] < 0.07                                  # 0.063
        assert got > 1.8, (errors, got)                          # 1.87
    else:
        assert errors[1] < 0.003                                 # 0.0027
        assert got > 3.7, (errors, got)                          # 3.80


# --- bad input -------------------------------------------------------------------------

def _good():
    rng = np.random.default_rng(3)
    return dict(x=rng.random((50, 3)), alpha=rng.normal(size=(50, 3)), volume=1e-3,
                epsilon=0.05, nu=0.1)


@pytest.mark.parametrize("change,error,match", [
    (dict(nu=-0.1), ValueError, "nu must be >= 0"),
    (dict(nu=float("nan")), ValueError, "nu must be finite"),
    (dict(nu=np.ones(3)), TypeError, "nu must be a scalar"),
    (dict(epsilon=0.0), ValueError, "epsilon must be > 0"),
    (dict(epsilon=float("inf")), ValueError, "epsilon must be finite"),
    (dict(x=np.zeros((50, 2))), ValueError, r"x has shape \(50, 2\); expected \(N, 3\)"),
    (dict(x=np.zeros((0, 3))), ValueError, "N >= 1"),
    (dict(x=np.array([["a", "b", "c"]] * 50)), TypeError, "x has dtype"),
    (dict(alpha=np.zeros((49, 3))), ValueError, r"alpha has shape \(49, 3\); expected \(50, 3\)"),
    (dict(volume=np.ones(49)), ValueError, r"volume has shape \(49,\)"),
    (dict(volume=-1.0), ValueError, "volume must be finite and > 0"),
    (dict(volume=np.full(50, np.nan)), ValueError, "volumes not known"),
    (dict(x=np.full((50, 3), np.inf)), ValueError, "x contains NaN or inf"),
    (dict(alpha=np.full((50, 3), np.nan)), ValueError, "alpha contains NaN or inf"),
    (dict(box=0.8), ValueError, "too small for the PSE reach"),
    (dict(box=-1.0), ValueError, "box must be > 0"),
    (dict(tol=0.5), ValueError, "tol must be in"),
    (dict(order=3), ValueError, r"pse_order\) must be one of \(2, 4\)"),
    (dict(order=True), ValueError, "pse_order"),
])
def test_bad_input(change, error, match):
    kw = {**_good(), **change}
    with pytest.raises(error, match=match):
        pse_rate(kw.pop("x"), kw.pop("alpha"), kw.pop("volume"), kw.pop("epsilon"),
                 kw.pop("nu"), **kw)


def test_box_just_large_enough():
    kw = _good()
    reach = pse_reach(kw["epsilon"])
    x = np.mod(kw["x"], 2.0 * reach * (1 + 2e-6))
    pse_rate(x, kw["alpha"], 1e-3, kw["epsilon"], 0.1, box=2.0 * reach * (1 + 2e-6))
    with pytest.raises(ValueError, match="too small"):
        pse_rate(x, kw["alpha"], 1e-3, kw["epsilon"], 0.1, box=2.0 * reach)


# --- the GPU's neighbour table, checked on the host --------------------------------------

@pytest.mark.parametrize("box,epsilon,order", [(None, 0.15, 2), (None, 0.5, 4), (3.0, 0.17, 2),
                                               (3.0, 0.09, 4), (3.0, 0.05, 2)])
def test_gpu_neighbor_table_gathers_every_pair_once(rng, box, epsilon, order):
    """The GPU kernel (cuda/pse.cu) gathers, for each element, the 27 neighbour cells of
    :func:`vortexsim.physics.pse_gpu.neighbor_table` at their image shifts, keeping the
    pairs within the reach.  The same gather in NumPy over that table (built with
    xp = numpy) equals pse_rate: every pair within the reach is met exactly once
    (a box of 2 cells per axis lists a cell at two images, of which one is in reach)."""
    from vortexsim.physics.pse import pse_constant
    from vortexsim.physics.pse_common import cell_grid as _cell_grid
    from vortexsim.physics.pse_gpu import neighbor_table
    x, alpha, volume = _random_elements(rng, 500, 3.0)
    want = pse_rate(x, alpha, volume, epsilon, 0.3, box=box, order=order)
    reach = pse_reach(epsilon, order=order)
    grid = _cell_grid(np.mod(x, box) if box else x, reach, box, np)
    nbr, shift = neighbor_table(grid, np)
    assert nbr.shape == (len(grid.start) - 1, 27) and shift.shape == nbr.shape + (3,)
    av = np.column_stack([alpha[grid.order], volume[grid.order]])
    acc = np.zeros((len(x), 3))
    for c in range(len(grid.start) - 1):
        t = np.arange(grid.start[c], grid.start[c + 1])
        for j in range(27):
            if nbr[c, j] < 0:
                continue
            q = np.arange(grid.start[nbr[c, j]], grid.start[nbr[c, j] + 1])
            d = grid.xs[t][:, None, :] - (grid.xs[q] + shift[c, j])[None, :, :]
            r2 = np.einsum("tqk,tqk->tq", d, d)
            e = -0.25 * r2 / epsilon ** 2
            w = np.exp(e) * ((3.5 + e) if order == 4 else 1.0) * (r2 < reach * reach)
            acc[t] += av[t, 3:] * (w @ av[q, :3]) - av[t, :3] * (w @ av[q, 3:])
    got = np.empty_like(acc)
    got[grid.order] = acc * pse_constant(epsilon, 0.3)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())
