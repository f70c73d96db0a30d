"""The picture of a periodic-box run (``plot.png``): the energy, the dissipation and the
energy spectrum of the remeshing lattice's field, from the diagnostics rows.

:func:`is_box` tells a periodic run's rows (they carry ``lattice_energy``);
:func:`draw_box` makes the figure that :func:`vortexsim.output.plot.plot_rows` and
:func:`~vortexsim.output.plot.plot_run` save for such a run.
"""
from __future__ import annotations

import numpy as np

__all__ = ["is_box", "draw_box", "SPECTRA_SHOWN", "SPECTRUM_FLOOR"]

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
    eps = _series(rows, "lattice_dissipation")
    ax.plot(t, eps, "-", label="ε = 2ν⟨s_ij s_ij⟩ of the lattice field")
    if len(t) >= 3:
        # centred differences of the rows' E: what the run loses, viscous and numerical
        rate = -np.gradient(energy, t)
        ax.plot(t, rate, "--", label="−dE/dt (the rows' differences): ε plus the\n"
                                     "discretisation's own loss (or gain)")
    ax.set_xlabel("t [T]")
    ax.set_ylabel("dissipation [L²/T³]")
    ax.set_title("dissipation")
    ax.legend(fontsize="small")

    ax = axes[2]
    spectra = [r for r in rows if "energy_spectrum" in r]
    picks = sorted(set(np.linspace(0, len(spectra) - 1, min(SPECTRA_SHOWN, len(spectra)))
                       .round().astype(int))) if spectra else []
    for style, i in zip(_STYLES, picks):
        k = np.asarray(spectra[i]["wavenumber"], dtype=float)
        e = np.asarray(spectra[i]["energy_spectrum"], dtype=float)
        keep = (k > 0) & (e > SPECTRUM_FLOOR * e.max()) if e.size and e.max() > 0 else k < 0
        if keep.any():
            ax.loglog(k[keep], e[keep], linestyle=style, marker=".", ms=3,
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
