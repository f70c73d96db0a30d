"""A picture of a run: ring centres and radii, numerical health, and the last snapshot;
for a periodic-box run its energy, dissipation and spectrum (:mod:`.plot_box`).

``plot_run(run_dir)`` reads ``diagnostics.nc`` and the newest ``snapshot_*.nc`` of a run
directory and writes ``plot.png``; ``plot_rows`` draws the same figure from the rows
and positions in memory (the run's plot writer, at the end of a run).  Needs matplotlib
(a dependency of vortexsim); without it the plot is skipped with a warning, never an
error.
"""
from __future__ import annotations

import functools
import glob
import io
import logging
import os

import numpy as np

from ..diagnostics.health import LIMITS
from .cf import TIME, with_current_names
from .files import atomic_path
from .plot_box import draw_box, is_box

logger = logging.getLogger(__name__)

__all__ = ["plot_run", "plot_rows", "latest_snapshot", "preload", "flat_if_constant",
           "curve_style", "LINE_STYLES", "FLAT", "ROUND_OFF"]


#: most elements drawn as points over the tracers' density image (every k-th beyond)
PLOT_ELEMENTS = 1 << 16
#: pixels of the density image along the longer side of the x–z box (about the width
#: of the panel at the figure's size and dpi)
DENSITY_PIXELS = 400
#: resolution of plot.png [dots per inch]
DPI = 110
#: the four panels [left, bottom, width, height] in figure fractions (20 x 4.5 in):
#: room for the tick labels, the twin axis of the second and the two-line fourth title
_PANELS = ((0.035, 0.11, 0.2, 0.75), (0.27, 0.11, 0.19, 0.75),
           (0.56, 0.11, 0.18, 0.75), (0.78, 0.11, 0.21, 0.75))
#: line styles of curves that may lie on top of each other (curve i: the i-th), so that
#: both show (a symmetric collision's radii, two runs of the same case)
LINE_STYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)))
#: their markers (open symbols: one on top of another still shows)
_MARKERS = ("o", "s", "^", "v", "D", "x")
#: a panel whose curves each vary by at most this fraction of their scale is drawn flat,
#: with the variation written on it: a ring radius constant to 5e-8 or an impulse kept
#: to 1e-8 by the time stepping would otherwise fill the panel as an apparent trend
FLAT = 1e-6
#: a variation at most this fraction of the scale is float64 round-off (said so)
ROUND_OFF = 1e-12
#: half the height of a flat panel's y window: at least this fraction of the curves'
#: scale, and at least 1000 times their range (which then spans under a pixel)
_FLAT_WINDOW = 1e-6
#: the numerical-health curves of the third panel: (column, label, line style)
_HEALTH = (("energy_error", "|energy error| / 1%", "-"),
           ("spacing_max", "spacing along lines / 1.5σ", "--"),
           ("step_strain", "dt·max|∇u| / 0.5", ":"),
           ("ring_escaped", "strength off ring {ring} / 5%", "-."))


def _density(x, z, extent, shape):
    """Counts (nz, nx) of the points (x, z) in the ``shape`` = (nx, nz) pixels of
    ``extent`` = (x0, x1, z0, z1); row 0 at z0.  np.histogram2d's counts for uniform
    bins (a point on the upper edge in the last pixel), in a tenth of its time."""
    (x0, x1, z0, z1), (nx, nz) = extent, shape
    i = np.minimum(((x - x0) * (nx / (x1 - x0))).astype(np.intp), nx - 1)
    k = np.minimum(((z - z0) * (nz / (z1 - z0))).astype(np.intp), nz - 1)
    return np.bincount(k * nx + i, minlength=nx * nz).reshape(nz, nx)


