"""FMM planner, domain root cube, the particle set replaced, the right-hand side's terms."""
import numpy as np
import pytest

import vortexsim
from vortexsim.geometry import FreeSpace, GroundPlane
from vortexsim.physics import VortexRHS
from vortexsim.summation.fmm import FMMPlanner, StepPlan
from vortexsim.physics.terms import Term


def _sim(**kw):
    return vortexsim.make_case("leapfrog", n_phi=12, tracers_per_ring=32, device="cpu",
                               method="fmm", progress=False, **kw)


def test_root_cube_margin_rule():
    lo, hi = np.array([0.0, 0.0, 0.0]), np.array([2.0, 1.0, 1.0])
    corner, edge, margin = FreeSpace().root_cube(lo, hi, 0.05, 0.01)
    assert margin == pytest.approx(0.1) and edge == pytest.approx(2.2)
    np.testing.assert_allclose(corner, lo - 0.1)
    # a displacement larger than the slack sets the margin
    _, edge, margin = GroundPlane(0.0).root_cube(lo, hi, 0.05, 0.5)
    assert margin == 0.5 and edge == pytest.approx(3.0)


def test_planner_refresh_and_state_round_trip():
    planner = FMMPlanner(FreeSpace(), np, active=True, root_slack=0.05, refresh=3)
    planner.observe_box(np.array([0, 0, 0, 1, 1, 1.0]))
    plan, margin = planner.step(0, 0.1)
    assert plan.depth is None and plan.records and plan.capacity_due and not plan.sync_free
    plan.depth = 4
    planner.commit(plan, 2.0, np.array([0, 0, 0, 1, 1, 1.0]))
    plan, margin = planner.step(1, 0.1)
    assert plan.depth == 4 and plan.sync_free and margin == pytest.approx(0.4)
    assert planner.step(3, 0.1)[0].depth is None            # refreshed every 3 steps
    state = FMMPlanner(FreeSpace(), np, active=True, root_slack=0.05).load_state_dict(
        {"fmm_depth": 5, "speed": 1.5}).state_dict()
    assert state == {"fmm_depth": 5, "speed": 1.5}
    off = FMMPlanner(FreeSpace(), np, active=False, root_slack=0.05)
    assert off.root(0.1) == (None, 0.0)


def test_queries_do_not_change_the_plan():
    """diagnostics(), velocity() and rates() between steps leave the run bitwise as it was."""
    a, b = _sim(), _sim()
    a.run(steps=2)
    b.run(steps=1)
    depth = b.planner.depth
    b.diagnostics(), b.velocity(gradient=True), b.rates()
    assert b.planner.depth == depth
    b.run(steps=1)
    np.testing.assert_array_equal(a.elements.x, b.elements.x)
    np.testing.assert_array_equal(a.elements.alpha, b.elements.alpha)
    np.testing.assert_array_equal(a.tracers.x, b.tracers.x)
    assert a.state_dict()["fmm_depth"] == b.state_dict()["fmm_depth"]


def test_replace_elements_resets_what_depends_on_the_set():
    sim = _sim()
    sim.run(steps=1)
    e = sim.elements
    assert sim.planner.depth is not None
    sim.replace_elements(e.x[::2], e.alpha[::2], e.sigma[::2], volume=1e-3,
                         group=e.group[::2])
    n = len(sim.elements)
    assert n == (len(e) + 1) // 2 and sim.config["n_elements"] == n
    assert sim.planner.depth is None
    assert [(g.start, g.stop) for g in sim.groups] == [(0, n // 2), (n // 2, n)]
    np.testing.assert_array_equal(sim.elements.volume, np.full(n, 1e-3))
    sim.run(steps=1)
    assert np.isfinite(sim.elements.x).all() and sim.state_dict()["fmm_depth"] >= 0
    mixed = np.array(e.group)
    mixed[0], mixed[-1] = 1, 0
    with pytest.raises(ValueError, match="not contiguous"):
        sim.replace_elements(e.x, e.alpha, e.sigma, group=mixed)
    with pytest.raises(ValueError, match="volume"):
        sim.replace_elements(e.x, e.alpha, e.sigma, volume=-1.0)


def test_a_term_adds_to_the_rates(rng):
    """A term appended to VortexRHS.terms adds its dα/dt to the stretching's."""
    from vortexsim.summation import make_summation as Summation

    class Constant(Term):
        def alpha_rate(self, stage):
            return np.ones_like(stage.alpha)

    x, a, s = rng.random((20, 3)), rng.normal(size=(20, 3)) * 1e-3, np.full(20, 0.2)
    y = rng.random((5, 3))
    rhs = VortexRHS(Summation(device=vortexsim.Device("cpu")), FreeSpace())
    rhs.begin_step(0.0, s, (0.2, 0.2), plan=StepPlan())
    dx, da, dy = rhs((x, a, y), 0.0)
    rhs.terms.append(Constant())
    dx2, da2, dy2 = rhs((x, a, y), 0.0)
    np.testing.assert_array_equal(dx2, dx)
    np.testing.assert_array_equal(da2, da + 1.0)
    np.testing.assert_array_equal(dy2, dy)


def test_replace_elements_relabels_when_a_group_empties():
    """A group left without elements is dropped and the labels follow the kept groups."""
    sim = _sim()
    e = sim.elements
    n = len(e)
    labels = np.array(e.group)
    keep = labels == 1                                   # only the front ring survives
    sim.replace_elements(e.x[keep], e.alpha[keep], e.sigma[keep], group=labels[keep])
    assert [g.name for g in sim.groups] == ["front"]
    np.testing.assert_array_equal(sim.elements.group, np.zeros(int(keep.sum())))
    with pytest.raises(ValueError, match="group labels go up to 1"):
        sim.replace_elements(e.x[:4], e.alpha[:4], e.sigma[:4], group=np.array([0, 0, 1, 1]))
    assert n == len(e)


def test_a_failed_step_leaves_the_planner_as_it_was():
    sim = _sim(max_speed=1e-6)                  # any motion is a "blow-up"
    sim.planner.depth = 3
    with pytest.raises(vortexsim.SimulationError):
        sim.step()                              # iteration 0: a refresh step
    assert sim.planner.depth == 3 and sim.state_dict()["fmm_depth"] == 3
