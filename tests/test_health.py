"""The numerical-health measures of a diagnostics row on configurations whose values are
known: lattices, rings at a known station spacing, known escaped strength, exact energy
balances, and a run whose rows carry them."""
import logging
import math

import numpy as np
import pytest

import vortexsim
from vortexsim.cases.rings import vortex_ring
from vortexsim.diagnostics.health import (LIMITS, SPACING_CAP, HealthLog, energy_error,
                                          line_spacing, ring_escaped)


def _lattice(n, h):
    g = np.arange(n) * h
    return np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)


@pytest.mark.parametrize("overlap", [0.8, 1.0, 2.0])
def test_lattice_spacing_is_one_over_overlap_for_any_direction(overlap):
    h = 0.1
    x = _lattice(6, h)
    alpha = np.random.default_rng(1).normal(size=x.shape)
    assert line_spacing(x, alpha, overlap * h) == pytest.approx(1 / overlap, rel=1e-12)


def test_ring_spacing_is_the_chord_between_stations_and_grows_with_stretching():
    n_phi, radius = 40, 1.0
    x, alpha, sigma = vortex_ring(radius=radius, core=0.0, n_phi=n_phi)
    chord = 2 * radius * math.sin(math.pi / n_phi)
    assert line_spacing(x, alpha, sigma) == pytest.approx(chord / sigma[0], rel=1e-12)
    stretched = x * np.array([1.7, 1.7, 1.0])   # the same stations on a ring of 1.7 R
    assert line_spacing(stretched, alpha, sigma) == pytest.approx(1.7 * chord / sigma[0],
                                                                  rel=1e-12)


def test_layers_beside_an_element_do_not_hide_the_spacing_along_the_line():
    # a thick core whose layers sit at 0.3 sigma across the line, stations 1.2 sigma apart
    n_phi, radius = 64, 1.0
    chord = 2 * radius * math.sin(math.pi / n_phi)
    sigma = chord / 1.2
    x, alpha, s = vortex_ring(radius=radius, core=0.3 * sigma, layers=3, n_phi=n_phi,
                              sigma=sigma, layer_spacing=1.0)
    value = line_spacing(x, alpha, s)
    # the outermost layer's stations are farthest apart: (R + 2 layers) / R times the chord
    assert 1.2 <= value <= 1.2 * (radius + 2 * 0.3 * sigma) / radius + 1e-12


def test_an_isolated_element_is_reported_at_the_cap_and_weak_ones_do_not_count():
    x, alpha, sigma = vortex_ring(core=0.0, n_phi=48)
    lone = np.array([[0.0, 0.0, 5.0]])
    strong = line_spacing(np.vstack([x, lone]), np.vstack([alpha, alpha[:1]]),
                          np.r_[sigma, sigma[:1]])
    assert strong == SPACING_CAP
    weak = line_spacing(np.vstack([x, lone]), np.vstack([alpha, 1e-3 * alpha[:1]]),
                        np.r_[sigma, sigma[:1]])
    assert weak == pytest.approx(line_spacing(x, alpha, sigma), rel=1e-12)


def test_spacing_does_not_depend_on_the_element_order():
    x, alpha, sigma = vortex_ring(core=0.1, layers=2, n_phi=32)
    perm = np.random.default_rng(3).permutation(len(x))
    assert line_spacing(x[perm], alpha[perm], sigma[perm]) == line_spacing(x, alpha, sigma)


def test_ring_escaped_is_the_strength_share_of_the_elements_moved_away():
    x, alpha, _ = vortex_ring(radius=1.0, core=0.1, layers=2, n_phi=32)
    frame = ([(0.0, 0.0, 0.0)], [(0.0, 0.0, 1.0)], [1.0])
    assert ring_escaped(x, alpha, [(0, len(x))], *frame)[0] == 0.0
    moved = x.copy()
    moved[:20, 2] -= 2.0                       # 20 elements left 2 R behind
    mag = np.linalg.norm(alpha, axis=1)
    expect = mag[:20].sum() / mag.sum()
    got = ring_escaped(moved, alpha, [(0, len(x))], *frame)[0]
    assert got == pytest.approx(expect, rel=1e-12)


