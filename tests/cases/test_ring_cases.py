"""The ring cases: geometry, tracers, groups, mirror construction, parameters."""
import math

import numpy as np
import pytest

import vortexsim
from vortexsim.cases import case_defaults, ring_tracers
from vortexsim.geometry import mirror

SMALL = dict(n_phi=12, layers=2, tracers_per_ring=30, device="cpu", progress=False)


@pytest.mark.parametrize("name", ["single_ring", "leapfrog", "collision", "oblique_collision",
                                  "ring_ground"])
def test_every_case_builds_and_steps(name):
    sim = vortexsim.make_case(name, **SMALL)
    rings = len(sim.groups)
    assert len(sim.elements) == rings * 12 * 7 and len(sim.tracers) == rings * 30
    assert sim.config["case"] == name and sim.config["t_end"] > 0
    sim.step()
    d = sim.diagnostics()
    assert d["ring_centre"].shape == (rings, 3)
    np.testing.assert_allclose(d["ring_radius"], 1.0, rtol=0.05)


def test_leapfrog_geometry():
    sim = vortexsim.make_case("leapfrog", spacing=1.5, **SMALL)
    d = sim.diagnostics()
    np.testing.assert_allclose(d["ring_centre"][:, 2], [0.0, 1.5], atol=1e-12)
    np.testing.assert_allclose(d["ring_axis"], [[0, 0, 1], [0, 0, 1]], atol=1e-12)
    assert case_defaults("leapfrog")["circulation"] == 1.0 and case_defaults("leapfrog")["core"] == 0.1


def test_collision_is_built_as_exact_mirror_images():
    sim = vortexsim.make_case("collision", spacing=2.4, **SMALL)
    n, m = len(sim.elements) // 2, len(sim.tracers) // 2
    xm, am = mirror(sim.elements.x[:n], sim.elements.alpha[:n])
    np.testing.assert_array_equal(sim.elements.x[n:], xm)
    np.testing.assert_array_equal(sim.elements.alpha[n:], am)
    np.testing.assert_array_equal(sim.tracers.x[m:], sim.tracers.x[:m] * [1, 1, -1])
    d = sim.diagnostics()
    np.testing.assert_allclose(d["ring_centre"][:, 2], [1.2, -1.2], atol=1e-12)
    # they move toward each other
    dx, _, _ = sim.rates()
    assert dx[:n, 2].mean() < 0 < dx[n:, 2].mean()


def test_oblique_rings_are_tilted_toward_each_other():
    sim = vortexsim.make_case("oblique_collision", angle=20.0, separation=2.6, **SMALL)
    d = sim.diagnostics()
    s = math.sin(math.radians(20))
    np.testing.assert_allclose(d["ring_axis"], [[s, 0, math.cos(math.radians(20))],
                                                [-s, 0, math.cos(math.radians(20))]], atol=1e-12)
    np.testing.assert_allclose(d["ring_centre"][:, 0], [-1.3, 1.3], atol=1e-12)


def test_ring_ground_is_above_the_plane_and_moves_down():
    sim = vortexsim.make_case("ring_ground", height=1.2, **SMALL)
    assert sim.config["boundary"] == "ground"
    assert sim.elements.x[:, 2].min() > 0 and sim.tracers.x[:, 2].min() >= 0
    dx, _, _ = sim.rates()
    assert dx[:, 2].mean() < 0


def test_ring_tracers():
    rng = np.random.default_rng(0)
    y = ring_tracers(2000, 2.0, (1, 0, 0), (0, 0, 1), 0.1, rng)
    rad = np.linalg.norm(y[:, :2] - [1, 0], axis=1)
    assert abs(rad.mean() - 2.0) < 0.01 and abs(rad.std() - 0.1) < 0.01
    assert abs(y[:, 2].std() - 0.1) < 0.01
    with pytest.raises(ValueError, match="tracers"):
        ring_tracers(-1, 1.0, (0, 0, 0), (0, 0, 1), 0.1, rng)


def test_case_parameter_errors():
    with pytest.raises(ValueError, match="spacing"):
        vortexsim.make_case("leapfrog", spacing=0.0, **SMALL)
    with pytest.raises(ValueError, match="angle"):
        vortexsim.make_case("oblique_collision", angle=95.0, **SMALL)
    with pytest.raises(ValueError, match="height"):
        vortexsim.make_case("ring_ground", height=-1.0, **SMALL)
