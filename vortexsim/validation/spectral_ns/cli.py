"""The command line of the spectral solver: ``python benchmarks/validation/spectral_ns.py``
(:func:`main`; the options and outputs are described in the package docstring)."""
from __future__ import annotations

import argparse
import math
import os
from fractions import Fraction

from vortexsim.output.lattice_field import read_velocity_field, write_velocity_field
from vortexsim.validation import records

from .driver import peak, run, write_netcdf
from .solver import SpectralNS, array_namespace, shear_wave, taylor_green

__all__ = ["REMOVED_WARN", "parse_number", "parse_times", "main"]

#: the removed part of an initial field (divergent or beyond the 2/3 cut) above which
#: the tool warns, relative to the field's energy
REMOVED_WARN = 1e-10

#: the command's description (the first paragraph of the package docstring)
DESCRIPTION = ("A pseudo-spectral reference solver of incompressible Navier–Stokes in the "
               "periodic box: the same flows as vortexsim's periodic runs, solved by another "
               "method, for side-by-side comparisons of accuracy and time to solution.")


def parse_number(text):
    """A float from ``text``: decimals, fractions (``1/1600``) and multiples of π
    (``2pi``, ``2*pi``, ``pi/2``)."""
    s = str(text).strip().lower().replace(" ", "")
    factor = 1.0
    if "pi" in s:
        head, _, tail = s.partition("pi")
        head = head.rstrip("*") or "1"
        s = head + (tail if tail.startswith("/") else "")
        if tail and not tail.startswith("/"):
            raise argparse.ArgumentTypeError(f"cannot read {text!r} as a number")
        factor = math.pi
    try:
        return float(Fraction(s)) * factor
    except (ValueError, ZeroDivisionError) as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as a number "
                                         "(e.g. 0.01, 1/1600, 2pi)") from exc


def parse_times(text):
    """Comma-separated times: ``0,5,9.5`` → [0.0, 5.0, 9.5]."""
    return sorted(parse_number(s) for s in text.split(",") if s.strip())


