r"""The ``vortexsim`` command: run named cases, restart from snapshots, list cases, inspect files.

::

    vortexsim run leapfrog                                 # cases/leapfrog.toml → runs/leapfrog/
    vortexsim run my_case.toml --set n_phi=64 --set dt=0.05 --out runs/big --device gpu
    vortexsim restart runs/leapfrog/snapshot_00000100.nc   # continue (bitwise) to t_end
    vortexsim restart runs/leapfrog/snapshot_00000200.nc --t-end 40
    vortexsim cases
    vortexsim info runs/leapfrog/snapshot_00000100.nc

A run directory holds ``config.toml`` (the resolved case file: ``vortexsim run
DIR/config.toml`` repeats the run), ``snapshot_<iteration>.nc`` (one per output time, each a
checkpoint), ``diagnostics.nc`` (one row per diagnostic time), ``plot.png`` and ``run.log``,
and the files of its case (``CaseSetup.files``: ``initial_field.nc``, the initial velocity
of ``isotropic_turbulence``), written once when the run starts.
A restart from a snapshot that is not the newest state of its directory continues in the
new branch ``branch_<iteration>[_k]/`` inside it, a run directory of its own, and leaves
the directory's files as they were (``--truncate`` continues in place and deletes the
later output it lists; ``--out DIR`` writes the continuation elsewhere;
``docs/cli.md``, *Run history*).

This module is wiring: it parses the command, builds the simulation
(:func:`vortexsim.make_case`, or :func:`vortexsim.from_config` and
:meth:`vortexsim.Simulation.pickup` of the snapshot for a restart), attaches the output
writers (:func:`vortexsim.output.writers.run_writers`, intervals from
:func:`~vortexsim.output.writers.output_intervals`), installs the SIGINT/SIGTERM handlers
(they call :meth:`~vortexsim.Simulation.request_stop`) and runs
(:meth:`vortexsim.Simulation.run`, which owns the loop).  Before it builds anything,
``run`` checks what the run will cost (:mod:`vortexsim.resources`: memory against the
machine or ``--max-memory``, steps, snapshot files, diagnostics rows and disk space
against their bounds, ``--force``) and ``--overwrite`` accepts only a directory marked by
an earlier run (:data:`RUN_MARKER`).  One run, in order::

    t0: diagnostics row, snapshot
    until t_end (or N steps):
        step, shortened so as to land on the next snapshot / diagnostics time
        on a diagnostics time: append a row (diagnostics.nc rewritten atomically, at
            most every 2 s and before each snapshot)
        on a snapshot time: write snapshot_<iteration>.nc (atomically)
        on SIGINT/SIGTERM (after the step in progress and the pending writes): write a
            checkpoint, exit 130/143; a second SIGINT: give up the queued writes, exit 130
        on a failed safety check (NaN/inf, blow-up): write the last good state, exit 1
        on a failed file write (disk full, permission, netCDF/HDF5): write the state of
            the last completed step if possible, one line, exit 1 (traceback in run.log)
        on any other error: write the state of the last completed step, re-raise
    end: final diagnostics row and snapshot, plot.png

The files are written on the run's output thread while the next steps run
(:meth:`vortexsim.Simulation.run`, ``docs/driver.md``); signals reach only the main
thread, which never holds a netCDF file, so a second Ctrl-C cannot hang the process.

Exit codes: 0 done; 1 the simulation failed (the last good state is written) or a file
write failed; 2 bad input (one-line message, no traceback; also a run refused by the
guards or an output directory that cannot be written); 130/143 interrupted by
SIGINT/SIGTERM (checkpoint written during a run; one line at any time, also while the
command starts: :mod:`vortexsim._startup`).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import errno
import glob
import importlib
import json
import logging
import math
import os
import shlex
import shutil
import signal
import stat
import sys
import threading

from .config import (CLI_ONLY, OUTPUT_DEFAULTS, PARAMETERS, ConfigError, check_params, closest,
                     load_case_file, load_presets, parse_assignments, to_toml)
from .resources import (HARD_LIMIT, MAX_DIAGNOSTICS_ROWS, MAX_SNAPSHOTS, MAX_STEPS,
                        ResourceError, check_disk, check_resources, check_schedule,
                        format_bytes, parse_size)
from ._startup import end_startup
from .schedules import DUE_RTOL, due

logger = logging.getLogger("vortexsim.cli")

__all__ = ["main", "build_parser", "case_files_dir", "case_file"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_DERIVED = ("case", "t0", "groups", "n_elements", "n_tracers")
_OUR_FILES = ("snapshot_*.nc", "diagnostics.nc", "spectra.nc", "plot.png", "config.toml",
              "run.log", ".snapshot_*.tmp", ".diagnostics.nc.*.tmp", ".spectra.nc.*.tmp",
              ".plot.png.*.tmp", ".config.toml.*.tmp", "initial_field.nc",
              ".initial_field.nc.*.tmp", "elements.xdmf", "tracers.xdmf", "xdmf_index.bin",
              ".elements.xdmf.*.tmp", ".tracers.xdmf.*.tmp", ".xdmf_index.bin.*.tmp")
#: modules whose ``add_command(subparsers, common)`` adds a subcommand that reads run
#: directories (analysis, plots, pictures, export); each imports its heavy dependencies
#: inside its handler, so that building the parser stays cheap
COMMAND_MODULES = ("postprocess.cli", "vortexsim.viz.cli", "vortexsim.output.xdmf")
#: the file that marks a directory as a run directory of vortexsim (written by every
#: ``vortexsim run``); ``--overwrite`` replaces only a directory that has it
RUN_MARKER = ".vortexsim-run"


class UsageError(Exception):
    """Bad input: reported as one line, exit code 2."""


# -- case files -----------------------------------------------------------------------
def case_files_dir():
    """Directory of the shipped case files: ``vortexsim/case_files`` (installed package
    data, a link to the repository's ``cases/`` in a source checkout) or ``cases/``."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.path.join(here, "case_files"), os.path.join(os.path.dirname(here), "cases")):
        if os.path.isdir(d):
            return d
    return os.path.join(here, "case_files")


def case_file(name):
    """Path of the shipped case file of ``name`` (None if there is none)."""
    path = os.path.join(case_files_dir(), f"{name}.toml")
    return path if os.path.isfile(path) else None


def _looks_like_path(arg):
    return arg.endswith(".toml") or os.sep in arg or "/" in arg or os.path.isfile(arg)


def _resolve_case(arg):
    """(case name, {key: value} of its file, source label) for a case name or TOML path."""
    from .cases import list_cases  # noqa: PLC0415

    names = sorted(list_cases())
    if _looks_like_path(arg):
        case, params = load_case_file(arg)
        source = arg
    else:
        path = case_file(arg)
        if path is None:
            if arg in names:  # a registered case without a shipped file: its defaults
                return arg, {}, arg
            raise UsageError(f"unknown case {arg!r}{closest(arg, names)}; the cases are "
                             f"{', '.join(names)} (or give the path of a .toml case file).")
        case, params = load_case_file(path)
        source = path
    if case not in names:
        raise UsageError(f"{source}: unknown case {case!r}{closest(case, names)}; the cases "
                         f"are {', '.join(names)}.")
    return case, params, source


def _defaults(case):
    from .cases import case_defaults  # noqa: PLC0415

    d = {k: v for k, v in case_defaults(case).items() if k not in CLI_ONLY}
    return {**d, **OUTPUT_DEFAULTS}


# -- argument parsing --------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage + error by default)
        self.exit(EXIT_USAGE, f"vortexsim: error: {message} (see {self.prog} --help)\n")


def _step_count(text):
    """``--steps N``: a whole number from 1 to :data:`~vortexsim.resources.HARD_LIMIT`."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of steps, got {text!r}")
    if not 1 <= n <= HARD_LIMIT:
        raise argparse.ArgumentTypeError(f"must be from 1 to {HARD_LIMIT}, got {text}")
    return n


def _memory_size(text):
    """``--max-memory 8GB``: bytes (:func:`vortexsim.resources.parse_size`)."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).rstrip(".")) from None


def build_parser():
    """The argparse parser of the ``vortexsim`` command."""
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("logging")
    g.add_argument("-v", "--verbose", action="count", default=0,
                   help="more log output (-v: debug messages, FMM stage timings)")
    g.add_argument("-q", "--quiet", action="count", default=0,
                   help="less output: no progress bar, warnings and errors only "
                        "(-qq: errors only)")
    stop = argparse.ArgumentParser(add_help=False)
    s = stop.add_argument_group("stop criterion (one of)").add_mutually_exclusive_group()
    s.add_argument("--t-end", type=float, metavar="T",
                   help="run until simulated time T [T] (default: the case's t_end; for "
                        "restart, the end the run was heading for); the last step is "
                        "shortened to land on it")
    s.add_argument("--steps", type=_step_count, metavar="N", help="run N more time steps")
    limits = argparse.ArgumentParser(add_help=False)
    limits.add_argument("--max-memory", type=_memory_size, metavar="SIZE",
                        help="memory the run may use, e.g. 8GB or 16GiB (default: what the "
                             "machine has available, host memory or the GPU's); a run "
                             "estimated to need more is refused before it starts")

    p = _Parser(prog="vortexsim", description=(
        "Vortex-particle simulations of vortex rings: run a named case or a case file, "
        "write netCDF snapshots (every one a checkpoint) and diagnostics, restart from any "
        "snapshot."), epilog="Each command has its own --help, e.g. vortexsim run --help.")
    from . import __version__  # noqa: PLC0415
    p.add_argument("--version", action="version", version=f"vortexsim {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    r = sub.add_parser("run", parents=[common, stop, limits], help="run a case",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=(
        "Run a named case (vortexsim cases lists them) or a TOML case file, writing "
        "config.toml, snapshot_<iteration>.nc (each a checkpoint), diagnostics.nc, "
        "plot.png and run.log into the output directory.\n\n"
        "Before anything is built or written, the run's memory is estimated and checked "
        "against the machine (--max-memory), and its schedule against the bounds: at most "
        f"{MAX_STEPS:,} steps, {MAX_SNAPSHOTS:,} snapshot files, {MAX_DIAGNOSTICS_ROWS:,} "
        "diagnostics rows and the free disk space (--force lifts these).\n\n"
        "Exit codes: 0 done; 1 the simulation failed (last good state written) or a file "
        "write failed (e.g. disk full); 2 bad input; 130/143 interrupted by SIGINT/SIGTERM "
        "(checkpoint written; continue with vortexsim restart)."))
    r.add_argument("case", metavar="CASE|FILE",
                   help="a case name (vortexsim cases lists them) or the path of a .toml "
                        "case file")
    r.add_argument("--preset", metavar="NAME",
                   help="apply the case file's [presets.NAME] table before any --set, e.g. "
                        "--preset gpu for the documented GPU size (vortexsim cases lists "
                        "the presets)")
    r.add_argument("--dry-run", action="store_true",
                   help="print the resolved parameters (case file, preset, --set) as a "
                        "case file and exit without running")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one parameter of the case file, e.g. --set n_phi=16 "
                        "--set kernel=algebraic --set time.dt=0.05 (repeatable; keys and "
                        "units are listed in the case files)")
    r.add_argument("--out", metavar="DIR",
                   help="output directory (default: runs/<case>); must not exist unless "
                        "--overwrite")
    r.add_argument("--device", choices=("cpu", "gpu", "auto"),
                   help="where to compute (default: the case file's, 'auto' = GPU when CuPy "
                        "sees one); an explicit gpu without a GPU is an error")
    r.add_argument("--precision", choices=("float64", "float32"),
                   help="floating point precision of the summation (default: the case "
                        "file's, float64)")
    r.add_argument("--overwrite", action="store_true",
                   help="replace the vortexsim files of an existing run directory (one "
                        f"that vortexsim run wrote: it holds {RUN_MARKER}; other files are "
                        "left alone); any other directory is refused")
    r.add_argument("--force", action="store_true",
                   help=f"run even beyond {MAX_STEPS:,} steps, {MAX_SNAPSHOTS:,} snapshot "
                        f"files or {MAX_DIAGNOSTICS_ROWS:,} diagnostics rows, or when the "
                        "files are estimated not to fit on the disk")
    r.set_defaults(func=cmd_run)

    rs = sub.add_parser("restart", parents=[common, stop, limits],
                        help="continue a run from a snapshot",
                        description=(
        "Continue the run of a snapshot file: the same configuration and device, bitwise "
        "identical to the uninterrupted run; diagnostics.nc continues without duplicated "
        "or missing rows.  Without --t-end/--steps the run continues to the end it was "
        "heading for.  From the newest snapshot of its directory the run continues in that "
        "directory; from an earlier one (the directory holds later snapshots or "
        "diagnostics rows) it continues in a new branch directory DIR/branch_<iteration> "
        "whose diagnostics.nc starts with the rows up to the snapshot, and the original "
        "files are left as they are (--truncate continues in the directory instead and "
        "deletes its later output)."))
    rs.add_argument("snapshot", metavar="SNAPSHOT.nc", help="a snapshot_*.nc of a run")
    rs.add_argument("--device", choices=("cpu", "gpu", "auto"),
                    help="continue on another device (the result is then not bitwise equal "
                         "to a run on the original device)")
    rs.add_argument("--force", action="store_true",
                    help=f"continue even beyond {MAX_STEPS:,} steps, {MAX_SNAPSHOTS:,} snapshot "
                         f"files or {MAX_DIAGNOSTICS_ROWS:,} diagnostics rows")
    where = rs.add_argument_group("where the continuation goes (one of)") \
        .add_mutually_exclusive_group()
    where.add_argument("--out", metavar="DIR",
                       help="write the continuation into the new (or empty) directory DIR, "
                            "which starts with a copy of the snapshot and the diagnostics "
                            "rows up to it; the snapshot's directory is left as it is")
    where.add_argument("--truncate", action="store_true",
                       help="continue in the snapshot's own directory even if it holds "
                            "later output: DELETE its snapshots after this one and its "
                            "diagnostics rows after this one's iteration (each listed "
                            "before the run)")
    rs.set_defaults(func=cmd_restart)

    c = sub.add_parser("cases", parents=[common], help="list the cases",
                       description="List the named cases, one line each, and their case files.")
    c.set_defaults(func=cmd_cases)

    i = sub.add_parser("info", parents=[common], help="describe a netCDF file",
                       description="Describe a vortexsim snapshot or diagnostics file (case, "
                                   "time, sizes, device, variables and units) or any netCDF "
                                   "file.")
    i.add_argument("file", metavar="FILE.nc")
    i.set_defaults(func=cmd_info)
    for module in COMMAND_MODULES:        # the tools that read a run directory
        importlib.import_module(module).add_command(sub, common)
    return p


