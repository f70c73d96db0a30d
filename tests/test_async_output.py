"""Output on the run's output thread (Simulation.run with async_output, the writers of
vortexsim/output/writers.py): the same files as a synchronous run, bitwise restarts,
every netCDF call off the main thread, failed writes raised as the run's error with the
writers' state kept equal to the files, interruptions (request_stop, SIGINT, a second
SIGINT) that leave whole files, and the timings of the output thread (issues 15, 19)."""
from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import threading
import re
import time

import numpy as np
import pytest
import xarray as xr

import vortexsim
from vortexsim import Callback, IterationInterval, TimeInterval
from vortexsim.output import DiagnosticsLog, read_rows, read_snapshot
from vortexsim.output import writers as W
from vortexsim.output.writers import run_writers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = dict(n_phi=6, layers=1, tracers_per_ring=6, device="cpu", progress=False)
META = {"case": "single_ring", "vortexsim_version": "0", "device": "cpu"}


def _sim(async_output=True, **kw):
    sim = vortexsim.make_case("single_ring", **{**TINY, **kw})
    sim.async_output = async_output
    return sim


def _attrs(attrs):
    return {k: np.asarray(v).tolist() for k, v in attrs.items()}


def _same_files(a, b):
    """Every .nc of ``a`` equals that of ``b``: variables bitwise, all attributes."""
    names = sorted(os.path.basename(f) for f in glob.glob(os.path.join(a, "*.nc")))
    assert names and names == sorted(os.path.basename(f)
                                     for f in glob.glob(os.path.join(b, "*.nc")))
    for name in names:
        with xr.open_dataset(os.path.join(a, name), decode_cf=False) as x, \
                xr.open_dataset(os.path.join(b, name), decode_cf=False) as y:
            assert _attrs(x.attrs) == _attrs(y.attrs), name
            assert sorted(x.variables) == sorted(y.variables), name
            for v in x.variables:
                assert x[v].values.tobytes() == y[v].values.tobytes(), (name, v)
                assert _attrs(x[v].attrs) == _attrs(y[v].attrs), (name, v)
    return names


def _whole(run_dir):
    """Every snapshot reads back (checksum) and no temporary file is left."""
    snaps = sorted(glob.glob(os.path.join(run_dir, "snapshot_*.nc")))
    for f in snaps:
        read_snapshot(f)
    read_rows(os.path.join(run_dir, "diagnostics.nc"))
    assert not glob.glob(os.path.join(run_dir, ".*.tmp"))
    return snaps


@pytest.fixture
def slow_snapshots(monkeypatch):
    """Each snapshot write takes 0.1 s longer (so that writes are pending)."""
    write = W.write_snapshot

    def slow(*args, **kwargs):
        time.sleep(0.1)
        return write(*args, **kwargs)
    monkeypatch.setattr(W, "write_snapshot", slow)


def test_async_files_are_the_sync_files(tmp_path):
    """Adaptive dt, intervals that are no multiple of dt, a final row and a rewritten
    final snapshot: the output thread writes bitwise the files of a synchronous run."""
    for mode in ("sync", "async"):
        (tmp_path / mode).mkdir()
        sim = _sim(mode == "async", adaptive=True, courant=0.02, nu=1e-3)
        sim.output_writers.update(run_writers(str(tmp_path / mode), META, "h", 0.13, 0.07,
                                              plot=False))
        sim.run(t_end=0.4)
    assert _same_files(tmp_path / "sync", tmp_path / "async")[0] == "diagnostics.nc"


