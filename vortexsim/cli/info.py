"""``vortexsim cases`` (the named cases, their files and presets) and ``vortexsim info``
(what a netCDF file is; for a snapshot, what a restart of it would do)."""
from __future__ import annotations

import shlex

from ..config import (CLI_ONLY, OUTPUT_DEFAULTS, PARAMETER_TABLE, SECTIONS, ConfigError,
                      check_params, load_case_file, load_presets)
from .common import EXIT_OK, UsageError, case_file, first_line
from .restart import restart_stop, restart_target

__all__ = ["cmd_cases", "cmd_info"]


def cmd_cases(args, argv):
    """List the cases: per case its description, case file, default size with the
    measured CPU time of its default run, and each preset with its settings and size."""
    from ..cases import list_cases  # noqa: PLC0415
    from .resources import CASE_CPU_SECONDS  # noqa: PLC0415
    cases = list_cases()
    if getattr(args, "name", None):
        return _case_parameters(args.name, cases)
    width = max(len(n) for n in cases)
    pad = " " * width
    for name, doc in cases.items():
        path = case_file(name)
        print(f"{name:<{width}}  {doc.replace('``', '')}")
        print(f"{pad}  file: {path or '(no case file; the defaults of make_case)'}")
        seconds = CASE_CPU_SECONDS.get(name)
        cpu = (f"about {seconds} s on 2 CPU cores" if seconds is not None
               else "CPU time not measured")
        print(f"{pad}  default: {_size_text(name, path)}; {cpu}")
        for preset, values in (load_presets(path) if path else {}).items():
            settings = " ".join(f"{k}={v}" for k, v in values.items())
            print(f"{pad}  --preset {preset}: {settings}")
            print(f"{pad}    size: {_size_text(name, path, values)}")
    print("\nRun one with: vortexsim run NAME [--preset NAME] [--set key=value]; copy a case "
          "file to make your own.  Its parameters, units and meanings: vortexsim cases NAME.")
    return EXIT_OK


def _size_text(name, path, preset=None):
    """"448 elements, 1,024 tracers" of the case ``name`` as its case file ``path`` (None:
    the defaults) and the ``preset``'s values resolve it (the count as the case is built;
    remeshing changes it as the run goes), without building it
    (:func:`vortexsim.cli.resources.problem_size`)."""
    from ..cases import case_defaults  # noqa: PLC0415
    from .resources import problem_size  # noqa: PLC0415
    defaults = {**{k: v for k, v in case_defaults(name).items() if k not in CLI_ONLY},
                **OUTPUT_DEFAULTS}
    try:
        params = check_params(load_case_file(path)[1], defaults) if path else {}
        params.update(check_params(preset or {}, defaults))
        config = {k: v for k, v in {**defaults, **params}.items() if k not in OUTPUT_DEFAULTS}
        remeshed = bool(config.get("remesh_every")) and config.get("boundary") != "periodic"
        # the count as built: the memory bound of a remeshed ring counts lattice nodes
        size = problem_size({**config, "case": name, "remesh_every": 0})
    except (ConfigError, ValueError, TypeError) as exc:
        return f"not known ({first_line(exc)})"
    if size is None:
        return "not known before the case is built"
    elements, tracers, sources = size
    images = f" (+{sources - elements:,} images)" if sources > elements else ""
    later = " as built (remeshing changes the count as it runs)" if remeshed else ""
    tracers = f"{tracers:,}" if tracers else "no"
    return f"{elements:,} elements{images}{later}, {tracers} tracers"


def _case_parameters(name, cases):
    """Print the parameters of the case ``name`` by case-file section: the value of its
    case file (else the default), the unit and the meaning of the parameter table."""
    from ..cases import case_defaults  # noqa: PLC0415
    if name not in cases:
        raise UsageError(f"unknown case {name!r}; the cases are {', '.join(sorted(cases))} "
                         "(vortexsim cases lists them).")
    path = case_file(name)
    values = {**case_defaults(name), **(load_case_file(path)[1] if path else {})}
    print(f"{name}: {cases[name].replace('``', '')}")
    print(f"file: {path or '(no case file; the defaults of make_case)'}")
    width = max(len(k) + len(_shown(v)) for k, v in values.items()) + 3
    for section in SECTIONS:
        keys = [k for k in values if k in PARAMETER_TABLE
                and PARAMETER_TABLE[k].section == section]
        if not keys:
            continue
        print(f"[{section}]")
        for key in keys:
            p = PARAMETER_TABLE[key]
            unit = "" if p.unit in ("", "-") else f" [{p.unit}]"
            print(f"  {f'{key} = {_shown(values[key])}':<{width}}{unit:<10} {p.help}")
    return EXIT_OK


def _shown(value):
    """A value as a case file writes it ("auto" for None)."""
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return str(value).lower()
    return f'"{value}"' if isinstance(value, str) else f"{value}"


