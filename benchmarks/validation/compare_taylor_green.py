"""Taylor–Green: vortexsim runs against a spectral_ns.py run, one table.

    python benchmarks/validation/compare_taylor_green.py SPECTRAL.json RUN1/diagnostics.nc [RUN2 ...]
    python benchmarks/validation/compare_taylor_green.py          # the runs in results/

SPECTRAL.json is what ``spectral_ns.py --out`` writes (rows of t, energy, dissipation);
each vortexsim file is a ``diagnostics.nc`` of a periodic run (``particle_energy``,
``particle_dissipation``, ``dissipation``).  Printed per run:

* the maxima of the dissipation in the two windows 5 < t < 7.8 and 7.8 < t < 10 (the
  Re-400 spectral curve has two maxima 0.2 % apart there), each from a parabola through
  the largest row and its neighbours ("—" when the largest row is at a window edge);
* the maximum of −dE_p/dt (E_p = ``particle_energy``; centred differences of the rows);
* the maximum of the blob velocity's ν⟨|∇×u|²⟩ (``dissipation``);
* max |E_p/E − 1| over t ≤ 9 and over the whole run, E the spectral energy interpolated;
* where the file has them (newer runs), the lattice field's ε =
  ``lattice_dissipation`` maxima and max |E_lattice/E − 1|: the measures compared with
  the spectral solver (``docs/periodic.md``).

Without arguments each ``results/taylor_green/vortexsim_*_GPU.nc`` is compared with the
spectral run of its own GPU (``results/taylor_green/spectral_ns_n128_GPU.json``).
"""
from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np

from vortexsim.output.cf import TIME, with_current_names

HERE = os.path.dirname(os.path.abspath(__file__))
WINDOWS = ((5.0, 7.8), (7.8, 10.0))


def peak(t, x, lo=-np.inf, hi=np.inf):
    """(value, time) of the maximum of x(t) in lo < t < hi from a parabola through the
    largest row and its neighbours; (nan, nan) when that row is at the window's edge."""
    m = (t > lo) & (t < hi)
    t, x = t[m], x[m]
    i = int(np.argmax(x))
    if i == 0 or i == len(t) - 1:
        return np.nan, np.nan
    a, b, c = np.polyfit(t[i - 1:i + 2], x[i - 1:i + 2], 2)
    tp = -b / (2 * a)
    return float(np.polyval([a, b, c], tp)), float(tp)


def fmt(value_time):
    v, t = value_time
    return "—" if np.isnan(v) else f"{v:.5f} at {t:.2f}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("spectral", nargs="?", help="spectral_ns.py JSON")
    p.add_argument("runs", nargs="*", help="vortexsim diagnostics.nc files")
    args = p.parse_args(argv)
    import xarray as xr
    res = os.path.join(os.path.dirname(HERE), "results", "taylor_green")
    runs = args.runs or sorted(glob.glob(os.path.join(res, "vortexsim_*.nc")))
    last = None
    for path in runs:
        gpu = os.path.splitext(path)[0].rsplit("_", 1)[-1]
        spectral = args.spectral or os.path.join(res, f"spectral_ns_n128_{gpu}.json")
        if spectral != last:
            rows = json.load(open(spectral))["rows"]
            ts, es, ds = (np.asarray(rows[k], dtype=float) for k in ("t", "energy",
                                                                      "dissipation"))
            print(f"spectral ({os.path.basename(spectral)}): ε " +
                  " / ".join(fmt(peak(ts, ds, *w)) for w in WINDOWS) +
                  f"; E({ts[-1]:g}) = {es[-1]:.5f}")
            last = spectral
        d = with_current_names(xr.open_dataset(path))   # "time" in files of format <= 3
        t = d[TIME].values
        ep, zp = d["particle_energy"].values, d["particle_dissipation"].values
        dev = np.abs(ep / np.interp(t, ts, es) - 1)
        print(f"{os.path.basename(path)}: ν⟨ω_p·ω⟩ " +
              " / ".join(fmt(peak(t, zp, *w)) for w in WINDOWS) +
              f"; −dE_p/dt {fmt(peak(t, -np.gradient(ep, t)))}" +
              f"; ν⟨|∇×u|²⟩ {fmt(peak(t, d['dissipation'].values))}" +
              f"; max|E_p/E − 1| {dev[t <= 9].max():.3f} (t ≤ 9), {dev.max():.3f}")
        if "lattice_dissipation" in d:
            el = d["lattice_energy"].values
            print("    lattice field: ε " + " / ".join(
                fmt(peak(t, d["lattice_dissipation"].values, *w)) for w in WINDOWS) +
                f"; max|E/E_s − 1| {np.abs(el / np.interp(t, ts, es) - 1).max():.3f}")


if __name__ == "__main__":
    main()