def test_restart_from_an_async_snapshot_is_bitwise(tmp_path, slow_snapshots):
    """A synchronous run, an asynchronous one with slow snapshot writes, and a restart
    (asynchronous) from a middle snapshot of the latter: the same files, bitwise."""
    ref, a, b = tmp_path / "ref", tmp_path / "a", tmp_path / "b"
    for mode, out in (("sync", ref), ("async", a)):
        out.mkdir()
        sim = _sim(mode == "async", adaptive=True, courant=0.02)
        sim.output_writers.update(run_writers(str(out), META, "h", 0.1, 0.05, plot=False))
        sim.run(t_end=0.4)                     # returns with every file on disk
    shutil.copytree(a, b)
    middle = sorted(glob.glob(str(b / "snapshot_*.nc")))[2]
    os.remove(sorted(glob.glob(str(b / "snapshot_*.nc")))[-1])
    again = vortexsim.from_config(sim.config)
    again.output_writers.update(run_writers(str(b), META, "h", 1.0, 1.0, plot=False))
    again.run(pickup=middle)
    _same_files(ref, a)
    _same_files(ref, b)


def test_every_netcdf_call_of_a_run_is_off_the_main_thread(tmp_path, monkeypatch):
    calls = []
    for cls, name in ((xr.Dataset, "to_netcdf"), (xr.backends.NetCDF4DataStore, "open")):
        original = getattr(cls, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            calls.append((_name, threading.current_thread() is threading.main_thread()))
            return _original(*args, **kwargs)
        monkeypatch.setattr(cls, name, staticmethod(spy) if name == "open" else spy)
    sim = _sim()
    sim.output_writers.update(run_writers(str(tmp_path), META, "h", 0.1, 0.05, plot=True))
    sim.run(t_end=0.2)
    assert os.path.isfile(tmp_path / "plot.png")
    # writes only: the plot is drawn from the rows and the state in memory
    assert {n for n, _ in calls} == {"to_netcdf"}
    assert not [c for c in calls if c[1]], "netCDF used on the main thread"


def _failing(monkeypatch, target, name, when):
    """Make ``target.name`` raise OSError(ENOSPC) once, at the call where ``when``."""
    original = getattr(target, name)
    state = {"failed": False}

    def failing(*args, **kwargs):
        if not state["failed"] and when(*args, **kwargs):
            state["failed"] = True
            raise OSError(28, "No space left on device")
        return original(*args, **kwargs)
    monkeypatch.setattr(target, name, failing)
    return state


@pytest.mark.parametrize("what", ["snapshot", "diagnostics"])
@pytest.mark.parametrize("async_output", [False, True])
def test_a_failed_write_is_the_runs_error_and_leaves_a_restartable_checkpoint(
        what, async_output, tmp_path, monkeypatch):
    """A write that fails (on the output thread: raised at the next step, write or flush)
    ends the run like a synchronous failure: the same exception, an "error" checkpoint
    of the last completed step whose schedule still owes the output and whose row count
    is that of diagnostics.nc, so that it restarts."""
    if what == "snapshot":
        _failing(monkeypatch, W, "write_snapshot", lambda path, state, *a: state["iteration"] == 4)
    else:
        _failing(monkeypatch, DiagnosticsLog, "write", lambda log, rows=None: len(rows) == 5)
    sim = _sim(async_output, dt=0.05)
    sim.output_writers.update(run_writers(str(tmp_path), META, "h", 0.1, 0.05, plot=False))
    with pytest.raises(OSError, match="No space left on device"):
        sim.run(t_end=1.0)
    assert sim.iteration < 20
    snaps = _whole(tmp_path)
    last = read_snapshot(snaps[-1])
    assert last.attrs["snapshot_kind"] == "error" and last.iteration == sim.iteration
    rows = read_rows(tmp_path / "diagnostics.nc")
    assert last.schedule["diagnostics_rows"] == len(rows) == \
        len(sim.output_writers["diagnostics"].log)
    if what == "snapshot":
        assert not os.path.exists(tmp_path / "snapshot_00000004.nc") or not async_output
        assert last.schedule["next_snapshot"] == 2              # t = 0.2 still owed
    else:
        assert last.schedule["next_diagnostics"] == 4           # t = 0.2 still owed
    again = vortexsim.from_config(sim.config)
    again.output_writers.update(run_writers(str(tmp_path), META, "h", 1.0, 1.0, plot=False))
    again.run(pickup=snaps[-1], t_end=0.5)
    _whole(tmp_path)
    times = [r["t"] for r in read_rows(tmp_path / "diagnostics.nc")]
    assert times == sorted(times) and times[-1] == 0.5


def test_after_a_failed_write_a_restart_continues_the_uninterrupted_run(tmp_path, monkeypatch):
    """The snapshot at iteration 4 fails slowly: the next row and snapshot, queued behind
    it, are discarded, and the run stops at iteration 5, owing that step's row and
    snapshot (the newest of the undone ones).  A restart from the error checkpoint
    writes them at once and goes on: every file but the lost snapshot is bitwise that of
    an uninterrupted run."""
    ref, out = tmp_path / "ref", tmp_path / "out"
    ref.mkdir()
    out.mkdir()
    sim = _sim(False, dt=0.05)
    sim.output_writers.update(run_writers(str(ref), META, "h", 0.05, 0.05, plot=False))
    sim.run(t_end=0.5)
    write = W.write_snapshot

    def slow_failure(path, state, *args, **kwargs):
        if state["iteration"] == 4:
            time.sleep(0.3)
            raise OSError(28, "No space left on device")
        return write(path, state, *args, **kwargs)
    monkeypatch.setattr(W, "write_snapshot", slow_failure)
    sim = _sim(dt=0.05)
    sim.output_writers.update(run_writers(str(out), META, "h", 0.05, 0.05, plot=False))
    with pytest.raises(OSError, match="No space") as info:
        sim.run(t_end=0.5)
    assert sim.iteration == 5 and "later write(s) discarded" in str(info.value.__notes__)
    error = read_snapshot(out / "snapshot_00000005.nc")
    assert error.attrs["snapshot_kind"] == "error"
    assert (error.schedule["next_snapshot"], error.schedule["next_diagnostics"],
            error.schedule["diagnostics_rows"]) == (5, 5, 5)
    monkeypatch.setattr(W, "write_snapshot", write)
    again = vortexsim.from_config(sim.config)
    again.output_writers.update(run_writers(str(out), META, "h", 1.0, 1.0, plot=False))
    again.run(pickup=str(out / "snapshot_00000005.nc"))
    os.remove(ref / "snapshot_00000004.nc")
    _same_files(ref, out)


def test_request_stop_with_pending_writes_checkpoints_after_them(tmp_path, slow_snapshots):
    sim = _sim(dt=0.05)
    sim.output_writers.update(run_writers(str(tmp_path), META, "h", 0.05, 0.05, plot=False))
    sim.callbacks["stop"] = Callback(lambda s: s.request_stop(), IterationInterval(6))
    sim.run(t_end=1.0)
    assert sim.stop_reason == "interrupted" and sim.iteration == 6
    snaps = _whole(tmp_path)
    assert len(snaps) == 7
    last = read_snapshot(snaps[-1])
    assert last.attrs["snapshot_kind"] == "interrupted" and last.iteration == 6
    assert last.schedule["diagnostics_rows"] == len(read_rows(tmp_path / "diagnostics.nc"))


def test_keyboard_interrupt_gives_up_the_queued_writes_without_partial_files(
        tmp_path, slow_snapshots):
    def interrupt(s):
        raise KeyboardInterrupt
    sim = _sim(dt=0.05)
    sim.output_writers.update(run_writers(str(tmp_path), META, "h", 0.05, 0.05, plot=False))
    sim.callbacks["ctrl_c"] = Callback(interrupt, IterationInterval(3))
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        sim.run(t_end=1.0)
    assert time.perf_counter() - t0 < 5
    snaps = _whole(tmp_path)
    assert 1 <= len(snaps) <= 3                 # those written or in flight; none partial
    w = sim.output_writers["snapshots"]
    assert w.last_path == snaps[-1]             # the discarded ones are forgotten
    assert len(sim.output_writers["diagnostics"].log) == \
        len(read_rows(tmp_path / "diagnostics.nc"))


def test_output_timings_and_the_run_log(tmp_path, caplog):
    sim = _sim(dt=0.05)
    sim.output_writers.update(run_writers(str(tmp_path), META, "h", 0.1, 0.05, plot=False))
    with caplog.at_level("INFO", logger="vortexsim.simulation"):
        sim.run(t_end=0.3)
    out = sim.output_timings
    assert out["snapshots"]["jobs"] == 4 and out["diagnostics"]["jobs"] == 7
    assert all(o["write"] > 0 and o["waited"] >= 0 for o in out.values())
    assert sim.run_timings["diagnostics"][1] == 7 + 1      # the writes, the finalize
    lines = [r.message for r in caplog.records]
    time_line = [m for m in lines if m.startswith("time: ")][0]
    assert "waiting for the output thread" in time_line and "wall" in time_line
    # the writers' imports happen in the set-up, before the first step, on this thread
    assert re.search(r"set-up before the first step [0-9.e+-]+ s", time_line)
    assert sim.timings.setup_seconds > 0
    thread_line = [m for m in lines if m.startswith("output thread: ")][0]
    assert "snapshots" in thread_line and "overlapped" in thread_line
    sync = _sim(False, dt=0.05)
    (tmp_path / "s").mkdir()
    sync.output_writers.update(run_writers(str(tmp_path / "s"), META, "h", 0.1, 0.05,
                                           plot=False))
    sync.run(t_end=0.3)
    assert sync.output_timings == {}


def test_a_run_removes_the_temporary_files_of_an_interrupted_write(tmp_path):
    stale = [".snapshot_00000003.nc.0badf00d.tmp", ".diagnostics.nc.12345678.tmp",
             ".plot.png.abcdef01.tmp"]
    kept = ["notes.tmp", ".other.nc.12345678.tmp", "snapshot_x.txt"]
    for name in stale + kept:
        (tmp_path / name).write_text("x")
    sim = _sim()
    sim.output_writers.update(run_writers(str(tmp_path), META, "h", 0.1, 0.05, plot=True))
    sim.initialize()
    assert sorted(os.listdir(tmp_path)) == sorted(kept)


# -- signals to the command (subprocesses) ----------------------------------------------------
_SLOW = ("import sys, time; import vortexsim.output.writers as w; write = w.write_snapshot; "
         "w.write_snapshot = lambda *a, **k: (time.sleep(0.3), write(*a, **k))[1]; "
         "from vortexsim.cli import main; sys.exit(main(sys.argv[1:]))")


def _start(out):
    """``vortexsim run`` whose snapshot writes take 0.3 s more, once it has 2 snapshots."""
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW, "run", "single_ring", "--set", "n_phi=8", "--set",
         "tracers_per_ring=16", "--device", "cpu", "-q", "--set", "snapshot_interval=0.05",
         "--set", "t_end=30", "--set", "plot=false", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 30
    while len(glob.glob(str(out / "snapshot_*.nc"))) < 2:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "no snapshots written"
        time.sleep(0.02)
    return proc


def test_sigint_with_pending_writes_and_a_second_sigint_never_hang(tmp_path):
    """Issue 19, defect 1: a second Ctrl-C during a write hung the process (xarray's file
    lock left held by a KeyboardInterrupt).  One SIGINT: the pending writes, then the
    checkpoint, exit 130.  Two: the queued writes are given up, the one in flight
    finishes, exit 130 within seconds; every file whole in both cases."""
    one = tmp_path / "one"
    proc = _start(one)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130 and "checkpoint written" in err, err
    snaps = _whole(one)
    last = read_snapshot(snaps[-1])
    assert last.attrs["snapshot_kind"] == "interrupted"
    assert last.schedule["diagnostics_rows"] == len(read_rows(one / "diagnostics.nc"))

    two = tmp_path / "two"
    proc = _start(two)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.1)                  # the main thread now waits for the slow writes
    proc.send_signal(signal.SIGINT)
    t0 = time.time()
    _, err = proc.communicate(timeout=20)
    assert time.time() - t0 < 6, err
    assert proc.returncode == 130 and "aborted" in err and "Traceback" not in err, err
    _whole(two)


