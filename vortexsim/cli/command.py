"""The entry point of the ``vortexsim`` command: the parser of its subcommands, logging
set-up, the signal phase of a command outside a run, and the mapping of every outcome to one line
and an exit code."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..config import ConfigError
from .common import EXIT_FAILED, EXIT_USAGE, UsageError, first_line, say
from .info import cmd_cases, cmd_info
from .log import log_to_file, remove_handlers, setup_logging
from .ranks import command_ranks, finalize_mpi
from .resources import HARD_LIMIT, MAX_DIAGNOSTICS_ROWS, MAX_SNAPSHOTS, MAX_STEPS, parse_size
from .restart import cmd_restart
from .run import cmd_run
from .writefail import disk_full_text
from .rundir import RUN_MARKER
from . import signals

__all__ = ["main", "run_command", "build_parser", "COMMAND_MODULES"]


#: modules whose ``add_command(subparsers, common)`` adds a subcommand that reads run
#: directories (analysis, plots, pictures, export); each imports its heavy dependencies
#: inside its handler, so that building the parser stays cheap
COMMAND_MODULES = ("postprocess.cli", "vortexsim.viz.cli", "vortexsim.output.xdmf")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage + error by default)
        self.exit(EXIT_USAGE, f"vortexsim: error: {message} (see {self.prog} --help)\n")


def _step_count(text):
    """``--steps N``: a whole number from 1 to :data:`~vortexsim.cli.resources.HARD_LIMIT`."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of steps, got {text!r}")
    if not 1 <= n <= HARD_LIMIT:
        raise argparse.ArgumentTypeError(f"must be from 1 to {HARD_LIMIT}, got {text}")
    return n


def _thread_count(text):
    """``--threads N``: a whole number ≥ 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of threads, got {text!r}")
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return n


def _memory_size(text):
    """``--max-memory 8GB``: bytes (:func:`vortexsim.cli.resources.parse_size`)."""
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
    limits.add_argument("--threads", type=_thread_count, metavar="N",
                        help="CPU threads of the computation (FFTs, FINUFFT, the FMM's near "
                             "field; default: the cores this process may use, its CPU "
                             "affinity within a container's quota)")
    limits.add_argument("--max-memory", type=_memory_size, metavar="SIZE",
                        help="memory the run may use, e.g. 8GB or 16GiB (default: what the "
                             "machine has available, host memory or the GPU's); a run "
                             "estimated to need more is refused before it starts")

    p = _Parser(prog="vortexsim", description=(
        "Vortex-particle simulations of vortex rings: run a named case or a case file, "
        "write netCDF snapshots (every one a checkpoint) and diagnostics, restart from any "
        "snapshot."), epilog="Each command has its own --help, e.g. vortexsim run --help.")
    from .. import __version__  # noqa: PLC0415
    p.add_argument("--version", action="version", version=f"vortexsim {__version__}")
    # the logging options before the command too (vortexsim -v run ...): own names, since
    # a subcommand's defaults would overwrite the same dest; added to the command's
    p.add_argument("-v", "--verbose", action="count", default=0, dest="global_verbose",
                   help="as the command's -v")
    p.add_argument("-q", "--quiet", action="count", default=0, dest="global_quiet",
                   help="as the command's -q")
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
                       description="List the named cases, one line each, and their case "
                                   "files; with a NAME, that case's parameters, their units "
                                   "and meanings.")
    c.add_argument("name", nargs="?", metavar="NAME",
                   help="a case: print its parameters (value, unit, meaning)")
    c.set_defaults(func=cmd_cases)

    i = sub.add_parser("info", parents=[common], help="describe a netCDF file",
                       description="Describe a vortexsim snapshot or diagnostics file (case, "
                                   "time, sizes, device, variables and units) or any netCDF "
                                   "file.")
    i.add_argument("file", metavar="FILE.nc")
    i.add_argument("--no-verify", action="store_true",
                   help="describe a snapshot whose checksum does not match (a corrupted or "
                        "edited file) with a warning instead of refusing it")
    i.set_defaults(func=cmd_info)
    for module in COMMAND_MODULES:        # the tools that read a run directory
        importlib.import_module(module).add_command(sub, common)
    return p


def main(argv=None):
    """The ``vortexsim`` command (:func:`run_command`); in the command process it ends
    the process itself with the exit code (:func:`vortexsim.cli.signals.finish`)."""
    code = run_command(argv)
    if signals.installed():
        signals.finish(code)
    return code


def run_command(argv=None):
    """Entry point of the ``vortexsim`` console script (and ``python -m vortexsim``).

    Every outcome is one line on stderr and an exit code: bad input (also an output
    directory that cannot be written, before the run) 2; the run's own codes from
    :func:`run_simulation`; SIGINT 130 and SIGTERM 143 at any time, whatever signals
    follow (the first decides; :mod:`vortexsim.cli.signals`): outside a run the first
    raises in the main thread (KeyboardInterrupt, :class:`~vortexsim.cli.signals.Terminated`)
    so that cleanups run, and any exception it ends in is reported as the interruption.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    signals.reset()
    command = next((a for a in argv if not a.startswith("-")), "")
    try:
        try:
            with signals.during("command", 1,
                                lambda signum, seen: signals.raise_for(signum)):
                code = _dispatch(argv)
            if signals.first() is None or code == 128 + signals.first():
                return code
            # a signal whose exception a library swallowed, or one during the outcome
        except BaseException as exc:
            if signals.first() is None or isinstance(exc, SystemExit):
                raise
        if not signals.said():
            say(signals.interrupted_line(f"vortexsim {command} stopped".rstrip()))
        return 128 + signals.first()
    finally:
        remove_handlers()
        # the ranks meet before MPI_Finalize (rank 0 may still be writing the run's last
        # file): a signal now is taken and let go, since a rank that exited at once would
        # make the launcher end rank 0 in its write; a second one still ends the process
        with signals.during("finalizing", signals.taken() + 1, _let_go):
            finalize_mpi()
        if signals.installed():
            signals.exiting()


