"""``vortexsim restart``: continue the run of a snapshot, in its directory, in a new
branch directory beside its later output, or truncating that output (``docs/cli.md``,
*Run history*)."""
from __future__ import annotations

import logging
import math
import os

import numpy as np

from ..schedules import due
from ..backend import SingleProcess
from .common import UsageError, check_device, first_line
from .ranks import Ranks
from .execute import log_cores, run_simulation
from .log import add_file_log
from .resources import ResourceError, check_schedule
from .rundir import (RUN_MARKER, RunDirLock, directory_entries, history_line, is_run_dir,
                     mark_run_dir, remove_branch, run_metadata)
from .run import check_memory

__all__ = ["cmd_restart", "restart_stop", "restart_target", "snapshot_on_ranks"]

logger = logging.getLogger("vortexsim.cli")


def cmd_restart(args, argv):
    """``vortexsim restart``; on several MPI ranks every rank runs and rank 0 alone
    touches the run directory (:mod:`vortexsim.cli.ranks`): a snapshot of any number
    of ranks restarts on any other, each rank holding the whole state or, where the
    continuation splits it by slabs, its rows (:func:`snapshot_on_ranks`)."""
    ranks = getattr(args, "ranks", None) or Ranks(SingleProcess())
    sharing = ranks.sharing(args.device or "auto")
    snap = snapshot_on_ranks(ranks, args.snapshot)
    snap, config, s, stop = ranks.agree(_checked_restart, args, sharing, snap)
    ranks.use_device(config.get("device", "auto"))
    ranks.on_root(_check_out, args.out)
    mode, run_dir, later = ranks.on_root(restart_target, snap, stop, args.truncate, args.out,
                                         share=True)
    branch = mode == "branch"
    lock, created = ranks.on_root(_branch_and_lock, run_dir, branch) or (None, False)
    try:
        return _continue(ranks, args, argv, snap, config, s, stop, mode, run_dir, later,
                         branch, created)
    finally:
        if lock is not None:
            lock.release()


def _check_out(out):
    if out is not None and os.path.exists(out) and \
            (not os.path.isdir(out) or os.listdir(out)):
        raise UsageError(f"--out {out} exists and is not an empty directory; the "
                         "continuation of a restart goes into a new (or empty) directory.")


def _branch_and_lock(run_dir, branch):
    """(lock, created): the branch directory made (when ``branch``) and ``run_dir``
    locked (rank 0's)."""
    created = False
    if branch:
        try:
            created = not os.path.isdir(run_dir)
            os.makedirs(run_dir, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create the branch directory {run_dir} for the "
                             f"continuation ({exc.strerror or exc}); choose one with --out "
                             "DIR.") from None
    return _hold(run_dir, branch, created), created


def _checked_restart(args, sharing, snap):
    """(snapshot, config, schedule, stop) of a restart from the snapshot ``snap`` read
    (:func:`snapshot_on_ranks`), every check of its input done (on every rank: memory
    is per rank)."""
    from ..output.writers import SCHEDULE_KEYS  # noqa: PLC0415
    config = dict(snap.config)
    s = dict(snap.schedule)
    if any(s.get(k) is None for k in SCHEDULE_KEYS):
        raise UsageError(f"cannot restart: {args.snapshot} has no output schedule (run_* "
                         "attributes); it was not written by vortexsim run.")
    original = config.get("device", "auto")
    if args.device:
        config["device"] = args.device
    try:
        check_device(config.get("device", "auto"))
    except UsageError as exc:
        hint = (f" (the snapshot was computed on device {original!r}; restart with --device "
                "cpu to continue on the CPU, not bitwise equal)" if not args.device else "")
        raise UsageError(f"{exc}{hint}") from None
    stop = restart_stop(snap, args.t_end, args.steps)
    check_memory(config, config.get("device", "auto"), args.max_memory, sharing)
    _check_restart_schedule(snap, config, stop, args.force)
    return snap, config, s, stop


def _hold(run_dir, branch, created):
    """Take the lock of ``run_dir`` (:class:`RunDirLock`): refused while another run or
    restart writes there; a branch is marked as a run directory of its own (under the
    lock, and checked again to be empty: another restart may have made it first)."""
    try:
        lock = RunDirLock(run_dir, "vortexsim restart")
    except OSError as exc:
        raise UsageError(f"cannot lock the run directory {run_dir} ({exc.strerror or exc}); "
                         "choose another with --out DIR.") from None
    if not branch:
        return lock
    try:
        if directory_entries(run_dir):
            raise UsageError(f"the branch directory {run_dir} is not empty: another "
                             "restart wrote there first; choose one with --out DIR.")
        try:
            mark_run_dir(run_dir)             # a run directory of its own (--overwrite)
        except OSError as exc:
            raise UsageError(f"cannot create the branch directory {run_dir} for the "
                             f"continuation ({exc.strerror or exc}); choose one with --out "
                             "DIR.") from None
    except BaseException:
        lock.release()
        raise
    return lock


