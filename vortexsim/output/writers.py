r"""Output writers of a run: snapshots (each a checkpoint), the diagnostics file, the plot.

Each writer is attached to :attr:`vortexsim.Simulation.output_writers` under a name and
follows the run loop's protocol (:meth:`vortexsim.Simulation.run`): ``schedule`` (a
:mod:`vortexsim.schedules` schedule; None: acts only at the end), ``write(sim)``,
``initialize(sim)``, ``finalize(sim, reason)`` and ``state_dict()`` /
``load_state_dict(state)``.  What ``vortexsim run`` attaches (:func:`run_writers`)::

    "diagnostics": DiagnosticsWriter   diagnostics.nc, a row at t0 + k·diagnostics_interval
                                       and at the end
    "snapshots":   SnapshotWriter      snapshot_<iteration>.nc at t0 + k·snapshot_interval,
                                       at the end, on an interruption, a failed check
                                       (last good state) or an error; reads them back
                                       for a pickup
    "plot":        PlotWriter          plot.png at the end

At a time that is both, the diagnostics row comes first, so the snapshot's row count
includes it.  Each snapshot stores the run's state (:meth:`Simulation.run_state_dict`:
stop criteria, schedules, the number of diagnostics rows) as its ``run_*`` global
attributes, in the form of snapshot format 1 (:func:`schedule_attrs`,
:func:`run_state_from_schedule`), so that old and new snapshots restart alike.

How a write goes: on the main thread, when the schedule fires, the writer captures what
it writes (``state_dict()``: a host copy of the state; ``diagnostics()``: the row, which
needs the device) and records it (the snapshot's path, the row); the file I/O goes to
``sim.submit_output(func, undo)``, which runs it on the run's output thread
(:mod:`vortexsim.simulation.output_thread`: one thread, in submission order, at most two pending)
while the next steps run, or at once outside a run or with ``async_output=False``.  If
the write fails, ``undo`` forgets the record again, so the writer's state stays that of
the files on disk.  The diagnostics file, rewritten whole with every row so far, is
rewritten at most every ``MIN_REWRITE_INTERVAL`` seconds during a run
(``submit_output(..., defer=True)``: a deferred rewrite is replaced by the next row's,
and written before any other writer's output, e.g. a snapshot, and at the end of the
run).  During a run every netCDF file is written by that one thread; the run's plot is
drawn at its end on the main thread from the rows and the state in memory (no file read
back), while the output thread writes the final snapshot.  Each writer removes, when a run
starts, the temporary files that an interrupted write of its own left
(:func:`vortexsim.output.files.remove_stale_tmp`).

This module knows the simulation only through that protocol (``sim.t``,
``sim.iteration``, ``sim.dt``, ``sim.config``, ``state_dict()``, ``diagnostics()``,
``run_state_dict()``, ``submit_output()``, ``flush_output()``).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
import math
import os
import re
import shutil
import time

import numpy as np

from ..backend import to_host
from ..diagnostics.health import HealthLog
from ..schedules import TimeInterval, load_schedule_state, schedule_state
from .diagnostics import SPECTRA_FILE, DiagnosticsLog, split_rows
from .files import atomic_path, remove_stale_tmp, write_text
from .plot import latest_snapshot, plot_rows, plot_run, preload
from .snapshot import (Snapshot, SnapshotError, preload_netcdf, read_snapshot,
                       write_snapshot)

logger = logging.getLogger(__name__)

__all__ = ["SnapshotWriter", "DiagnosticsWriter", "PlotWriter", "run_writers",
           "MIN_REWRITE_INTERVAL",
           "output_intervals", "schedule_attrs", "run_state_from_schedule", "snapshot_name",
           "SCHEDULE_KEYS", "snapshot_files", "LaterOutput", "later_output", "branch_dir",
           "start_branch", "truncate_run"]

#: [s] the least wall time between two rewrites of ``diagnostics.nc`` during a run
#: (:class:`DiagnosticsWriter`): the rows in between wait in memory
MIN_REWRITE_INTERVAL = 2.0
#: the ``run_*`` attributes that ``vortexsim restart`` needs (snapshot format 1)
SCHEDULE_KEYS = ("t0", "snapshot_interval", "diagnostics_interval", "next_snapshot",
                 "next_diagnostics", "diagnostics_rows")
#: writer name → (its interval key, its next-index key) in the ``run_*`` attributes
_LEGACY = {"snapshots": ("snapshot_interval", "next_snapshot"),
           "diagnostics": ("diagnostics_interval", "next_diagnostics")}


def snapshot_name(iteration):
    """``snapshot_<iteration:08d>.nc``."""
    return f"snapshot_{iteration:08d}.nc"


_SNAPSHOT_FILE = re.compile(r"snapshot_(\d+)\.nc")


def snapshot_files(run_dir):
    """``{iteration: path}`` of the ``snapshot_<iteration>.nc`` files in ``run_dir``."""
    out = {}
    with contextlib.suppress(OSError):
        for name in os.listdir(run_dir):
            m = _SNAPSHOT_FILE.fullmatch(name)
            if m:
                out[int(m.group(1))] = os.path.join(run_dir, name)
    return out


def output_intervals(dt, duration, snapshot_interval=None, diagnostics_interval=None):
    """The snapshot and diagnostics intervals [T] of a run, the automatic ones (None or 0)
    derived as whole multiples of ``dt`` (so that no step is shortened for them): about
    ``duration``/10 between snapshots and snapshot_interval/10 between diagnostics rows.

    Returns (snapshot_interval, diagnostics_interval) as floats.
    """
    snap_dt = snapshot_interval or dt * max(1, round(duration / (10 * dt)))
    diag_dt = diagnostics_interval or dt * max(1, round(snap_dt / (10 * dt)))
    return float(snap_dt), float(diag_dt)


# -- the run state in the snapshot's run_* attributes -----------------------------------------
def _is_interval(state):
    return isinstance(state, dict) and set(state) == {"t0", "interval", "next_index"}


def _empty(value):
    return isinstance(value, dict) and all(_empty(v) for v in value.values())


def schedule_attrs(run):
    """The ``run_*`` attributes (prefix dropped) of a :meth:`Simulation.run_state_dict`.

    The time-interval schedules of the writers named ``snapshots`` and ``diagnostics``
    and the diagnostics row count become the format-1 keys (``t0``,
    ``snapshot_interval``, ``next_snapshot``, ``diagnostics_interval``,
    ``next_diagnostics``, ``diagnostics_rows``), with ``stop_time``, ``stop_iteration``
    and ``plot`` (1 when a writer named ``plot`` is attached); any other non-empty state
    (other writers, callbacks, other schedules) goes into ``state_json``.
    """
    writers = {k: dict(v) for k, v in (run.get("output_writers") or {}).items()}
    out, t0 = {}, None
    legacy = {}
    for name, (interval_key, next_key) in _LEGACY.items():
        sched = writers.get(name, {}).get("schedule")
        if _is_interval(sched) and sched["t0"] is not None and t0 in (None, sched["t0"]):
            t0 = sched["t0"]
            legacy[name] = (interval_key, next_key, sched)
            del writers[name]["schedule"]
    if legacy:
        out["t0"] = float(t0)
        for interval_key, _, sched in legacy.values():
            out[interval_key] = float(sched["interval"])
        for _, next_key, sched in legacy.values():
            out[next_key] = int(sched["next_index"])
    if "diagnostics" in legacy and "rows" in writers["diagnostics"]:
        out["diagnostics_rows"] = int(writers["diagnostics"].pop("rows"))
    out["stop_time"] = None if run.get("stop_time") is None else float(run["stop_time"])
    out["stop_iteration"] = None if run.get("stop_iteration") is None else \
        int(run["stop_iteration"])
    out["plot"] = int("plot" in writers)
    rest = {"output_writers": {k: v for k, v in writers.items() if not _empty(v)},
            "callbacks": {k: v for k, v in (run.get("callbacks") or {}).items()
                          if not _empty(v)}}
    if not _empty(rest):
        out["state_json"] = json.dumps(rest, sort_keys=True)
    return out


def run_state_from_schedule(schedule):
    """The :meth:`Simulation.run_state_dict` stored in a snapshot's ``run_*`` attributes
    (:attr:`Snapshot.schedule`; inverse of :func:`schedule_attrs`)."""
    s = dict(schedule)
    writers = {}
    for name, (interval_key, next_key) in _LEGACY.items():
        if s.get(interval_key) is not None and s.get(next_key) is not None and \
                s.get("t0") is not None:
            writers[name] = {"schedule": {"t0": float(s["t0"]),
                                          "interval": float(s[interval_key]),
                                          "next_index": int(s[next_key])}}
    if "diagnostics" in writers and s.get("diagnostics_rows") is not None:
        writers["diagnostics"]["rows"] = int(s["diagnostics_rows"])
    run = {"stop_time": None if s.get("stop_time") is None else float(s["stop_time"]),
           "stop_iteration": None if s.get("stop_iteration") is None else
           int(s["stop_iteration"]),
           "output_writers": writers, "callbacks": {}}
    if s.get("plot", 1):
        writers.setdefault("plot", {})
    if s.get("state_json"):
        rest = json.loads(s["state_json"])
        for key in ("output_writers", "callbacks"):
            for name, state in rest.get(key, {}).items():
                run[key].setdefault(name, {}).update(state)
    return run


# -- the writers ----------------------------------------------------------------------------
def _submit(sim, func, undo=None, defer=False):
    """``func()`` (file I/O of data captured on the main thread) through
    ``sim.submit_output`` (the run's output thread; ``defer``: it may wait for the next
    write), or at once for an object without it; ``undo()`` when the write fails."""
    submit = getattr(sim, "submit_output", None)
    if submit is not None:
        if defer:
            submit(func, undo, defer=True)
        else:
            submit(func, undo)
        return
    try:
        func()
    except BaseException:
        if undo is not None:
            undo()
        raise


def _writes(sim):
    """Whether ``sim``'s process writes the run's files (on several ranks rank 0 alone:
    :attr:`vortexsim.Simulation.writes_files`); the others only keep the writers' state."""
    return getattr(sim, "writes_files", True)


