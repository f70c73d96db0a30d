"""Plots of vortexsim runs (matplotlib, Agg: ``matplotlib.figure.Figure`` without pyplot,
so nothing touches a display or pyplot's global state).

Each function writes one PNG atomically (:func:`vortexsim.output.files.atomic_path`) and
returns its path; the default path is ``RUN_DIR/plot_<what>.png`` (one run) or
``comparison_<quantity>.png`` in the current directory (several runs).  A plot the run
cannot have (no rings, no spectra) raises ValueError with one line.
"""
from __future__ import annotations

import os

import numpy as np

from vortexsim.output.cf import TIME, unit_label

__all__ = ["PLOTS", "plot_energy", "plot_rings", "plot_spectra", "plot_dissipation",
           "plot_comparison", "plot_run", "COMPARISON_QUANTITIES"]

VIZ_EXTRA = "pip install 'vortexsim[viz]'"


def _figure(rows, title, width=7.0, height=2.6):
    try:
        from matplotlib.figure import Figure  # noqa: PLC0415
    except ImportError:
        raise RuntimeError(f"plots need matplotlib: {VIZ_EXTRA}") from None
    fig = Figure(figsize=(width, height * rows + 0.6), layout="constrained")
    fig.suptitle(title)
    return fig, fig.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]


def _save(fig, path):
    from vortexsim.output.files import atomic_path  # noqa: PLC0415

    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    return path


def _name(run_dir):
    return os.path.basename(os.path.normpath(os.fspath(run_dir))) or os.fspath(run_dir)


def _diagnostics(run_dir):
    from .run import open_diagnostics  # noqa: PLC0415
    diag = open_diagnostics(run_dir)
    if diag is None:
        raise ValueError(f"{run_dir} has no diagnostics.nc.")
    return diag


def _label(var):
    return f"{var.name} [{unit_label(var.attrs)}]"


def plot_energy(run_dir, out=None):
    """Energy, helicity and linear impulse (its components and magnitude) against time;
    in a periodic box the box-averaged energies (``lattice_energy``, ``mean_energy``,
    ``particle_energy``) instead of the free-space energy."""
    diag = _diagnostics(run_dir)
    t = diag[TIME].values
    fig, ax = _figure(3, f"{_name(run_dir)}: energy, helicity, impulse")
    box = [n for n in ("lattice_energy", "mean_energy", "particle_energy") if n in diag]
    for name in box or ["energy"]:
        ax[0].plot(t, diag[name].values, label=name)
    ax[0].set_ylabel(f"energy [{unit_label(diag[(box or ['energy'])[0]].attrs)}]")
    ax[0].legend(fontsize="small")
    ax[1].plot(t, diag["helicity"].values)
    ax[1].set_ylabel(_label(diag["helicity"]))
    impulse = diag["linear_impulse"].values
    for c, axis in enumerate("xyz"):
        ax[2].plot(t, impulse[:, c], label=f"P_{axis}")
    ax[2].plot(t, np.linalg.norm(impulse, axis=1), "k--", label="|P|")
    ax[2].set_ylabel(_label(diag["linear_impulse"]))
    ax[2].legend(fontsize="small", ncol=4)
    ax[-1].set_xlabel("t [T]")
    return _save(fig, out or os.path.join(run_dir, "plot_energy.png"))


def plot_rings(run_dir, out=None):
    """Per ring: radius, position along its axis and speed along its axis against time
    (:func:`postprocess.rings.track_rings`)."""
    from .rings import track_rings  # noqa: PLC0415

    rings = track_rings(_diagnostics(run_dir))
    t = rings[TIME].values
    fig, ax = _figure(3, f"{_name(run_dir)}: rings")
    names = [str(r) for r in rings["ring"].values] if "ring" in rings.coords else \
        [str(i) for i in range(rings.sizes["ring"])]
    for i, name in enumerate(names):
        for a, var in zip(ax, ("radius", "position", "speed")):
            a.plot(t, rings[var].values[:, i], label=name)
    for a, var in zip(ax, ("radius", "position", "speed")):
        a.set_ylabel(f"{var} [{unit_label(rings[var].attrs)}]")
        a.ticklabel_format(axis="y", useOffset=False)
    ax[0].legend(fontsize="small")
    ax[-1].set_xlabel("t [T]")
    return _save(fig, out or os.path.join(run_dir, "plot_rings.png"))