# -- deferred writes: submit_output(..., defer=True) ------------------------------------------
class _Rewriter:
    """A writer that rewrites its whole "file" (a list of iterations) at every output,
    deferred; ``fail(rows)`` makes the rewrite of ``rows`` raise."""

    def __init__(self, schedule, fail=None):
        self.schedule, self.fail = schedule, fail
        self.rows, self.file, self.rewrites = [], [], 0

    def write(self, sim):
        self.rows.append(sim.iteration)
        rows, row = list(self.rows), sim.iteration

        def rewrite():
            self.rewrites += 1
            if self.fail is not None and self.fail(rows):
                raise OSError(28, "No space left on device")
            self.file[:] = rows
        sim.submit_output(rewrite, lambda: self.rows.remove(row), defer=True)


class _Reader:
    """A writer whose output records what the rewriter's file holds when it is written."""

    def __init__(self, schedule, rewriter):
        self.schedule, self.rewriter, self.seen = schedule, rewriter, []

    def write(self, sim):
        iteration, file = sim.iteration, self.rewriter.file
        sim.submit_output(lambda: self.seen.append((iteration, list(file))))


@pytest.mark.parametrize("async_output", [False, True])
def test_a_deferred_write_is_replaced_and_written_before_other_output_and_at_the_end(
        async_output):
    sim = _sim(async_output, dt=0.05)
    rewriter = _Rewriter(TimeInterval(0.05))
    reader = _Reader(TimeInterval(0.15), rewriter)
    sim.output_writers.update(rows=rewriter, reader=reader)
    sim.run(t_end=0.5)
    assert rewriter.rows == rewriter.file == list(range(11))
    # every other output finds the file complete up to its iteration
    assert reader.seen == [(k, list(range(k + 1))) for k in (0, 3, 6, 9)]
    assert rewriter.rewrites == 4 + 1                 # before the reader's 4, at the end
    if async_output:
        assert sim.output_timings["rows"] == {**sim.output_timings["rows"], "jobs": 11,
                                              "files": 5}
    outside = []                                     # outside run(): written at once
    sim.submit_output(lambda: outside.append(1), defer=True)
    assert outside == [1]


