"""Running a built simulation from the command: the SIGINT/SIGTERM handlers and the
mapping of the run's outcome to one line and an exit code."""
from __future__ import annotations

import contextlib
import errno
import glob
import logging
import os
import shlex
import signal

from ..schedules import DUE_RTOL
from . import signals
from .common import EXIT_FAILED, EXIT_OK, first_line, say as _say
from .log import log_to_file
from .writefail import disk_full_text, free_space, is_write_failure

__all__ = ["StopOnSignal", "StopFile", "run_simulation", "write_failure_text", "log_cores"]

logger = logging.getLogger("vortexsim.cli")


class StopOnSignal:
    """SIGINT/SIGTERM during a run (the ``run`` phase of :mod:`vortexsim.cli.signals`):
    the first → ``sim.request_stop()``: the run finishes the step in progress and the
    pending writes, its writers checkpoint, and the command exits 128 + signal; a second
    SIGINT aborts (KeyboardInterrupt: the run gives up its queued writes and lets the one
    in flight finish; no partial file), a second SIGTERM changes nothing; any further
    signal ends the process at once.  The exit code is always the first signal's.
    ``snapshots`` (the snapshot writer) tells the line of an early exit what is on disk."""

    def __init__(self, sim, snapshots=None):
        self.sim = sim
        self.snapshots = snapshots
        self.signum = None
        self.cause = None             # what stopped the run when it was not a signal
        self._phase = None

    def describe(self):
        """What the run has on disk, for a one-line message: its newest snapshot file
        that exists (a write cut short leaves only a temporary file)."""
        path = getattr(self.snapshots, "last_path", None)
        if not (path and os.path.isfile(path)):
            run_dir = getattr(self.snapshots, "run_dir", None)
            found = sorted(glob.glob(os.path.join(glob.escape(run_dir), "snapshot_*.nc"))) \
                if run_dir else []
            path = found[-1] if found else None
        return f"the newest snapshot is {path}" if path else "no snapshot was written"

    def __enter__(self):
        self._phase = signals.during("run", 2, self._react, self.describe)
        self._phase.__enter__()
        return self

    def __exit__(self, *exc):
        return self._phase.__exit__(*exc)

    def stop_for(self, cause):
        """Stop as on a first SIGTERM (exit 143, a checkpoint) for ``cause`` (what the
        line names instead of the signal): the STOP file (:class:`StopFile`), an MPI
        launcher that is gone (:class:`vortexsim.cli.ranks.LauncherWatch`)."""
        if self.signum is None:
            self.signum, self.cause = signal.SIGTERM, cause
            self.sim.request_stop()
            logger.warning("%s: finishing the current step, then writing a checkpoint", cause)

    def orphaned(self):
        self.stop_for("the MPI launcher is gone (it was ended)")

    def _react(self, signum, seen):
        if self.signum is not None:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            return
        self.signum = signals.first() or signum
        self.sim.request_stop()
        logger.warning("%s received: finishing the current step, then writing a checkpoint "
                       "(press Ctrl-C again to abort without one)", signal.Signals(signum).name)


class StopFile:
    """A callback after every step: the file ``STOP`` in the run directory (``touch
    RUN_DIR/STOP``) stops the run after the step in progress with a checkpoint, as
    SIGTERM does, whatever starts the process (an MPI launcher may end its ranks within
    a fraction of a second of the signal it forwards: Open MPI 5's ``mpiexec`` does);
    the file is removed when it is seen.  One left from before the run is removed at its
    start.  On several ranks rank 0 looks; the ranks agree on the stop."""

    schedule = None
    reads_state = False               # the rows due still run beside the next step
    NAME = "STOP"

    def __init__(self, run_dir, stop_for):
        self.path = os.path.join(run_dir, self.NAME)
        self.stop_for = stop_for
        if os.path.lexists(self.path):
            logger.info("removed %s, left from before this run", self.path)
            with contextlib.suppress(OSError):
                os.remove(self.path)

    def __call__(self, sim):
        if os.path.lexists(self.path):
            with contextlib.suppress(OSError):
                os.remove(self.path)
            self.stop_for(self.path)