def _continue(ranks, args, argv, snap, config, s, stop, mode, run_dir, later, branch,
              created):
    """The rest of :func:`cmd_restart`, under the run directory's lock: build the
    simulation, start the branch or truncate, pick up the snapshot and run."""
    from ..output import run_writers  # noqa: PLC0415
    from ..output.writers import start_branch, truncate_run  # noqa: PLC0415
    t = snap.t
    source_dir = os.path.dirname(os.path.abspath(snap.path))
    if ranks.is_root:
        add_file_log(run_dir)
    try:
        sim = ranks.agree(_rebuild, config, args.snapshot, ranks.comm, snap.state)
        meta = {k: snap.attrs.get(k) for k in ("case", "config", "vortexsim_version",
                                               "precision", "kernel", "method", "tolerance",
                                               "integrator")}
        meta.update(run_metadata(sim, snap.attrs.get("config", "")))
        history = (str(snap.attrs.get("history", "")) + "\n" + history_line(argv)).strip()
        if branch:
            if args.out is not None:
                logger.info("restart from %s into %s, a new run directory (%s is left as "
                            "it is)", args.snapshot, run_dir, source_dir)
            elif not is_run_dir(source_dir):
                logger.warning(
                    "%s is not a run directory of vortexsim (no %s file): none of its files "
                    "are written; the continuation goes into the new directory %s",
                    source_dir, RUN_MARKER, run_dir)
            else:
                logger.warning(
                    "%s is not the newest state of %s (which holds %s after it); that "
                    "directory is left as it is and the continuation goes into the new "
                    "branch %s (--truncate would continue in %s and delete that later "
                    "output instead)", os.path.basename(snap.path), source_dir,
                    later.describe(), run_dir, source_dir)
            copy = ranks.on_root(start_branch, run_dir, snap.path, later.rows, meta,
                                 history, snap.attrs.get("config") or None, share=True)
            snap = snapshot_on_ranks(ranks, copy)
        sim.output_writers.update(run_writers(
            run_dir, meta, history, float(s["snapshot_interval"]),
            float(s["diagnostics_interval"]), plot=bool(s.get("plot", 1))))
        # the state, the schedules, the stop criterion; diagnostics.nc resumed
        ranks.agree(_pickup, sim, snap, args.snapshot)
    except BaseException:
        if branch and ranks.is_root:
            remove_branch(run_dir, created)
        raise
    if mode == "truncate":
        if later:
            logger.warning("--truncate: continuing in %s from iteration %d; deleting its %s",
                           run_dir, snap.iteration, later.describe())
            ranks.on_root(truncate_run, later, meta, history)
        else:
            logger.info("--truncate: %s holds nothing after iteration %d; nothing deleted",
                        run_dir, snap.iteration)
    elif mode == "in place" and later.later_rows:
        logger.info("restart: %s holds %s, written after this snapshot by a run that did not "
                    "finish; the continuation writes them again", run_dir, later.describe())
    logger.info("restart %s from %s: t = %.10g, iteration %d, on %s; writing into %s",
                config.get("case"), args.snapshot, t, snap.iteration, sim.device.describe(),
                run_dir)
    if ranks.size > 1:
        logger.info("on %d MPI ranks; rank 0 writes the files", ranks.size)
    log_cores(sim.config)
    return run_simulation(sim, args.quiet == 0 and ranks.is_root, ranks, **stop)


def _rebuild(config, snapshot, communicator, state):
    """The simulation of ``config`` built from the snapshot's ``state`` (which the pickup
    then restores): the case's initial state is not made again."""
    from ..cases import from_config  # noqa: PLC0415
    try:
        return from_config({**config, "progress": False}, communicator=communicator,
                           state=state)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"cannot restart from {snapshot}: {first_line(exc)}") from None


def _read(path):
    from ..output import SnapshotError, read_snapshot  # noqa: PLC0415
    try:
        return read_snapshot(path)
    except SnapshotError as exc:
        raise UsageError(f"cannot restart: {first_line(exc)}") from None