# -- logging and progress ---------------------------------------------------------------
class _TqdmHandler(logging.StreamHandler):
    """Log records written through tqdm.write, so they do not break the progress bar."""

    def emit(self, record):
        try:
            from tqdm import tqdm  # noqa: PLC0415
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # noqa: BLE001
            self.handleError(record)


def _remove_handlers():
    root = logging.getLogger("vortexsim")
    for h in list(root.handlers):
        if getattr(h, "_vortexsim_cli", False):
            root.removeHandler(h)
            h.close()


def _setup_logging(args):
    level = {0: logging.INFO, 1: logging.WARNING}.get(args.quiet, logging.ERROR)
    if args.verbose:
        level = logging.DEBUG
    _remove_handlers()
    root = logging.getLogger("vortexsim")
    handler = _TqdmHandler()
    handler._vortexsim_cli = True
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    handler.setLevel(level)
    root.addHandler(handler)
    root.setLevel(min(level, logging.INFO))
    logging.captureWarnings(True)


class _RunLog(logging.FileHandler):
    """run.log of a run directory.  A record that cannot be written (a full disk) is
    dropped and :attr:`failed` set, instead of logging's "--- Logging error ---" and a
    traceback on stderr for every record; the run's own failure is reported once, in one
    line (:func:`_run`)."""

    failed = False

    def handleError(self, record):  # noqa: N802 - logging's name
        self.failed = True


