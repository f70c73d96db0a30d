"""Output writers (vortexsim/output/writers.py): state round trips, the run state in the
snapshot's format-1 run_* attributes, automatic intervals, pickup from a snapshot."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import xarray as xr

import vortexsim
from vortexsim.output import read_rows, read_snapshot
from vortexsim.output.writers import (SCHEDULE_KEYS, DiagnosticsWriter, PlotWriter,
                                      SnapshotWriter, output_intervals, run_state_from_schedule,
                                      run_writers, schedule_attrs)
from vortexsim.schedules import IterationInterval, TimeInterval

TINY = dict(n_phi=6, layers=1, tracers_per_ring=6, device="cpu", progress=False)
META = {"case": "single_ring", "vortexsim_version": "0", "device": "cpu"}


def _sim(**kw):
    return vortexsim.make_case("single_ring", **{**TINY, **kw})


@pytest.mark.parametrize("dt, duration, snap, diag, want", [
    (0.05, 5.0, None, None, (0.5, 0.05)),
    (0.1, 20.0, None, None, (2.0, 0.2)),
    (0.05, 0.1, None, None, (0.05, 0.05)),     # at least one step
    (0.05, 5.0, 0.13, None, (0.13, 0.05)),
    (0.05, 5.0, 0.13, 0.07, (0.13, 0.07)),
])
def test_output_intervals(dt, duration, snap, diag, want):
    got = output_intervals(dt, duration, snap, diag)
    assert got == pytest.approx(want, rel=1e-12) and all(isinstance(v, float) for v in got)
    if snap is None:                       # auto: whole multiples of dt
        assert got[0] / dt == pytest.approx(round(got[0] / dt), abs=1e-9)


def test_run_state_is_stored_as_the_format_1_schedule():
    """What `vortexsim run` writers give: exactly the run_* keys of snapshot format 1
    (so old code restarts new snapshots and the checksum rules are unchanged)."""
    sim = _sim()
    sim.output_writers.update(run_writers("unused", META, "", 0.5, 0.1, plot=True))
    sim.stop_time = 2.0
    sim.initialize()
    sim.output_writers["diagnostics"].load_state_dict(
        {"rows": 11, "schedule": {"t0": 0.0, "interval": 0.1, "next_index": 11}})
    sim.output_writers["snapshots"].schedule.next_index = 3
    flat = schedule_attrs(sim.run_state_dict())
    assert flat == {"t0": 0.0, "snapshot_interval": 0.5, "diagnostics_interval": 0.1,
                    "next_snapshot": 3, "next_diagnostics": 11, "diagnostics_rows": 11,
                    "stop_time": 2.0, "stop_iteration": None, "plot": 1}
    assert list(flat)[:6] == list(SCHEDULE_KEYS)
    run = run_state_from_schedule(flat)
    assert run["output_writers"]["snapshots"] == {
        "schedule": {"t0": 0.0, "interval": 0.5, "next_index": 3}}
    assert run["output_writers"]["diagnostics"]["rows"] == 11
    assert schedule_attrs(run) == flat


def test_other_state_goes_into_state_json():
    sim = _sim()
    sim.output_writers["snapshots"] = SnapshotWriter("unused", IterationInterval(5))
    sim.callbacks["probe"] = vortexsim.Callback(lambda s: None, TimeInterval(0.3))
    sim.stop_time, sim.stop_iteration = None, 40
    sim.initialize()
    run = sim.run_state_dict()
    flat = schedule_attrs(run)
    assert "state_json" in flat and flat["plot"] == 0 and flat["stop_iteration"] == 40
    assert not set(SCHEDULE_KEYS) & set(flat)
    back = run_state_from_schedule(flat)
    assert back["callbacks"]["probe"] == run["callbacks"]["probe"]
    assert back["stop_iteration"] == 40 and back["stop_time"] is None


def test_writer_state_round_trip(tmp_path):
    sim = _sim()
    diag = DiagnosticsWriter(tmp_path / "d.nc", TimeInterval(0.1), META)
    snaps = SnapshotWriter(tmp_path, TimeInterval(0.2), META)
    plot = PlotWriter(tmp_path)
    sim.output_writers.update(diagnostics=diag, snapshots=snaps, plot=plot)
    sim.run(t_end=0.3)
    assert diag.rows == 4 and snaps.state_dict()["schedule"]["next_index"] == 2
    again = [DiagnosticsWriter(tmp_path / "d.nc", TimeInterval(1.0)),
             SnapshotWriter(tmp_path, TimeInterval(1.0)), PlotWriter(tmp_path)]
    for old, new in zip((diag, snaps, plot), again):
        new.load_state_dict(old.state_dict())
        assert new.state_dict() == old.state_dict()
    assert plot.state_dict() == {} and plot.schedule is None


def test_writers_land_on_their_times_and_finish_the_run(tmp_path):
    """Intervals that are no multiple of dt: the steps are shortened so that every row and
    snapshot is at t0 + k·interval exactly; the end gets a final row and snapshot."""
    sim = _sim(dt=0.05)
    sim.output_writers.update(run_writers(str(tmp_path), META, "", 0.13, 0.07, plot=False))
    sim.run(t_end=0.3)
    rows = read_rows(tmp_path / "diagnostics.nc")
    assert [r["t"] for r in rows] == [k * 0.07 for k in range(5)] + [0.3]
    times, kinds = [], []
    for f in sorted(os.listdir(tmp_path)):
        if f.startswith("snapshot_"):
            with xr.open_dataset(tmp_path / f) as ds:
                times.append(float(ds["t"].values[0]))
                kinds.append(ds.attrs["snapshot_kind"])
    assert times == [0.0, 0.13, 2 * 0.13, 0.3]
    assert kinds == ["scheduled", "scheduled", "scheduled", "final"]
    assert sim.t == 0.3 and sim.stop_reason == "stop_time"


def test_pickup_from_a_snapshot_is_bitwise(tmp_path):
    """run(pickup=path) restores the state, the schedules and the diagnostics rows: the
    continued run writes bitwise the files of the uninterrupted one."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    kw = dict(adaptive=True, courant=0.01, nu=1e-3)
    sim = _sim(**kw)
    sim.output_writers.update(run_writers(str(a), META, "", 0.2, 0.07, plot=False))
    sim.run(t_end=0.6)
    shutil.copytree(a, b)
    middle = sorted(f for f in os.listdir(b) if f.startswith("snapshot_"))[1]
    again = vortexsim.from_config(sim.config)
    again.output_writers.update(run_writers(str(b), META, "", 1.0, 1.0, plot=False))
    again.run(pickup=str(b / middle))        # intervals, indices, stop time from the file
    assert again.t == sim.t and again.iteration == sim.iteration and again.dt == sim.dt
    for name in ("x", "alpha", "sigma"):
        assert getattr(again.elements, name).tobytes() == getattr(sim.elements, name).tobytes()
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    for name in names:
        with xr.open_dataset(a / name) as x, xr.open_dataset(b / name) as y:
            for v in x.variables:
                assert x[v].values.tobytes() == y[v].values.tobytes(), (name, v)
    # "latest": the final snapshot; continuing it needs a new stop criterion
    third = vortexsim.from_config(sim.config)
    third.output_writers.update(run_writers(str(b), META, "", 1.0, 1.0, plot=False))
    third.pickup("latest")
    assert third.iteration == sim.iteration and third.stop_time == 0.6
    snap = read_snapshot(third.output_writers["snapshots"].last_path)
    assert snap.attrs["snapshot_kind"] == "final"