def _flush(sim):
    """Wait until ``sim``'s pending writes are on disk (``sim.flush_output()``)."""
    flush = getattr(sim, "flush_output", None)
    if flush is not None:
        flush()


class SnapshotWriter:
    """``snapshot_<iteration:08d>.nc`` in ``run_dir`` on its schedule and at the end of a
    run; each snapshot is a complete checkpoint (:func:`write_snapshot`).

    Parameters
    ----------
    run_dir : str, the directory of the snapshots
    schedule : schedule (e.g. ``TimeInterval(snapshot_interval)``) or None (only at the end)
    meta : dict, global attributes (case, config TOML, version, device, …)
    history : str, the CF ``history`` text

    ``finalize(sim, reason)`` writes the kind of snapshot ``reason`` calls for:
    ``"done"`` → ``final`` (unless this iteration's is written and its run state is still
    current: a final diagnostics row after it makes it rewritten), ``"interrupted"`` →
    ``interrupted``, ``"failed"`` → ``last_good_state``, ``"error"`` → ``error``.
    :attr:`last_path` is the newest file; :meth:`read_checkpoint` reads one back.
    """

    _KINDS = {"done": "final", "interrupted": "interrupted", "failed": "last_good_state",
              "error": "error"}
    whole_state = "root"     # rank 0 alone writes it: the whole state on its host alone

    def __init__(self, run_dir, schedule=None, meta=None, history=""):
        self.run_dir = os.fspath(run_dir)
        self.schedule = schedule
        self.meta, self.history = dict(meta or {}), history
        self.last_path = None
        self.last_iteration = None
        self._last_schedule = None
        self._swept = False

    def path(self, iteration):
        return os.path.join(self.run_dir, snapshot_name(iteration))

    def initialize(self, sim):
        """Once: remove the temporary snapshot files of an interrupted earlier write, and
        import the netCDF stack (:func:`~vortexsim.output.snapshot.preload_netcdf`)
        before the first step."""
        if not self._swept and _writes(sim):
            remove_stale_tmp(self.run_dir, "snapshot_*.nc")
            self._swept = True
            preload_netcdf()

    def write(self, sim, kind="scheduled"):
        """Write the snapshot of the current state; returns its path.

        The state, config and run state are captured now; the file is written through
        ``sim.submit_output`` (during a run: on the output thread, after the writes
        submitted before it)."""
        path = self.path(sim.iteration)
        schedule = schedule_attrs(sim.run_state_dict())
        recorded = self.last_path, self.last_iteration, self._last_schedule

        def undo():
            self.last_path, self.last_iteration, self._last_schedule = recorded

        self.last_path, self.last_iteration = path, sim.iteration
        self._last_schedule = schedule
        if not _writes(sim):            # another rank writes it: no copy of the state
            return path
        state, config = sim.state_dict(), copy.deepcopy(sim.config)
        meta, history = self.meta, self.history
        _submit(sim, lambda: write_snapshot(path, state, config, meta, schedule, kind,
                                            history), undo)
        if kind == "scheduled":
            logger.info("t = %.6g, iteration %d, dt = %.4g: saving %s", sim.t, sim.iteration,
                        sim.dt, os.path.basename(path))
        return path

    def finalize(self, sim, reason):
        if reason == "done" and self.last_iteration == sim.iteration and \
                self._last_schedule == schedule_attrs(sim.run_state_dict()):
            return          # this iteration's snapshot is written and still up to date
        if reason != "error":
            self.write(sim, self._KINDS[reason])
            return
        try:
            path = self.write(sim, "error")
            _flush(sim)
            logger.error("unexpected error; the state of the last completed step is in %s",
                         path, extra={"file_only": True})     # the command says it
        except Exception:  # noqa: BLE001 - the run's own error is the one to report
            logger.error("unexpected error; no checkpoint could be written",
                         extra={"file_only": True})

    def read_checkpoint(self, source):
        """The checkpoint of ``source`` for :meth:`vortexsim.Simulation.pickup`: a snapshot
        path, ``"latest"`` or True (the newest in ``run_dir``), an iteration, or a
        :class:`Snapshot` already read.  Returns ``{"state", "run", "path"}``; raises
        :class:`SnapshotError` for a missing, corrupted or foreign file."""
        if isinstance(source, Snapshot):
            snap = source
        else:
            if source is True or source == "latest":
                path = latest_snapshot(self.run_dir)
                if path is None:
                    raise SnapshotError(f"no snapshot_*.nc in {self.run_dir} to pick up from.")
            elif isinstance(source, int) and not isinstance(source, bool):
                path = self.path(source)
            else:
                path = os.fspath(source)
            snap = read_snapshot(path)
        self.last_iteration = snap.iteration      # that checkpoint exists: not rewritten
        self.last_path, self._last_schedule = snap.path, dict(snap.schedule)
        return {"state": snap.state, "run": run_state_from_schedule(snap.schedule),
                "path": snap.path}

    def state_dict(self):
        return schedule_state(self.schedule)

    def load_state_dict(self, state):
        load_schedule_state(self.schedule, state)
        return self