def _add_file_log(run_dir):
    handler = _RunLog(os.path.join(run_dir, "run.log"), encoding="utf-8")
    handler._vortexsim_cli = True
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("vortexsim").addHandler(handler)


# -- running: signals and exit codes ---------------------------------------------------------
class _Stop:
    """SIGINT/SIGTERM → ``sim.request_stop()``: the run finishes the step in progress and
    the pending writes, its writers checkpoint, and the command exits 128 + signal; a
    second SIGINT aborts (KeyboardInterrupt: the run gives up its queued writes and lets
    the one in flight finish; no partial file)."""

    def __init__(self, sim):
        self.sim = sim
        self.signum = None
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            # an ignored SIGINT stays ignored (a background job of a shell without job
            # control: the terminal's Ctrl-C is not meant for it; SIGTERM still stops it)
            if sig == signal.SIGINT and signal.getsignal(sig) is signal.SIG_IGN:
                continue
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _handle(self, signum, frame):
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = signum
        self.sim.request_stop()
        logger.warning("%s received: finishing the current step, then writing a checkpoint "
                       "(press Ctrl-C again to abort without one)", signal.Signals(signum).name)


def _run(sim, progress, **stop):
    """Run ``sim`` (its output writers attached) with the signal handlers; the exit code.

    The run loop writes the checkpoints (:meth:`vortexsim.Simulation.run`); this maps its
    outcome to the command's messages and exit codes: done 0 (said in one line when the
    run took no step, or when a signal came after its last step), a failed safety check
    1 (the last good state written), a failed file write 1 (one line: disk full, no
    permission, a netCDF/HDF5 error; the traceback goes to run.log), SIGINT/SIGTERM
    128 + signal (a checkpoint written).
    """
    from .simulation import SimulationError  # noqa: PLC0415
    snapshots = sim.output_writers["snapshots"]
    start = sim.iteration
    with _Stop(sim) as stop_signal:
        try:
            sim.run(progress=progress, **stop)
        except SimulationError as exc:
            logger.error("run stopped: %s", exc)
            _say(f"vortexsim: the simulation failed at step {exc.step} (t = {exc.t:.6g}); the "
                 f"last good state is in {snapshots.last_path}. {_first(exc)}")
            return EXIT_FAILED
        except Exception as exc:
            if not _is_write_failure(exc):
                raise
            _say(_write_failure_text(exc, sim, snapshots))
            return EXIT_FAILED
        if sim.stop_reason == "interrupted":
            path = snapshots.last_path
            name = signal.Signals(stop_signal.signum).name
            _say(f"vortexsim: interrupted by {name} at t = {sim.t:.6g} (iteration "
                 f"{sim.iteration}); checkpoint written: {path}. Continue with: vortexsim "
                 f"restart {shlex.quote(path)}")
            return 128 + stop_signal.signum
    logger.info("done at t = %.6g, iteration %d; last snapshot %s", sim.t, sim.iteration,
                snapshots.last_path)
    if sim.iteration == start:
        end = (f"t_end = {sim.stop_time:.10g}" if sim.stop_time is not None
               else f"iteration {sim.stop_iteration}")
        _say(f"vortexsim: the run took no step: it starts at t = {sim.t:.10g} (iteration "
             f"{sim.iteration}), which is already its end ({end}, within the schedule's "
             f"relative tolerance {DUE_RTOL:g}); its state is in {snapshots.last_path}.")
    elif stop_signal.signum is not None:
        _say(f"vortexsim: {signal.Signals(stop_signal.signum).name} came after the run's last "
             f"step; the run is complete (t = {sim.t:.6g}, iteration {sim.iteration}; last "
             f"snapshot {snapshots.last_path}).")
    return EXIT_OK