def test_pickup_needs_a_checkpoint_reader():
    sim = _sim()
    with pytest.raises(ValueError, match="read_checkpoint"):
        sim.run(pickup="snapshot_00000001.nc")


def test_diagnostics_resume_refuses_a_foreign_file(tmp_path):
    sim = _sim()
    w = DiagnosticsWriter(tmp_path / "diagnostics.nc", TimeInterval(0.1), META)
    w.load_state_dict({"rows": 3})
    with pytest.raises(ValueError, match="missing"):
        w.initialize(sim)


def test_snapshot_writer_finalize_kinds(tmp_path):
    sim = _sim()
    w = SnapshotWriter(tmp_path, None, META)
    sim.output_writers["snapshots"] = w
    kinds = {}
    for reason in ("interrupted", "failed", "error", "done"):
        w.last_iteration = None
        w.finalize(sim, reason)
        with xr.open_dataset(w.last_path) as ds:
            kinds[reason] = ds.attrs["snapshot_kind"]
    assert kinds == {"interrupted": "interrupted", "failed": "last_good_state",
                     "error": "error", "done": "final"}
    mtime = os.stat(w.last_path).st_mtime_ns
    w.finalize(sim, "done")                  # this iteration's snapshot exists: kept
    assert os.stat(w.last_path).st_mtime_ns == mtime
    assert np.isfinite(read_snapshot(w.last_path).t)