#: the element arrays of a snapshot's state that a rank of a state split by slabs holds
#: its rows of: (name, trailing shape)
_ROW_ARRAYS = (("x", (3,)), ("alpha", (3,)), ("sigma", ()), ("volume", ()), ("group", ()))


def snapshot_on_ranks(ranks, path):
    """The snapshot ``path`` as each rank of a restart needs it (UsageError on every
    rank where it cannot be read).  Rank 0 reads and checks it
    (:func:`vortexsim.output.read_snapshot`).  Where the continuation will hold its
    state split by slabs (:func:`vortexsim.model.slab_partition.splits_by_slabs` of
    its config on these ranks; a format-3 state of the n³ lattice nodes in remesh
    order, without tracers or groups), each rank gets from rank 0 its slab's rows of
    the element arrays (state ``"rows"``: (r0, r1)), and no rank but rank 0, while it
    reads, holds the whole state; otherwise every rank reads the whole file itself."""
    if ranks.size == 1:
        return _read(path)
    root = ranks.on_root(_read, path)
    plan = ranks.on_root(_row_plan, root, ranks.size, share=True)
    if plan is None:
        return ranks.agree(lambda: root if ranks.is_root else _read(path))
    from ..geometry.slab import Slabs  # noqa: PLC0415
    from ..output.snapshot import Snapshot  # noqa: PLC0415
    light, n, dtypes = plan
    counts = Slabs(n, ranks.size).counts(n * n)
    whole = None if root is None else root.state["elements"]
    root = None                                 # rank 0 lets the whole state go as it sends
    # (a rank 0 that fails while it sends ends every rank: the CLI aborts on an error)
    own = {}
    for name, tail in _ROW_ARRAYS:
        own[name] = ranks.comm.scatter_rows_from_root(
            None if whole is None else whole[name], counts, tail, dtypes[name])
        if whole is not None:
            whole[name] = None
    r0 = sum(counts[:ranks.comm.rank])
    state = {**light.state, "elements": own, "rows": (r0, r0 + counts[ranks.comm.rank]),
             "tracers": {"x": np.empty((0, 3), dtypes["tracers"])}}
    return Snapshot(light.path, state, light.config, light.schedule, light.attrs)


def _row_plan(snap, size):
    """(snapshot without its arrays, n, {array: dtype}) where a continuation of ``snap``
    on ``size`` ranks holds its state split by slabs and gets each rank's rows
    (:func:`snapshot_on_ranks`); else None (rank 0's)."""
    from ..geometry.periodic import are_lattice_nodes  # noqa: PLC0415
    from ..model.slab_partition import splits_by_slabs  # noqa: PLC0415
    from ..output.checksum import has_groups  # noqa: PLC0415
    from ..output.snapshot import Snapshot  # noqa: PLC0415
    state, config = snap.state, snap.config
    n, box = config.get("n"), config.get("box")
    el = state["elements"]
    if not (has_groups(state) and not state["groups"] and splits_by_slabs(config, size)
            and len(state["tracers"]["x"]) == 0 and len(el["x"]) == n ** 3
            and are_lattice_nodes(el["x"], n, box)):
        return None
    dtypes = {name: np.asarray(el[name]).dtype.str for name, _ in _ROW_ARRAYS}
    dtypes["tracers"] = np.asarray(state["tracers"]["x"]).dtype.str
    light = {k: v for k, v in state.items() if k not in ("elements", "tracers")}
    return Snapshot(snap.path, light, snap.config, snap.schedule, snap.attrs), n, dtypes


def _pickup(sim, snap, source):
    from ..output import SnapshotError  # noqa: PLC0415
    try:
        sim.pickup(snap)
    except SnapshotError as exc:
        raise UsageError(f"cannot restart: {first_line(exc)}") from None
    except (ValueError, TypeError) as exc:
        raise UsageError(f"cannot restart from {source}: {first_line(exc)}") from None


def restart_stop(snap, t_end=None, steps=None):
    """The stop criterion of a restart of ``snap``: ``{"t_end": T}``, ``{"steps": N}`` or
    ``{}`` (the one stored in the snapshot: the end its run was heading for).  Raises
    :class:`UsageError` for a bad one, or without one at the end of a finished run."""
    s, t = snap.schedule, snap.t
    if t_end is not None:
        if not (math.isfinite(t_end) and t_end > t):
            raise UsageError(f"--t-end {t_end:g} is not after the snapshot's time "
                             f"t = {t:.10g}.")
        return {"t_end": float(t_end)}
    if steps is not None:                  # 1 ≤ steps ≤ HARD_LIMIT (_step_count)
        return {"steps": steps}
    if (s.get("stop_iteration") is not None and snap.iteration >= s["stop_iteration"]) or \
            (s.get("stop_time") is not None and due(t, float(s["stop_time"]))):
        end = (f"iteration {s['stop_iteration']}" if s.get("stop_iteration") is not None
               else f"t_end = {s['stop_time']:g}")
        raise UsageError(f"{snap.path} is the end of its run ({end}); pass --t-end T "
                         f"(T > {t:.10g}) or --steps N to continue.")
    return {}


