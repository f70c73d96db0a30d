"""The model apart from the run (vortexsim/model/): VortexModel steps, evaluates and
restarts on its own; Simulation(model) runs it exactly as Simulation(elements, ...) does;
the updaters (remeshing, adaptive dt) act between steps."""
from __future__ import annotations

import numpy as np
import pytest

import vortexsim
from vortexsim import Simulation, VortexModel
from vortexsim.model import AdaptiveTimeStep


def _ring():
    x, a, s = vortexsim.cases.vortex_ring(n_phi=12, core=0.0)
    tracers = np.array([[0.0, 0.0, 0.5], [0.3, 0.2, -0.4]])
    return (x, a, s), tracers


def test_the_model_steps_alone_as_the_simulation_steps_it():
    elements, tracers = _ring()
    model = VortexModel(elements, tracers, dt=0.05, device="cpu", progress=False)
    for _ in range(3):
        model.time_step(model.dt)
    sim = Simulation(elements, tracers, dt=0.05, device="cpu", progress=False)
    sim.run(steps=3)
    assert model.iteration == sim.iteration == 3 and model.t == sim.t
    assert np.array_equal(model.elements.x, sim.elements.x)
    assert np.array_equal(model.elements.alpha, sim.elements.alpha)
    assert np.array_equal(model.tracers.x, sim.tracers.x)
    u_model, _ = model.velocity()
    u_sim, _ = sim.velocity()
    assert np.array_equal(u_model, u_sim)


def test_simulation_of_a_built_model_runs_that_model():
    elements, tracers = _ring()
    model = VortexModel(elements, tracers, dt=0.05, device="cpu", progress=False)
    sim = Simulation(model, stop_iteration=2)
    assert sim.model is model and sim.config is model.config
    sim.run()
    assert model.iteration == 2 and sim.t == model.t
    sim.dt = 0.01                                   # the model's attributes, set through
    assert model.dt == 0.01
    with pytest.raises(TypeError, match="takes a built VortexModel alone"):
        Simulation(model, tracers)
    with pytest.raises(TypeError, match="takes a built VortexModel alone"):
        Simulation(model, dt=0.1)


def test_the_model_restarts_bitwise_and_chains_through_the_simulation():
    elements, tracers = _ring()
    first = VortexModel(elements, tracers, dt=0.05, device="cpu", progress=False)
    first.time_step(0.05)
    state = first.state_dict()
    first.time_step(0.05)
    again = Simulation(elements, tracers, dt=0.05, device="cpu", progress=False)
    assert again.load_state_dict(state) is again      # chains: sim.load_state_dict(s).run()
    again.step()
    assert np.array_equal(again.elements.x, first.elements.x)
    assert np.array_equal(again.elements.alpha, first.elements.alpha)


def test_a_failed_check_leaves_the_model_at_its_last_good_state():
    elements, tracers = _ring()
    model = VortexModel(elements, tracers, dt=0.05, max_speed=1e-9, device="cpu",
                        progress=False)
    x0 = model.elements.x.copy()
    with pytest.raises(vortexsim.SimulationError, match="exceeds the bound max_speed"):
        model.time_step(0.05)
    assert model.iteration == 0 and np.array_equal(model.elements.x, x0)
    with pytest.raises(vortexsim.SimulationError, match="non-finite or non-positive"):
        model.time_step(float("nan"))


def test_during_runs_before_the_commit_and_sees_the_state_the_step_started_from():
    elements, tracers = _ring()
    model = VortexModel(elements, tracers, dt=0.05, device="cpu", progress=False)
    seen = []
    model.time_step(0.05, during=lambda: seen.append((model.iteration, model.t)))
    assert seen == [(0, 0.0)] and model.iteration == 1


@pytest.mark.parametrize("grad, expected", [(0.0, 0.2), (1.0, 0.1), (1e3, 0.1 / 1e3),
                                            (1e9, 1e-4)])
def test_adaptive_time_step_rule(grad, expected):
    rule = AdaptiveTimeStep(courant=0.1, dt_min=1e-4, dt_max=0.2)
    assert rule.next_dt(grad) == pytest.approx(expected, rel=1e-15)


def test_the_simulation_class_holds_no_physics():
    """What the run loop may touch of the model: its public attributes and methods; the
    step's physics (terms, remeshing, checks) stays in the model."""
    import inspect
    from vortexsim.simulation import simulation as S
    source = inspect.getsource(S.Simulation)
    for name in ("before_step", "after_step", "remesh(", "diffuse", "check_step",
                 "scheme.step"):
        assert name not in source, name
