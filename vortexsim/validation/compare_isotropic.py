r"""Decaying isotropic turbulence: a vortexsim run against a spectral_ns.py run from the
same initial field, side by side (``benchmarks/validation/compare_isotropic.py``).

    vortexsim run isotropic_turbulence --preset gpu --out runs/hit128
    python benchmarks/validation/spectral_ns.py --init runs/hit128/initial_field.nc --nu 0.0056 \
        --t-end 2 --dt 0.01 --every 5 --spectrum-times 0,1,2 --statistics --device gpu \
        --nc hit128_spectral.nc
    python benchmarks/validation/compare_isotropic.py runs/hit128 hit128_spectral.nc \
        --spectrum-times 1,2 --png hit128_spectra.png

Inputs: the vortexsim run directory (``diagnostics.nc``: ``lattice_energy`` E = ½⟨|u|²⟩
and ``lattice_dissipation`` ε = 2ν⟨s_ij s_ij⟩ of the lattice velocity, ``re_lambda``,
``skewness``, ``flatness`` on ``t``; ``spectra.nc``: ``energy_spectrum`` on (t,
wavenumber)) and the ``--nc`` file of spectral_ns.py (``energy``, ``dissipation`` and, with
its ``--statistics``, ``re_lambda``, ``skewness``, ``flatness`` on ``time``;
``energy_spectrum`` on (spectrum_time, wavenumber)).

Printed:

* at each row time of the spectral file that vortexsim's diagnostics also have (the same
  time within ``--time-tol``, relative to max(1, |t|)): E, ε, −dE/dt (``numpy.gradient``
  of each file's own rows, second order), Re_λ, skewness and flatness of both, and the relative
  differences (vortexsim − spectral)/spectral of E and ε.  A spectral time inside
  vortexsim's time range that vortexsim has no row at is interpolated linearly in time
  from vortexsim's rows and marked ``*`` (the footnote says how many);
* the largest |relative difference| of E and of ε over all those times;
* for each ``--spectrum-times`` entry that both files have a spectrum at (the same
  tolerance; no interpolation): max |E_v(k)/E_s(k) − 1| over the shells
  1 ≤ k ≤ k_max/2, k_max = (n/3) 2π/L (n/3 for the 2π box; n and L from the spectral
  file's attributes), and the spectra of both in one log-log plot with a k^(−5/3)
  guide (``--png``; matplotlib).

Exit codes: 0; 2 a missing file or variable, no common time (one line).  The comparison
itself lives in functions (:func:`load_vortexsim`, :func:`load_spectral`,
:func:`compare_rows`, :func:`compare_spectra`, :func:`plot_spectra`), tested in
``tests/test_compare_isotropic.py``.
"""
from __future__ import annotations

import argparse
import math
import os

import numpy as np

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

#: the statistics printed for both codes, besides E and ε
STATISTICS = ("re_lambda", "skewness", "flatness")
#: vortexsim's diagnostics variables: our name → the file's
VORTEXSIM_ROWS = {"energy": "lattice_energy", "dissipation": "lattice_dissipation",
                  **{s: s for s in STATISTICS}}
#: spectral_ns.py's rows: our name → the file's (the statistics only with --statistics)
SPECTRAL_ROWS = {"energy": "energy", "dissipation": "dissipation",
                 **{s: s for s in STATISTICS}}
TIME_TOL = 1e-9
#: the plot's E(k) axis ends this far below the spectra's peak
PLOT_DECADES = 1e-8


class CompareError(Exception):
    """A missing file or variable, or nothing to compare: one line, exit 2."""


