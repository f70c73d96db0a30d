"""The run of the spectral solver to an end time (:func:`run`: rows of E, ε and, with
``statistics``, the turbulence statistics, spectra at given times, wall times), the peak
of a series (:func:`peak`) and the netCDF file of the rows (:func:`write_netcdf`)."""
from __future__ import annotations

import math
import os
import time

import numpy as np

from vortexsim.validation.records import synchronize

__all__ = ["STATISTICS", "peak", "run", "write_netcdf"]

#: the turbulence statistics of ``--statistics`` (keys of
#: :func:`vortexsim.diagnostics.turbulence.flow_statistics`): (units, long_name)
STATISTICS = {
    "u_rms": ("L/T", "rms velocity u' = sqrt(2E/3)"),
    "integral_scale": ("L", "integral scale pi/(2 u'^2) sum E(k)/k dk"),
    "taylor_scale": ("L", "Taylor micro-scale sqrt(15 nu u'^2/eps)"),
    "re_lambda": ("1", "Taylor-scale Reynolds number u' lambda/nu"),
    "kolmogorov_eta": ("L", "Kolmogorov scale (nu^3/eps)^(1/4)"),
    "k_max_eta": ("1", "k_max eta, k_max = (n/3) 2 pi/L (the 2/3 rule)"),
    "skewness": ("1", "longitudinal velocity-derivative skewness, mean over x, y, z"),
    "flatness": ("1", "longitudinal velocity-derivative flatness, mean over x, y, z"),
}
#: the removed part of an initial field (divergent or beyond the 2/3 cut) above which
#: the tool warns, relative to the field's energy
REMOVED_WARN = 1e-10


def peak(t, y):
    """(t, y) of the largest value of the series, refined by the parabola through it and
    its neighbours when it is interior (else the row itself)."""
    t, y = np.asarray(t, float), np.asarray(y, float)
    i = int(np.argmax(y))
    if 0 < i < len(y) - 1:
        a, b, c = np.polyfit(t[i - 1:i + 2], y[i - 1:i + 2], 2)
        if a < 0:
            tv = -b / (2 * a)
            if t[i - 1] <= tv <= t[i + 1]:
                return float(tv), float(np.polyval((a, b, c), tv))
    return float(t[i]), float(y[i])


