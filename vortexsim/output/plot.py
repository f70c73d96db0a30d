"""A picture of a run: ring centres and radii against time, and the last snapshot.

``plot_run(run_dir)`` reads ``diagnostics.nc`` and the newest ``snapshot_*.nc`` of a run
directory and writes ``plot.png``.  Needs matplotlib (a dependency of vortexsim); without
it the plot is skipped with a warning, never an error.
"""
from __future__ import annotations

import glob
import logging
import os

import numpy as np

from .files import atomic_path

logger = logging.getLogger(__name__)

__all__ = ["plot_run", "latest_snapshot"]


#: most points of each kind drawn in the x–z projection
PLOT_POINTS = {"tracers": 1 << 17, "elements": 1 << 16}


def _every(var, most):
    """Positions (k, 3) of the first time of ``var`` (time, n, 3), every ⌈n/most⌉-th
    point (read from the file only those)."""
    n = var.shape[1]
    return var[0, ::max(1, -(-n // most))].values


def latest_snapshot(run_dir):
    """Path of the snapshot with the largest iteration in ``run_dir`` (None if none)."""
    files = sorted(glob.glob(os.path.join(run_dir, "snapshot_*.nc")))
    return files[-1] if files else None


def plot_run(run_dir, path=None):
    """Write ``plot.png`` (or ``path``) for the run in ``run_dir``; return the path, or None
    when matplotlib is missing or there is nothing to plot."""
    try:
        import matplotlib  # noqa: PLC0415
        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        logger.warning("matplotlib is not installed; no plot written "
                       "(pip install matplotlib, then python postprocess/plot_run.py %s)",
                       run_dir)
        return None
    import xarray as xr  # noqa: PLC0415

    path = path or os.path.join(run_dir, "plot.png")
    diag_path = os.path.join(run_dir, "diagnostics.nc")
    snap_path = latest_snapshot(run_dir)
    if not os.path.exists(diag_path) or snap_path is None:
        logger.warning("no diagnostics.nc or snapshot in %s; no plot written", run_dir)
        return None
    with xr.open_dataset(diag_path, engine="netcdf4") as d, \
            xr.open_dataset(snap_path, engine="netcdf4") as s:
        d, s = d.load(), s.load()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), constrained_layout=True)
    t = d["time"].values
    names = [str(n) for n in d["ring"].values] if "ring" in d.variables else []
    ax = axes[0]
    if names:
        for i, name in enumerate(names):
            c = d["ring_centre"].values[:, i]
            ax.plot(t, c[:, 2], "-", label=f"{name}: z")
            if np.ptp(c[:, 0]) > 1e-3 * max(1.0, np.ptp(c[:, 2])):
                ax.plot(t, c[:, 0], "--", label=f"{name}: x")
        ax.set_ylabel("ring centre [L]")
        ax.legend(fontsize="small")
    ax.set_xlabel("t [T]")
    ax.set_title("ring centres")
    ax = axes[1]
    if names:
        for i, name in enumerate(names):
            ax.plot(t, d["ring_radius"].values[:, i], label=name)
        ax.set_ylabel("ring radius [L]")
        ax.legend(fontsize="small")
    e = d["energy"].values
    if len(e) and e[0] != 0:
        ax2 = ax.twinx()
        ax2.plot(t, e / e[0] - 1, "k:", lw=1)
        ax2.set_ylabel("E/E(0) − 1 (dotted)")
    ax.set_xlabel("t [T]")
    ax.set_title("ring radii, energy change")
    ax = axes[2]
    # every k-th point beyond PLOT_POINTS (2^20 tracers took 2 s to draw; the
    # projection looks the same)
    y = _every(s["tracer_x"], PLOT_POINTS["tracers"])
    x = _every(s["element_x"], PLOT_POINTS["elements"])
    if len(y):
        ax.scatter(y[:, 0], y[:, 2], s=0.5, c="0.6", label="tracers", rasterized=True)
    ax.scatter(x[:, 0], x[:, 2], s=2, c="C3", label="elements", rasterized=True)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x [L]")
    ax.set_ylabel("z [L]")
    ax.set_title(f"t = {float(s['time'].values[0]):.4g} (x–z projection)")
    fig.suptitle(f"vortexsim: {s.attrs.get('case', '')}  ({os.path.basename(snap_path)})")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    logger.info("wrote %s", path)
    return path