def _open(path, what):
    import xarray as xr  # noqa: PLC0415
    if not os.path.isfile(path):
        raise CompareError(f"{path} does not exist ({what}).")
    try:
        with xr.open_dataset(path, engine="netcdf4") as ds:
            return ds.load()
    except (OSError, ValueError, RuntimeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CompareError(f"{path} is not a readable netCDF file ({first}).") from None


def _variable(ds, path, name, dims, hint=""):
    if name not in ds.variables:
        raise CompareError(f"{path} has no variable {name!r}{hint}; it has "
                           f"{sorted(ds.data_vars)}.")
    var = ds[name]
    if tuple(var.dims) != tuple(dims):
        raise CompareError(f"{path}: {name} has dims {var.dims}; expected {tuple(dims)}.")
    return np.asarray(var.values, dtype=np.float64)


def _run_config(run_dir):
    """The flat dict of ``run_dir/config.toml`` ({} when there is none)."""
    path = os.path.join(run_dir, "config.toml")
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    flat = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            flat.update({k: v for k, v in value.items() if not isinstance(v, dict)})
        else:
            flat[key] = value
    return flat


def load_vortexsim(run_dir, spectra=True):
    """The rows (and, with ``spectra``, the spectra) of a vortexsim run directory.

    Returns a dict: ``t`` (rows), ``energy``, ``dissipation``, ``re_lambda``,
    ``skewness``, ``flatness`` (arrays on ``t``), ``spectrum_t``, ``k``, ``spectrum``
    (rows × shells; None without ``spectra``), ``config`` (config.toml, flat).
    Raises :class:`CompareError` for a missing file or variable.
    """
    if not os.path.isdir(run_dir):
        raise CompareError(f"{run_dir} is not a directory (expected a vortexsim run "
                           "directory).")
    from vortexsim.output.cf import TIME, with_current_names  # noqa: PLC0415

    path = os.path.join(run_dir, "diagnostics.nc")
    ds = with_current_names(_open(path, "the diagnostics of a vortexsim run"))
    hint = " (a periodic run with remeshing writes the lattice statistics)"
    out = {"t": _variable(ds, path, TIME, (TIME,))}
    for ours, theirs in VORTEXSIM_ROWS.items():
        out[ours] = _variable(ds, path, theirs, (TIME,), hint)
    out["spectrum_t"] = out["k"] = out["spectrum"] = None
    if spectra:
        path = os.path.join(run_dir, "spectra.nc")
        ds = with_current_names(_open(path, "the spectra of a vortexsim run"))
        out["spectrum_t"] = _variable(ds, path, TIME, (TIME,))
        out["k"] = _variable(ds, path, "wavenumber", ("wavenumber",))
        out["spectrum"] = _variable(ds, path, "energy_spectrum", (TIME, "wavenumber"))
    out["config"] = _run_config(run_dir)
    return out


def load_spectral(path, spectra=True):
    """The rows (and spectra) of a spectral_ns.py ``--nc`` file: the keys of
    :func:`load_vortexsim` (the statistics all NaN when the file has none: it was run
    without ``--statistics``; ``has_statistics`` says which), and ``attrs``."""
    ds = _open(path, "the --nc file of spectral_ns.py")
    out = {"t": _variable(ds, path, "time", ("time",))}
    for ours, theirs in SPECTRAL_ROWS.items():
        if ours in STATISTICS and theirs not in ds.variables:
            out[ours] = np.full_like(out["t"], np.nan)
            continue
        out[ours] = _variable(ds, path, theirs, ("time",))
    out["has_statistics"] = all(s in ds.variables for s in STATISTICS)
    out["spectrum_t"] = out["k"] = out["spectrum"] = None
    if spectra:
        hint = " (run spectral_ns.py with --spectrum-times)"
        out["spectrum_t"] = _variable(ds, path, "spectrum_time", ("spectrum_time",), hint)
        out["k"] = _variable(ds, path, "wavenumber", ("wavenumber",), hint)
        out["spectrum"] = _variable(ds, path, "energy_spectrum",
                                    ("spectrum_time", "wavenumber"), hint)
    out["attrs"] = dict(ds.attrs)
    return out


def _same_time(a, b, tol=TIME_TOL):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def _find(times, t, tol=TIME_TOL):
    """The index of ``t`` in ``times`` (within ``tol``), or None."""
    if len(times) == 0:
        return None
    i = int(np.argmin(np.abs(np.asarray(times) - t)))
    return i if _same_time(float(times[i]), t, tol) else None


def minus_dedt(t, energy):
    """−dE/dt of rows (``numpy.gradient``, second order inside and, from 3 rows on, at the
    ends); NaN with < 2 rows or times not increasing."""
    t, energy = np.asarray(t, float), np.asarray(energy, float)
    if len(t) < 2 or not np.all(np.diff(t) > 0):
        return np.full_like(energy, np.nan)
    return -np.gradient(energy, t, edge_order=2 if len(t) > 2 else 1)


def compare_rows(vortexsim, spectral, tol=TIME_TOL):
    """The rows of both at the spectral times that vortexsim's rows cover.

    A spectral time equal (within ``tol``) to a vortexsim row takes that row; one inside
    vortexsim's time range without a row is interpolated linearly in vortexsim's rows
    (``interpolated`` True).  Returns a dict of arrays on the common times ``t``:
    ``<key>_v``, ``<key>_s`` for energy, dissipation, minus_dEdt and :data:`STATISTICS`,
    ``rel_energy``, ``rel_dissipation`` ((v − s)/s), ``interpolated``, and the floats
    ``max_rel_energy``, ``max_rel_dissipation`` (max |rel| over the times).  Raises
    :class:`CompareError` when no time is common.
    """
    tv, ts = np.asarray(vortexsim["t"], float), np.asarray(spectral["t"], float)
    v = {key: np.asarray(vortexsim[key], float) for key in ("energy", "dissipation",
                                                             *STATISTICS)}
    s = {key: np.asarray(spectral[key], float) for key in v}
    v["minus_dEdt"] = minus_dedt(tv, v["energy"])
    s["minus_dEdt"] = minus_dedt(ts, s["energy"])
    if len(tv) == 0:
        raise CompareError("the vortexsim diagnostics have no rows.")
    lo, hi = float(tv.min()), float(tv.max())
    rows, times, interpolated = [], [], []
    for j, t in enumerate(ts):
        i = _find(tv, t, tol)
        if i is not None:
            rows.append((j, {key: v[key][i] for key in v}))
            interpolated.append(False)
        elif lo < t < hi:
            rows.append((j, {key: float(np.interp(t, tv, v[key])) for key in v}))
            interpolated.append(True)
        else:
            continue
        times.append(float(t))
    if not rows:
        raise CompareError(f"no common time: the spectral rows span t = {ts.min():g}.."
                           f"{ts.max():g}, vortexsim's {lo:g}..{hi:g}.")
    out = {"t": np.array(times), "interpolated": np.array(interpolated)}
    for key in v:
        out[f"{key}_v"] = np.array([r[key] for _, r in rows])
        out[f"{key}_s"] = np.array([s[key][j] for j, _ in rows])
    for key in ("energy", "dissipation"):
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = out[f"{key}_v"] / out[f"{key}_s"] - 1.0
        out[f"rel_{key}"] = rel
        out[f"max_rel_{key}"] = float(np.nanmax(np.abs(rel))) if np.isfinite(rel).any() \
            else math.nan
    return out


def k_max_of(spectral, vortexsim=None):
    """k_max = (n/3) 2π/L from the spectral file's attributes n and box (else the run's
    config.toml); raises :class:`CompareError` when neither says n."""
    attrs = spectral.get("attrs", {})
    config = (vortexsim or {}).get("config", {})
    n = attrs.get("n", config.get("n"))
    box = attrs.get("box", config.get("box", 2 * math.pi))
    if n is None:
        raise CompareError("neither the spectral file (attribute n) nor the run's "
                           "config.toml says n; k_max = n/3 needs it.")
    return float(n) / 3.0 * 2.0 * math.pi / float(box)


def compare_spectra(vortexsim, spectral, times, k_max, tol=TIME_TOL):
    """E(k) of both at each of ``times`` that both files have a spectrum at.

    Shells are matched by wavenumber (within ``tol``); the difference is taken over
    1 ≤ k ≤ k_max/2.  Returns (results, missing): results a list of dicts ``t``, ``k``,
    ``e_v``, ``e_s`` (the common shells, all of them), ``max_rel`` (max |E_v/E_s − 1|
    over the range), ``k_range`` (the shells in it); missing the times left out, each with
    the reason.
    """
    results, missing = [], []
    kv, ks = np.asarray(vortexsim["k"], float), np.asarray(spectral["k"], float)
    pairs = [(a, b) for a, kk in enumerate(kv) for b in [_find(ks, kk, tol)] if b is not None]
    if not pairs:
        raise CompareError("the two files' spectra have no wavenumber in common (different "
                           "boxes?).")
    iv, i_s = (np.array(p) for p in zip(*pairs))
    k = kv[iv]
    in_range = (k >= 1.0 - tol) & (k <= 0.5 * k_max * (1 + tol))
    for t in times:
        a = _find(vortexsim["spectrum_t"], t, tol)
        b = _find(spectral["spectrum_t"], t, tol)
        if a is None or b is None:
            who = " and ".join(name for name, x in (("vortexsim", a), ("spectral_ns", b))
                               if x is None)
            missing.append((t, f"no spectrum of {who} at t = {t:g}"))
            continue
        e_v = np.asarray(vortexsim["spectrum"][a], float)[iv]
        e_s = np.asarray(spectral["spectrum"][b], float)[i_s]
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = e_v[in_range] / e_s[in_range] - 1.0
        results.append({"t": float(t), "k": k, "e_v": e_v, "e_s": e_s,
                        "k_range": k[in_range],
                        "max_rel": float(np.max(np.abs(rel))) if rel.size else math.nan})
    return results, missing


def plot_spectra(results, k_max, path, title=None):
    """Both spectra of each result (:func:`compare_spectra`) in one log-log plot, spectral
    solid and vortexsim dashed in one colour per time, a k^(−5/3) guide and the line
    k = k_max/2, E(k) down to :data:`PLOT_DECADES` of the peak; written to ``path``
    (PNG)."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 5))
    top = []
    for i, r in enumerate(results):
        colour = f"C{i}"
        pos = (r["k"] > 0) & (r["e_s"] > 0)
        ax.loglog(r["k"][pos], r["e_s"][pos], "-", color=colour,
                  label=f"spectral_ns, t = {r['t']:g}")
        pos_v = (r["k"] > 0) & (r["e_v"] > 0)
        ax.loglog(r["k"][pos_v], r["e_v"][pos_v], "--", color=colour,
                  label=f"vortexsim, t = {r['t']:g} (max |rel| {100 * r['max_rel']:.1f} %)")
        if pos.any():
            top.append((r["k"][pos], r["e_s"][pos]))
    if top:
        k, e = top[0]
        k0 = float(k[np.argmax(e)])                      # from the peak, above the curve
        e0 = 2.0 * float(e.max())
        kk = np.array([k0, max(2 * k0, float(k.max()))])
        ax.loglog(kk, e0 * (kk / k0) ** (-5.0 / 3.0), ":", color="k", label=r"$k^{-5/3}$")
        peak = max(float(e.max()) for _, e in top)
        ax.set_ylim(PLOT_DECADES * peak, 3 * peak)       # round-off shells off the plot
    ax.axvline(0.5 * k_max, color="0.6", lw=0.8)
    ax.text(0.5 * k_max, ax.get_ylim()[0], r" $k_{max}/2$", color="0.4", va="bottom")
    ax.set_xlabel("k [1/L]")
    ax.set_ylabel("E(k) [L$^3$/T$^2$]")
    ax.set_title(title or "energy spectra: spectral_ns (solid), vortexsim (dashed)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _f(x, fmt=".5e"):
    return "—" if x is None or not np.isfinite(x) else format(x, fmt)


def format_rows(rows, has_statistics=True):
    """The markdown table of :func:`compare_rows`, with the footnotes (a list of lines)."""
    head = ("| t | E vortexsim | E spectral | rel E | eps vortexsim | eps spectral | rel eps "
            "| -dE/dt vortexsim | -dE/dt spectral | Re_lambda v / s | skewness v / s "
            "| flatness v / s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for i, t in enumerate(rows["t"]):
        mark = "*" if rows["interpolated"][i] else ""
        lines.append(
            f"| {t:.6g}{mark} | {_f(rows['energy_v'][i])} | {_f(rows['energy_s'][i])} "
            f"| {_f(100 * rows['rel_energy'][i], '+.3f')} % "
            f"| {_f(rows['dissipation_v'][i])} | {_f(rows['dissipation_s'][i])} "
            f"| {_f(100 * rows['rel_dissipation'][i], '+.3f')} % "
            f"| {_f(rows['minus_dEdt_v'][i])} | {_f(rows['minus_dEdt_s'][i])} "
            + "".join(f"| {_f(rows[f'{s}_v'][i], '.4g')} / {_f(rows[f'{s}_s'][i], '.4g')} "
                      for s in STATISTICS) + "|")
    n_int = int(np.sum(rows["interpolated"]))
    if n_int:
        lines.append(f"\n* {n_int} of {len(rows['t'])} times: vortexsim has no row there; "
                     "its values are interpolated linearly in time between its rows.")
    if not has_statistics:
        lines.append("\nThe spectral file has no Re_lambda, skewness, flatness (—): run "
                     "spectral_ns.py with --statistics.")
    lines.append(f"\nmax |rel diff| over the {len(rows['t'])} common times: "
                 f"E {_f(100 * rows['max_rel_energy'], '.3f')} %, "
                 f"eps {_f(100 * rows['max_rel_dissipation'], '.3f')} %")
    return lines


def _parse_times(text):
    try:
        return sorted(float(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as comma-separated times "
                                          "(e.g. 1,2)") from None


def _consistency(vortexsim, spectral):
    """Warnings when the two runs' n, nu or box differ (from config.toml and the spectral
    file's attributes)."""
    out = []
    config, attrs = vortexsim.get("config", {}), spectral.get("attrs", {})
    for key in ("n", "nu", "box"):
        a, b = config.get(key), attrs.get(key)
        if a is not None and b is not None and not math.isclose(float(a), float(b),
                                                                 rel_tol=1e-9):
            out.append(f"warning: {key} differs: vortexsim {a}, spectral_ns {b}")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", help="vortexsim run directory (diagnostics.nc, spectra.nc)")
    p.add_argument("spectral", help="the --nc file of spectral_ns.py")
    p.add_argument("--spectrum-times", type=_parse_times, default=None,
                   help="comma-separated times of the E(k) comparison (default: the "
                        "spectral file's spectrum times)")
    p.add_argument("--png", default=None, help="write the spectra plot here")
    p.add_argument("--time-tol", type=float, default=TIME_TOL,
                   help="relative tolerance of equal times (default 1e-9)")
    args = p.parse_args(argv)
    want_spectra = args.spectrum_times is None or bool(args.spectrum_times) or bool(args.png)
    try:
        vs = load_vortexsim(args.run_dir, spectra=want_spectra)
        sp = load_spectral(args.spectral, spectra=want_spectra)
        rows = compare_rows(vs, sp, args.time_tol)
        spectra, missing = [], []
        if want_spectra:
            k_max = k_max_of(sp, vs)
            times = list(sp["spectrum_t"]) if args.spectrum_times is None \
                else args.spectrum_times
            spectra, missing = compare_spectra(vs, sp, times, k_max, args.time_tol)
    except CompareError as exc:
        p.exit(2, f"compare_isotropic: error: {exc}\n")

    for line in _consistency(vs, sp):
        print(line)
    print(f"## {args.run_dir} (vortexsim) against {args.spectral} (spectral_ns)\n")
    print("\n".join(format_rows(rows, sp["has_statistics"])))
    if want_spectra:
        print(f"\nE(k) over 1 <= k <= k_max/2 = {0.5 * k_max:g} (k_max = n/3 · 2π/L):")
        for r in spectra:
            print(f"  t = {r['t']:g}: max |E_v(k)/E_s(k) - 1| = {100 * r['max_rel']:.2f} % "
                  f"over {len(r['k_range'])} shells")
        for _, why in missing:
            print(f"  {why}: not compared")
        if args.png:
            if spectra:
                plot_spectra(spectra, k_max, args.png)
                print(f"wrote {args.png}")
            else:
                print(f"no spectrum at a common time: {args.png} not written")
    return 0