def main(argv=None, results_dir="results"):
    """Run the solver as the command line ``argv`` says; ``results_dir``: the folder of
    the JSON file when ``--out`` is not given.  Returns the exit code."""
    p = argparse.ArgumentParser(description=DESCRIPTION)
    p.add_argument("--n", type=int, default=None,
                   help="lattice points per axis (default 64, or the file's)")
    p.add_argument("--nu", type=parse_number, required=True, help="viscosity [L²/T], e.g. 1/1600")
    p.add_argument("--t-end", type=parse_number, required=True, help="final time [T]")
    p.add_argument("--dt", type=parse_number, default=None, help="fixed step [T] (or the cap of --cfl)")
    p.add_argument("--cfl", type=float, default=None,
                   help="dt = CFL h/max(|u|+|v|+|w|), updated at each row (default 0.5 "
                        "without --dt)")
    p.add_argument("--box", type=parse_number, default=None, help="period L (default 2pi, or the file's)")
    p.add_argument("--init", default="taylor-green",
                   help="taylor-green, shear-wave, or a velocity-field file (.nc)")
    p.add_argument("--every", type=int, default=10, help="steps between diagnostic rows")
    p.add_argument("--spectrum-times", type=parse_times, default=[],
                   help="comma-separated times of E(k), e.g. 0,9,10")
    p.add_argument("--nc", default=None, help="netCDF of the rows (default: --out with .nc)")
    p.add_argument("--save-field", default=None, metavar="PATH",
                   help="write the final velocity in the velocity-field format")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --save-field")
    p.add_argument("--statistics", action="store_true",
                   help="add u_rms, integral/Taylor/Kolmogorov scales, Re_lambda, k_max eta, "
                        "skewness and flatness to every row (FFTs of the velocity; nu > 0)")
    p.add_argument("--quiet", action="store_true", help="no progress rows")
    records.add_common_options(p, "spectral_ns", "cpu", results_dir)
    args = p.parse_args(argv)
    if args.dt is None and args.cfl is None:
        args.cfl = 0.5
    if args.statistics and not args.nu > 0:
        p.error("--statistics needs --nu > 0 (Re_lambda, eta and the Taylor scale divide by it).")
    if args.save_field and os.path.exists(args.save_field) and not args.overwrite:
        p.error(f"{args.save_field} exists; add --overwrite to replace it.")

    t0 = 0.0
    if args.init in ("taylor-green", "shear-wave"):
        n = 64 if args.n is None else args.n
        box = 2 * math.pi if args.box is None else args.box
        build = taylor_green if args.init == "taylor-green" else shear_wave
        u0 = build(n, box)
    else:
        try:
            u0, box, t0, _ = read_velocity_field(args.init, box=args.box)
        except (FileNotFoundError, ValueError) as exc:
            p.error(str(exc))
        n = u0.shape[1]
        if args.n is not None and args.n != n:
            p.error(f"--n {args.n} but {args.init} holds a {n}^3 lattice; leave --n out.")
    xp = array_namespace(args.device)
    solver = SpectralNS(n, args.nu, box, xp)
    removed = solver.set_velocity(u0, t=t0)
    del u0
    for what in ("divergent_energy", "truncated_energy"):
        if removed[what] > REMOVED_WARN * max(removed["energy"], 1e-300):
            print(f"warning: the initial field lost {removed[what] / removed['energy']:.3e} of "
                  f"its energy as {what.replace('_', ' ')}", flush=True)
    if args.t_end < t0:
        p.error(f"--t-end {args.t_end:g} is before the field's time {t0:g}.")

    result = run(solver, args.t_end, dt=args.dt, cfl=args.cfl, every=args.every,
                 spectrum_times=args.spectrum_times, device=args.device,
                 progress=not args.quiet, statistics=args.statistics)
    rows = result["rows"]
    t_peak, eps_peak = peak(rows["t"], rows["dissipation"])
    json_path = records.out_path(args, "spectral_ns", results_dir)
    nc_path = args.nc or os.path.splitext(json_path)[0] + ".nc"
    method = ("pseudo-spectral, velocity form, rotational u x omega, projection, 2/3-rule "
              "dealiasing, Lawson (integrating-factor) RK4, float64")
    params = dict(n=n, nu=args.nu, box=box, init=args.init, t_start=t0, t_end=args.t_end,
                  dt=args.dt, cfl=args.cfl, every=args.every, method=method,
                  **({"statistics": 1} if args.statistics else {}))
    write_netcdf(nc_path, result, dict(params, device=records.device_name(args.device),
                                       xp=xp.__name__))
    if args.save_field:
        write_velocity_field(args.save_field, solver.velocity(), box, solver.t,
                             overwrite=args.overwrite,
                             title=f"spectral_ns.py at t = {solver.t:g} from {args.init}")
    ms_step = result["ms_per_step"]
    what = f"spectral NS {n}^3 {args.init} nu {args.nu:g} to t = {solver.t:g}, RK4 step"
    payload = dict(params, netcdf=nc_path, initial_field=removed, steps=result["steps"],
                   error=result["error"], t_final=solver.t, wall_s=result["wall_s"],
                   step_s=result["step_s"], diagnostics_s=result["diagnostics_s"],
                   ms_per_step=ms_step, ms_per_step_median_block=result["ms_per_step_median_block"],
                   energy_final=rows["energy"][-1], dissipation_peak=eps_peak,
                   t_dissipation_peak=t_peak, divergence_final=solver.divergence(),
                   rows=rows, spectrum_times=[s[0] for s in result["spectra"]])
    summary = [dict(what=what, ms=ms_step, err_u=None, err_grad=None, target=None, met=None)]
    records.write_json(args, "spectral_ns", args.device, payload, summary, results_dir)
    print(f"wrote {nc_path}")
    if result["error"]:
        print(f"error: {result['error']}")
    print(f"\n## spectral_ns on {records.device_name(args.device)}"
          + (f" ({args.label})" if args.label else "") + "\n")
    print("| n | nu | init | steps | t_end | ms/step (mean / median) | steps s | diagnostics s "
          "| total s | E(t_end) | peak eps | t(peak eps) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {n} | {args.nu:.6g} | {args.init} | {result['steps']} | {solver.t:g} | "
          f"{records.fmt(ms_step, '.2f')} / {records.fmt(result['ms_per_step_median_block'], '.2f')} | "
          f"{result['step_s']:.2f} | {result['diagnostics_s']:.2f} | {result['wall_s']:.2f} | "
          f"{rows['energy'][-1]:.6e} | {eps_peak:.6e} | {t_peak:.3f} |")
    return 1 if result["error"] else 0
