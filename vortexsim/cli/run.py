"""``vortexsim run``: resolve the case (name or file, preset, ``--set``), check what the
run will cost, prepare the run directory, build the case and run it."""
from __future__ import annotations

import logging
import os
import time

from ..config import (CLI_ONLY, OUTPUT_DEFAULTS, check_params, closest, load_case_file,
                      load_presets, parse_assignments, to_toml)
from ..schedules import DUE_RTOL, due
from ..backend import SingleProcess
from .common import EXIT_OK, UsageError, case_file, check_device, first_line
from .ranks import Ranks
from .execute import log_cores, run_simulation
from .writefail import os_error_text
from .resources import (ResourceError, announce_cpu_cost, check_disk, check_resources,
                        check_schedule, estimate_memory, format_bytes, per_rank,
                        spill_bytes, split_fraction)
from .rundir import (check_output_dir, history_line, our_files_size, prepare_run_dir,
                     resolved_toml, run_metadata, write_case_files)

__all__ = ["cmd_run", "check_costs", "check_memory"]

logger = logging.getLogger("vortexsim.cli")


def _looks_like_path(arg):
    return arg.endswith(".toml") or os.sep in arg or "/" in arg or os.path.isfile(arg)


def _resolve_case(arg):
    """(case name, {key: value} of its file, source label) for a case name or TOML path."""
    from ..cases import list_cases  # noqa: PLC0415

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
    from ..cases import case_defaults  # noqa: PLC0415

    d = {k: v for k, v in case_defaults(case).items() if k not in CLI_ONLY}
    return {**d, **OUTPUT_DEFAULTS}


def cmd_run(args, argv):
    """``vortexsim run``; on several MPI ranks every rank runs it and rank 0 alone
    touches the run directory (:mod:`vortexsim.cli.ranks`)."""
    ranks = getattr(args, "ranks", None) or Ranks(SingleProcess())
    return ranks.agree(_resolve_run, args)(ranks, args, argv)


def _resolve_run(args):
    """The parameters of ``vortexsim run`` (the same on every rank): a function that runs
    it, or that prints the dry run."""
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

        def dry_run(ranks, args, argv):
            on_ranks = _ranks_line(ranks, case, resolved) if ranks.size > 1 else ""
            if ranks.is_root:
                print(to_toml(case, resolved, header=header + on_ranks))
            return EXIT_OK
        return dry_run

    def run(ranks, args, argv):
        return _run(ranks, args, argv, case, source, params, defaults, output)
    return run


def _ranks_line(ranks, case, resolved):
    """The dry run's words on its MPI ranks: each holds the whole state, or its slab of
    it (collective)."""
    device = resolved.get("device", "auto")
    on_host, on_gpu, size = ranks.sharing(device)
    config = {**resolved, "case": case}
    est = estimate_memory(config, device)
    fraction = split_fraction(config, size)
    holding = "its slab of the state" if fraction < 1 else "the whole state"
    if est is None:
        return f" On {ranks.size} MPI ranks, each holding {holding}."
    est = per_rank(est, fraction)
    need = est.device_bytes if est.device == "gpu" else est.host_bytes
    return (f" On {ranks.size} MPI ranks, each holding {holding}: about "
            f"{format_bytes(need)} of {est.device.upper()} memory per rank, "
            f"{format_bytes(need * (on_gpu if est.device == 'gpu' else on_host))} on "
            f"{'each GPU' if est.device == 'gpu' else 'this machine'}.")


def _checked_dir(run_dir, args, case, config, output, device, sharing):
    """Rank 0's checks of the run directory and of what the run costs (memory of every
    rank on a machine and a GPU, steps, files, disk)."""
    existing = check_output_dir(run_dir, args.overwrite)
    freed = our_files_size(run_dir) if existing else 0
    check_costs(case, config, output, device, run_dir, args, freed, sharing)


def _run(ranks, args, argv, case, source, params, defaults, output):
    """Check, build and run the case of :func:`cmd_run` on every rank."""
    run_dir = args.out or os.path.join("runs", case if source == case else
                                       os.path.splitext(os.path.basename(source))[0])
    device = params.get("device", defaults.get("device"))
    ranks.agree(check_device, device)
    # the writers' libraries, warmed up while the case is built (joined in _start)
    warm = ranks.on_root(_prewarm, device, output)
    ranks.use_device(device)
    sharing = ranks.sharing(device)
    ranks.on_root(_checked_dir, run_dir, args, case, {**defaults, **params}, output, device,
                  sharing)
    built = time.perf_counter()
    sim = ranks.agree(_make, case, params, ranks.comm)
    built = time.perf_counter() - built
    from ..output import output_intervals  # noqa: PLC0415
    snap_dt, diag_dt = output_intervals(sim.config["dt"], sim.config["t_end"] - sim.t,
                                        output["snapshot_interval"],
                                        output["diagnostics_interval"])
    output.update(snapshot_interval=snap_dt, diagnostics_interval=diag_dt)

    config_toml = resolved_toml(sim, output)
    lock = ranks.on_root(_prepare, run_dir, args.overwrite, config_toml)
    try:                          # rank 0 alone writes into run_dir until the run ends
        return _start(ranks, sim, args, argv, case, source, run_dir, config_toml, output,
                      snap_dt, diag_dt, built, warm)
    finally:
        if lock is not None:
            lock.release()


