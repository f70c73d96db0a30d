"""The run loop of Simulation (vortexsim/simulation/simulation.py): stop criteria, callbacks and
writers on schedules, steps landing on scheduled times, pickup, request_stop, the
checkpoints of a failed or broken run."""
from __future__ import annotations

import numpy as np
import pytest

import vortexsim
from vortexsim import Callback, IterationInterval, SimulationError, TimeInterval
from vortexsim.output.writers import SnapshotWriter
from vortexsim.output import read_snapshot

TINY = dict(n_phi=6, layers=1, tracers_per_ring=6, device="cpu", progress=False)


def _sim(**kw):
    return vortexsim.make_case("single_ring", **{**TINY, **kw})


class Recorder:
    """A writer that records (t, iteration) of every write and the finalize reasons."""

    def __init__(self, schedule):
        self.schedule, self.seen, self.reasons = schedule, [], []

    def write(self, sim):
        self.seen.append((sim.t, sim.iteration))

    def finalize(self, sim, reason):
        self.reasons.append(reason)


def test_no_stopping_criterion_and_what_counts_as_one():
    x, a, s = vortexsim.cases.vortex_ring(n_phi=8, core=0.0)
    sim = vortexsim.Simulation((x, a, s), dt=0.1, device="cpu", progress=False)
    assert sim.stop_time is None
    with pytest.raises(ValueError, match="No stopping criterion"):
        sim.run()
    sim.stop_iteration = 2
    assert sim.run().iteration == 2 and sim.stop_reason == "stop_iteration"
    sim.stop_iteration, sim.wall_time_limit = None, 1e-9
    sim.run()
    assert sim.stop_reason == "wall_time_limit"
    with pytest.raises(ValueError, match="wall_time_limit"):
        vortexsim.Simulation((x, a, s), dt=0.1, device="cpu", wall_time_limit=-1)


def test_run_arguments_replace_the_stop_criteria():
    sim = _sim()
    assert sim.stop_time == sim.config["t_end"] and sim.stop_iteration is None
    sim.run(steps=2)
    assert (sim.stop_time, sim.stop_iteration, sim.stop_reason) == (None, 2, "stop_iteration")
    sim.run(t_end=0.12)
    assert (sim.stop_time, sim.stop_iteration, sim.stop_reason) == (0.12, None, "stop_time")
    assert sim.t == 0.12 and sim.iteration == 3
    sim.run()                                     # met already: no step
    assert sim.iteration == 3


def test_steps_land_on_schedule_times_and_callbacks_act_after_steps():
    """dt 0.05 with a 0.07 callback and a 0.13 writer: every scheduled time is hit exactly
    (t0 + k·interval); plain callbacks act after every step, never at the start."""
    sim = _sim(dt=0.05)
    every, timed = [], []
    sim.callbacks.append(lambda s: every.append(s.iteration))
    sim.callbacks["timed"] = Callback(lambda s, p: timed.append((p, s.t)), TimeInterval(0.07),
                                      parameters="p")
    rec = Recorder(TimeInterval(0.13))
    sim.output_writers["rec"] = rec
    sim.run(t_end=0.3)
    assert [t for t, _ in rec.seen] == [0.0, 0.13, 2 * 0.13]
    assert timed == [("p", k * 0.07) for k in range(1, 5)]    # t0 itself: not called
    assert every == list(range(1, sim.iteration + 1))
    assert rec.reasons == ["done"] and sim.t == 0.3
    # 0.05, 0.07, 0.12, 0.13, 0.14, 0.19, 0.21, 0.26, 0.28, 0.3
    assert sim.iteration == 10


def test_iteration_schedules_do_not_shorten_steps():
    sim = _sim(dt=0.05)
    rec = Recorder(IterationInterval(2))
    sim.output_writers["rec"] = rec
    sim.run(steps=5)
    assert [i for _, i in rec.seen] == [0, 2, 4]
    assert sim.t == pytest.approx(0.25, abs=1e-15)