@pytest.mark.parametrize("async_output", [False, True])
def test_a_failed_deferred_write_undoes_every_output_it_held_and_owes_the_newest(
        async_output):
    """The rewrite released by the reader at iteration 6 fails (slowly): the rows 4-6 it
    held are forgotten and the reader's output after it is undone, both schedules owe
    their newest undone output; the rows on "disk" are those of iteration 3.  On the
    output thread the failure is raised when row 7 is held (which waits for room, as
    a submission does): row 7 is undone too and is the one owed."""
    def fail(rows):
        if len(rows) == 7:
            time.sleep(0.3 * async_output)
            return True
        return False
    sim = _sim(async_output, dt=0.05)
    rewriter = _Rewriter(TimeInterval(0.05), fail=fail)
    reader = _Reader(TimeInterval(0.15), rewriter)
    sim.output_writers.update(rows=rewriter, reader=reader)
    with pytest.raises(OSError, match="No space"):
        sim.run(t_end=0.5)
    assert rewriter.rows == rewriter.file == [0, 1, 2, 3]
    assert reader.seen == [(0, [0]), (3, [0, 1, 2, 3])]
    assert sim.iteration == 6 + async_output
    assert rewriter.schedule.next_index == sim.iteration and reader.schedule.next_index == 2


def test_a_second_ctrl_c_gives_up_a_deferred_write():
    def interrupt(s):
        raise KeyboardInterrupt
    sim = _sim(dt=0.05)
    rewriter = _Rewriter(TimeInterval(0.05))
    sim.output_writers["rows"] = rewriter
    sim.callbacks["ctrl_c"] = Callback(interrupt, IterationInterval(4))
    with pytest.raises(KeyboardInterrupt):
        sim.run(t_end=1.0)
    assert rewriter.rows == rewriter.file == []      # iteration 0's was held as well


