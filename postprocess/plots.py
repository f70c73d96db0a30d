"""Plots of vortexsim runs (matplotlib, Agg: ``matplotlib.figure.Figure`` without pyplot,
so nothing touches a display or pyplot's global state).

Each ``plot_*`` function writes one PNG atomically
(:func:`vortexsim.output.files.atomic_path`) and returns its path; the default path is
``RUN_DIR/plot_<what>.png`` (one run) or ``comparison_<quantity>.png`` in the current
directory (several runs); each ``*_figure`` function returns the same figure undrawn.  A
plot the run cannot have (no rings, no spectra) raises ValueError with one line.

The drawing rules are those of the run's own ``plot.png`` (:mod:`vortexsim.output.plot`,
:mod:`vortexsim.output.plot_box`), shared: curves that may coincide (runs, rings) each get
a dash pattern, marker and width of their own (``curve_style``); a panel that varies by at
most 1e-6 of its size is drawn flat with "conserved to ..." / "constant to ..." on it
(``flat_if_constant``); spectra show the shells above 1e-12 of their peak
(``resolved_spectrum``); ε and −dE/dt are explained in the legend
(``dissipation_curves``).
"""
from __future__ import annotations

import os

import numpy as np

from vortexsim.output.cf import TIME, unit_label
from vortexsim.output.plot import LINE_STYLES, curve_style, flat_if_constant
from vortexsim.output.plot_box import SPECTRUM_FLOOR, dissipation_curves, resolved_spectrum

__all__ = ["PLOTS", "plot_energy", "plot_rings", "plot_spectra", "plot_dissipation",
           "plot_comparison", "plot_run", "COMPARISON_QUANTITIES", "FIGURES",
           "energy_figure", "rings_figure", "spectra_figure", "dissipation_figure",
           "comparison_figure", "CONSERVED"]

#: the diagnostics that the dynamics conserve (inviscid, free space): a panel of one that
#: does not vary says "conserved to ..." (:func:`vortexsim.output.plot.flat_if_constant`)
CONSERVED = ("energy", "helicity", "linear_impulse", "angular_impulse", "total_vorticity",
             "particle_energy")

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


def _helicity_scale(diag):
    """The size the helicity's variation is measured against [L^4/T^2]: (2 E Ω)^½ from
    the energy E = ½∫|u|² and the enstrophy Ω = ∫|ω|² (|∫u·ω| ≤ (∫|u|² ∫|ω|²)^½,
    Cauchy–Schwarz), their largest values over the rows; None without them."""
    if "energy" not in diag or "enstrophy" not in diag:
        return None
    scale = float(np.sqrt(2.0 * np.nanmax(np.abs(diag["energy"].values))
                          * np.nanmax(np.abs(diag["enstrophy"].values))))
    return scale if scale > 0 else None


def _word(name):
    return "conserved" if name in CONSERVED else "constant"


def energy_figure(run_dir):
    """The figure of :func:`plot_energy` (a matplotlib Figure, not yet drawn)."""
    diag = _diagnostics(run_dir)
    t = diag[TIME].values
    fig, ax = _figure(3, f"{_name(run_dir)}: energy, helicity, impulse")
    box = [n for n in ("lattice_energy", "mean_energy", "particle_energy") if n in diag]
    names = box or ["energy"]
    for name, style in zip(names, LINE_STYLES):
        ax[0].plot(t, diag[name].values, linestyle=style, label=name)
    ax[0].set_ylabel(f"energy [{unit_label(diag[names[0]].attrs)}]")
    flat_if_constant(ax[0], [diag[n].values for n in names],
                      word="conserved" if not box else "constant")
    ax[0].legend(fontsize="small")        # after the note: the legend avoids it
    ax[1].plot(t, diag["helicity"].values)
    ax[1].set_ylabel(_label(diag["helicity"]))
    flat_if_constant(ax[1], diag["helicity"].values, scale=_helicity_scale(diag),
                      word="conserved")
    impulse = diag["linear_impulse"].values
    size = np.linalg.norm(impulse, axis=1)
    for c, axis in enumerate("xyz"):
        ax[2].plot(t, impulse[:, c], linestyle=LINE_STYLES[c + 1], label=f"P_{axis}")
    ax[2].plot(t, size, "k-", lw=0.8, label="|P|")
    ax[2].set_ylabel(_label(diag["linear_impulse"]))
    flat_if_constant(ax[2], np.column_stack([impulse, size]), word="conserved")
    ax[2].legend(fontsize="small", ncol=4)
    ax[-1].set_xlabel("t [T]")
    return fig