def test_energy_error_inviscid_and_viscous_balances():
    t = np.linspace(0.0, 2.0, 11)
    assert np.all(energy_error(t, np.full(11, 3.0), np.ones(11), 0.0) == 0.0)
    e = 3.0 * (1 + 0.02 * t)
    np.testing.assert_allclose(energy_error(t, e, np.ones(11), 0.0), 0.02 * t, rtol=1e-12,
                               atol=1e-15)
    # viscous: Ω₂ linear in t (the trapezoidal rule is exact), E following dE/dt = −ν Ω₂
    nu, enstrophy = 0.01, 5.0 + 2.0 * t
    energy = 3.0 - nu * (5.0 * t + t ** 2)
    np.testing.assert_allclose(energy_error(t, energy, enstrophy, nu), 0.0, atol=1e-15)
    off = energy + np.where(t > 0, 0.03, 0.0)  # 1 % of E(0) gained after t = 0
    np.testing.assert_allclose(energy_error(t, off, enstrophy, nu)[1:], 0.01, rtol=1e-12)


def test_health_log_warns_once_per_measure_with_the_fix(caplog):
    log = HealthLog(0.0)
    rows = []
    with caplog.at_level(logging.WARNING, logger="vortexsim"):
        for i, strain in enumerate([0.2, 0.7, 0.9]):
            rows.append({"t": 0.1 * i, "energy": 1.0, "enstrophy": 1.0,
                         "spacing_max": 1.0 + i, "step_strain": strain,
                         "ring_names": ["a"], "ring_escaped": np.array([0.0])})
            log.update(rows)
    text = [r.getMessage() for r in caplog.records]
    assert sum("overlap lost" in m for m in text) == 1
    assert sum("dt max|grad u|" in m for m in text) == 1
    assert not any("energy" in m for m in text)
    assert any(LIMITS["spacing_max"][2] in m for m in text)
    assert log.worst[("step_strain", None)] == 0.9


def test_a_run_carries_the_measures_on_every_row():
    x, alpha, sigma = vortex_ring(core=0.0, n_phi=48)
    sim = vortexsim.Simulation((x, alpha, sigma), None, dt=0.02, t_end=0.06,
                               integrator="rk4", device="cpu",
                               groups=[{"name": "ring", "start": 0, "stop": len(x),
                                        "circulation": 1.0, "axis": [0, 0, 1]}])
    u, grad = sim.model.velocity(gradient=True)
    frobenius = np.sqrt((grad ** 2).sum(axis=(1, 2))).max()
    row = sim.diagnostics()
    assert row["step_strain"] == pytest.approx(0.02 * frobenius, rel=1e-12)
    assert row["spacing_max"] == pytest.approx(2 * math.sin(math.pi / 48) / sigma[0],
                                               rel=1e-12)
    assert row["ring_escaped"][0] == 0.0
    log = HealthLog(0.0)
    rows = [dict(row)]
    log.update(rows)
    sim.run()
    rows.append(dict(sim.diagnostics()))
    log.update(rows)
    assert rows[-1]["energy_error"] == pytest.approx(rows[-1]["energy"] / rows[0]["energy"]
                                                     - 1, rel=1e-12)
    # a thin ring translating over three RK4 steps keeps its energy
    assert abs(rows[-1]["energy_error"]) < 1e-6


@pytest.mark.gpu
def test_measures_on_the_gpu_equal_the_cpu():
    cp = pytest.importorskip("cupy")
    x, alpha, sigma = vortex_ring(core=0.1, layers=3, n_phi=64)
    x[:30, 2] += 1.5
    cpu = line_spacing(x, alpha, sigma)
    gpu = line_spacing(cp.asarray(x), cp.asarray(alpha), cp.asarray(sigma))
    # the same pairs; a sum of three squares may round differently on the device
    assert gpu == pytest.approx(cpu, rel=1e-14)
    frame = ([(0.0, 0.0, 0.0)], [(0.0, 0.0, 1.0)], [1.0])
    np.testing.assert_allclose(
        ring_escaped(cp.asarray(x), cp.asarray(alpha), [(0, len(x))], *frame),
        ring_escaped(x, alpha, [(0, len(x))], *frame), rtol=1e-13)
