"""Right-hand side and summation strategy: one call for elements and tracers, self pairs,
stretching, images, FMM strategy, core spreading."""
import math

import numpy as np
import pytest

import vortexsim
from vortexsim.backend import Device
from vortexsim.geometry import FreeSpace, GroundPlane, mirror
from vortexsim.physics import VortexRHS
from vortexsim.summation import make_summation as Summation

CPU = Device("cpu")


def _ring_and_tracers(rng, n_tracers=40):
    x, a, s = vortexsim.cases.vortex_ring(radius=1.0, centre=(0, 0, 1.2), axis=(0.2, 0, 1),
                                          core=0.1, n_phi=24, layers=2)
    y = rng.normal(scale=0.8, size=(n_tracers, 3)) + [0, 0, 1.2]
    return x, a, s, y


def _rhs(boundary=FreeSpace(), method="direct", stretching="transpose", nu=0.0, **kw):
    rhs = VortexRHS(Summation(method, "gaussian", device=CPU, **kw), boundary, stretching, nu)
    return rhs


def _call(rhs, x, a, s, y, t=0.0):
    rhs.begin_step(0.0, s, (s.min(), s.max()))
    return rhs((x, a, y), t)


@pytest.mark.parametrize("stretching", ["transpose", "classical"])
def test_one_call_equals_separate_induced_velocity(rng, stretching):
    x, a, s, y = _ring_and_tracers(rng)
    dx, da, dy = _call(_rhs(stretching=stretching), x, a, s, y)
    u, g = vortexsim.induced_velocity(x, a, s, device="cpu")            # self pairs excluded
    ut, _ = vortexsim.induced_velocity(x, a, s, y, gradient=False, device="cpu")
    np.testing.assert_allclose(dx, u, rtol=0, atol=1e-13 * np.abs(u).max())
    np.testing.assert_allclose(dy, ut, rtol=0, atol=1e-13 * np.abs(u).max())
    expect = vortexsim.stretching(a, g, stretching)
    np.testing.assert_allclose(da, expect, rtol=0, atol=1e-12 * np.abs(expect).max())


def test_transpose_stretching_conserves_total_strength(rng):
    x, a, s, y = _ring_and_tracers(rng)
    a = a + 0.02 * rng.normal(size=a.shape)         # a generic, non-symmetric field
    _, da, _ = _call(_rhs(), x, a, s, y)
    assert np.abs(da.sum(axis=0)).max() <= 1e-13 * np.abs(da).sum()
    _, da_c, _ = _call(_rhs(stretching="classical"), x, a, s, y)
    assert np.abs(da_c.sum(axis=0)).max() > 1e-6 * np.abs(da_c).sum()   # the check can fail


def test_ground_images_equal_explicit_mirror_sources(rng):
    x, a, s, y = _ring_and_tracers(rng)
    y[:, 2] = np.abs(y[:, 2])
    dx, da, dy = _call(_rhs(GroundPlane(0.0)), x, a, s, y)
    xi, ai = mirror(x, a)
    xs, as_, ss = np.concatenate([x, xi]), np.concatenate([a, ai]), np.concatenate([s, s])
    u, g = vortexsim.induced_velocity(xs, as_, ss, np.concatenate([x, y]), device="cpu")
    np.testing.assert_allclose(dx, u[:len(x)], atol=1e-13 * np.abs(u).max(), rtol=0)
    np.testing.assert_allclose(dy, u[len(x):], atol=1e-13 * np.abs(u).max(), rtol=0)
    # the element's own pair is the only one removed (its image stays)
    from vortexsim.kernels.direct import INV_4PI, skew
    a0, _ = vortexsim.get_kernel("gaussian").factors(np.zeros(len(x)), s, np)
    g_el = g[:len(x)] - INV_4PI * skew(a0[:, None] * a)
    np.testing.assert_allclose(da, vortexsim.stretching(a, g_el), atol=1e-12 * np.abs(da).max(),
                               rtol=0)


def test_fmm_strategy_matches_direct(rng):
    x, a, s, y = _ring_and_tracers(rng, 300)
    ref = _call(_rhs(), x, a, s, y)
    rhs = _rhs(method="fmm", tol=1e-6)
    rhs.summation.fmm.leaf_size = 16      # small leaves, so that the far field carries pairs
    lo = np.minimum(x.min(0), y.min(0)) - 0.5
    rhs.begin_step(0.0, s, (s.min(), s.max()), root=(lo, float((np.maximum(x.max(0), y.max(0)) - lo).max() + 0.5)))
    got = rhs((x, a, y), 0.0)
    assert rhs.summation.method == "fmm"
    assert rhs.summation.fmm.config.depth >= 2, "the test must exercise the far field"
    for r, g, tol in zip(ref, got, (1e-6, 1e-5, 1e-6)):
        assert np.linalg.norm(g - r) <= tol * np.linalg.norm(r)