def _is_write_failure(exc):
    """A file write that failed (the output thread's or the main thread's): an OSError
    (disk full, permission, read-only file system) or netCDF4's RuntimeError
    ("NetCDF: HDF error", what a full disk gives inside HDF5)."""
    return isinstance(exc, OSError) or (isinstance(exc, RuntimeError)
                                        and ("NetCDF" in str(exc) or "HDF" in str(exc)))


def _write_failure_text(exc, sim, snapshots):
    """The one-line message of a run ended by a failed write."""
    run_dir = snapshots.run_dir
    try:
        free = f"{format_bytes(shutil.disk_usage(run_dir).free)} free"
    except OSError:
        free = "free space unknown"
    code = getattr(exc, "errno", None)
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        what = f"the disk is full ({os.strerror(code)}; {run_dir}: {free})"
    elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
        what = f"no permission to write in {run_dir} ({os.strerror(code)})"
    elif isinstance(exc, OSError):
        what = f"{exc.strerror or _first(exc)} ({run_dir}: {free})"
    else:
        what = (f"{_first(exc)} (netCDF/HDF5 says this on a full disk, among other "
                f"causes; {run_dir}: {free})")
    log = os.path.join(run_dir, "run.log")
    log_failed = _log_to_file("the run stopped: a file write failed", exc)
    logged = f"{log} could not be written either" if log_failed else \
        f"the traceback is in {log}"
    return (f"vortexsim: error: writing the run's files failed: {what}. The run stopped at "
            f"t = {sim.t:.6g} (iteration {sim.iteration}); "
            + (f"the newest snapshot is {snapshots.last_path}; once the problem is fixed, "
               "continue from it with vortexsim restart" if snapshots.last_path else
               "no snapshot was written")
            + f"; {logged}.")


def _log_to_file(message, exc):
    """``message`` and the traceback of ``exc`` into run.log only (not on the terminal);
    True when run.log failed (now or before)."""
    record = logger.makeRecord(logger.name, logging.ERROR, __file__, 0, message, (),
                               (type(exc), exc, exc.__traceback__))
    failed = False
    for handler in logging.getLogger("vortexsim").handlers:
        if isinstance(handler, _RunLog):
            handler.handle(record)
            failed = failed or handler.failed
    return failed


def _first(exc):
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _say(message):
    print(message, file=sys.stderr, flush=True)


def _meta(sim, config_toml):
    from . import __version__  # noqa: PLC0415
    from .cases.registry import CASES  # noqa: PLC0415
    from .output.cf import GENERIC_UNITS  # noqa: PLC0415
    cfg = sim.config
    case = CASES.get(cfg.get("case"))
    length_unit, time_unit = case.units if case is not None else GENERIC_UNITS
    return {"case": cfg.get("case"), "length_unit": length_unit, "time_unit": time_unit,
            "config": config_toml, "vortexsim_version": __version__,
            "device": sim.device.describe(), "precision": cfg.get("precision"),
            "kernel": cfg.get("kernel"), "method": cfg.get("method"),
            "tolerance": float(cfg.get("tol")), "integrator": cfg.get("integrator")}


def _history_line(argv):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{now}: vortexsim {' '.join(shlex.quote(a) for a in argv)}"


def _resolved_toml(sim, output):
    cfg = sim.config
    params = {k: v for k, v in cfg.items() if k not in _DERIVED and k not in CLI_ONLY}
    params.update(output)
    derived = {k: cfg[k] for k in ("t0", "n_elements", "n_tracers", "groups") if k in cfg}
    header = (f"vortexsim {cfg.get('case')}: resolved configuration (every value as run).\n"
              "Units: L length, T time (the case's units).  Repeat the run with: "
              "vortexsim run config.toml")
    return to_toml(cfg.get("case"), params, header=header, derived=derived)


def _log_cores(config):
    """Log the physical, element and effective cores; warn when σ > σ_c."""
    from .cases import core_summary  # noqa: PLC0415
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


def _check_device(device):
    from .backend import resolve_device  # noqa: PLC0415
    try:
        resolve_device(device)
    except (RuntimeError, ValueError) as exc:
        raise UsageError(_first(exc)) from None


