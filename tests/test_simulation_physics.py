"""Issue-4 physics acceptance on the CPU (small N, direct sum): time-step convergence,
Saffman's ring speed, conservation, ring–ground ≡ head-on collision, mirror symmetry,
leapfrogging.  Heavier versions: benchmarks/validation/validate_rings.py."""
import math

import numpy as np
import pytest

import vortexsim
from vortexsim import diagnostics as D
from vortexsim.geometry import mirror
from vortexsim.validation.ring_events import ring_rows

CPU = dict(device="cpu", progress=False)


def saffman_speed(circulation, radius, sigma_eff):
    """U = Γ/(4πR) [ln(8R/(√2 σ_eff)) − 0.558] (physics.md; Saffman 1970, a = √2 σ_eff)."""
    return circulation / (4 * math.pi * radius) * (
        math.log(8 * radius / (math.sqrt(2) * sigma_eff)) - 0.558)


def centre_speed(sim, ring=0, eps=1e-5):
    """dZ/dt of the impulse centre of one ring along its axis, from the state's rates
    (central difference of Z along the exact direction (dx/dt, dα/dt))."""
    g = sim.groups[ring]
    dx, da, _ = sim.rates()
    x, a = sim.elements.x[g.start:g.stop], sim.elements.alpha[g.start:g.stop]
    dx, da = dx[g.start:g.stop], da[g.start:g.stop]
    n_hat, origin = D.ring_frame(x, a, g.circulation, g.axis)

    def z(h):
        return float(D.ring_centre(x + h * dx, a + h * da, n_hat, origin) @ n_hat)
    return (z(eps) - z(-eps)) / (2 * eps)


def _final_state(integrator, n_steps, t_end):
    sim = vortexsim.make_case("single_ring", n_phi=24, layers=2, tracers_per_ring=32,
                              integrator=integrator, dt=t_end / n_steps, **CPU)
    sim.run(t_end=t_end)
    assert sim.t == pytest.approx(t_end, abs=1e-12)
    return np.concatenate([sim.elements.x.ravel(), sim.elements.alpha.ravel(),
                           sim.tracers.x.ravel()])


def test_time_step_convergence_orders():
    """Observed order from the errors at dt and dt/2 against an RK4 run at dt/16 of the
    finest (T = 1: the cores turn by about a radian, so every scheme is in its range)."""
    t_end = 1.0
    ref = _final_state("rk4", 256, t_end)
    orders = {}
    for scheme, n, (lo, hi) in (("euler", 32, (0.8, 1.2)), ("rk2", 16, (1.7, 2.3)),
                                ("rk4", 8, (3.5, 4.5))):
        e1 = np.abs(_final_state(scheme, n, t_end) - ref).max()
        e2 = np.abs(_final_state(scheme, 2 * n, t_end) - ref).max()
        orders[scheme] = math.log2(e1 / e2)
        assert lo <= orders[scheme] <= hi, (scheme, e1, e2, orders)
    print("measured orders", orders)


@pytest.mark.parametrize("sigma_eff", [0.045, 0.065])
def test_saffman_speed_of_a_resolved_gaussian_core(sigma_eff):
    """Impulse-centre speed at t = 0 of a ring with a resolved Gaussian core (4 layers out
    to 3σ_c, element σ = σ_c, stations spaced σ): within 2 % of Saffman's formula with
    σ_eff² = σ_c² + σ².  (The speed averaged over one radius of travel: validate_rings.py.)"""
    core = sigma_eff / math.sqrt(2)
    n_phi = math.ceil(2 * math.pi / core)
    sim = vortexsim.make_case("single_ring", core=core, sigma=core, layers=4, layer_spacing=1.0,
                              n_phi=n_phi, tracers_per_ring=0, **CPU)
    speed = centre_speed(sim)
    expect = saffman_speed(1.0, 1.0, sigma_eff)
    print(f"sigma_eff = {sigma_eff}: U = {speed:.5f}, Saffman {expect:.5f}, "
          f"error {100 * (speed / expect - 1):+.2f} %")
    assert abs(speed / expect - 1) <= 0.02


def test_single_ring_conserves_total_strength_and_impulse():
    """Over one radius of travel (transpose stretching, RK4): Σα to 1e-12 of Σ|α|, P to 1e-4."""
    sim = vortexsim.make_case("single_ring", tracers_per_ring=64, **CPU)
    d0 = sim.diagnostics()
    scale = np.abs(sim.elements.alpha).sum()
    z0 = d0["ring_centre"][0, 2]
    while sim.diagnostics()["ring_centre"][0, 2] - z0 < 1.0:
        sim.run(steps=10)
        assert sim.t < 10, "the ring does not move"
        drift = np.abs(sim.elements.alpha.sum(axis=0) - d0["total_vorticity"]).max() / scale
        assert drift <= 1e-12
    d = sim.diagnostics()
    p_drift = np.linalg.norm(d["linear_impulse"] - d0["linear_impulse"]) / np.linalg.norm(
        d0["linear_impulse"])
    print(f"one radius at t = {sim.t:.2f}: Σα drift {drift:.2e} of Σ|α|, P drift {p_drift:.2e}, "
          f"energy {d0['energy']:.6f} -> {d['energy']:.6f}")
    assert p_drift <= 1e-4


