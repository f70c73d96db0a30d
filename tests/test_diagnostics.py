"""Integral diagnostics against closed forms on rings and hand-made sets."""
import math

import numpy as np
import pytest

import vortexsim

from vortexsim import diagnostics as D
from vortexsim.cases.rings import vortex_ring


def test_closed_forms_on_two_elements():
    x = np.array([[1.0, 0, 0], [0, 2.0, 0]])
    a = np.array([[0, 1.0, 0], [0, 0, 3.0]])
    np.testing.assert_allclose(D.total_vorticity(a), [0, 1, 3])
    np.testing.assert_allclose(D.linear_impulse(x, a), 0.5 * (np.cross(x[0], a[0]) + np.cross(x[1], a[1])))
    expect = (np.cross(x[0], np.cross(x[0], a[0])) + np.cross(x[1], np.cross(x[1], a[1]))) / 3
    np.testing.assert_allclose(D.angular_impulse(x, a), expect)


def test_ring_centre_and_radius():
    n_hat = np.array([0.0, 0.6, 0.8])
    c = np.array([1.0, -2.0, 0.5])
    x, a, _ = vortex_ring(radius=0.9, circulation=-1.3, centre=c, axis=n_hat, core=0.0,
                          n_phi=200)
    np.testing.assert_allclose(D.ring_centre(x, a, n_hat, c - 3 * n_hat), c, atol=1e-12)
    assert float(D.ring_radius(x, a, -1.3, n_hat)) == pytest.approx(0.9, rel=1e-12)
    # a thick core: the impulse radius is R (1 + O(σ_c²/R²))
    x, a, _ = vortex_ring(radius=1.0, circulation=1.0, core=0.1, layers=3, n_phi=64)
    assert float(D.ring_radius(x, a, 1.0, (0, 0, 1))) == pytest.approx(1.0, rel=0.02)


def test_translation_shifts_impulses_as_expected():
    x, a, _ = vortex_ring(radius=1.0, circulation=1.0, core=0.1, layers=2, n_phi=40)
    shift = np.array([0.3, -0.7, 2.0])
    # Σα = 0 for a closed ring, so P does not depend on the origin
    np.testing.assert_allclose(D.linear_impulse(x + shift, a), D.linear_impulse(x, a), atol=1e-13)
    assert math.isclose(np.linalg.norm(D.total_vorticity(a)), 0.0, abs_tol=1e-13)


# --- energy, enstrophy, helicity (Winckelmans & Leonard 1993 pair sums) -------------------

@pytest.mark.parametrize("kernel", ["gaussian", "algebraic", "winckelmans", "polynomial",
                                    "singular"])
def test_stream_factor_is_the_green_function_of_the_kernel(kernel):
    """−dg/dρ = q(ρ)/ρ² (so that −∇G_σ × α gives the kernel's velocity) and g → 1/ρ."""
    k = vortexsim.get_kernel(kernel)
    rho = np.linspace(0.05, 6.0, 400)
    rho = rho[np.abs(rho - 1.0) > 1e-3]                 # the polynomial kernel's kink
    h = 1e-5
    dg = (D.stream_factor(kernel, rho + h) - D.stream_factor(kernel, rho - h)) / (2 * h)
    np.testing.assert_allclose(-dg, k.q(rho, np) / rho ** 2, rtol=1e-7, atol=1e-9)
    far = np.array([60.0])
    assert D.stream_factor(kernel, far)[0] == pytest.approx(1 / 60.0, rel=2e-3)


def test_gaussian_energy_of_two_blobs_against_monte_carlo():
    """E = (1/8π) Σ_pq α_p·α_q ⟨1/|X_p − X_q|⟩ for independent Gaussian positions."""
    x = np.array([[0.0, 0, 0], [0.15, 0.05, -0.1]])
    a = np.array([[0.3, -0.2, 1.0], [0.5, 0.4, -0.3]])
    s = np.array([0.1, 0.07])
    rng = np.random.default_rng(7)
    mc = 0.0
    for p in range(2):
        for q in range(2):
            z = x[p] - x[q] + rng.normal(size=(1_000_000, 3)) * math.sqrt(s[p] ** 2 + s[q] ** 2)
            mc += a[p] @ a[q] * np.mean(1.0 / np.linalg.norm(z, axis=1))
    mc /= 8 * math.pi
    assert float(D.kinetic_energy(x, a, s, "gaussian")) == pytest.approx(mc, rel=3e-3)


def test_gaussian_enstrophy_of_two_blobs_against_quadrature():
    """Ω₂ = ∫ ω·ω dV with ω = Σ α_p ζ(|x − x_p|/σ_p)/σ_p³ on a grid (trapezoid, exact for
    Gaussians to round-off on a wide grid)."""
    x = np.array([[0.0, 0, 0], [0.15, 0.05, -0.1]])
    a = np.array([[0.3, -0.2, 1.0], [0.5, 0.4, -0.3]])
    s = np.array([0.1, 0.07])
    g = np.linspace(-0.8, 0.8, 97)
    h = g[1] - g[0]
    pts = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    zeta = vortexsim.get_kernel("gaussian").zeta
    w = sum(a[p] * (zeta(np.linalg.norm(pts - x[p], axis=1) / s[p], np) / s[p] ** 3)[:, None]
            for p in range(2))
    quad = (w * w).sum() * h ** 3
    assert float(D.enstrophy(x, a, s, "gaussian")) == pytest.approx(quad, rel=1e-9)
    e, w2 = D.energy_and_enstrophy(x, a, s, "gaussian")
    assert float(w2) == pytest.approx(quad, rel=1e-9)
    assert float(e) == pytest.approx(float(D.kinetic_energy(x, a, s)), rel=1e-14)