def _box(*points):
    """``extent`` (x0, x1, z0, z1) of the x–z projection of all ``points`` ((n, 3) each),
    widened by 2 % (and to at least 1e-9 when they coincide), and its pixel shape
    (nx, nz): square pixels, ``DENSITY_PIXELS`` along the longer side."""
    x0 = min(p[:, 0].min() for p in points if len(p))
    x1 = max(p[:, 0].max() for p in points if len(p))
    z0 = min(p[:, 2].min() for p in points if len(p))
    z1 = max(p[:, 2].max() for p in points if len(p))
    pad = 0.02 * max(x1 - x0, z1 - z0, 1e-9)
    x0, x1, z0, z1 = x0 - pad, x1 + pad, z0 - pad, z1 + pad
    scale = DENSITY_PIXELS / max(x1 - x0, z1 - z0)
    nx, nz = max(1, round((x1 - x0) * scale)), max(1, round((z1 - z0) * scale))
    # widen the shorter side to whole pixels, so that the pixels are square
    dx, dz = (nx / scale - (x1 - x0)) / 2, (nz / scale - (z1 - z0)) / 2
    return (x0 - dx, x1 + dx, z0 - dz, z1 + dz), (nx, nz)


@functools.cache
def preload():
    """Import and warm up what :func:`plot_run` draws with (matplotlib's Figure, the Agg
    canvas, the fonts) ahead of the plot, once per process: a fresh process spends ~0.4 s
    on it, a fresh machine seconds (matplotlib builds its font cache).  Call it before a
    run steps, not on a thread beside the steps: this is Python holding the GIL, which
    the stepping thread needs to launch its kernels (on an H100, the leapfrog GPU run's
    first diagnostics row took 0.6 s instead of 0.15 s with it on a side thread).  Returns
    whether the warm-up drew; never raises."""
    try:
        # the plot's own figure on made-up data, at its size and dpi: the fonts at each
        # text size, the tick machinery and the PNG encoder are then ready (on an H100
        # machine the run's last plot took 0.4–0.5 s after a one-axes warm-up)
        t = np.linspace(0.0, 1.0, 3)
        rings = (["a", "b"], np.zeros((3, 2, 3)), np.ones((3, 2)))
        points = np.random.default_rng(0).normal(size=(64, 3))
        _draw(t, rings, 1.0 + t, {"spacing_max": 1.0 + t}, points, points, 1.0,
              "warm-up").savefig(
            io.BytesIO(), dpi=DPI, format="png")
    except Exception:  # noqa: BLE001 - plot_run / plot_rows report a missing matplotlib
        return False
    return True


def latest_snapshot(run_dir):
    """Path of the snapshot with the largest iteration in ``run_dir`` (None if none)."""
    files = sorted(glob.glob(os.path.join(run_dir, "snapshot_*.nc")))
    return files[-1] if files else None


def plot_run(run_dir, path=None):
    """Write ``plot.png`` (or ``path``) for the run in ``run_dir``; return the path, or None
    when matplotlib is missing or there is nothing to plot.

    Three panels: the ring centres against time, the ring radii and the relative energy
    change against time (``diagnostics.nc``), and the x–z projection of the newest
    snapshot: every tracer in a density image (tracers per pixel, grey, logarithmic; white
    where there are none) and the elements as red points (every k-th beyond
    ``PLOT_ELEMENTS``).  The density image costs about the same for any number of
    tracers: at 2^20 tracers and 32766 elements the whole plot takes 0.26 s on 2 CPU
    cores once matplotlib is imported (a scatter of every 8th tracer took 0.44 s there,
    1.5 s on the output thread of a GPU run).
    """
    if not _matplotlib(f"pip install matplotlib, then python postprocess/plot_run.py "
                       f"{run_dir}"):
        return None
    import xarray as xr  # noqa: PLC0415

    path = path or os.path.join(run_dir, "plot.png")
    diag_path = os.path.join(run_dir, "diagnostics.nc")
    snap_path = latest_snapshot(run_dir)
    if os.path.exists(diag_path):
        from .diagnostics import read_rows  # noqa: PLC0415
        rows = read_rows(diag_path)
        if is_box(rows):                       # a periodic run: energy, ε, E(k)
            with xr.open_dataset(diag_path, engine="netcdf4") as d:
                case = d.attrs.get("case", "")
            last = f"  ({os.path.basename(snap_path)})" if snap_path else ""
            return _save(draw_box(rows, f"vortexsim: {case}{last}"), path)
    if not os.path.exists(diag_path) or snap_path is None:
        logger.warning("no diagnostics.nc or snapshot in %s; no plot written", run_dir)
        return None
    with xr.open_dataset(diag_path, engine="netcdf4") as d, \
            xr.open_dataset(snap_path, engine="netcdf4") as s:
        d, s = with_current_names(d.load()), with_current_names(s)
        y, x = s["tracer_x"].values[0], s["element_x"].values[0]   # read only these
        t_snap, case = float(s[TIME].values[0]), s.attrs.get("case", "")
    rings = ([str(n) for n in d["ring"].values], d["ring_centre"].values,
             d["ring_radius"].values) if "ring" in d.variables else ([], None, None)
    health = {name: d[name].values for name, _, _ in _HEALTH if name in d.variables}
    return _save(_draw(d[TIME].values, rings, d["energy"].values, health, x, y, t_snap,
                       f"vortexsim: {case}  ({os.path.basename(snap_path)})"), path)