class DiagnosticsWriter:
    """A row of :meth:`vortexsim.Simulation.diagnostics` (and ``dt_next``, the next step's
    dt) in ``path`` (``diagnostics.nc``, :class:`DiagnosticsLog`, rewritten atomically)
    on its schedule, and a final row at the end of a run (unless this iteration has one).

    Parameters
    ----------
    path : str, the diagnostics file
    schedule : schedule, e.g. ``TimeInterval(diagnostics_interval)``
    meta : dict, global attributes; history : str, the CF ``history`` text
    min_rewrite_interval : float [s] >= 0, the least wall time between two rewrites of
        the file during a run (default ``MIN_REWRITE_INTERVAL``; 0: at every row)

    The file is rewritten whole, with every row so far.  During a run a row sooner than
    ``min_rewrite_interval`` after the last rewrite is kept in memory and its rewrite
    deferred (``sim.submit_output(..., defer=True)``): the next row's rewrite replaces
    it, and any other output (a snapshot, the plot read from the files) and the end of
    the run, whatever its reason, write it first.  So the file holds every row that a snapshot counts, and all rows when the
    run ends.  A rewrite that fails forgets the rows it held and owes the newest.

    The state is the schedule's and the number of rows.  After
    :meth:`load_state_dict` (a pickup) :meth:`initialize` resumes the file: it keeps the
    rows up to the current iteration (there must be as many as the state says) and
    drops later ones, so the file continues without duplicated or missing rows.
    """

    whole_state = False      # it reads the row alone (on the slabs of a split state)

    def __init__(self, path, schedule=None, meta=None, history="",
                 min_rewrite_interval=MIN_REWRITE_INTERVAL):
        if isinstance(min_rewrite_interval, bool) or not isinstance(
                min_rewrite_interval, (int, float)) or not (
                math.isfinite(min_rewrite_interval) and min_rewrite_interval >= 0):
            raise ValueError(f"min_rewrite_interval must be a number of seconds >= 0, got "
                             f"{min_rewrite_interval!r}.")
        self.path = os.fspath(path)
        self.schedule = schedule
        self.meta, self.history = dict(meta or {}), history
        self.min_rewrite_interval = float(min_rewrite_interval)
        self.log = None
        self._resume_rows = None
        self._swept = False
        # time.monotonic() of the last rewrite submitted or begun (set on the output
        # thread too, when a deferred rewrite is written)
        self._rewritten = -math.inf
        self.health = None

    def initialize(self, sim):
        if not self._swept and _writes(sim):   # once: the temporary file of an earlier write
            folder = os.path.dirname(os.path.abspath(self.path))
            for name in (os.path.basename(self.path), SPECTRA_FILE):
                remove_stale_tmp(folder, name)
            self._swept = True
            preload_netcdf()      # the netCDF stack imported before the first step
        if self.log is not None:
            return
        if self._resume_rows is None:
            self.log = DiagnosticsLog(self.path, self.meta, history=self.history)
        else:
            self.log = DiagnosticsLog.resume(self.path, self.meta, sim.iteration,
                                             self._resume_rows, self.history)
            self._resume_rows = None

    def write(self, sim):
        """Compute the row of the current state (main thread, device) and rewrite the
        file through ``sim.submit_output`` with the rows up to it, deferred when the last
        rewrite is less than ``min_rewrite_interval`` ago.  Inside a run the row may be
        computed during the next step, beside its kernels (``sim.defer_row``,
        :meth:`vortexsim.Simulation.defer_row`): same state, same values."""
        self.initialize(sim)
        defer = getattr(sim, "defer_row", None)
        if defer is None:
            self._write_row(sim)
        else:
            defer(lambda: self._write_row(sim))

    def _write_row(self, sim):
        row = sim.diagnostics()
        row["dt_next"] = sim.dt
        log = self.log
        row = log.add(row)
        if self.health is None:
            self.health = HealthLog(sim.model.rhs.nu,
                                   periodic=sim.model.domain.name == "periodic")
        self.health.update(log.rows)         # energy_error from every row; warnings
        rows = list(log.rows)
        now = time.monotonic()
        defer = now - self._rewritten < self.min_rewrite_interval
        if not defer:
            self._rewritten = now

        def rewrite():
            self._rewritten = time.monotonic()
            log.write(rows)
        _submit(sim, rewrite, lambda: log.discard(row), defer)

    def finalize(self, sim, reason):
        if reason != "done":
            return
        self.initialize(sim)
        rows = self.log.rows
        if not rows or rows[-1]["iteration"] != sim.iteration:
            self.write(sim)

    @property
    def rows(self):
        """The number of rows written (or to be resumed)."""
        if self.log is not None:
            return len(self.log)
        return self._resume_rows or 0

    def state_dict(self):
        return {"rows": self.rows, **schedule_state(self.schedule)}

    def load_state_dict(self, state):
        load_schedule_state(self.schedule, state)
        self._resume_rows = int(state.get("rows", 0))
        self.log = None
        return self