# -- diagnostics.nc rewritten less often than once per row ------------------------------------
def _count_rewrites(monkeypatch):
    """The row counts of every DiagnosticsLog.write."""
    counts, write = [], DiagnosticsLog.write

    def counting(log, rows=None):
        counts.append(len(log.rows if rows is None else rows))
        return write(log, rows)
    monkeypatch.setattr(DiagnosticsLog, "write", counting)
    return counts


@pytest.mark.parametrize("async_output", [False, True])
def test_diagnostics_are_rewritten_less_often_than_rows_and_lose_none(
        async_output, tmp_path, monkeypatch):
    """A row every step, a large min_rewrite_interval: the file is written at the first
    row, before each snapshot (with exactly the rows it counts) and at the end (with
    every row), and holds the same rows as a run that rewrites it at every row."""
    counts = _count_rewrites(monkeypatch)
    for name, interval in (("every", 0.0), ("deferred", 1e6)):
        (tmp_path / name).mkdir()
        sim = _sim(async_output, dt=0.05)
        sim.output_writers.update(run_writers(str(tmp_path / name), META, "h", 0.25, 0.05,
                                              plot=False, min_rewrite_interval=interval))
        counts.clear()
        sim.run(t_end=1.0)
    assert counts == [1, 6, 11, 16, 21]       # first row; the snapshots 5, 10, 15, 20 (final)
    _same_files(tmp_path / "every", tmp_path / "deferred")
    for snap in _whole(tmp_path / "deferred"):
        s = read_snapshot(snap)
        assert s.schedule["diagnostics_rows"] == counts[[0, 5, 10, 15, 20].index(
            s.iteration)]