def plot_energy(run_dir, out=None):
    """Energy, helicity and linear impulse (its components and magnitude) against time;
    in a periodic box the box-averaged energies (``lattice_energy``, ``mean_energy``,
    ``particle_energy``) instead of the free-space energy.  A panel whose curves vary by
    at most 1e-6 of their size (the helicity of a ring, 1e-17 of (2 E Ω)^½; its impulse)
    is drawn flat with "conserved to <variation>" on it."""
    return _save(energy_figure(run_dir), out or os.path.join(run_dir, "plot_energy.png"))


def _ring_names(rings):
    return [str(r) for r in rings["ring"].values] if "ring" in rings.coords else \
        [str(i) for i in range(rings.sizes["ring"])]


def rings_figure(run_dir):
    """The figure of :func:`plot_rings` (a matplotlib Figure, not yet drawn)."""
    from .rings import track_rings  # noqa: PLC0415

    rings = track_rings(_diagnostics(run_dir))
    t = rings[TIME].values
    fig, ax = _figure(3, f"{_name(run_dir)}: rings")
    names = _ring_names(rings)
    for a, var in zip(ax, ("radius", "position", "speed")):
        for i, name in enumerate(names):
            a.plot(t, rings[var].values[:, i], **curve_style(i, len(names), t.size),
                   label=name)
        a.set_ylabel(f"{var} [{unit_label(rings[var].attrs)}]")
        flat_if_constant(a, rings[var].values)
    ax[0].legend(fontsize="small")
    ax[-1].set_xlabel("t [T]")
    return fig


def plot_rings(run_dir, out=None):
    """Per ring: radius, position along its axis and speed along its axis against time
    (:func:`postprocess.rings.track_rings`); each ring its own line style and markers
    (rings on top of each other both show), a panel that does not vary (a radius constant
    to 5e-8) drawn flat with the variation written on it."""
    return _save(rings_figure(run_dir), out or os.path.join(run_dir, "plot_rings.png"))