# -- commands -----------------------------------------------------------------------------
def cmd_run(args, argv):
    case, file_params, source = _resolve_case(args.case)
    defaults = _defaults(case)
    where = f"{source}: " if source != case else ""
    params = check_params(file_params, defaults, where)
    if args.preset is not None:
        presets = load_presets(source) if source != case else {}
        if args.preset not in presets:
            known = ", ".join(presets) or "none"
            raise UsageError(f"{source}: no preset {args.preset!r}"
                             f"{closest(args.preset, list(presets))}; its presets: {known}.")
        params.update(check_params(presets[args.preset], defaults,
                                   f"{source} [presets.{args.preset}]: "))
    params.update(check_params(parse_assignments(args.set), defaults, "--set: "))
    if args.device:
        params["device"] = args.device
    if args.precision:
        params["precision"] = args.precision
    if args.t_end is not None:
        params["t_end"] = check_params({"t_end": args.t_end}, defaults, "--t-end: ")["t_end"]
    output = {k: params.pop(k, v) for k, v in OUTPUT_DEFAULTS.items()}
    t_end = params.get("t_end", defaults.get("t_end"))
    if t_end is None or not t_end > 0:
        raise UsageError(f"t_end = {t_end!r} is not after the start time t = 0; set t_end > 0.")
    if args.steps is None and due(0.0, float(t_end)):
        raise UsageError(f"t_end = {t_end:g} is within the schedule's tolerance "
                         f"({DUE_RTOL:g}) of the start time t = 0, so the run would take no "
                         f"step; set t_end > {DUE_RTOL:g} or use --steps N.")
    if args.dry_run:
        resolved = {**{k: v for k, v in defaults.items() if k not in OUTPUT_DEFAULTS},
                    **params, **output}
        header = (f"vortexsim {case}: the parameters `vortexsim run` would use (dry run"
                  + (f", preset {args.preset}" if args.preset else "") + "); \"auto\" "
                  "values are derived when the case is built.")
        print(to_toml(case, resolved, header=header))
        return EXIT_OK
    run_dir = args.out or os.path.join("runs", case if source == case else
                                       os.path.splitext(os.path.basename(source))[0])
    existing = os.path.exists(run_dir) and (not os.path.isdir(run_dir) or os.listdir(run_dir))
    if existing and not args.overwrite:
        raise UsageError(f"output directory {run_dir} exists and is not empty; pass --overwrite "
                         "to replace its vortexsim files, or choose another with --out DIR.")
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise UsageError(f"--out {run_dir} is a file, not a directory.")
    if existing and not _is_run_dir(run_dir):
        raise UsageError(f"--overwrite: {run_dir} is not a run directory of vortexsim (it has "
                         f"no {RUN_MARKER} file; runs of vortexsim before issue 19 have none "
                         "either), so none of its files are touched; delete or empty it "
                         "yourself, or choose another with --out DIR.")
    device = params.get("device", defaults.get("device"))
    _check_device(device)
    freed = _our_files_size(run_dir) if existing else 0
    _check_costs(case, {**defaults, **params}, output, device, run_dir, args, freed)

    from .cases import make_case  # noqa: PLC0415
    try:
        sim = make_case(case, **params, progress=False)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"case {case}: {_first(exc)}") from None
    from .output import output_intervals, run_writers  # noqa: PLC0415
    snap_dt, diag_dt = output_intervals(sim.config["dt"], sim.config["t_end"] - sim.t,
                                        output["snapshot_interval"],
                                        output["diagnostics_interval"])
    output.update(snapshot_interval=snap_dt, diagnostics_interval=diag_dt)

    config_toml = _resolved_toml(sim, output)
    try:
        _prepare_run_dir(run_dir, args.overwrite, config_toml)
    except OSError as exc:
        raise UsageError(f"cannot write into the output directory {run_dir}: "
                         f"{exc.strerror or _first(exc)}"
                         + (f" ({exc.filename})" if exc.filename else "") + ".") from None
    meta = _meta(sim, config_toml)
    history = _history_line(argv)
    _write_case_files(sim, run_dir, meta, history)
    sim.output_writers.update(run_writers(run_dir, meta, history, snap_dt, diag_dt,
                                          plot=bool(output["plot"])))
    logger.info("run %s (%s) → %s: %d elements, %d tracers, %s, %s on %s; snapshots every %g, "
                "diagnostics every %g", case, source, run_dir, sim.config["n_elements"],
                sim.config["n_tracers"], sim.config["method"], sim.config["precision"],
                sim.device.describe(), snap_dt, diag_dt)
    _log_cores(sim.config)
    stop = {"steps": args.steps} if args.steps else {"t_end": float(sim.config["t_end"])}
    return _run(sim, args.quiet == 0, **stop)


def _restart_stop(snap, t_end=None, steps=None):
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


def _restart_target(snap, stop, truncate=False, out=None):
    """Where a restart of ``snap`` continues (``docs/cli.md``, *Run history*):
    ``(mode, directory, later)``, ``later`` the :class:`~vortexsim.output.writers.LaterOutput`
    of the snapshot's directory.

    * ``"in place"``: the snapshot's directory, when it holds no later snapshot and any
      later diagnostics rows (written after the snapshot by a run that was killed) are
      rewritten by the continuation;
    * ``"truncate"`` (``--truncate``): the snapshot's directory, its later output deleted;
    * ``"branch"``: ``out`` (``--out DIR``), or otherwise, when the directory holds later
      output, the new directory ``branch_<iteration>[_k]`` inside it; the snapshot's
      directory is left as it is.

    Raises :class:`UsageError` when the directory's ``diagnostics.nc`` does not match the
    snapshot (missing, or another number of rows up to it).
    """
    from .output import SnapshotError  # noqa: PLC0415
    from .output.writers import branch_dir, later_output  # noqa: PLC0415
    run_dir = os.path.dirname(os.path.abspath(snap.path))
    try:
        rows = int(snap.schedule["diagnostics_rows"])
        later = later_output(run_dir, snap.iteration, rows)
    except (TypeError, ValueError) as exc:   # SnapshotError is a ValueError
        what = _first(exc) if isinstance(exc, SnapshotError) else \
            f"{snap.path} has a malformed run_diagnostics_rows attribute"
        raise UsageError(f"cannot restart: {what}") from None
    if out is not None:
        return "branch", os.path.abspath(out), later
    if truncate:
        return "truncate", run_dir, later
    if not later.snapshots and all(_reaches(snap, stop, r) for r in later.later_rows[-1:]):
        return "in place", run_dir, later
    return "branch", branch_dir(run_dir, snap.iteration), later


