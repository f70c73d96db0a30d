"""The picture of a periodic-box run (``plot.png``): the energy, the dissipation and the
energy spectrum of the remeshing lattice's field, from the diagnostics rows.

:func:`is_box` tells a periodic run's rows (they carry ``lattice_energy``);
:func:`draw_box` makes the figure that :func:`vortexsim.output.plot.plot_rows` and
:func:`~vortexsim.output.plot.plot_run` save for such a run.
"""
from __future__ import annotations

import numpy as np

__all__ = ["is_box", "draw_box", "SPECTRA_SHOWN", "SPECTRUM_FLOOR", "resolved_spectrum",
           "dissipation_curves"]

#: most spectra drawn (evenly spaced rows, the first and the last among them)
SPECTRA_SHOWN = 5
#: spectrum values below this fraction of its largest are round-off: not drawn
SPECTRUM_FLOOR = 1e-12
#: the three panels [left, bottom, width, height] in figure fractions (16 x 4.5 in)
_PANELS = ((0.05, 0.12, 0.27, 0.74), (0.385, 0.12, 0.27, 0.74), (0.715, 0.12, 0.27, 0.74))
_STYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)))


def is_box(rows):
    """Whether ``rows`` (diagnostics rows, dicts) are a periodic-box run's."""
    return bool(rows) and "lattice_energy" in rows[-1]


def resolved_spectrum(k, e, floor=SPECTRUM_FLOOR):
    """The shells of an energy spectrum worth drawing on a log axis: ``k`` (S,) [1/L] and
    ``e`` (S,) [L³/T²] where k > 0 and E(k) > ``floor`` × its largest value (below it, the
    round-off of the lattice's FFTs, down to 1e-35).  Returns (k, e), each (S',) (empty
    for a spectrum without a positive value)."""
    k, e = np.asarray(k, dtype=float), np.asarray(e, dtype=float)
    peak = float(np.nanmax(e)) if e.size else 0.0
    keep = (k > 0) & (e > floor * peak) if peak > 0 else np.zeros(k.shape, dtype=bool)
    return k[keep], e[keep]


#: the dissipation measures of a periodic run's diagnostics: (dissipation name, energy
#: name, what the dissipation is, what the energy is); the first pair present is the
#: flow's ε (:func:`dissipation_curves`)
_DISSIPATION = (
    ("lattice_dissipation", "lattice_energy",
     "ε = 2ν⟨s_ij s_ij⟩ = ν⟨|ω|²⟩ (lattice field)", "E = ½⟨|u|²⟩ of the lattice field"),
    ("dissipation", "mean_energy", "ε = ν⟨|∇×u|²⟩ (blob velocity)",
     "E = ½⟨|u|²⟩ of the blob velocity"),
    ("particle_dissipation", "particle_energy", "ν⟨ω_p·ω⟩: the viscous loss of E_p",
     "E_p = ½⟨ω_p·ψ⟩, the energy the method keeps"))


def dissipation_curves(t, series):
    """The curves of a dissipation panel of a periodic run, with their legend labels:
    ``t`` (R,) [T] the rows' times, ``series`` the diagnostics columns present (name →
    (R,) array; :data:`_DISSIPATION`'s names are used).  Returns ``(curves, note)``:
    ``curves`` a list of ``(values (R,) [L²/T³], label, line style)``: the flow's ε (the
    lattice field's; the blob velocity's without a lattice) and −dE/dt of its energy
    from the rows' centred differences (three rows or more), then the particles' pair
    ν⟨ω_p·ω⟩ and −dE_p/dt where the run has them; ``note`` a text for when ε and −dE/dt
    differ by more than 5 % on average (else "")."""
    t = np.asarray(t, dtype=float)
    pairs = [p for p in _DISSIPATION if p[0] in series]
    if pairs and pairs[0][0] == "lattice_dissipation":
        pairs = [p for p in pairs if p[0] != "dissipation"]
    curves, note = [], ""
    for n, (eps_name, energy_name, eps_label, energy_label) in enumerate(pairs[:2]):
        eps = np.asarray(series[eps_name], dtype=float)
        curves.append((eps, eps_label, "-" if n == 0 else "-."))
        if energy_name not in series or t.size < 3:
            continue
        rate = -np.gradient(np.asarray(series[energy_name], dtype=float), t)
        symbol = "E_p" if energy_name == "particle_energy" else "E"
        curves.append((rate, f"−d{symbol}/dt from the energy rows, {energy_label}",
                       "--" if n == 0 else ":"))
        mean_eps, mean_rate = float(np.nanmean(eps)), float(np.nanmean(rate))
        if n == 0 and mean_eps > 0 and abs(mean_rate / mean_eps - 1) > 0.05:
            gap = mean_rate / mean_eps - 1
            note = (f"mean −dE/dt {abs(gap):.0%} {'above' if gap > 0 else 'below'} mean ε: "
                    "E is not the energy\nthe method keeps (E_p); the difference is the "
                    "discretisation's own\nloss or gain (remeshing, smoothing, time "
                    "stepping)")
    return curves, note