RING = dict(radius=1.0, core=0.1, n_phi=24, layers=2, tracers_per_ring=48, seed=3, dt=0.1, **CPU)


def test_ring_ground_equals_upper_ring_of_head_on_collision():
    """Images: the ring above z = 0 moves exactly as the upper ring of two mirror rings."""
    ground = vortexsim.make_case("ring_ground", height=1.0, **RING)
    pair = vortexsim.make_case("collision", spacing=2.0, **RING)
    n, m = len(ground.elements), len(ground.tracers)
    np.testing.assert_array_equal(pair.elements.x[:n], ground.elements.x)
    np.testing.assert_array_equal(pair.tracers.x[:m], ground.tracers.x)
    worst = 0.0
    for _ in range(10):
        ground.run(steps=5)
        pair.run(steps=5)
        diff = max(np.abs(ground.elements.x - pair.elements.x[:n]).max(),
                   np.abs(ground.elements.alpha - pair.elements.alpha[:n]).max(),
                   np.abs(ground.tracers.x - pair.tracers.x[:m]).max())
        worst = max(worst, diff)
        assert diff <= 1e-8
    print(f"ring_ground vs collision: max difference {worst:.2e} over t = 0..{ground.t:g}")
    # the ring has reached the ground and spread: the comparison covered the interaction
    r = ground.diagnostics()["ring_radius"][0]
    assert r > 1.3 and ground.elements.x[:, 2].min() < 0.35


@pytest.mark.parametrize("method,tol,steps", [("direct", 1e-11, 20), ("fmm", 1e-5, 3)])
def test_head_on_collision_stays_mirror_symmetric(method, tol, steps):
    """Lower ring = mirror image of the upper one, to the summation's accuracy
    (FMM at tol 1e-6: u to 1e-6, ∇u to 1e-5 relative)."""
    ring = {**RING, "tracers_per_ring": 256}
    if method == "fmm":          # thin single-layer cores: a short near field
        ring.update(n_phi=200, layers=1, core=0.0)
    sim = vortexsim.make_case("collision", spacing=2.0, method=method, tol=1e-6, **ring)
    if method == "fmm":          # small leaves, so that the far field carries pairs
        sim.summation.fmm.leaf_size = 16
    n = len(sim.elements) // 2
    sim.run(steps=steps)
    if method == "fmm":
        assert sim.summation.fmm.config.depth >= 2, "the test must exercise the far field"
    xm, am = mirror(sim.elements.x[:n], sim.elements.alpha[:n])
    err_x = np.abs(sim.elements.x[n:] - xm).max()
    err_a = np.abs(sim.elements.alpha[n:] - am).max() / np.abs(am).max()
    print(f"{method}: mirror difference x {err_x:.2e}, alpha {err_a:.2e} (relative)")
    assert err_x <= tol and err_a <= tol


def test_leapfrog_defaults_pass_twice_by_t12():
    """Default leapfrog (Γ = 1, R = 1, spacing 1, σ_c = 0.1): the rings' centres swap order
    at least twice by t = 12 (the CPU default passes at 3.88 and 10.5), with the linear
    impulse conserved to 1e-3."""
    sim = vortexsim.make_case("leapfrog", tracers_per_ring=0, **CPU)
    d0 = sim.diagnostics()
    times, gap = [0.0], [np.diff(d0["ring_centre"][:, 2])[0]]
    while sim.t < 12.0 - 1e-9:
        sim.run(t_end=min(12.0, sim.t + 0.2))
        centres, _ = ring_rows(sim)          # the rows' ring centres, without the energy
        times.append(sim.t)
        gap.append(centres[1, 2] - centres[0, 2])                     # front − rear
    d = sim.diagnostics()
    gap, times = np.array(gap), np.array(times)
    swaps = np.nonzero(np.sign(gap[1:]) != np.sign(gap[:-1]))[0]
    # linear interpolation of the crossing times
    passes = [times[i] - gap[i] * (times[i + 1] - times[i]) / (gap[i + 1] - gap[i]) for i in swaps]
    p_drift = np.linalg.norm(d["linear_impulse"] - d0["linear_impulse"]) / np.linalg.norm(
        d0["linear_impulse"])
    print("leapfrog passes at t =", np.round(passes, 2), f"impulse drift {p_drift:.1e}")
    assert len(passes) >= 2
    assert p_drift <= 1e-3