def test_blocking_does_not_change_the_sums(rng):
    x, a, s = rng.random((50, 3)), rng.normal(size=(50, 3)), 0.05 + 0.1 * rng.random(50)
    for fn in (D.kinetic_energy, D.enstrophy):
        whole = float(fn(x, a, s, "winckelmans"))
        assert float(fn(x, a, s, "winckelmans", pairs_per_block=7)) == pytest.approx(whole, rel=1e-13)
    assert math.isnan(float(D.enstrophy(x, a, s, "polynomial")))


def test_ground_energy_is_half_the_mirror_system():
    from vortexsim.geometry import GroundPlane, mirror
    x, a, s = vortex_ring(radius=1.0, centre=(0, 0, 0.8), axis=(0.3, 0, -1), core=0.1, n_phi=24,
                          layers=2)
    xi, ai = mirror(x, a)
    full = D.kinetic_energy(np.concatenate([x, xi]), np.concatenate([a, ai]), np.concatenate([s, s]))
    half = D.kinetic_energy(x, a, s, sources=GroundPlane(0.0).sources(x, a, s))
    assert float(half) == pytest.approx(0.5 * float(full), rel=1e-12)


def test_helicity_of_a_ring_vanishes_and_of_a_linked_pair_does_not():
    x, a, s = vortex_ring(radius=1.0, core=0.0, n_phi=64, sigma=0.15)
    u, _ = vortexsim.induced_velocity(x, a, s, device="cpu", gradient=False)
    assert abs(float(D.helicity(a, u))) < 1e-12
    # two linked rings (Hopf link): H = ±2 Γ₁Γ₂ (linking number 1)
    x2, a2, s2 = vortex_ring(radius=1.0, centre=(1.0, 0, 0), axis=(0, 1, 0), core=0.0, n_phi=64,
                             sigma=0.15)
    X, A, S = np.concatenate([x, x2]), np.concatenate([a, a2]), np.concatenate([s, s2])
    u, _ = vortexsim.induced_velocity(X, A, S, device="cpu", gradient=False)
    assert abs(float(D.helicity(A, u))) == pytest.approx(2.0, rel=0.02)


def test_row_sums_equal_the_per_ring_functions():
    """RowSums (moments summed over all rings at once, the centre from them on the host)
    = ring_frame, ring_centre and ring_radius of each ring, and the totals = the
    functions of all elements, to rounding; an element outside the rings is ignored by
    the rings.  The rings sit far from the origin (moments about a ring's own element)."""
    rings = [vortex_ring(radius=0.9, circulation=-1.3, centre=(1.0, -2.0, 0.5),
                         axis=(0.0, 0.6, 0.8), core=0.1, layers=2, n_phi=30),
             vortex_ring(radius=1.2, circulation=0.7, centre=(0.0, 0.3, -1.0),
                         axis=(1.0, 0.0, 0.0), core=0.05, layers=3, n_phi=24)]
    stray = (np.array([[5.0, 5.0, 5.0]]), np.array([[0.0, 1.0, 0.0]]))
    x = np.concatenate([rings[0][0], stray[0], rings[1][0]])
    alpha = np.concatenate([rings[0][1], stray[1], rings[1][1]])
    n0 = len(rings[0][0])
    ranges = [(0, n0), (n0 + 1, len(x))]
    gammas, hints = [-1.3, 0.7], [(0.0, 0.6, 0.8), (1.0, 0.0, 0.0)]
    x = x + np.array([40.0, -25.0, 60.0])
    sums = D.RowSums(ranges, gammas, hints, len(x), np)
    v = sums.finish(sums(x, alpha))
    centre, radius, axis = v["ring_centre"], v["ring_radius"], v["ring_axis"]
    np.testing.assert_allclose(v["total_vorticity"], D.total_vorticity(alpha), atol=1e-14)
    np.testing.assert_allclose(v["linear_impulse"], D.linear_impulse(x, alpha), rtol=1e-13,
                               atol=1e-13)
    np.testing.assert_allclose(v["angular_impulse"], D.angular_impulse(x, alpha), rtol=1e-13,
                               atol=1e-11)
    assert v["field_sums"] == (0.0, 0.0, 0.0) and v["extra"].size == 0
    for i, (a, b) in enumerate(ranges):
        n_hat, origin = D.ring_frame(x[a:b], alpha[a:b], gammas[i], hints[i])
        np.testing.assert_allclose(axis[i], n_hat, atol=1e-14)
        np.testing.assert_allclose(centre[i], D.ring_centre(x[a:b], alpha[a:b], n_hat, origin),
                                   atol=1e-13)
        assert radius[i] == pytest.approx(float(D.ring_radius(x[a:b], alpha[a:b], gammas[i],
                                                              n_hat)), rel=1e-13)
