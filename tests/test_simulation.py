"""Simulation API: construction, config round trip, bitwise restart, safety, stop criteria,
adaptive dt, viscosity."""
import json
import math

import numpy as np
import pytest

import vortexsim
from vortexsim import Simulation, SimulationError

SMALL = dict(n_phi=16, layers=2, tracers_per_ring=20, device="cpu", progress=False)


def test_make_case_api():
    sim = vortexsim.make_case("single_ring", **SMALL)
    assert isinstance(sim, Simulation) and sim.t == 0.0 and sim.iteration == 0
    assert sim.elements.x.shape == (16 * 7, 3) and sim.elements.alpha.shape == (16 * 7, 3)
    assert sim.elements.sigma.shape == (16 * 7,) and sim.tracers.x.shape == (20, 3)
    x0 = sim.elements.x.copy()
    sim.step()
    assert sim.iteration == 1 and sim.t == pytest.approx(0.05)
    assert not np.array_equal(sim.elements.x, x0)
    sim.run(steps=2)
    assert sim.iteration == 3
    sim.run(t_end=0.32)                                   # last step shortened to land on t_end
    assert sim.t == pytest.approx(0.32, abs=1e-14) and sim.iteration == 7
    d = sim.diagnostics()
    for key in ("total_vorticity", "linear_impulse", "angular_impulse", "energy", "helicity",
                "enstrophy", "ring_centre", "ring_radius"):
        assert key in d
    assert d["ring_centre"].shape == (1, 3) and d["ring_radius"].shape == (1,)
    assert set(vortexsim.list_cases()) == {"single_ring", "leapfrog", "collision",
                                           "oblique_collision", "ring_ground", "taylor_green",
                                           "isotropic_turbulence"}


def test_unknown_names_suggest_the_closest():
    with pytest.raises(ValueError, match="did you mean 'n_phi'"):
        vortexsim.make_case("single_ring", nphi=10)
    with pytest.raises(ValueError, match="Did you mean 'leapfrog'"):
        vortexsim.make_case("leapfrg")
    with pytest.raises(ValueError, match="Did you mean 'rk4'"):
        vortexsim.make_case("single_ring", integrator="rk5", **SMALL)


def test_no_stop_criterion():
    x, a, s = vortexsim.cases.vortex_ring(n_phi=16, core=0.0)
    sim = Simulation((x, a, s), dt=0.1, device="cpu", progress=False)
    with pytest.raises(ValueError, match="No stopping criterion"):
        sim.run()
    with pytest.raises(ValueError, match="dt must be"):
        Simulation((x, a, s), device="cpu")


def test_config_is_json_and_rebuilds_the_same_simulation():
    sim = vortexsim.make_case("leapfrog", **SMALL)
    cfg = json.loads(json.dumps(sim.config))
    assert cfg["case"] == "leapfrog" and cfg["method"] == "direct" and cfg["device"] == "cpu"
    assert cfg["sigma"] == pytest.approx(2 * math.pi / 16)       # resolved default
    again = vortexsim.from_config(cfg)
    np.testing.assert_array_equal(again.elements.x, sim.elements.x)
    np.testing.assert_array_equal(again.tracers.x, sim.tracers.x)
    assert again.config == sim.config


@pytest.mark.parametrize("adaptive", [False, True])
def test_restart_is_bitwise_identical(adaptive):
    kw = dict(SMALL, adaptive=adaptive, courant=0.05, nu=1e-3)
    a = vortexsim.make_case("leapfrog", **kw)
    a.run(steps=3)
    saved = a.state_dict()
    a.run(steps=3)
    b = vortexsim.from_config(a.config)
    b.load_state_dict(saved)
    b.run(steps=3)
    assert b.t == a.t and b.iteration == a.iteration == 6 and b.dt == a.dt
    for name in ("x", "alpha", "sigma"):
        np.testing.assert_array_equal(getattr(b.elements, name), getattr(a.elements, name))
    np.testing.assert_array_equal(b.tracers.x, a.tracers.x)


def test_adaptive_dt_follows_the_velocity_gradient():
    sim = vortexsim.make_case("single_ring", adaptive=True, courant=0.2, dt=1.0, **SMALL)
    u, g = sim.velocity(gradient=True)
    gmax = np.sqrt((g ** 2).sum(axis=(1, 2))).max()
    assert sim.dt == pytest.approx(0.2 / gmax, rel=1e-12)
    sim.step()
    assert sim.dt < 1.0


def test_core_spreading():
    sim = vortexsim.make_case("single_ring", nu=0.01, **SMALL)
    s0 = sim.elements.sigma.copy()
    sim.run(t_end=0.3)
    np.testing.assert_allclose(sim.elements.sigma, np.sqrt(s0 ** 2 + 2 * 0.01 * 0.3), rtol=1e-14)
    with pytest.raises(ValueError, match="volume"):      # PSE needs the element volumes
        vortexsim.make_case("single_ring", nu=0.01, viscous="pse", **SMALL)


def test_blow_up_stops_with_the_last_good_state():
    sim = vortexsim.make_case("collision", dt=0.05, max_speed=0.3, **SMALL)
    with pytest.raises(SimulationError) as info:
        sim.run(steps=100)
    err = info.value
    assert err.step == sim.iteration + 1 and err.t == sim.t
    assert "max_speed" in str(err) and f"step {err.step}" in str(err) and "dt" in str(err)
    np.testing.assert_array_equal(err.state["elements"]["x"], sim.elements.x)
    assert np.isfinite(sim.elements.x).all()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nan_is_caught_and_names_the_step():
    x, a, s = vortexsim.cases.vortex_ring(n_phi=16, core=0.0)
    sim = Simulation((x, a, s), dt=0.1, device="cpu", progress=False, max_speed=math.inf)
    sim.elements.alpha[0] = 1e306                       # overflows to inf within the step
    with pytest.raises(SimulationError, match=r"step 1 \(t = 0.*NaN/inf.*dt too large"):
        sim.step()
    assert sim.iteration == 0 and sim.t == 0.0


def test_callbacks_and_groups():
    seen = []
    sim = vortexsim.make_case("leapfrog", **SMALL)
    sim.callbacks.append(lambda s: seen.append(s.iteration))
    sim.run(steps=2)
    assert seen == [1, 2]
    assert [g.name for g in sim.groups] == ["rear", "front"]
    assert sim.groups[1].start == sim.groups[0].stop == 16 * 7