def test_every_snapshot_of_a_deferred_run_finds_its_rows_on_disk_and_restarts_bitwise(
        tmp_path, monkeypatch):
    """What a SIGKILL right after each snapshot would leave: a copy of the run directory
    taken on the output thread as each snapshot is written.  Its diagnostics.nc has the
    snapshot's rows (split_rows checks the count), and a restart from the copy of a middle
    snapshot writes bitwise the files of an uninterrupted run that rewrites every row."""
    ref, out = tmp_path / "ref", tmp_path / "out"
    ref.mkdir()
    out.mkdir()
    sim = _sim(False, adaptive=True, courant=0.02)
    sim.output_writers.update(run_writers(str(ref), META, "h", 0.1, 0.03, plot=False,
                                          min_rewrite_interval=0.0))
    sim.run(t_end=0.4)
    write, copies = W.write_snapshot, []

    def write_and_copy(path, state, *args, **kwargs):
        write(path, state, *args, **kwargs)
        copy = tmp_path / f"copy{len(copies)}"
        shutil.copytree(out, copy)
        copies.append((copy, path))
    monkeypatch.setattr(W, "write_snapshot", write_and_copy)
    sim = _sim(adaptive=True, courant=0.02)
    sim.output_writers.update(run_writers(str(out), META, "h", 0.1, 0.03, plot=False,
                                          min_rewrite_interval=1e6))
    sim.run(t_end=0.4)
    monkeypatch.setattr(W, "write_snapshot", write)
    assert len(copies) == 6                  # at t = 0, 0.1, ..., 0.4, then the final one
    for copy, path in copies:
        snap = read_snapshot(copy / os.path.basename(path))
        W.later_output(copy, snap.iteration, snap.schedule["diagnostics_rows"])
    copy, path = copies[2]                  # killed after the snapshot at t = 0.2
    assert sorted(glob.glob(str(copy / "snapshot_*.nc")))[-1].endswith(
        os.path.basename(path))
    again = vortexsim.from_config(sim.config)
    again.output_writers.update(run_writers(str(copy), META, "h", 1.0, 1.0, plot=False,
                                            min_rewrite_interval=1e6))
    again.run(pickup="latest")
    _same_files(ref, copy)