def _let_go(signum, seen):
    """A signal while the ranks meet at the end: the command's outcome is decided."""
    del signum, seen


def _dispatch(argv):
    """Parse ``argv`` and run its command; one line and an exit code for every outcome
    but a signal (:func:`main`)."""
    ranks = None
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version (0) and usage errors (2, one line)
            return exc.code
        args.verbose = getattr(args, "verbose", 0) + args.global_verbose
        args.quiet = getattr(args, "quiet", 0) + args.global_quiet
        ranks = None
        if args.command in ("run", "restart"):     # the commands that run on MPI ranks
            ranks = args.ranks = command_ranks(args.command)
        setup_logging(args, None if ranks is None else ranks.comm)
        if getattr(args, "threads", None) is not None:
            from ..backend.threads import set_cpu_threads  # noqa: PLC0415
            set_cpu_threads(args.threads)
        if ranks is None or ranks.size == 1:
            return args.func(args, argv)
        try:
            return args.func(args, argv)
        except (UsageError, ConfigError):
            raise
        except Exception as exc:    # one rank's error ends every rank, with its message
            log_to_file(f"vortexsim {args.command} failed on {ranks.comm.describe()}", exc)
            ranks.abort(f"{type(exc).__name__}: {first_line(exc)}")
    except (UsageError, ConfigError) as exc:
        if ranks is None or ranks.is_root:         # every rank has it; rank 0 says it
            say(f"vortexsim: error: {' '.join(str(exc).split())}")
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. vortexsim info FILE | head
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED
    except OSError as exc:   # before the run: e.g. restart in a read-only run directory
        where = f" {exc.filename}" if exc.filename else ""
        directory = os.path.dirname(os.path.abspath(exc.filename)) if exc.filename else "."
        reason = disk_full_text(exc, directory) or exc.strerror or first_line(exc)
        say(f"vortexsim: error: cannot use{where}: {reason}.")
        return EXIT_USAGE