def _check_restart_schedule(snap, config, stop, force):
    """Refuse (UsageError) a restart whose stored schedule and stop would take more steps
    or write more files than :func:`vortexsim.resources.check_schedule` allows (a
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


def _remove_branch(branch, created):
    """Undo a branch that could not start: remove its vortexsim files (and the directory
    when this restart created it)."""
    _remove_handlers()                 # run.log is closed before it is removed
    for pattern in (*_OUR_FILES, RUN_MARKER):
        for f in glob.glob(os.path.join(glob.escape(branch), pattern)):
            with contextlib.suppress(OSError):
                os.remove(f)
    if created:
        with contextlib.suppress(OSError):
            os.rmdir(branch)


def _is_run_dir(run_dir):
    """True when ``run_dir`` holds the marker of a run directory (:data:`RUN_MARKER`): a
    regular file (not a link) of at most 4 kB holding a JSON object with
    ``"vortexsim_run"``."""
    path = os.path.join(run_dir, RUN_MARKER)
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 4096:
            return False
        with open(path, encoding="utf-8") as fh:
            marker = json.loads(fh.read(4097))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and "vortexsim_run" in marker


def _our_files_size(run_dir):
    """Bytes of vortexsim's files in ``run_dir`` (what ``--overwrite`` removes)."""
    total = 0
    for pattern in _OUR_FILES:
        for f in glob.glob(os.path.join(glob.escape(run_dir), pattern)):
            try:
                total += os.lstat(f).st_size
            except OSError:
                pass
    return total


def _check_costs(case, config, output, device, run_dir, args, freed):
    """Refuse (UsageError) a run that does not fit in memory (``--max-memory``), whose
    schedule is beyond the bounds of :mod:`vortexsim.resources` or whose files would not
    fit on the disk (``--force`` lifts the last two)."""
    config = {k: v for k, v in config.items() if k not in OUTPUT_DEFAULTS}
    config["case"] = case
    try:
        est = check_resources(config, device, args.max_memory)
        dt = config.get("dt")
        if not (isinstance(dt, (int, float)) and dt > 0):
            return                         # make_case says what is wrong
        plan = check_schedule(dt=float(dt), duration=float(config["t_end"]), steps=args.steps,
                              snapshot_interval=output["snapshot_interval"],
                              diagnostics_interval=output["diagnostics_interval"],
                              force=args.force)
        if est is not None:
            check_disk(run_dir, est.n_elements, est.n_tracers, plan["snapshots"],
                       plan["rows"], force=args.force, freed=freed)
    except ResourceError as exc:
        raise UsageError(str(exc)) from None
    except (ValueError, TypeError) as exc:   # the case builder rejects the parameters
        raise UsageError(f"case {case}: {_first(exc)}") from None


def check_memory(config, device, max_memory=None):
    """Refuse (UsageError) the run of ``config`` (a snapshot's stored config on restart)
    when it would not fit in memory on ``device``
    (:func:`vortexsim.resources.check_resources`); a config whose size cannot be told is
    left to ``from_config`` to reject."""
    try:
        check_resources(config, device, max_memory)
    except ResourceError as exc:
        raise UsageError(str(exc)) from None
    except (KeyError, ValueError, TypeError, AttributeError):
        return


def _mark_run_dir(run_dir):
    """Write the marker :data:`RUN_MARKER` into ``run_dir`` unless it holds one."""
    from . import __version__  # noqa: PLC0415
    if not _is_run_dir(run_dir):
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        with open(os.path.join(run_dir, RUN_MARKER), "w", encoding="utf-8") as fh:
            json.dump({"vortexsim_run": 1, "vortexsim_version": __version__,
                       "created": now}, fh)
            fh.write("\n")


def _prepare_run_dir(run_dir, overwrite, config_toml):
    """Create ``run_dir`` with its marker (or, with ``overwrite``, remove vortexsim's files
    of the run directory there), start run.log and write config.toml."""
    from .output import write_text  # noqa: PLC0415
    os.makedirs(run_dir, exist_ok=True)
    if overwrite:
        for pattern in _OUR_FILES:
            for f in glob.glob(os.path.join(glob.escape(run_dir), pattern)):
                os.remove(f)
    _mark_run_dir(run_dir)
    _add_file_log(run_dir)
    write_text(os.path.join(run_dir, "config.toml"), config_toml)


def _write_case_files(sim, run_dir, meta, history):
    """Write the case's own files (``CaseSetup.files``, e.g. ``initial_field.nc``) into the
    fresh run directory ``run_dir``, before the first step; a restart never rewrites
    them."""
    for name, write in getattr(sim, "case_files", {}).items():
        path = os.path.join(run_dir, name)
        try:
            write(path, sim.config, {"source": f"vortexsim {meta['vortexsim_version']}",
                                     "history": history})
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or _first(exc)}.") from None
        logger.info("wrote %s", path)