def test_components_check_what_they_get():
    sim = _sim()
    with pytest.raises(TypeError, match="output writer needs write"):
        sim.output_writers["bad"] = object()
    with pytest.raises(TypeError, match="callable"):
        sim.callbacks["bad"] = 3
    with pytest.raises(TypeError, match="schedule"):
        Callback(print, schedule=3)
    sim.callbacks.append(print)
    sim.callbacks.append(print)
    assert list(sim.callbacks) == ["print", "print_2"]
    assert isinstance(sim.callbacks["print"], Callback)
    other = vortexsim.make_case("single_ring", **TINY)
    assert len(other.callbacks) == 0 and len(other.output_writers) == 0


def test_pickup_of_a_checkpoint_dict_is_bitwise():
    kw = dict(adaptive=True, courant=0.02, nu=1e-3)
    a = _sim(**kw)
    a.callbacks["c"] = Callback(lambda s: None, TimeInterval(0.07))
    a.run(t_end=0.2)
    saved = a.checkpoint_state()
    a.run(t_end=0.4)
    b = vortexsim.from_config(a.config)
    b.callbacks["c"] = Callback(lambda s: None, TimeInterval(1.0))
    b.run(pickup=saved, t_end=0.4)
    assert b.callbacks["c"].schedule.state_dict() == a.callbacks["c"].schedule.state_dict()
    assert (b.t, b.iteration, b.dt) == (a.t, a.iteration, a.dt)
    for name in ("x", "alpha", "sigma"):
        assert getattr(b.elements, name).tobytes() == getattr(a.elements, name).tobytes()
    assert b.tracers.x.tobytes() == a.tracers.x.tobytes()


def test_request_stop_checkpoints_and_the_run_can_go_on(tmp_path):
    sim = _sim()
    snaps = SnapshotWriter(tmp_path, None)
    sim.output_writers["snapshots"] = snaps
    sim.callbacks["stop"] = Callback(lambda s: s.request_stop(), IterationInterval(3))
    sim.run(steps=10)
    assert sim.stop_reason == "interrupted" and sim.iteration == 3
    snap = read_snapshot(snaps.last_path)
    assert snap.attrs["snapshot_kind"] == "interrupted" and snap.iteration == 3
    assert snap.schedule["stop_iteration"] == 10
    del sim.callbacks["stop"]
    sim.run()                                      # towards the same stop iteration
    assert sim.iteration == 10 and sim.stop_reason == "stop_iteration"
    assert read_snapshot(snaps.last_path).attrs["snapshot_kind"] == "final"


def test_failed_check_writes_the_last_good_state(tmp_path):
    sim = _sim(max_speed=1e-6)
    snaps = SnapshotWriter(tmp_path, None)
    sim.output_writers["snapshots"] = snaps
    with pytest.raises(SimulationError):
        sim.run(steps=3)
    snap = read_snapshot(snaps.last_path)
    assert snap.attrs["snapshot_kind"] == "last_good_state" and snap.iteration == 0
    np.testing.assert_array_equal(snap.state["elements"]["x"], sim.elements.x)


def test_unexpected_error_writes_the_last_completed_step(tmp_path):
    sim = _sim()
    snaps = SnapshotWriter(tmp_path, None)
    rec = Recorder(None)
    sim.output_writers.update(snapshots=snaps, rec=rec)

    def broken(s):
        if s.iteration == 2:
            raise RuntimeError("boom")
    sim.callbacks.append(broken)
    with pytest.raises(RuntimeError, match="boom"):
        sim.run(steps=5, progress=True)
    assert rec.reasons == ["error"]
    snap = read_snapshot(snaps.last_path)
    assert snap.attrs["snapshot_kind"] == "error" and snap.iteration == 2


def test_a_failed_write_leaves_its_schedule_owing_the_output():
    """A write that raises does not count as done: the schedule fires again next time."""
    class Flaky(Recorder):
        def write(self, sim):
            if sim.iteration == 2 and not hasattr(self, "failed"):
                self.failed = True
                raise OSError("disk full")
            super().write(sim)

    sim = _sim(dt=0.1)
    w = Flaky(TimeInterval(0.2))
    sim.output_writers["flaky"] = w
    with pytest.raises(OSError):
        sim.run(steps=4)
    assert sim.iteration == 2 and w.seen == [(0.0, 0)]
    assert w.schedule.next_time == pytest.approx(0.2)      # still owed
    sim.run(steps=1)
    assert [it for _, it in w.seen] == [0, 2]              # written at the next chance