class PlotWriter:
    """``plot.png`` of the run directory at the end of a completed run; a plot never
    fails a run (a problem is a warning).  No schedule, no state.

    With ``diagnostics`` (the run's :class:`DiagnosticsWriter`, holding every row in
    memory) the plot is drawn on the main thread from those rows and the final state
    (:func:`vortexsim.output.plot.plot_rows`), while the output thread writes the final
    snapshot: neither waits for the other, and no file is read back (on an H100 machine
    the end of the leapfrog GPU run waited 0.38–0.58 s for the plot drawn from the
    files).  Without it the plot reads the run's files (:func:`.plot.plot_run`) on the
    output thread, after the final snapshot.  Drawn beside the final writes, the plot is
    on disk even when one of them fails (the run ends with that error, checkpointed)."""

    schedule = None
    whole_state = "root"     # rank 0 alone draws it

    def __init__(self, run_dir, path=None, diagnostics=None):
        self.run_dir, self.path_ = os.fspath(run_dir), path
        self.diagnostics = diagnostics
        self._swept = False

    def initialize(self, sim):
        """Once: remove the temporary file of an interrupted earlier plot; on the GPU,
        warm up matplotlib (:func:`~vortexsim.output.plot.preload`) before the first step
        (on the CPU its drawing cost more than it saved: a plot 1.75 s with, 1.51 without)."""
        if not self._swept and _writes(sim):
            path = self.path_ or os.path.join(self.run_dir, "plot.png")
            remove_stale_tmp(os.path.dirname(os.path.abspath(path)), os.path.basename(path))
            self._swept = True
            if sim.device.kind == "gpu":
                preload()

    def write(self, sim):
        """Make the plot through ``sim.submit_output`` (at once outside a run)."""
        _submit(sim, self._plot)

    def _plot(self):
        try:
            return plot_run(self.run_dir, self.path_)
        except Exception as exc:  # noqa: BLE001 - a plot never fails a finished run
            logger.warning("could not write the plot: %s", exc)
            return None

    def finalize(self, sim, reason):
        if reason != "done" or not _writes(sim):
            return
        log = getattr(self.diagnostics, "log", None)
        if log is None or not log.rows:
            self.write(sim)
            return
        try:
            x = to_host(sim.elements.x)
            y = to_host(sim.tracers.x) if sim.tracers is not None else np.zeros((0, 3))
            case = self.diagnostics.meta.get("case", "")
            # the title of plot_run, which names the final snapshot (this state)
            plot_rows(list(log.rows), x, y, sim.t,
                      f"vortexsim: {case}  ({snapshot_name(sim.iteration)})",
                      self.path_ or os.path.join(self.run_dir, "plot.png"))
        except Exception as exc:  # noqa: BLE001 - a plot never fails a finished run
            logger.warning("could not write the plot: %s", exc)

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        return self