def test_an_interrupted_deferred_run_checkpoints_every_row_and_continues_bitwise(tmp_path):
    """request_stop (the CLI's first Ctrl-C) in a run whose rows all wait in memory: the
    interrupted checkpoint counts every row and diagnostics.nc holds them; the restart
    ends with the rows of an uninterrupted run."""
    ref, out = tmp_path / "ref", tmp_path / "out"
    for d, stop in ((ref, None), (out, 7)):
        d.mkdir()
        sim = _sim(dt=0.05)
        sim.output_writers.update(run_writers(str(d), META, "h", 0.25, 0.05, plot=False,
                                              min_rewrite_interval=0.0 if stop is None
                                              else 1e6))
        if stop:
            sim.callbacks["stop"] = Callback(lambda s: s.request_stop(),
                                             IterationInterval(stop))
        sim.run(t_end=0.6)
    assert sim.stop_reason == "interrupted" and sim.iteration == 7
    last = read_snapshot(_whole(out)[-1])
    assert last.attrs["snapshot_kind"] == "interrupted"
    assert last.schedule["diagnostics_rows"] == len(read_rows(out / "diagnostics.nc")) == 8
    again = vortexsim.from_config(sim.config)
    again.output_writers.update(run_writers(str(out), META, "h", 1.0, 1.0, plot=False,
                                            min_rewrite_interval=1e6))
    again.run(pickup="latest")
    with xr.open_dataset(ref / "diagnostics.nc") as a, \
            xr.open_dataset(out / "diagnostics.nc") as b:
        for v in a.variables:
            assert a[v].values.tobytes() == b[v].values.tobytes(), v


def test_rows_run_inside_the_next_step_and_give_the_files_of_rows_run_at_once(
        tmp_path, monkeypatch):
    """A due diagnostics row runs inside the next step, before it commits (it sees the
    state the step started from), unless another writer or a callback acts first or the
    run ends; the files are bitwise those of rows computed at once (overlap_rows False),
    and a row's time is its writer's, not the step's."""
    seen = []
    diagnostics = vortexsim.Simulation.diagnostics

    def spy(sim):
        frames = [f.function for f in __import__("inspect").stack()[1:12]]
        seen.append((sim.iteration, "step" in frames))
        return diagnostics(sim)
    monkeypatch.setattr(vortexsim.Simulation, "diagnostics", spy)
    for overlap in (True, False):
        seen.clear()
        (tmp_path / str(overlap)).mkdir()
        sim = _sim(adaptive=True, courant=0.02, nu=1e-3)
        sim.overlap_rows = overlap
        ticks = []
        sim.callbacks["tick"] = Callback(lambda s: ticks.append(s.iteration),
                                         IterationInterval(5))
        sim.output_writers.update(run_writers(str(tmp_path / overlap.__str__()), META, "h",
                                              0.13, 0.05, plot=False))
        sim.run(t_end=0.4)
        inside = [it for it, in_step in seen if in_step]
        if overlap:
            assert len(inside) >= len(seen) // 2, "most rows run inside a step"
            assert seen[-1][1] is False, "the final row: no step follows"
            # every write counted once, wherever its row ran, and the finalize
            assert sim.run_timings["diagnostics"][1] == len(seen) + 1
        else:
            assert not inside
    assert _same_files(tmp_path / "True", tmp_path / "False")[0] == "diagnostics.nc"


def test_a_row_that_fails_inside_a_step_fails_the_run_before_the_step_commits(
        tmp_path, monkeypatch):
    """A row that raises inside the next step is the run's error: that step is not
    committed, the writer's schedule still owes the row, and the checkpoint written at
    the error holds the state the row was of."""
    sim = _sim()
    sim.output_writers.update(run_writers(str(tmp_path), META, "h", 1.0, 0.05, plot=False))
    calls = []
    diagnostics = vortexsim.Simulation.diagnostics

    def failing(s):
        calls.append(s.iteration)
        if len(calls) == 3:
            raise RuntimeError("row failed")
        return diagnostics(s)
    monkeypatch.setattr(vortexsim.Simulation, "diagnostics", failing)
    with pytest.raises(RuntimeError, match="row failed"):
        sim.run(t_end=0.4)
    assert sim.iteration == calls[-1], "the step the row ran in was not committed"
    writer = sim.output_writers["diagnostics"]
    assert writer.rows == 2
    assert writer.schedule(sim), "the schedule still owes the failed row"
