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

This package is wiring: it parses the command, builds the simulation
(:func:`vortexsim.make_case`, or :func:`vortexsim.from_config` and
:meth:`vortexsim.Simulation.pickup` of the snapshot for a restart), attaches the output
writers (:func:`vortexsim.output.writers.run_writers`, intervals from
:func:`~vortexsim.output.writers.output_intervals`), installs the SIGINT/SIGTERM handlers
(they call :meth:`~vortexsim.Simulation.request_stop`) and runs
(:meth:`vortexsim.Simulation.run`, which owns the loop).  Before it builds anything,
``run`` checks what the run will cost (:mod:`vortexsim.cli.resources`: memory against the
machine or ``--max-memory``, steps, snapshot files, diagnostics rows and disk space
against their bounds, ``--force``) and ``--overwrite`` accepts only a directory marked by
an earlier run (:data:`~vortexsim.cli.rundir.RUN_MARKER`).  One run, in order::

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
command starts, whatever signals follow the first: :mod:`vortexsim.cli.signals`).

Modules: :mod:`~vortexsim.cli.command` (the parser, ``main``), :mod:`~vortexsim.cli.run`,
:mod:`~vortexsim.cli.restart`, :mod:`~vortexsim.cli.info` (``cases`` and ``info``),
:mod:`~vortexsim.cli.rundir` (run directories), :mod:`~vortexsim.cli.resources` (what a
run will cost), :mod:`~vortexsim.cli.execute` (signals and exit codes of a run),
:mod:`~vortexsim.cli.log`, :mod:`~vortexsim.cli.common`, :mod:`~vortexsim.cli.startup`
(the signals while the command starts), :mod:`~vortexsim.cli.signals` (the signals from
the command's first line to its exit), :mod:`~vortexsim.cli.writefail` (what a failed
write says: "the disk is full") and :mod:`~vortexsim.cli.demo`.
"""
from __future__ import annotations

import importlib

#: the names this package offers and the module of each; imported when first used, so
#: that ``vortexsim/__init__.py`` can install the start-up signal handlers
#: (:mod:`vortexsim.cli.startup`) before anything heavier than the standard library loads
EXPORTS = {"main": "command", "build_parser": "command", "case_files_dir": "common",
           "case_file": "common", "UsageError": "common", "EXIT_OK": "common",
           "EXIT_FAILED": "common", "EXIT_USAGE": "common", "RUN_MARKER": "rundir",
           "check_memory": "run"}

__all__ = list(EXPORTS)


def __getattr__(name):
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(EXPORTS))