def cmd_restart(args, argv):
    from .output import SnapshotError, read_snapshot, run_writers  # noqa: PLC0415
    from .output.writers import SCHEDULE_KEYS, start_branch, truncate_run  # noqa: PLC0415
    try:
        snap = read_snapshot(args.snapshot)
    except SnapshotError as exc:
        raise UsageError(f"cannot restart: {_first(exc)}") from None
    config = dict(snap.config)
    s = dict(snap.schedule)
    if any(s.get(k) is None for k in SCHEDULE_KEYS):
        raise UsageError(f"cannot restart: {args.snapshot} has no output schedule (run_* "
                         "attributes); it was not written by vortexsim run.")
    original = config.get("device", "auto")
    if args.device:
        config["device"] = args.device
    try:
        _check_device(config.get("device", "auto"))
    except UsageError as exc:
        hint = (f" (the snapshot was computed on device {original!r}; restart with --device "
                "cpu to continue on the CPU, not bitwise equal)" if not args.device else "")
        raise UsageError(f"{exc}{hint}") from None
    t = snap.t
    stop = _restart_stop(snap, args.t_end, args.steps)
    check_memory(config, config.get("device", "auto"), args.max_memory)
    _check_restart_schedule(snap, config, stop, args.force)
    if args.out is not None and os.path.exists(args.out) and \
            (not os.path.isdir(args.out) or os.listdir(args.out)):
        raise UsageError(f"--out {args.out} exists and is not an empty directory; the "
                         "continuation of a restart goes into a new (or empty) directory.")
    mode, run_dir, later = _restart_target(snap, stop, args.truncate, args.out)
    source_dir = os.path.dirname(os.path.abspath(snap.path))
    branch = mode == "branch"
    created = False
    if branch:
        try:
            created = not os.path.isdir(run_dir)
            os.makedirs(run_dir, exist_ok=True)
            _mark_run_dir(run_dir)             # a run directory of its own (--overwrite)
        except OSError as exc:
            raise UsageError(f"cannot create the branch directory {run_dir} for the "
                             f"continuation ({exc.strerror or exc}); choose one with --out "
                             "DIR.") from None
    _add_file_log(run_dir)
    from .cases import from_config  # noqa: PLC0415
    try:
        try:
            sim = from_config({**config, "progress": False})
        except (ValueError, TypeError) as exc:
            raise UsageError(f"cannot restart from {args.snapshot}: {_first(exc)}") from None
        meta = {k: snap.attrs.get(k) for k in ("case", "config", "vortexsim_version",
                                               "precision", "kernel", "method", "tolerance",
                                               "integrator")}
        meta.update(_meta(sim, snap.attrs.get("config", "")))
        history = (str(snap.attrs.get("history", "")) + "\n" + _history_line(argv)).strip()
        if branch:
            if args.out is not None:
                logger.info("restart from %s into %s, a new run directory (%s is left as "
                            "it is)", args.snapshot, run_dir, source_dir)
            else:
                logger.warning(
                    "%s is not the newest state of %s (which holds %s after it); that "
                    "directory is left as it is and the continuation goes into the new "
                    "branch %s (--truncate would continue in %s and delete that later "
                    "output instead)", os.path.basename(snap.path), source_dir,
                    later.describe(), run_dir, source_dir)
            copy = start_branch(run_dir, snap.path, later.rows, meta, history,
                                snap.attrs.get("config") or None)
            snap = read_snapshot(copy)
        sim.output_writers.update(run_writers(
            run_dir, meta, history, float(s["snapshot_interval"]),
            float(s["diagnostics_interval"]), plot=bool(s.get("plot", 1))))
        try:     # the state, the schedules, the stop criterion; diagnostics.nc resumed
            sim.pickup(snap)
        except SnapshotError as exc:
            raise UsageError(f"cannot restart: {_first(exc)}") from None
        except (ValueError, TypeError) as exc:
            raise UsageError(f"cannot restart from {args.snapshot}: {_first(exc)}") from None
    except BaseException:
        if branch:
            _remove_branch(run_dir, created)
        raise
    if mode == "truncate":
        if later:
            logger.warning("--truncate: continuing in %s from iteration %d; deleting its %s",
                           run_dir, snap.iteration, later.describe())
            truncate_run(later, meta, history)
        else:
            logger.info("--truncate: %s holds nothing after iteration %d; nothing deleted",
                        run_dir, snap.iteration)
    elif mode == "in place" and later.later_rows:
        logger.info("restart: %s holds %s, written after this snapshot by a run that did not "
                    "finish; the continuation writes them again", run_dir, later.describe())
    logger.info("restart %s from %s: t = %.10g, iteration %d, on %s; writing into %s",
                config.get("case"), args.snapshot, t, snap.iteration, sim.device.describe(),
                run_dir)
    _log_cores(sim.config)
    return _run(sim, args.quiet == 0, **stop)


def cmd_cases(args, argv):
    from .cases import list_cases  # noqa: PLC0415
    cases = list_cases()
    width = max(len(n) for n in cases)
    for name, doc in cases.items():
        path = case_file(name)
        print(f"{name:<{width}}  {doc.replace('``', '')}")
        print(f"{'':<{width}}  file: {path or '(no case file; the defaults of make_case)'}")
        for preset, values in (load_presets(path) if path else {}).items():
            settings = " ".join(f"{k}={v}" for k, v in values.items())
            print(f"{'':<{width}}  --preset {preset}: {settings}")
    print("\nRun one with: vortexsim run NAME [--preset NAME] [--set key=value]; copy a case "
          "file to make your own.")
    return EXIT_OK


def _restart_note(path, snap):
    """What ``vortexsim restart path`` would do with the snapshot ``snap`` (read and
    checked), in the words of ``info``: refused, the end of its run, or where it
    continues (the checks and the choice of :func:`cmd_restart`)."""
    from .output.writers import SCHEDULE_KEYS  # noqa: PLC0415
    if any(snap.schedule.get(k) is None for k in SCHEDULE_KEYS):
        return "NOT restartable: no output schedule (run_* attributes); not written by " \
               "vortexsim run"
    try:
        mode, where, later = _restart_target(snap, {})
        _restart_stop(snap)
    except UsageError as exc:
        text = " ".join(str(exc).split())
        if text.startswith("cannot restart: "):
            return "NOT restartable: " + text[len("cannot restart: "):]
        return text                    # the end of its run: how to continue
    command = "restart with: vortexsim restart " + shlex.quote(path)
    if mode == "in place":
        return f"{command} (continues in {where})"
    return (f"{command} (continues in the new branch {where}: {later.run_dir} holds "
            f"{later.describe()} after it, left as it is)")