def run_writers(run_dir, meta, history, snapshot_interval, diagnostics_interval, plot=True,
                t0=None, min_rewrite_interval=MIN_REWRITE_INTERVAL):
    """The writers of ``vortexsim run`` in their order: ``diagnostics``, ``snapshots`` and
    (with ``plot``) ``plot``, writing into ``run_dir`` at ``t0 + k·interval`` (t0 None:
    the start of the run; ``diagnostics.nc`` rewritten at most every
    ``min_rewrite_interval`` seconds of wall time, and before every snapshot).  Their
    files are written on the run's output thread (the simulation's ``async_output``,
    default True), in this order at a time that is both."""
    writers = {
        "diagnostics": DiagnosticsWriter(os.path.join(run_dir, "diagnostics.nc"),
                                         TimeInterval(diagnostics_interval, t0), meta, history,
                                         min_rewrite_interval),
        "snapshots": SnapshotWriter(run_dir, TimeInterval(snapshot_interval, t0), meta,
                                    history),
    }
    if plot:
        writers["plot"] = PlotWriter(run_dir, diagnostics=writers["diagnostics"])
    return writers


# -- run history: the output after a snapshot, branches, truncation ---------------------------
@dataclasses.dataclass(frozen=True)
class LaterOutput:
    """What a run directory holds around a snapshot at ``iteration``
    (:func:`later_output`).

    run_dir : str
    iteration : int, the snapshot's
    snapshots : tuple of the paths of the snapshots after it (oldest first)
    rows : tuple of the diagnostics rows up to it (as many as the snapshot counts)
    later_rows : tuple of the diagnostics rows after it

    True when there is output after the snapshot (later snapshots or rows): a restart
    that continued in ``run_dir`` would replace or strand it.
    """

    run_dir: str
    iteration: int
    snapshots: tuple
    rows: tuple
    later_rows: tuple

    def __bool__(self):
        return bool(self.snapshots or self.later_rows)

    def describe(self):
        """E.g. ``3 later snapshots (snapshot_00000010.nc, …) and 15 later diagnostics
        rows (t = 0.3 … 1)``."""
        parts = []
        if self.snapshots:
            names = [os.path.basename(p) for p in self.snapshots]
            if len(names) > 6:
                names = [*names[:3], "…", *names[-2:]]
            n = len(self.snapshots)
            parts.append(f"{n} later snapshot{'s' * (n != 1)} ({', '.join(names)})")
        if self.later_rows:
            n, first, last = len(self.later_rows), self.later_rows[0], self.later_rows[-1]
            span = f"{first['t']:.6g}" + (f" … {last['t']:.6g}" if n > 1 else "")
            parts.append(f"{n} later diagnostics row{'s' * (n != 1)} (t = {span})")
        return " and ".join(parts) or "no later output"