def test_a_failed_diagnostics_write_keeps_file_and_log_equal(tmp_path, monkeypatch):
    from vortexsim.output import DiagnosticsLog
    log = DiagnosticsLog(str(tmp_path / "d.nc"), {"case": "x"})
    row = {"t": 0.0, "iteration": 0, "energy": 1.0}
    log.append(row)
    monkeypatch.setattr(DiagnosticsLog, "write", lambda self: (_ for _ in ()).throw(OSError()))
    with pytest.raises(OSError):
        log.append({**row, "t": 0.1, "iteration": 1})
    assert len(log) == 1


def test_a_stop_request_is_spent_by_the_run_that_ends():
    sim = _sim(dt=0.1)
    sim.callbacks["stop"] = Callback(lambda s: s.request_stop(), IterationInterval(3))
    sim.run(steps=3)                         # the request comes during the last step
    del sim.callbacks["stop"]
    sim.run(steps=2)
    assert sim.iteration == 5 and sim.stop_reason == "stop_iteration"


def test_scalar_sigma():
    x, a, _ = vortexsim.cases.vortex_ring(n_phi=8, core=0.0)
    sim = vortexsim.Simulation((x, a, 0.5), dt=0.1, device="cpu", progress=False)
    np.testing.assert_array_equal(sim.elements.sigma, np.full(8, 0.5))


def test_run_timings_count_steps_and_each_writer(caplog):
    sim = _sim(dt=0.1)
    w = Recorder(IterationInterval(2))
    sim.output_writers["rec"] = w
    with caplog.at_level("INFO", logger="vortexsim.simulation"):
        sim.run(steps=4)
    assert sim.run_timings["steps"][1] == 4 and sim.run_timings["steps"][0] > 0
    assert sim.run_timings["rec"][1] == len(w.seen) + len(w.reasons) == 3 + 1
    line = [r.message for r in caplog.records if r.message.startswith("time: ")]
    assert line and "steps" in line[0] and "rec" in line[0] and "wall" in line[0]
    # the first and the slowest step, where first-use costs show
    ext = sim.step_extremes
    assert 0 < ext["first"] <= ext["slowest"][0] <= sim.run_timings["steps"][0]
    assert 1 <= ext["slowest"][1] <= 4
    assert f"slowest {ext['slowest'][0]:.3g} s at iteration {ext['slowest'][1]})" in line[0]


@pytest.mark.parametrize("interval", [1e-4, None])
def test_run_shortens_the_gil_slices_and_restores_them(interval):
    """During run() the interpreter switches threads every ``gil_switch_interval``
    seconds (the stepping thread gets the GIL back soon after another thread took it);
    afterwards, and after a run that raised, the process's own interval is back."""
    import sys
    before = sys.getswitchinterval()
    sim = _sim(dt=0.1)
    sim.gil_switch_interval = interval
    seen = []
    sim.callbacks["look"] = lambda s: seen.append(sys.getswitchinterval())
    sim.run(steps=2)
    assert seen == pytest.approx([interval or before] * 2)
    assert sys.getswitchinterval() == before

    def fail(s):
        raise RuntimeError("boom")
    sim.callbacks["fail"] = fail
    with pytest.raises(RuntimeError, match="boom"):
        sim.run(steps=1)
    assert sys.getswitchinterval() == before

    def ctrl_c(s):
        raise KeyboardInterrupt
    sim.callbacks["fail"] = ctrl_c
    with pytest.raises(KeyboardInterrupt):
        sim.run(steps=1)
    assert sys.getswitchinterval() == before
    del sim.callbacks["fail"]
    sim.callbacks["stop"] = lambda s: s.request_stop()          # the interrupted return
    sim.run(steps=3)
    assert sim.stop_reason == "interrupted" and sys.getswitchinterval() == before


@pytest.mark.parametrize("bad", [0, -1e-3, float("nan"), "fast", True])
def test_a_bad_gil_switch_interval_is_refused_before_the_run(bad):
    import sys
    before = sys.getswitchinterval()
    sim = _sim(dt=0.1)
    sim.gil_switch_interval = bad
    with pytest.raises(ValueError, match="gil_switch_interval must be a number of seconds"):
        sim.run(steps=1)
    assert sim.iteration == 0 and sys.getswitchinterval() == before