def _series(rows, name):
    return np.array([float(r.get(name, np.nan)) for r in rows])


def draw_box(rows, title):
    """The figure of a periodic run's ``rows`` (at least one; dicts of
    :meth:`vortexsim.Simulation.diagnostics`, with ``wavenumber`` and ``energy_spectrum``
    where the run wrote spectra): a matplotlib Figure, not yet drawn."""
    from matplotlib import rc_context  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    t = _series(rows, "t")
    energy = _series(rows, "lattice_energy")
    fig = Figure(figsize=(16, 4.5))
    with rc_context({"axes.titley": 1.0}):
        axes = [fig.add_axes(box) for box in _PANELS]

    ax = axes[0]
    ax.plot(t, energy, "-", label="E = ½⟨|u|²⟩ of the lattice field")
    mean = _series(rows, "mean_energy")
    if np.isfinite(mean).any():
        ax.plot(t, mean, "--", label="½⟨|u|²⟩ of the blob velocity")
    ax.set_xlabel("t [T]")
    ax.set_ylabel("energy [L²/T²]")
    ax.set_title("energy")
    ax.legend(fontsize="small")

    ax = axes[1]
    # the flow's ε and −dE/dt only (the lattice field's; the blob velocity's without a
    # lattice): the particles' pair is in ``vortexsim plot --what dissipation``
    flow = next((p for p in _DISSIPATION[:2] if p[0] in rows[-1]), _DISSIPATION[0])
    columns = {name: _series(rows, name) for name in flow[:2] if name in rows[-1]}
    curves, note = dissipation_curves(t, columns)
    for values, label, style in curves:
        ax.plot(t, values, linestyle=style, label=label)
    ax.set_xlabel("t [T]")
    ax.set_ylabel("dissipation [L²/T³]")
    ax.set_title("dissipation")
    ax.legend(fontsize="x-small", title=note or None, title_fontsize="x-small")

    ax = axes[2]
    spectra = [r for r in rows if "energy_spectrum" in r]
    picks = sorted(set(np.linspace(0, len(spectra) - 1, min(SPECTRA_SHOWN, len(spectra)))
                       .round().astype(int))) if spectra else []
    for style, i in zip(_STYLES, picks):
        k, e = resolved_spectrum(spectra[i]["wavenumber"], spectra[i]["energy_spectrum"])
        if k.size:
            ax.loglog(k, e, linestyle=style, marker=".", ms=3,
                      label=f"t = {spectra[i]['t']:.4g}")
    ax.set_xlabel("k [1/L]")
    ax.set_ylabel("E(k) [L³/T²]")
    ax.set_title(f"energy spectrum (values above {SPECTRUM_FLOOR:g} of its peak)",
                 fontsize="small")
    if picks:
        ax.legend(fontsize="small")
        # plain numbers at 1, 2, 5, 10, ... (the log axis would write 2×10⁰)
        from matplotlib.ticker import NullFormatter, ScalarFormatter  # noqa: PLC0415
        lo, hi = ax.get_xlim()
        ticks = [m * 10 ** d for d in range(-1, 5) for m in (1, 2, 5) if lo <= m * 10 ** d <= hi]
        if ticks:
            ax.set_xticks(ticks)
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
    for a in axes[:2]:
        a.xaxis.get_major_locator().set_params(nbins=5)
        a.yaxis.get_major_locator().set_params(nbins=5)
    fig.suptitle(title)
    return fig