def run_simulation(sim, progress, ranks=None, **stop):
    """Run ``sim`` (its output writers attached) with the signal handlers; the exit code.

    The run loop writes the checkpoints (:meth:`vortexsim.Simulation.run`); this maps its
    outcome to the command's messages and exit codes: done 0 (said in one line when the
    run took no step), a signal after its last step 128 + signal (the run complete, said
    in one line), a second SIGINT 128 + the first signal (no checkpoint of the step in
    progress), a failed safety check
    1 (the last good state written), a failed file write 1 (one line: disk full, no
    permission, a netCDF/HDF5 error; the traceback goes to run.log), SIGINT/SIGTERM
    128 + signal (a checkpoint written).

    On several MPI ranks (``ranks``, :class:`vortexsim.cli.ranks.Ranks`) every rank runs
    and ends alike, rank 0 says the line; a failed write (rank 0's alone) ends every
    rank with its line (:meth:`~vortexsim.cli.ranks.Ranks.abort`).
    """
    from ..simulation import SimulationError  # noqa: PLC0415
    root = ranks is None or ranks.is_root
    say = _say_and_log if root else _silent
    snapshots = sim.output_writers["snapshots"]
    start = sim.iteration
    with StopOnSignal(sim, snapshots) as stop_signal:
        if root:
            sim.callbacks["stop_file"] = StopFile(snapshots.run_dir, stop_signal.stop_for)
        if ranks is not None and ranks.size > 1:
            from .ranks import LauncherWatch  # noqa: PLC0415
            sim.callbacks["launcher"] = LauncherWatch(stop_signal.orphaned)
        try:
            sim.run(progress=progress, **stop)
        except KeyboardInterrupt:      # a second SIGINT: the run gave up its queued writes
            say(signals.interrupted_line("aborted without a checkpoint of the step in "
                                         "progress"))
            return 128 + (signals.first() or signal.SIGINT)
        except SimulationError as exc:
            logger.error("run stopped: %s", exc)
            say(f"vortexsim: the simulation failed at step {exc.step} (t = {exc.t:.6g}); the "
                 f"last good state is in {snapshots.last_path}. {first_line(exc)}")
            return EXIT_FAILED
        except Exception as exc:
            if not is_write_failure(exc):
                raise
            if ranks is not None and ranks.size > 1:
                ranks.abort(write_failure_text(exc, sim, snapshots).removeprefix(
                    "vortexsim: "))
            say(write_failure_text(exc, sim, snapshots))
            return EXIT_FAILED
        if sim.stop_reason == "interrupted":
            path = snapshots.last_path
            name = stop_signal.cause or signal.Signals(stop_signal.signum).name
            say(f"vortexsim: interrupted by {name} at t = {sim.t:.6g} (iteration "
                 f"{sim.iteration}); checkpoint written: {path}. Continue with: vortexsim "
                 f"restart {shlex.quote(path)}")
            return 128 + stop_signal.signum
    logger.info("done at t = %.6g, iteration %d; last snapshot %s", sim.t, sim.iteration,
                snapshots.last_path)
    if sim.iteration == start and stop_signal.signum is None:
        end = (f"t_end = {sim.stop_time:.10g}" if sim.stop_time is not None
               else f"iteration {sim.stop_iteration}")
        say(f"vortexsim: the run took no step: it starts at t = {sim.t:.10g} (iteration "
             f"{sim.iteration}), which is already its end ({end}, within the schedule's "
             f"relative tolerance {DUE_RTOL:g}); its state is in {snapshots.last_path}.")
    if stop_signal.signum is not None:
        say(f"vortexsim: {signal.Signals(stop_signal.signum).name} came after the run's last "
             f"step; the run is complete (t = {sim.t:.6g}, iteration {sim.iteration}; last "
             f"snapshot {snapshots.last_path}).")
        return 128 + stop_signal.signum
    return EXIT_OK


def _say_and_log(message):
    """The command's line, also in run.log (a terminal may be gone: an MPI launcher
    ended before its ranks)."""
    logger.info(message.removeprefix("vortexsim: "), extra={"file_only": True})
    _say(message)


def _silent(message):
    """The line of a rank other than 0: rank 0 says it."""


def write_failure_text(exc, sim, snapshots):
    """The one-line message of a run ended by a failed write."""
    run_dir = snapshots.run_dir
    _, free = free_space(run_dir)
    newest = snapshots.last_path
    size = os.path.getsize(newest) if newest and os.path.isfile(newest) else 0
    code = getattr(exc, "errno", None)
    full = disk_full_text(exc, run_dir, size)
    if full is not None:
        what = full
    elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
        what = f"no permission to write in {run_dir} ({os.strerror(code)})"
    elif isinstance(exc, OSError):
        what = f"{exc.strerror or first_line(exc)} ({run_dir}: {free})"
    else:
        what = (f"{first_line(exc)} (netCDF/HDF5 says this on a full disk, among other "
                f"causes; {run_dir}: {free})")
    log = os.path.join(run_dir, "run.log")
    log_failed = log_to_file("the run stopped: a file write failed", exc)
    logged = f"{log} could not be written either" if log_failed else \
        f"the traceback is in {log}"
    return (f"vortexsim: error: writing the run's files failed: {what}. The run stopped at "
            f"t = {sim.t:.6g} (iteration {sim.iteration}); "
            + (f"the newest snapshot is {snapshots.last_path}; once the problem is fixed, "
               "continue from it with vortexsim restart" if snapshots.last_path else
               "no snapshot was written")
            + f"; {logged}.")


def log_cores(config):
    """Log the physical, element and effective cores; warn when σ > σ_c."""
    from ..cases import core_summary  # noqa: PLC0415
    summary = core_summary(config)
    if summary is None:
        return
    text, resolved = summary
    if resolved:
        logger.info(text)
    else:
        logger.warning("%s: the element sigma exceeds the physical core, so the core is not "
                       "resolved and the run simulates a core of the effective size (raise "
                       "n_phi/layers and lower sigma, e.g. --preset gpu)", text)