def cmd_info(args, argv):
    """Describe a netCDF file.  A file that says it is a vortexsim snapshot is read and
    checked like a restart (:func:`vortexsim.output.read_snapshot`): a bad one is a
    one-line error, exit 2.  Every text taken from the file is printed with its control
    characters escaped (:func:`vortexsim.output.validate.printable`)."""
    from .output import SnapshotError, open_netcdf, read_snapshot  # noqa: PLC0415
    from .output.cf import unit_label  # noqa: PLC0415
    from .output.diagnostics import DIAGNOSTICS_FORMAT  # noqa: PLC0415
    from .output.snapshot import FORMAT  # noqa: PLC0415
    from .output.validate import printable  # noqa: PLC0415
    try:
        ds = open_netcdf(args.file)
    except SnapshotError as exc:
        raise UsageError(_first(exc)) from None
    a = ds.attrs
    fmt = a.get("vortexsim_format")
    fmt = fmt if isinstance(fmt, str) else None
    lines = [printable(args.file)]
    if fmt == FORMAT:
        try:
            snap = read_snapshot(args.file)
        except SnapshotError as exc:
            raise UsageError(_first(exc)) from None
        lines += _snapshot_lines(snap, args.file)
    elif fmt == DIAGNOSTICS_FORMAT:
        lines.append(_diagnostics_line(ds, args.file))
    elif fmt is not None and fmt.startswith("vortexsim"):
        lines.append(f"  {printable(fmt)}: not a vortexsim format this version knows")
    else:
        lines.append("  not a vortexsim file (no vortexsim_format attribute)")
    lines.append("  dimensions: " + ", ".join(f"{printable(k)} = {v}"
                                              for k, v in ds.sizes.items()))
    for key in ("length_unit", "time_unit"):
        if key in a:
            lines.append(f"  {key}: {printable(a[key])}")
    lines.append("  variables (dimension in the case's units L, T):")
    for name, var in ds.variables.items():
        dims = ", ".join(printable(d) for d in var.dims)
        lines.append(f"    {printable(name)} ({dims}) [{printable(unit_label(var.attrs) or '?')}] "
                     f"{printable(var.attrs.get('long_name', ''))}".rstrip())
    hist = a.get("history", "")
    hist = (hist if isinstance(hist, str) else str(hist)).strip()
    if hist:
        lines.append("  history:")
        lines += [f"    {printable(h)}" for h in hist.splitlines()]
    print("\n".join(lines))
    return EXIT_OK


def _snapshot_lines(snap, path):
    """What ``info`` says of a checked snapshot (every text from the file escaped)."""
    from .cases import core_summary  # noqa: PLC0415
    from .output.snapshot import FORMAT_VERSION  # noqa: PLC0415
    from .output.validate import printable  # noqa: PLC0415
    a, cfg, s = snap.attrs, snap.config, snap.schedule

    def attr(name):
        return printable(a.get(name))

    el, tr = snap.state["elements"], snap.state["tracers"]
    cores = core_summary(cfg)
    version = int(a["vortexsim_format_version"])
    scope = "" if version >= 2 else (
        f" (format {version}: the checksum does not cover the config TOML text)")
    if version < 3 <= FORMAT_VERSION:
        scope += (f" (format {version}: no element volumes and groups; a run whose remeshing "
                  "changed the element count cannot restart from it)")
    end = (f"t = {s['stop_time']!r}" if s.get("stop_time") is not None
           else f"iteration {s.get('stop_iteration')}")
    return [f"  vortexsim snapshot ({attr('snapshot_kind')}), case {printable(cfg.get('case'))}, "
            f"vortexsim {attr('vortexsim_version')}",
            f"  t = {snap.t:.10g}, iteration {snap.iteration}, next dt = "
            f"{snap.state['dt']:.6g}",
            f"  {len(el['x'])} elements, {len(tr['x'])} tracers; "
            f"{printable(cfg.get('integrator'))} dt = {printable(cfg.get('dt'))}, "
            f"{printable(cfg.get('method'))} (tol {printable(cfg.get('tol'))}), kernel "
            f"{printable(cfg.get('kernel'))}, {printable(cfg.get('precision'))}, device "
            f"{attr('device')}",
            *([f"  {printable(cores[0])}"] if cores else []),
            f"  run end: {end}",
            f"  checksum ok{scope}; {printable(_restart_note(path, snap))}"]


def _diagnostics_line(ds, path):
    """``info``'s line for a diagnostics file (UsageError when its times are unusable)."""
    from .output.cf import TIME, with_current_names  # noqa: PLC0415
    from .output.validate import printable  # noqa: PLC0415
    ds = with_current_names(ds)                  # "time" in formats 1 to 3
    t = ds[TIME].values if TIME in ds.variables else None
    if t is None or t.ndim != 1 or t.dtype.kind != "f":
        what = "no time variable" if t is None else f"time of dtype {t.dtype}, shape {t.shape}"
        raise UsageError(f"{path}: a vortexsim diagnostics file with {what}, expected float "
                         f"times ({TIME}); the file is corrupted.")
    case = printable(ds.attrs.get("case"))
    return (f"  vortexsim diagnostics, case {case}: {len(t)} rows, t = "
            + (f"{t[0]:.6g} … {t[-1]:.6g}" if len(t) else "(none)"))


class _Terminated(BaseException):
    """SIGTERM outside a run (while starting, reading, building, after the run)."""


def _terminate(signum, frame):
    raise _Terminated


def main(argv=None):
    """Entry point of the ``vortexsim`` console script (and ``python -m vortexsim``).

    Every outcome is one line on stderr and an exit code: bad input (also an output
    directory that cannot be written, before the run) 2; SIGINT 130 and SIGTERM 143 at
    any time (during a run, after a checkpoint); the run's own codes from :func:`_run`.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        end_startup()           # SIGINT is KeyboardInterrupt again (vortexsim._startup)
    old_term = signal.signal(signal.SIGTERM, _terminate) if in_main else None
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version (0) and usage errors (2, one line)
            return exc.code
        _setup_logging(args)
        return args.func(args, argv)
    except (UsageError, ConfigError) as exc:
        _say(f"vortexsim: error: {' '.join(str(exc).split())}")
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. vortexsim info FILE | head
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED
    except OSError as exc:   # before the run: e.g. restart in a read-only run directory
        where = f" {exc.filename}" if exc.filename else ""
        _say(f"vortexsim: error: cannot use{where}: {exc.strerror or _first(exc)}.")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say("vortexsim: aborted (no checkpoint of the step in progress; the last snapshot of "
             "the run directory is a checkpoint)")
        return 128 + signal.SIGINT
    except _Terminated:
        _say("vortexsim: terminated by SIGTERM outside a run's steps (no checkpoint of its "
             "own; the snapshots already in the run directory are checkpoints)")
        return 128 + signal.SIGTERM
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, old_term if old_term is not None else signal.SIG_DFL)
        _remove_handlers()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