def plot_rows(rows, x, y, t, title, path):
    """Write the figure of :func:`plot_run` to ``path`` from data in memory, without
    reading the run's files: ``rows`` the diagnostics rows (dicts of
    :meth:`vortexsim.Simulation.diagnostics`, as :class:`~.diagnostics.DiagnosticsLog`
    holds them; at least one), ``x`` (N, 3) and ``y`` (M, 3) [L] the elements and the
    tracers at time ``t`` [T] (host arrays), ``title`` the figure's.  Returns the path,
    or None when matplotlib is missing.  What the run's plot writer draws at the end of a
    run (on an H100 machine reading the two files took 0.17–0.2 s of the plot's 0.3)."""
    if not _matplotlib("pip install matplotlib"):
        return None
    if is_box(rows):                           # a periodic run: energy, ε, E(k)
        return _save(draw_box(rows, title), path)
    names = list(rows[-1].get("ring_names", ()))
    rings = (names, np.stack([r["ring_centre"] for r in rows]),
             np.stack([r["ring_radius"] for r in rows])) if names else ([], None, None)
    health = {name: np.stack([np.asarray(r[name], dtype=float) for r in rows])
              for name, _, _ in _HEALTH if name in rows[-1] and all(name in r for r in rows)}
    return _save(_draw(np.array([r["t"] for r in rows]), rings,
                       np.array([r["energy"] for r in rows]), health, x, y, t, title), path)


def _matplotlib(hint):
    """Whether matplotlib imports; if not, a warning that no plot is written, with
    ``hint`` (what to do) in it."""
    try:
        import matplotlib  # noqa: PLC0415
    except ImportError as exc:
        logger.warning("matplotlib cannot be imported (%s); no plot written (%s)", exc, hint)
        return False
    logger.debug("plotting with matplotlib %s", matplotlib.__version__)
    return True


def _save(figure, path):
    """``figure`` as a PNG at ``path``, atomically; returns the path."""
    with atomic_path(path) as tmp:
        # zlib level 1: a quarter of level 6's encoding time for a 12 % larger file
        figure.savefig(tmp, dpi=DPI, format="png", pil_kwargs={"compress_level": 1})
    logger.info("wrote %s", path)
    return path


