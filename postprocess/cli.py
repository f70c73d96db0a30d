"""The commands ``vortexsim analyze RUN_DIR`` and ``vortexsim plot RUN_DIR [RUN_DIR ...]``.

``add_command(subparsers, common)`` registers both on the ``vortexsim`` parser
(``common``: the parent parser of -v/-q); the handlers are ``func(args, argv) -> int``
and report bad input as ``vortexsim.cli.UsageError`` (one line, exit 2).
"""
from __future__ import annotations

import numpy as np

__all__ = ["add_command", "summarize", "analyze_command", "plot_command"]

#: the turbulence statistics of ``analyze``: (label, diagnostics names in order of
#: preference)
_TURBULENCE = (("E", ("lattice_energy", "mean_energy")),
               ("epsilon", ("lattice_dissipation", "dissipation")),
               ("Re_lambda", ("re_lambda",)), ("skewness", ("skewness",)),
               ("flatness", ("flatness",)))


def summarize(run_dir):
    """The table of ``vortexsim analyze`` as text: per ring the mean speed along its axis
    and the radius at start and end; for periodic runs E, epsilon, Re_lambda, skewness
    and flatness at start and end; the worst value of each numerical-health measure
    (:func:`vortexsim.diagnostics.health.summary_lines`).  ValueError for a directory that is not a run or has
    no diagnostics."""
    from vortexsim.output.cf import TIME, unit_label  # noqa: PLC0415

    from .rings import track_rings  # noqa: PLC0415
    from .run import check_run_dir, open_diagnostics  # noqa: PLC0415

    run_dir = check_run_dir(run_dir)
    diag = open_diagnostics(run_dir)
    if diag is None or diag.sizes.get(TIME, 0) == 0:
        raise ValueError(f"{run_dir} has no diagnostics rows (diagnostics.nc); nothing to "
                         "analyze.")
    t = diag[TIME].values
    lines = [f"{run_dir}: case {diag.attrs.get('case', '?')}, {t.size} diagnostics rows, "
             f"t = {t[0]:.6g} … {t[-1]:.6g}"]
    if "ring_centre" in diag and t.size > 1:
        rings = track_rings(diag)
        names = [str(r) for r in rings["ring"].values] if "ring" in rings.coords else \
            [str(i) for i in range(rings.sizes["ring"])]
        width = max(4, *(len(n) for n in names))
        lines.append(f"{'ring':<{width}}  {'mean speed':>12}  {'R start':>12}  "
                     f"{'R end':>12}")
        for i, name in enumerate(names):
            r = rings["radius"].values[:, i]
            lines.append(f"{name:<{width}}  {np.mean(rings['speed'].values[:, i]):12.6g}  "
                         f"{r[0]:12.6g}  {r[-1]:12.6g}")
    stats = [(label, next(n for n in names_ if n in diag)) for label, names_ in _TURBULENCE
             if any(n in diag for n in names_)]
    if stats:
        lines.append(f"{'':<10}  {'start':>12}  {'end':>12}  quantity [units]")
        for label, name in stats:
            v = diag[name].values
            lines.append(f"{label:<10}  {v[0]:12.6g}  {v[-1]:12.6g}  {name} "
                         f"[{unit_label(diag[name].attrs)}]")
    from vortexsim.diagnostics.health import HEALTH_COLUMNS, summary_lines  # noqa: PLC0415
    health = summary_lines(t, {k: diag[k].values for k in HEALTH_COLUMNS if k in diag},
                           [str(r) for r in diag["ring"].values] if "ring" in diag.coords
                           else [])
    if len(lines) == 1 and not health:
        lines.append("(no rings and no turbulence statistics)")
    lines += health
    return "\n".join(lines)


def _usage(exc):
    from vortexsim.cli import UsageError  # noqa: PLC0415
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return UsageError(text)


def analyze_command(args, argv=None):
    """``vortexsim analyze RUN_DIR``: print :func:`summarize`."""
    try:
        text = summarize(args.run_dir)
    except ValueError as exc:
        raise _usage(exc) from None
    print(text.encode("utf-8", "backslashreplace").decode("utf-8"))
    return 0


def plot_command(args, argv=None):
    """``vortexsim plot RUN_DIR [RUN_DIR ...] [--out PNG] [--what ...]``: one run, its
    plots (:func:`postprocess.plots.plot_run`); several, the comparison plot of
    ``--what`` (default energy)."""
    from .plots import plot_comparison, plot_run  # noqa: PLC0415
    from .run import check_run_dir, open_diagnostics  # noqa: PLC0415

    try:
        dirs = [check_run_dir(d) for d in args.run_dirs]
        if len(dirs) == 1:
            paths = plot_run(dirs[0], args.out, args.what)
        else:
            what = args.what or "energy"
            quantity = {"energy": "energy", "rings": "ring_radius",
                        "spectra": "energy_spectrum"}.get(what)
            if what == "dissipation":
                diag = open_diagnostics(dirs[0])
                quantity = "lattice_dissipation" if diag is not None and \
                    "lattice_dissipation" in diag else "dissipation"
            paths = [plot_comparison(dirs, quantity, args.out)]
    except (ValueError, RuntimeError) as exc:
        raise _usage(exc) from None
    for path in paths:
        print(path)
    return 0


def add_command(subparsers, common):
    """Register ``analyze`` and ``plot`` on ``subparsers`` (``parents=[common]``)."""
    a = subparsers.add_parser(
        "analyze", parents=[common], help="summarize a run (rings, turbulence statistics)",
        description="Print per ring the mean speed along its axis and the radius at start "
        "and end; for periodic runs E, epsilon, Re_lambda, skewness and flatness at start "
        "and end.")
    a.add_argument("run_dir", metavar="RUN_DIR", help="a run directory of vortexsim run")
    a.set_defaults(func=analyze_command)
    p = subparsers.add_parser(
        "plot", parents=[common], help="plot a run, or compare several",
        description="One run: its plots (energy, rings, spectra, dissipation where it has "
        "them) as RUN_DIR/plot_<what>.png. Several runs: one comparison plot of the same "
        "quantity of each, labelled by directory name, each run in its own colour, dash "
        "pattern and marker, so that identical runs all show (default "
        "comparison_<quantity>.png). A quantity that varies by at most 1e-6 of its size is "
        "drawn flat with 'conserved to ...' or 'constant to ...' written on it; spectra "
        "show the shells above 1e-12 of their peak.")
    p.add_argument("run_dirs", metavar="RUN_DIR", nargs="+", help="run directories")
    p.add_argument("--out", metavar="PNG", help="the image file (one run without --what: "
                   "PNG's stem + _<what>.png for each plot)")
    p.add_argument("--what", choices=("energy", "rings", "spectra", "dissipation"),
                   help="which plot (one run: default all it has; several: default energy)")
    p.set_defaults(func=plot_command)
    return a, p