def _reaches(snap, stop, row):
    """Whether a restart of ``snap`` with ``stop`` runs at least to the diagnostics
    ``row`` (so that it writes that row again)."""
    s = snap.schedule
    if "t_end" in stop:
        return due(stop["t_end"], row["t"])
    if "steps" in stop:
        return snap.iteration + stop["steps"] >= row["iteration"]
    if s.get("stop_iteration") is not None:
        return int(s["stop_iteration"]) >= row["iteration"]
    return s.get("stop_time") is not None and due(float(s["stop_time"]), row["t"])


def restart_target(snap, stop, truncate=False, out=None):
    """Where a restart of ``snap`` continues (``docs/cli.md``, *Run history*):
    ``(mode, directory, later)``, ``later`` the :class:`~vortexsim.output.writers.LaterOutput`
    of the snapshot's directory.

    * ``"in place"``: the snapshot's directory, when it is a run directory of vortexsim
      (its marker), holds no later snapshot and any later diagnostics rows (written after
      the snapshot by a run that was killed) are rewritten by the continuation;
    * ``"truncate"`` (``--truncate``): the snapshot's run directory, its later output
      deleted (refused in a directory without the marker);
    * ``"branch"``: ``out`` (``--out DIR``), or otherwise, when the directory holds later
      output or is not a run directory of vortexsim (a snapshot copied among the user's
      files), the new directory ``branch_<iteration>[_k]`` inside it; the snapshot's
      directory is left as it is.

    Raises :class:`UsageError` when the directory's ``diagnostics.nc`` does not match the
    snapshot (missing, or another number of rows up to it).
    """
    from ..output import SnapshotError  # noqa: PLC0415
    from ..output.writers import branch_dir, later_output  # noqa: PLC0415
    run_dir = os.path.dirname(os.path.abspath(snap.path))
    try:
        rows = int(snap.schedule["diagnostics_rows"])
        later = later_output(run_dir, snap.iteration, rows)
    except (TypeError, ValueError) as exc:   # SnapshotError is a ValueError
        what = first_line(exc) if isinstance(exc, SnapshotError) else \
            f"{snap.path} has a malformed run_diagnostics_rows attribute"
        raise UsageError(f"cannot restart: {what}") from None
    if out is not None:
        return "branch", os.path.abspath(out), later
    ours = is_run_dir(run_dir)
    if truncate and not ours:
        raise UsageError(f"--truncate: {run_dir} is not a run directory of vortexsim (it has "
                         f"no {RUN_MARKER} file), so none of its files are deleted; restart "
                         "without --truncate (the continuation goes into a new directory) or "
                         "with --out DIR.")
    if truncate:
        return "truncate", run_dir, later
    if ours and not later.snapshots and \
            all(_reaches(snap, stop, r) for r in later.later_rows[-1:]):
        return "in place", run_dir, later
    return "branch", branch_dir(run_dir, snap.iteration), later


def _check_restart_schedule(snap, config, stop, force):
    """Refuse (UsageError) a restart whose stored schedule and stop would take more steps
    or write more files than :func:`vortexsim.cli.resources.check_schedule` allows (a
    snapshot can carry tiny intervals; ``--force`` lifts the bounds as for ``run``)."""
    s = snap.schedule
    dt = float(config["dt"])
    steps = stop.get("steps")
    if steps is None and "t_end" not in stop and s.get("stop_iteration") is not None:
        steps = max(1, int(s["stop_iteration"]) - snap.iteration)
    end = stop.get("t_end", s.get("stop_time"))
    duration = (float(end) - snap.t) if end is not None else (steps or 1) * dt
    try:
        check_schedule(dt=dt, duration=duration, steps=steps,
                       snapshot_interval=float(s["snapshot_interval"]),
                       diagnostics_interval=float(s["diagnostics_interval"]), force=force)
    except ResourceError as exc:
        raise UsageError(f"cannot restart {snap.path}: {exc}") from None