def _draw(t, rings, energy, health, x, y, t_snap, title):
    """The figure of :func:`plot_run`: ``t`` (R,) the rows' times [T]; ``rings`` (names,
    centres (R, n, 3) [L], radii (R, n) [L]) (names empty: no rings); ``energy`` (R,);
    ``health`` the rows' numerical-health columns present (name → (R,) or (R, n));
    the elements ``x`` (N, 3) and tracers ``y`` (M, 3) [L] of the snapshot at ``t_snap``
    [T]; ``title`` the figure's.  A matplotlib Figure, not yet drawn."""
    from matplotlib import rc_context  # noqa: PLC0415
    from matplotlib.colors import LogNorm  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    # a figure without pyplot (no global state, no GUI backend, half the import time)
    # and with fixed margins: a layout engine would lay out every text twice; titles at
    # a fixed height (axes.titley): the automatic position measures every tick label
    fig = Figure(figsize=(20, 4.5))
    fixed_titles = {"axes.titley": 1.0}
    with rc_context(fixed_titles):
        axes = [fig.add_axes(box) for box in _PANELS]
    names, centres, radii = rings
    ax = axes[0]
    if names:
        for i, name in enumerate(names):
            c, style = centres[:, i], LINE_STYLES[i % len(LINE_STYLES)]
            ax.plot(t, c[:, 2], style, color="C0", label=f"{name}: z")
            if np.ptp(c[:, 0]) > 1e-3 * max(1.0, np.ptp(c[:, 2])):
                ax.plot(t, c[:, 0], style, color="C1", label=f"{name}: x")
        ax.set_ylabel("ring centre [L]")
        flat_if_constant(ax, centres[..., 2])
        ax.legend(fontsize="small")          # after the note: the legend avoids it
    ax.set_xlabel("t [T]")
    ax.set_title("ring centres")
    ax = axes[1]
    if names:
        for i, name in enumerate(names):
            ax.plot(t, radii[:, i], LINE_STYLES[i % len(LINE_STYLES)], label=name)
        ax.set_ylabel("ring radius [L]")
        flat_if_constant(ax, radii)
        ax.legend(fontsize="small")
    if len(energy) and energy[0] != 0:
        with rc_context(fixed_titles):
            ax2 = ax.twinx()
        change = energy / energy[0] - 1
        ax2.plot(t, change, "k:", lw=1)
        ax2.set_ylabel("E/E(0) − 1 (dotted)")
        flat_if_constant(ax2, 1 + change, word="E", shift=1.0, y=0.04)
    ax.set_xlabel("t [T]")
    ax.set_title("ring radii, energy change")
    _draw_health(axes[2], t, health, names)
    ax = axes[3]
    extent, shape = _box(y, x)
    if len(y):
        counts = np.ma.masked_equal(_density(y[:, 0], y[:, 2], extent, shape), 0)
        ax.imshow(counts, origin="lower", extent=extent, cmap="Greys", interpolation="nearest",
                  norm=LogNorm(vmin=1, vmax=max(2, counts.max())), aspect="equal")
    shown = x[::max(1, -(-len(x) // PLOT_ELEMENTS))]
    ax.scatter(shown[:, 0], shown[:, 2], s=2, c="C3", linewidths=0)
    ax.set_xlim(extent[:2])
    ax.set_ylim(extent[2:])
    ax.set_aspect("equal")
    ax.set_xlabel("x [L]")
    ax.set_ylabel("z [L]")
    ax.set_title(f"t = {t_snap:.4g}, x–z projection\n{len(y)} tracers (grey: count, log), "
                 f"{len(x)} elements (red)", fontsize="small")
    # at most 6 ticks an axis (matplotlib's "auto" put 9–10 on these panels): each tick
    # is two lines and a label, a third of the figure's drawing time
    for a in fig.axes:
        a.xaxis.get_major_locator().set_params(nbins=5)
        if a.get_yscale() == "linear":
            a.yaxis.get_major_locator().set_params(nbins=5)
    fig.suptitle(title)
    return fig


def flat_if_constant(ax, curves, scale=None, word="constant", shift=0.0, y=0.1):
    """Draw a panel whose curves do not vary flat, and write how constant they are.

    ``curves``: the panel's curves, an array (R,) (one curve) or (R, m) (m curves) or a
    list of 1-D arrays, in the panel's units; ``scale``: the size their variation is
    measured against, in the same units (default: their largest |value|); ``shift``: what
    the axis subtracts from them (the energy change E/E(0) − 1 is given as E/E(0) with
    shift 1).  The y tick labels never get matplotlib's offset text (it sat over the
    title).  When every curve's range is at most :data:`FLAT` × scale, the y window is
    centred on them with a half height of 1e-6 × scale or 1000 × their range, whichever
    is larger (when they fit in it; curves far apart keep the automatic window, in which
    each is flat already and the lowest runs along the bottom margin), and the text
    "<word> to <range / scale>" goes at height ``y`` (axes fraction), with "(round-off)"
    when that is at most :data:`ROUND_OFF`.  Add a legend after this call, so that its
    automatic place avoids the text.  Returns range / scale of a flat panel, else None."""
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    if isinstance(curves, np.ndarray) and curves.ndim > 1:
        curves = [curves[:, i] for i in range(curves.shape[1])]
    elif isinstance(curves, np.ndarray):
        curves = [curves]
    curves = [c[np.isfinite(c)] for c in (np.asarray(c, dtype=float).ravel() for c in curves)]
    curves = [c for c in curves if c.size]
    if not curves:
        return None
    size = float(scale) if scale is not None else max(float(np.abs(c).max()) for c in curves)
    spread = max(float(np.ptp(c)) for c in curves)
    if not size > 0 or spread > FLAT * size:
        return None
    relative = spread / size
    lo, hi = min(float(c.min()) for c in curves), max(float(c.max()) for c in curves)
    half = max(_FLAT_WINDOW * size, 1e3 * spread)
    if hi - lo <= half:
        centre = 0.5 * (lo + hi) - shift
        ax.set_ylim(centre - half, centre + half)
    # below 1e-16 of the scale is below float64's resolution of its values
    amount = "< 1e-16" if relative < 1e-16 else f"{relative:.0e}"
    ax.text(0.5, y, f"{word} to {amount}" + (" (round-off)" if relative <= ROUND_OFF else ""),
            transform=ax.transAxes, ha="center", fontsize="small",
            bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
    return relative


def curve_style(i, n, points):
    """Keyword arguments of ``Axes.plot`` for the ``i``-th of ``n`` curves of ``points``
    points each that may lie exactly on top of each other (runs of the same case): its own
    dash pattern and open marker, markers staggered between the curves, the first curve
    widest and lowest, each later one narrower and above, so that every curve shows
    beside or through the others; a curve alone: a plain solid line."""
    if n <= 1:
        return {"linestyle": LINE_STYLES[0]}
    step = max(1, points // 8)                  # about 8 markers a curve
    return {"linestyle": LINE_STYLES[i % len(LINE_STYLES)],
            "marker": _MARKERS[i % len(_MARKERS)],
            "markevery": ((i * step) // max(n, 1), step), "markersize": 6,
            "fillstyle": "none", "linewidth": 2.8 - 1.6 * i / max(n - 1, 1),
            "zorder": 2 + i}


def _draw_health(ax, t, health, names):
    """The health panel: each measure over its limit (1: the limit, a red line), on a
    logarithmic axis so that a measure far below its limit still shows its trend."""
    drawn = False
    for name, label, style in _HEALTH:
        if name not in health:
            continue
        values = np.abs(np.asarray(health[name], dtype=float)) / LIMITS[name][0]
        columns = [(label, values)] if values.ndim == 1 else \
            [(label.format(ring=n), values[:, i]) for i, n in enumerate(names)]
        for text, v in columns:
            v = np.where(v > 0, v, np.nan)          # zeros have no place on a log axis
            if np.isfinite(v).any():
                ax.plot(t, v, style, label=text)
                drawn = True
    ax.axhline(1.0, color="C3", lw=0.8)
    if drawn:
        ax.set_yscale("log")
        ax.legend(fontsize="x-small", loc="upper left")
    ax.set_xlabel("t [T]")
    ax.set_ylabel("measure / its limit")
    ax.set_title("numerical health (above 1: over the limit)")