def _rows_at(times, wanted):
    """Indices of the rows nearest to each of ``wanted`` (default: first, middle, last),
    without repeats, in order."""
    if wanted is None or len(wanted) == 0:
        idx = [0, len(times) // 2, len(times) - 1]
    else:
        idx = [int(np.argmin(np.abs(times - w))) for w in wanted]
    return sorted(set(idx))


def spectra_figure(run_dir, times=None):
    """The figure of :func:`plot_spectra` (a matplotlib Figure, not yet drawn)."""
    from .run import open_spectra  # noqa: PLC0415

    spectra = open_spectra(run_dir)
    if spectra is None:
        raise ValueError(f"{run_dir} has no energy spectra (spectra.nc: periodic runs with "
                         "remeshing).")
    k, t = spectra["wavenumber"].values, spectra[TIME].values
    fig, ax = _figure(1, f"{_name(run_dir)}: energy spectra", height=4.0)
    ax = ax[0]
    kk = e = np.empty(0)
    for n, i in enumerate(_rows_at(t, times)):
        kk, e = resolved_spectrum(k, spectra["energy_spectrum"].values[i])
        if kk.size:
            ax.loglog(kk, e, linestyle=LINE_STYLES[n % len(LINE_STYLES)], marker=".", ms=4,
                      label=f"t = {t[i]:.4g}")
    if kk.size:
        j = int(np.argmax(e))
        ax.loglog(kk[j:], e[j] * (kk[j:] / kk[j]) ** (-5.0 / 3.0), "k-", lw=0.8,
                  label="k^(-5/3)")
    ax.set_xlabel("k [1/L]")
    ax.set_ylabel("E(k) [L^3/T^2]")
    ax.set_title(f"shells with E(k) above {SPECTRUM_FLOOR:g} of the spectrum's peak",
                 fontsize="small")
    ax.legend(fontsize="small")
    return fig


def plot_spectra(run_dir, times=None, out=None):
    """E(k) (``spectra.nc``) at the rows nearest to ``times`` [T] (default: first, middle
    and last), log-log, from the first shell k > 0 through the last above 1e-12 of the
    spectrum's peak (below it: round-off; :func:`vortexsim.output.plot_box.resolved_spectrum`),
    with a k^(-5/3) guide through the last spectrum's peak."""
    return _save(spectra_figure(run_dir, times),
                 out or os.path.join(run_dir, "plot_spectra.png"))


def _dissipation(diag):
    """(energy name, dissipation name) of a periodic run's diagnostics, or None."""
    for energy, eps in (("lattice_energy", "lattice_dissipation"),
                        ("mean_energy", "dissipation")):
        if energy in diag and eps in diag:
            return energy, eps
    return None


def dissipation_figure(run_dir):
    """The figure of :func:`plot_dissipation` (a matplotlib Figure, not yet drawn)."""
    diag = _diagnostics(run_dir)
    if _dissipation(diag) is None:
        raise ValueError(f"{run_dir} has no dissipation (a periodic-box run has it).")
    t = diag[TIME].values
    fig, ax = _figure(1, f"{_name(run_dir)}: dissipation", height=3.5)
    ax = ax[0]
    curves, note = dissipation_curves(t, {name: diag[name].values for name in diag.data_vars
                                          if diag[name].dims == (TIME,)})
    for values, label, style in curves:
        ax.plot(t, values, linestyle=style, label=label)
    ax.set_xlabel("t [T]")
    ax.set_ylabel("dissipation [L^2/T^3]")
    ax.legend(fontsize="x-small", title=note or None, title_fontsize="x-small")
    return fig


def plot_dissipation(run_dir, out=None):
    """The flow's dissipation rate ε (``lattice_dissipation``; ``dissipation`` without a
    lattice) and −dE/dt of the matching energy (centred differences of the rows), and the
    particles' ν⟨ω_p·ω⟩ and −dE_p/dt, against time, each explained in the legend, with a
    note when ε and −dE/dt differ by more than 5 %
    (:func:`vortexsim.output.plot_box.dissipation_curves`)."""
    return _save(dissipation_figure(run_dir),
                 out or os.path.join(run_dir, "plot_dissipation.png"))


#: what ``plot_comparison`` can compare besides any diagnostics variable
COMPARISON_QUANTITIES = ("ring_radius", "ring_position", "ring_speed", "energy_spectrum")


def comparison_figure(run_dirs, quantity="energy"):
    """The figure of :func:`plot_comparison` (a matplotlib Figure, not yet drawn)."""
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
    units, curves, scales = "", [], []
    for n, (run_dir, name) in enumerate(zip(run_dirs, names)):
        if quantity == "energy_spectrum":
            spectra = open_spectra(run_dir)
            if spectra is None:
                raise ValueError(f"{run_dir} has no energy spectra.")
            k, e = resolved_spectrum(spectra["wavenumber"].values,
                                     spectra["energy_spectrum"].values[-1])
            ax.loglog(k, e, color=f"C{n}", **curve_style(n, len(run_dirs), k.size),
                      label=f"{name} (t = {spectra[TIME].values[-1]:.4g})")
            units = "L^3/T^2"
            continue
        diag = _diagnostics(run_dir)
        t = diag[TIME].values
        style = curve_style(n, len(run_dirs), t.size)
        if quantity.startswith("ring_") and quantity != "ring_centre":
            rings = track_rings(diag)
            var = rings[quantity[len("ring_"):]]
            # a colour per ring, a line style per run
            for i, ring in enumerate(_ring_names(rings)):
                ax.plot(t, var.values[:, i], color=f"C{i}", **style, label=f"{name}: {ring}")
                curves.append(var.values[:, i])
        else:
            if quantity not in diag:
                raise ValueError(f"{run_dir} has no {quantity!r} in its diagnostics (it "
                                 f"has {', '.join(sorted(diag.data_vars))}).")
            var = diag[quantity]
            values = var.values
            if values.ndim > 1:
                values = np.linalg.norm(values.reshape(values.shape[0], -1), axis=1)
            ax.plot(t, values, color=f"C{n}", **style, label=name)
            curves.append(values)
            if quantity == "helicity":
                scales.append(_helicity_scale(diag))
        units = unit_label(var.attrs)
    if quantity == "energy_spectrum":
        ax.set_xlabel("k [1/L]")
    else:
        ax.set_xlabel("t [T]")
        scale = max((x for x in scales if x is not None), default=None)
        flat_if_constant(ax, curves, scale=scale, word=_word(quantity))
    ax.set_ylabel(f"{quantity} [{units}]")
    ax.legend(fontsize="small")
    return fig


def plot_comparison(run_dirs, quantity="energy", out=None):
    """The same ``quantity`` of two or more runs in one plot, each labelled by its
    directory name and drawn in its own colour, dash pattern, marker and width (runs that
    coincide all show): a diagnostics variable against time (vectors: their magnitude),
    a ring quantity (``ring_radius``, ``ring_position``, ``ring_speed``; one line per run
    and ring, a colour per ring) or ``energy_spectrum`` (each run's last spectrum,
    log-log, its resolved shells).  Curves that do not vary are drawn flat with the
    variation written on the panel."""
    return _save(comparison_figure(run_dirs, quantity),
                 out or f"comparison_{quantity}.png")


#: the plots of one run, by the name of ``vortexsim plot --what``
PLOTS = {"energy": plot_energy, "rings": plot_rings, "spectra": plot_spectra,
         "dissipation": plot_dissipation}
#: their figures (``run_dir`` → matplotlib Figure, not drawn), by the same names
FIGURES = {"energy": energy_figure, "rings": rings_figure, "spectra": spectra_figure,
           "dissipation": dissipation_figure}


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
