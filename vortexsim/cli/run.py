"""``vortexsim run``: resolve the case (name or file, preset, ``--set``), check what the
run will cost, prepare the run directory, build the case and run it."""
from __future__ import annotations

import logging
import os

from ..config import (CLI_ONLY, OUTPUT_DEFAULTS, check_params, closest, load_case_file,
                      load_presets, parse_assignments, to_toml)
from ..schedules import DUE_RTOL, due
from .common import EXIT_OK, UsageError, case_file, check_device, check_one_process, first_line
from .execute import log_cores, run_simulation
from .writefail import os_error_text
from .resources import (ResourceError, announce_cpu_cost, check_disk, check_resources,
                        check_schedule)
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
    check_one_process("run")
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
    existing = check_output_dir(run_dir, args.overwrite)
    device = params.get("device", defaults.get("device"))
    check_device(device)
    freed = our_files_size(run_dir) if existing else 0
    check_costs(case, {**defaults, **params}, output, device, run_dir, args, freed)

    from ..cases import make_case  # noqa: PLC0415
    try:
        sim = make_case(case, **params, progress=False)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"case {case}: {first_line(exc)}") from None
    from ..output import output_intervals  # noqa: PLC0415
    snap_dt, diag_dt = output_intervals(sim.config["dt"], sim.config["t_end"] - sim.t,
                                        output["snapshot_interval"],
                                        output["diagnostics_interval"])
    output.update(snapshot_interval=snap_dt, diagnostics_interval=diag_dt)

    config_toml = resolved_toml(sim, output)
    try:
        lock = prepare_run_dir(run_dir, args.overwrite, config_toml)
    except OSError as exc:
        raise UsageError(f"cannot write into the output directory {run_dir}: "
                         f"{os_error_text(exc, run_dir)}.") from None
    with lock:                        # this process alone writes into run_dir until it ends
        return _start(sim, args, argv, case, source, run_dir, config_toml, output,
                      snap_dt, diag_dt)


def _start(sim, args, argv, case, source, run_dir, config_toml, output, snap_dt, diag_dt):
    """The rest of :func:`cmd_run`, in the prepared and locked ``run_dir``: the case's
    files, the writers, the run."""
    from ..output import run_writers  # noqa: PLC0415
    meta = run_metadata(sim, config_toml)
    history = history_line(argv)
    write_case_files(sim, run_dir, meta, history)
    sim.output_writers.update(run_writers(run_dir, meta, history, snap_dt, diag_dt,
                                          plot=bool(output["plot"])))
    logger.info("run %s (%s) → %s: %d elements, %d tracers, %s, %s on %s; snapshots every %g, "
                "diagnostics every %g", case, source, run_dir, sim.config["n_elements"],
                sim.config["n_tracers"], sim.config["method"], sim.config["precision"],
                sim.device.describe(), snap_dt, diag_dt)
    log_cores(sim.config)
    if args.steps:            # two stop criteria: say which one ends this run
        logger.info("--steps %d ends this run (at t = %.6g with dt = %g); t_end = %g stays "
                    "its configured end, where vortexsim restart continues to",
                    args.steps, sim.t + args.steps * float(sim.config["dt"]),
                    float(sim.config["dt"]), float(sim.config["t_end"]))
    stop = {"steps": args.steps} if args.steps else {"t_end": float(sim.config["t_end"])}
    return run_simulation(sim, args.quiet == 0, **stop)


def check_costs(case, config, output, device, run_dir, args, freed):
    """Refuse (UsageError) a run that does not fit in memory (``--max-memory``), whose
    schedule is beyond the bounds of :mod:`vortexsim.cli.resources` or whose files would not
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
            announce_cpu_cost(config, est, args.preset, args.steps)
    except ResourceError as exc:
        raise UsageError(str(exc)) from None
    except (ValueError, TypeError) as exc:   # the case builder rejects the parameters
        raise UsageError(f"case {case}: {first_line(exc)}") from None


def check_memory(config, device, max_memory=None):
    """Refuse (UsageError) the run of ``config`` (a snapshot's stored config on restart)
    when it would not fit in memory on ``device``
    (:func:`vortexsim.cli.resources.check_resources`); a config whose size cannot be told is
    left to ``from_config`` to reject."""
    try:
        check_resources(config, device, max_memory)
    except ResourceError as exc:
        raise UsageError(str(exc)) from None
    except (KeyError, ValueError, TypeError, AttributeError):
        return