def _rows_at(times, wanted):
    """Indices of the rows nearest to each of ``wanted`` (default: first, middle, last),
    without repeats, in order."""
    if wanted is None or len(wanted) == 0:
        idx = [0, len(times) // 2, len(times) - 1]
    else:
        idx = [int(np.argmin(np.abs(times - w))) for w in wanted]
    return sorted(set(idx))


def plot_spectra(run_dir, times=None, out=None):
    """E(k) (``spectra.nc``) at the rows nearest to ``times`` (default: first, middle
    and last), log-log, with a k^(-5/3) guide through the last spectrum's peak."""
    from .run import open_spectra  # noqa: PLC0415

    spectra = open_spectra(run_dir)
    if spectra is None:
        raise ValueError(f"{run_dir} has no energy spectra (spectra.nc: periodic runs with "
                         "remeshing).")
    k, t = spectra["wavenumber"].values, spectra[TIME].values
    fig, ax = _figure(1, f"{_name(run_dir)}: energy spectra", height=4.0)
    ax = ax[0]
    use = k > 0
    e = None
    for i in _rows_at(t, times):
        e = spectra["energy_spectrum"].values[i]
        keep = use & (e > 0)
        ax.loglog(k[keep], e[keep], label=f"t = {t[i]:.4g}")
    keep = use & (e > 0)
    if keep.any():
        j = np.flatnonzero(keep)[np.argmax(e[keep])]
        kk = k[keep][k[keep] >= k[j]]
        ax.loglog(kk, e[j] * (kk / k[j]) ** (-5.0 / 3.0), "k--", label="k^(-5/3)")
    ax.set_xlabel("k [1/L]")
    ax.set_ylabel("E(k) [L^3/T^2]")
    ax.legend(fontsize="small")
    return _save(fig, out or os.path.join(run_dir, "plot_spectra.png"))


def _dissipation(diag):
    """(energy name, dissipation name) of a periodic run's diagnostics, or None."""
    for energy, eps in (("lattice_energy", "lattice_dissipation"),
                        ("mean_energy", "dissipation")):
        if energy in diag and eps in diag:
            return energy, eps
    return None


def plot_dissipation(run_dir, out=None):
    """The dissipation rate (``lattice_dissipation``; ``dissipation`` without a
    lattice) and -dE/dt of the matching energy (numpy.gradient over time) against time."""
    diag = _diagnostics(run_dir)
    names = _dissipation(diag)
    if names is None:
        raise ValueError(f"{run_dir} has no dissipation (a periodic-box run has it).")
    energy, eps = names
    t = diag[TIME].values
    fig, ax = _figure(1, f"{_name(run_dir)}: dissipation", height=3.5)
    ax = ax[0]
    ax.plot(t, diag[eps].values, label=eps)
    if t.size > 1:
        ax.plot(t, -np.gradient(diag[energy].values, t), "--", label=f"-d{energy}/dt")
    ax.set_xlabel("t [T]")
    ax.set_ylabel("[L^2/T^3]")
    ax.legend(fontsize="small")
    return _save(fig, out or os.path.join(run_dir, "plot_dissipation.png"))


#: what ``plot_comparison`` can compare besides any diagnostics variable
COMPARISON_QUANTITIES = ("ring_radius", "ring_position", "ring_speed", "energy_spectrum")


def plot_comparison(run_dirs, quantity="energy", out=None):
    """The same ``quantity`` of two or more runs in one plot, each labelled by its
    directory name: a diagnostics variable against time (vectors: their magnitude), a
    ring quantity (``ring_radius``, ``ring_position``, ``ring_speed``; one line per run
    and ring) or ``energy_spectrum`` (each run's last spectrum, log-log)."""
    from .rings import track_rings  # noqa: PLC0415
    from .run import open_spectra  # noqa: PLC0415

    run_dirs = [os.fspath(d) for d in run_dirs]
    if len(run_dirs) < 2:
        raise ValueError("a comparison needs two or more runs.")
    names = [_name(d) for d in run_dirs]
    if len(set(names)) < len(names):                    # same base names: whole paths
        names = run_dirs
    fig, ax = _figure(1, f"{quantity}: " + " vs ".join(names), height=4.0)
    ax = ax[0]
    units = ""
    for run_dir, name in zip(run_dirs, names):
        if quantity == "energy_spectrum":
            spectra = open_spectra(run_dir)
            if spectra is None:
                raise ValueError(f"{run_dir} has no energy spectra.")
            k, e = spectra["wavenumber"].values, spectra["energy_spectrum"].values[-1]
            keep = (k > 0) & (e > 0)
            ax.loglog(k[keep], e[keep],
                      label=f"{name} (t = {spectra[TIME].values[-1]:.4g})")
            units = "L^3/T^2"
            continue
        diag = _diagnostics(run_dir)
        t = diag[TIME].values
        if quantity.startswith("ring_") and quantity != "ring_centre":
            rings = track_rings(diag)
            var = rings[quantity[len("ring_"):]]
            ring_names = [str(r) for r in rings["ring"].values] if "ring" in rings.coords \
                else [str(i) for i in range(rings.sizes["ring"])]
            for i, ring in enumerate(ring_names):
                ax.plot(t, var.values[:, i], label=f"{name}: {ring}")
        else:
            if quantity not in diag:
                raise ValueError(f"{run_dir} has no {quantity!r} in its diagnostics (it "
                                 f"has {', '.join(sorted(diag.data_vars))}).")
            var = diag[quantity]
            values = var.values
            if values.ndim > 1:
                values = np.linalg.norm(values.reshape(values.shape[0], -1), axis=1)
            ax.plot(t, values, label=name)
        units = unit_label(var.attrs)
    if quantity == "energy_spectrum":
        ax.set_xlabel("k [1/L]")
    else:
        ax.set_xlabel("t [T]")
    ax.set_ylabel(f"{quantity} [{units}]")
    ax.legend(fontsize="small")
    return _save(fig, out or f"comparison_{quantity}.png")


#: the plots of one run, by the name of ``vortexsim plot --what``
PLOTS = {"energy": plot_energy, "rings": plot_rings, "spectra": plot_spectra,
         "dissipation": plot_dissipation}


def plot_run(run_dir, out=None, what=None):
    """The plots of one run: ``what`` (a name of :data:`PLOTS`) to ``out`` (default
    ``RUN_DIR/plot_<what>.png``), or, with ``what`` None, every plot that the run has
    (energy always; rings, spectra, dissipation where present) to
    ``<out stem>_<what>.png`` (``out`` None: ``RUN_DIR/plot_<what>.png``).  Returns the
    list of paths written."""
    from .run import check_run_dir, open_diagnostics, open_spectra  # noqa: PLC0415

    run_dir = check_run_dir(run_dir)
    if what is not None:
        if what not in PLOTS:
            raise ValueError(f"unknown plot {what!r}; one of {', '.join(PLOTS)}.")
        return [PLOTS[what](run_dir, out=out)]
    diag = open_diagnostics(run_dir)
    if diag is None:
        raise ValueError(f"{run_dir} has no diagnostics.nc.")
    kinds = ["energy"]
    if "ring_centre" in diag and diag.sizes[TIME] > 1:
        kinds.append("rings")
    if open_spectra(run_dir) is not None:
        kinds.append("spectra")
    if _dissipation(diag) is not None:
        kinds.append("dissipation")
    paths = []
    for kind in kinds:
        path = None
        if out is not None:
            stem, ext = os.path.splitext(os.fspath(out))
            path = f"{stem}_{kind}{ext or '.png'}"
        paths.append(PLOTS[kind](run_dir, out=path))
    return paths