def test_auto_method_resolution():
    assert Summation("auto", device=CPU, n_sources=100, n_targets=100).method == "direct"
    assert Summation("auto", device=CPU, n_sources=10**4, n_targets=10**4).method == "fmm"
    with pytest.raises(ValueError, match="Did you mean 'direct'"):
        Summation("drect", device=CPU)


def test_core_spreading_sigma_at_stage_times():
    rhs = _rhs(nu=0.01)
    s = np.array([0.1, 0.2])
    rhs.begin_step(1.0, s, (0.1, 0.2))
    np.testing.assert_allclose(rhs.sigma_at(1.5), np.sqrt(s ** 2 + 2 * 0.01 * 0.5), rtol=1e-15)
    lo, hi = rhs.sigma_range_at(1.5)
    assert lo == pytest.approx(math.sqrt(0.01 + 0.01)) and hi == pytest.approx(math.sqrt(0.04 + 0.01))


def test_step_core_range_follows_the_viscous_term():
    """After a step, core spreading widens (min σ, max σ) as σ² + 2ν dt; PSE keeps it
    (it exchanges strength, the cores stay)."""
    spread = VortexRHS(Summation(device=CPU), FreeSpace(), nu=0.01)
    assert spread.advance_sigma_range((0.1, 0.2), 0.5) == pytest.approx(
        (math.sqrt(0.01 + 0.01), math.sqrt(0.04 + 0.01)), rel=1e-15)
    for order in (2, 4):
        pse = VortexRHS(Summation(device=CPU), FreeSpace(), nu=0.01, viscous="pse",
                        pse_order=order)
        assert pse.pse_order == order and pse.terms[-1].order == order
        assert pse.advance_sigma_range((0.1, 0.2), 0.5) == (0.1, 0.2)


def test_bad_options():
    with pytest.raises(ValueError, match="pse_order"):
        VortexRHS(Summation(device=CPU), FreeSpace(), nu=0.1, viscous="pse", pse_order=3)
    with pytest.raises(ValueError, match="nu"):
        VortexRHS(Summation(device=CPU), FreeSpace(), nu=-1.0)
    with pytest.raises(ValueError, match="Did you mean 'classical'"):
        VortexRHS(Summation(device=CPU), FreeSpace(), stretching="clasical")


def test_pse_above_a_ground_plane_exchanges_with_the_images():
    """PSE by a ground plane is the free-space PSE of the elements and their images, on
    the elements; it keeps Σ α_z (no normal vorticity crosses a free-slip wall) and
    removes tangential vorticity near the wall (the odd extension)."""
    from vortexsim.geometry.boundaries import mirror
    from vortexsim.physics.pse import pse_rate
    from vortexsim.physics.terms import PSE
    rng = np.random.default_rng(4)
    n, h = 40, 0.1
    x = rng.random((n, 3)) * [1.0, 1.0, 0.3] + [0.0, 0.0, 0.5]
    alpha = rng.normal(size=(n, 3)) * h ** 3
    volume = np.full(n, h ** 3)
    term = PSE(0.01, ground_z=0.5)
    stage = type("Stage", (), dict(x=x, alpha=alpha, volume=volume, lattice=None,
                                   sigma_range=(0.1, 0.1)))()
    rate = term.alpha_rate(stage)
    xi, ai = mirror(x, alpha, 0.5)
    both = pse_rate(np.vstack([x, xi]), np.vstack([alpha, ai]), np.r_[volume, volume],
                    0.1 / np.sqrt(2), 0.01)[:n]
    np.testing.assert_array_equal(rate, both)
    assert abs(rate[:, 2].sum()) < 1e-12 * np.abs(rate[:, 2]).sum()
    free = PSE(0.01).alpha_rate(stage)
    assert abs(free[:, 0].sum()) < 1e-12 * np.abs(free[:, 0]).sum()
    assert abs(rate[:, 0].sum()) > 1e-3 * np.abs(rate[:, 0]).sum()
    VortexRHS(Summation(device=CPU), GroundPlane(), nu=0.1, viscous="pse")   # builds