def later_output(run_dir, iteration, expected_rows):
    """The output of ``run_dir`` around its snapshot at ``iteration`` (:class:`LaterOutput`).

    ``expected_rows`` is the snapshot's count of diagnostics rows; a ``diagnostics.nc``
    that holds another number of rows up to ``iteration``, or none although rows are
    expected, raises :class:`SnapshotError` (:func:`vortexsim.output.diagnostics.split_rows`).
    """
    run_dir = os.fspath(run_dir)
    kept, later = split_rows(os.path.join(run_dir, "diagnostics.nc"), iteration,
                             expected_rows)
    snaps = tuple(p for k, p in sorted(snapshot_files(run_dir).items()) if k > iteration)
    return LaterOutput(run_dir, int(iteration), snaps, tuple(kept), tuple(later))


def branch_dir(run_dir, iteration):
    """A new directory for a branch of ``run_dir`` at ``iteration``:
    ``run_dir/branch_<iteration:08d>``, or with ``_2``, ``_3``, … when that exists."""
    base = os.path.join(os.fspath(run_dir), f"branch_{iteration:08d}")
    path, k = base, 1
    while os.path.lexists(path):
        k += 1
        path = f"{base}_{k}"
    return path


def start_branch(branch, snapshot_path, rows, meta, history, config_toml=None):
    """Make the existing empty directory ``branch`` a run directory that starts at a
    snapshot: ``config.toml`` (``config_toml``, when given), a copy of the snapshot (the
    same bytes, so its checksum holds) and ``diagnostics.nc`` with ``rows`` (the rows up to
    the snapshot, :attr:`LaterOutput.rows`; none: no file).  Each file is written
    atomically; the snapshot's own directory is only read.  Returns the copy's path."""
    branch = os.fspath(branch)
    if config_toml:
        write_text(os.path.join(branch, "config.toml"), config_toml)
    if rows:
        DiagnosticsLog(os.path.join(branch, "diagnostics.nc"), meta, rows, history).write()
    copy_path = os.path.join(branch, os.path.basename(os.fspath(snapshot_path)))
    with atomic_path(copy_path) as tmp:
        shutil.copyfile(snapshot_path, tmp)
    return copy_path


def truncate_run(later, meta, history):
    """Drop the output after a snapshot from its run directory (``vortexsim restart
    --truncate``): delete ``later.snapshots``, newest first, then rewrite
    ``diagnostics.nc`` with ``later.rows`` (atomically; only when it has later rows).  In
    this order an interruption leaves a directory that restarts (rows after the newest
    snapshot are recomputed).  Each deleted file is logged.  Returns the deleted paths."""
    deleted = []
    for path in reversed(later.snapshots):
        os.remove(path)
        deleted.append(path)
        logger.info("--truncate: deleted %s", path)
    if later.later_rows:
        path = os.path.join(later.run_dir, "diagnostics.nc")
        DiagnosticsLog(path, meta, later.rows, history).write()
        logger.info("--truncate: %s now ends at iteration %d (%d rows dropped)", path,
                    later.iteration, len(later.later_rows))
    return deleted