def _restart_note(path, snap):
    """What ``vortexsim restart path`` would do with the snapshot ``snap`` (read and
    checked), in the words of ``info``: refused, the end of its run, or where it
    continues (the checks and the choice of :func:`cmd_restart`)."""
    from ..output.writers import SCHEDULE_KEYS  # noqa: PLC0415
    if any(snap.schedule.get(k) is None for k in SCHEDULE_KEYS):
        return "NOT restartable: no output schedule (run_* attributes); not written by " \
               "vortexsim run"
    try:
        mode, where, later = restart_target(snap, {})
        restart_stop(snap)
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
    from ..diagnostics.health import HEALTH_COLUMNS  # noqa: PLC0415
    from ..output import SnapshotError, open_netcdf, read_snapshot  # noqa: PLC0415
    from ..output.cf import (OLD_TIME, RING_NAME, TIME, bare_long_name,  # noqa: PLC0415
                             unit_label)
    from ..output.diagnostics import DIAGNOSTICS_FORMAT  # noqa: PLC0415
    from ..output.netcdf_header import check_declared_sizes, read_header  # noqa: PLC0415
    from ..output.snapshot import FORMAT, ChecksumMismatch  # noqa: PLC0415
    from ..output.validate import printable  # noqa: PLC0415
    from ..output.verify import viewed_snapshot  # noqa: PLC0415
    try:                          # the header only: no variable is read that is not needed
        header = read_header(args.file)
        a = header.attrs
        fmt = a.get("vortexsim_format")
        fmt = fmt if isinstance(fmt, str) else None
        lines = [printable(args.file)]
        if fmt == FORMAT:
            try:
                snap, verified = read_snapshot(args.file), True
            except ChecksumMismatch:        # refused naming --no-verify, or a warning
                snap = viewed_snapshot(args.file, getattr(args, "no_verify", False))
                verified = False
            lines += _snapshot_lines(snap, args.file, verified)
        elif fmt == DIAGNOSTICS_FORMAT:
            ds = open_netcdf(args.file, [TIME, OLD_TIME, "ring", RING_NAME, *HEALTH_COLUMNS])
            lines.append(_diagnostics_line(ds, args.file))
            lines += _health_lines(ds)
        elif fmt is not None and fmt.startswith("vortexsim"):
            check_declared_sizes(header)
            lines.append(f"  {printable(fmt)}: not a vortexsim format this version knows")
        else:
            lines.append("  not a vortexsim file (no vortexsim_format attribute)")
    except SnapshotError as exc:
        raise UsageError(first_line(exc)) from None
    lines.append("  dimensions: " + ", ".join(f"{printable(k)} = {v}"
                                              for k, v in header.dims.items()))
    for key in ("length_unit", "time_unit"):
        if key in a:
            lines.append(f"  {key}: {printable(a[key])}")
    lines.append("  variables (dimension in the case's units L, T):")
    for name, (dims, _, _) in header.variables.items():
        attrs = header.variable_attrs[name]
        dims = ", ".join(printable(d) for d in dims)
        lines.append(f"    {printable(name)} ({dims}) [{printable(unit_label(attrs) or '?')}] "
                     f"{printable(bare_long_name(attrs))}".rstrip())
    hist = a.get("history", "")
    hist = (hist if isinstance(hist, str) else str(hist)).strip()
    if hist:
        lines.append("  history:")
        lines += [f"    {printable(h)}" for h in hist.splitlines()]
    print("\n".join(lines))
    return EXIT_OK


def _snapshot_lines(snap, path, verified=True):
    """What ``info`` says of a checked snapshot (every text from the file escaped);
    ``verified`` False: one whose checksum does not match, read with ``--no-verify``
    (its values unchecked: no restart note, no core summary)."""
    from ..cases import core_summary  # noqa: PLC0415
    from ..output.snapshot import FORMAT_VERSION  # noqa: PLC0415
    from ..output.validate import printable  # noqa: PLC0415
    a, cfg, s = snap.attrs, snap.config, snap.schedule

    def attr(name):
        return printable(a.get(name))

    el, tr = snap.state["elements"], snap.state["tracers"]
    cores = core_summary(cfg) if verified else None
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
            f"  checksum ok{scope}; {printable(_restart_note(path, snap))}" if verified else
            "  checksum MISMATCH (read with --no-verify): the file is corrupted or was "
            "edited; NOT restartable"]


def _diagnostics_line(ds, path):
    """``info``'s line for a diagnostics file (UsageError when its times are unusable)."""
    from ..output.cf import TIME, with_current_names  # noqa: PLC0415
    from ..output.validate import printable  # noqa: PLC0415
    ds = with_current_names(ds)                  # "time" in formats 1 to 3
    t = ds[TIME].values if TIME in ds.variables else None
    if t is None or t.ndim != 1 or t.dtype.kind != "f":
        what = "no time variable" if t is None else f"time of dtype {t.dtype}, shape {t.shape}"
        raise UsageError(f"{path}: a vortexsim diagnostics file with {what}, expected float "
                         f"times ({TIME}); the file is corrupted.")
    case = printable(ds.attrs.get("case"))
    return (f"  vortexsim diagnostics, case {case}: {len(t)} rows, t = "
            + (f"{t[0]:.6g} … {t[-1]:.6g}" if len(t) else "(none)"))


def _health_lines(ds):
    """``info``'s lines on the numerical health of a diagnostics file's rows (none for a
    file written before the rows carried it)."""
    from ..diagnostics.health import HEALTH_COLUMNS, summary_lines  # noqa: PLC0415
    from ..output.cf import TIME, with_current_names  # noqa: PLC0415
    from ..output.validate import printable  # noqa: PLC0415
    ds = with_current_names(ds)
    columns = {k: ds[k].values for k in HEALTH_COLUMNS if k in ds.variables}
    rings = [printable(str(r)) for r in ds["ring"].values] if "ring" in ds.variables else []
    return ["  " + line for line in summary_lines(ds[TIME].values, columns, rings)]