def _prewarm(device, output):
    """:class:`~vortexsim.cli.prewarm.Prewarm` of a GPU run's writers: the netCDF stack,
    and matplotlib where a plot is drawn (as ``PlotWriter.initialize``); None on the CPU,
    where the build it would overlap is Python and NumPy on the same cores (no gain
    measured: 2-core whole runs of the CPU defaults within their noise)."""
    from ..backend.device import device_kind  # noqa: PLC0415
    from .prewarm import Prewarm  # noqa: PLC0415
    if device_kind(device) != "gpu":
        return None
    return Prewarm(plot=bool(output["plot"]))


def _make(case, params, communicator):
    from ..cases import make_case  # noqa: PLC0415
    try:
        return make_case(case, **params, progress=False, communicator=communicator)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"case {case}: {first_line(exc)}") from None


def _prepare(run_dir, overwrite, config_toml):
    try:
        return prepare_run_dir(run_dir, overwrite, config_toml)
    except OSError as exc:
        raise UsageError(f"cannot write into the output directory {run_dir}: "
                         f"{os_error_text(exc, run_dir)}.") from None


def _start(ranks, sim, args, argv, case, source, run_dir, config_toml, output, snap_dt,
           diag_dt, built=None, warm=None):
    """The rest of :func:`cmd_run`, in the prepared and locked ``run_dir``: the case's
    files, the writers, the run.  ``built``: the seconds the case took to build (said in
    the log with the seconds of its files, which the run's own time line leaves out);
    ``warm``: the :class:`~vortexsim.cli.prewarm.Prewarm` to wait for before the run."""
    from ..output import run_writers  # noqa: PLC0415
    meta = run_metadata(sim, config_toml)
    history = history_line(argv)
    files = time.perf_counter()
    ranks.on_root(write_case_files, sim, run_dir, meta, history)
    if built is not None:
        logger.info("set-up: the case built in %.3g s, its files written in %.3g s",
                    built, time.perf_counter() - files)
    sim.case_files = {}                  # written: the fields they held are let go
    sim.output_writers.update(run_writers(run_dir, meta, history, snap_dt, diag_dt,
                                          plot=bool(output["plot"])))
    logger.info("run %s (%s) → %s: %d elements, %d tracers, %s, %s on %s; snapshots every %g, "
                "diagnostics every %g", case, source, run_dir, sim.config["n_elements"],
                sim.config["n_tracers"], sim.config["method"], sim.config["precision"],
                sim.device.describe(), snap_dt, diag_dt)
    if ranks.size > 1:
        logger.info("on %d MPI ranks (%s); rank 0 writes the files", ranks.size,
                    sim.device.describe())
    log_cores(sim.config)
    if args.steps:            # two stop criteria: say which one ends this run
        logger.info("--steps %d ends this run (at t = %.6g with dt = %g); t_end = %g stays "
                    "its configured end, where vortexsim restart continues to",
                    args.steps, sim.t + args.steps * float(sim.config["dt"]),
                    float(sim.config["dt"]), float(sim.config["t_end"]))
    stop = {"steps": args.steps} if args.steps else {"t_end": float(sim.config["t_end"])}
    if warm is not None:
        warm.join()
    return run_simulation(sim, args.quiet == 0 and ranks.is_root, ranks, **stop)


def check_costs(case, config, output, device, run_dir, args, freed, sharing=(1, 1)):
    """Refuse (UsageError) a run that does not fit in memory (``--max-memory``; every
    rank's on a machine and a GPU: ``sharing``, :meth:`Ranks.sharing`), whose
    schedule is beyond the bounds of :mod:`vortexsim.cli.resources` or whose files would not
    fit on the disk (``--force`` lifts the last two)."""
    config = {k: v for k, v in config.items() if k not in OUTPUT_DEFAULTS}
    config["case"] = case
    try:
        est = check_resources(config, device, args.max_memory, sharing)
        dt = config.get("dt")
        if not (isinstance(dt, (int, float)) and dt > 0):
            return                         # make_case says what is wrong
        plan = check_schedule(dt=float(dt), duration=float(config["t_end"]), steps=args.steps,
                              snapshot_interval=output["snapshot_interval"],
                              diagnostics_interval=output["diagnostics_interval"],
                              force=args.force)
        if est is not None:
            check_disk(run_dir, est.n_elements, est.n_tracers, plan["snapshots"],
                       plan["rows"], force=args.force, freed=freed,
                       scratch=spill_bytes(config, sharing[2] if len(sharing) > 2 else 1,
                                           reserved=est.host_bytes))
            announce_cpu_cost(config, est, args.preset, args.steps)
    except ResourceError as exc:
        raise UsageError(str(exc)) from None
    except (ValueError, TypeError) as exc:   # the case builder rejects the parameters
        raise UsageError(f"case {case}: {first_line(exc)}") from None


def check_memory(config, device, max_memory=None, sharing=(1, 1)):
    """Refuse (UsageError) the run of ``config`` (a snapshot's stored config on restart)
    when it would not fit in memory on ``device``
    (:func:`vortexsim.cli.resources.check_resources`); a config whose size cannot be told is
    left to ``from_config`` to reject."""
    try:
        check_resources(config, device, max_memory, sharing)
    except ResourceError as exc:
        raise UsageError(str(exc)) from None
    except (KeyError, ValueError, TypeError, AttributeError):
        return