def run(solver, t_end, dt=None, cfl=None, every=10, spectrum_times=(), device="cpu",
        progress=True, statistics=False):
    """Advance ``solver`` (velocity already set) to ``t_end`` and record the diagnostics.

    Fixed ``dt``, or ``cfl`` (dt = C h/max(|u|+|v|+|w|) recomputed at each row, at most
    ``dt`` when both are given).  Rows every ``every`` steps, at t_end and at each of
    ``spectrum_times`` (steps shortened to land there; the spectrum is taken there).
    Returns a dict of lists (``t``, ``energy``, ``dissipation``, ``max_velocity``, ``dt``,
    ``cfl``, ``iteration``), ``spectra`` [(t, E(k))], ``k``, the wall times and ``error``
    (None, or what stopped the run: a non-finite row).  With ``statistics`` the rows also
    hold the turbulence statistics :data:`STATISTICS` of
    :func:`vortexsim.diagnostics.turbulence.flow_statistics` (FFTs of the lattice velocity at each row,
    counted in the diagnostics' wall time; needs ν > 0).
    """
    if dt is None and cfl is None:
        raise ValueError("give dt (fixed step) or cfl (step from the CFL number), or both.")
    if not (isinstance(every, int) and every >= 1):
        raise ValueError(f"every is {every!r}; expected an integer ≥ 1 (steps between rows).")
    if not (math.isfinite(t_end) and t_end >= solver.t):
        raise ValueError(f"t_end is {t_end!r}; expected a finite time ≥ t = {solver.t}.")
    h_lattice = solver.box / solver.n
    pending = sorted(s for s in spectrum_times if solver.t - 1e-12 <= s <= t_end + 1e-12)
    rows = {key: [] for key in ("t", "energy", "dissipation", "max_velocity", "dt", "cfl",
                                "iteration")}
    if statistics:
        if not solver.nu > 0:
            raise ValueError("statistics need a viscosity nu > 0 (Re_lambda, eta and the "
                             "Taylor scale divide by it).")
        from vortexsim.diagnostics.turbulence import flow_statistics  # noqa: PLC0415
        rows.update({key: [] for key in STATISTICS})
    spectra, k = [], None
    iteration, dt_now, error = 0, dt, None
    blocks, step_s, diag_s = [], 0.0, 0.0

    def record():
        nonlocal dt_now, k
        u_max, u_sum_max = solver.lattice_diagnostics()
        energy, eps = solver.energy(), solver.dissipation()
        if cfl is not None:
            dt_cfl = cfl * h_lattice / u_sum_max if u_sum_max > 0 else math.inf
            dt_now = min(dt_cfl, math.inf if dt is None else dt)
            if not math.isfinite(dt_now):            # a field at rest under --cfl alone
                dt_now = max(t_end - solver.t, 0.0)
        rows["t"].append(solver.t)
        rows["energy"].append(energy)
        rows["dissipation"].append(eps)
        rows["max_velocity"].append(u_max)
        rows["dt"].append(dt_now)
        rows["cfl"].append(dt_now * u_sum_max / h_lattice)
        rows["iteration"].append(iteration)
        if statistics:
            stats = flow_statistics(solver.xp.moveaxis(solver.velocity(), 0, -1), solver.box,
                                    solver.nu)
            for key in STATISTICS:
                rows[key].append(stats[key])
        while pending and abs(pending[0] - solver.t) <= 1e-9 * max(1.0, abs(solver.t)):
            k, ek = solver.spectrum()
            spectra.append((solver.t, ek))
            pending.pop(0)
        if progress:
            print(f"it {iteration:6d}  t {solver.t:9.4f}  dt {dt_now:.3e}  E {energy:.6e}  "
                  f"eps {eps:.6e}  max|u| {u_max:.4f}", flush=True)
        if not all(math.isfinite(v) for v in (energy, eps, u_max)):
            return f"non-finite row at t = {solver.t:g}, iteration {iteration} " \
                   f"(E = {energy}, eps = {eps}, max|u| = {u_max}, dt = {dt_now}): " \
                   "the run blew up; take a smaller --dt or --cfl."
        return None

    wall0 = time.perf_counter()
    error = record()
    synchronize(device)
    block0, block_steps = time.perf_counter(), 0
    while error is None and solver.t < t_end - 1e-12 * max(1.0, t_end):
        stop = min([t_end] + [s for s in pending if s > solver.t])
        h = dt_now
        land = solver.t + h >= stop - 1e-9 * h
        if land:
            h = stop - solver.t
        solver.step(h)
        if land:
            solver.t = stop                          # exactly, no rounding drift
        iteration += 1
        block_steps += 1
        if land or iteration % every == 0:
            synchronize(device)
            now = time.perf_counter()
            blocks.append((now - block0, block_steps))
            step_s += now - block0
            error = record()
            synchronize(device)
            block0, block_steps = time.perf_counter(), 0
            diag_s += block0 - now
    wall = time.perf_counter() - wall0
    t_rows = np.asarray(rows["t"])
    rows["minus_dEdt"] = (-np.gradient(np.asarray(rows["energy"]), t_rows)).tolist() \
        if len(t_rows) > 2 and np.all(np.diff(t_rows) > 0) else [math.nan] * len(t_rows)
    per_step = [s / m for s, m in blocks if m > 0]
    return dict(rows=rows, spectra=spectra, k=k, steps=iteration, error=error,
                wall_s=wall, step_s=step_s, diagnostics_s=diag_s,
                ms_per_step=1e3 * step_s / iteration if iteration else None,
                ms_per_step_median_block=1e3 * float(np.median(per_step)) if per_step else None,
                block_ms_per_step=[1e3 * v for v in per_step])


def write_netcdf(path, result, attrs):
    """The rows and spectra of ``result`` (from :func:`run`) as netCDF, with units."""
    import xarray as xr

    rows = result["rows"]
    variables = {
        "energy": ("L^2/T^2", "kinetic energy, box mean 1/2 <|u|^2>"),
        "dissipation": ("L^2/T^3", "dissipation nu <|omega|^2> = 2 nu <s_ij s_ij>"),
        "minus_dEdt": ("L^2/T^3", "-dE/dt from the rows (numpy.gradient)"),
        "max_velocity": ("L/T", "max |u| over the lattice"),
        "dt": ("T", "time step after this row"),
        "cfl": ("1", "dt max(|u|+|v|+|w|) / h after this row"),
        "iteration": ("1", "steps taken"),
        **{key: STATISTICS[key] for key in STATISTICS if key in rows},
    }
    data = {name: ("time", np.asarray(rows[name]), {"units": units, "long_name": long})
            for name, (units, long) in variables.items()}
    coords = {"time": ("time", np.asarray(rows["t"]), {"units": "T", "long_name": "time"})}
    if result["spectra"]:
        coords["spectrum_time"] = ("spectrum_time", np.array([s[0] for s in result["spectra"]]),
                                   {"units": "T", "long_name": "time of the spectrum"})
        coords["wavenumber"] = ("wavenumber", np.asarray(result["k"]),
                                {"units": "1/L", "long_name": "shell centre |k| = s 2 pi/L"})
        data["energy_spectrum"] = (("spectrum_time", "wavenumber"),
                                   np.stack([s[1] for s in result["spectra"]]),
                                   {"units": "L^3/T^2", "long_name":
                                    "shell-summed energy spectrum E(k), sum E(k) dk = E"})
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update({k: ("none" if v is None else v) for k, v in attrs.items()})
    encoding = {v: {"_FillValue": None} for v in list(ds.data_vars) + list(ds.coords)}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ds.to_netcdf(path, engine="netcdf4", format="NETCDF4", encoding=encoding)
    return path
