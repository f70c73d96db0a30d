"""Ring tracking over time from the diagnostics (``ring_centre``, ``ring_radius``,
``ring_axis`` of ``diagnostics.nc``), and the spectral slope helper."""
from __future__ import annotations

import numpy as np

__all__ = ["track_rings", "spectral_slope"]


def track_rings(source):
    """Per ring and time: centre, axis, radius, position along the axis and speed.

    ``source``: a run directory or the Dataset of :func:`postprocess.open_diagnostics`
    (``ring_centre``, ``ring_axis`` (time, ring, component), ``ring_radius`` (time, ring)).

    Returns an xarray Dataset (dims time, ring, component; ``units`` on every variable):
    ``centre`` [L], ``axis`` [1], ``radius`` [L], ``position`` [L] = centre · axis, the
    velocity of the centre ``velocity`` [L/T] = numpy.gradient(centre, time) (second
    order, exact for a centre moving at constant velocity) and ``speed`` [L/T] =
    velocity · axis, the speed along the ring's own axis at each time (for a fixed axis
    the time derivative of ``position``).  ValueError when the run has no rings, or
    fewer than two rows.
    """
    import xarray as xr  # noqa: PLC0415

    from vortexsim.output.cf import TIME, time_attrs, variable_attrs  # noqa: PLC0415
    from vortexsim.output.cf import with_current_names  # noqa: PLC0415

    from .run import open_diagnostics  # noqa: PLC0415

    diag = with_current_names(source) if isinstance(source, xr.Dataset) else \
        open_diagnostics(source)
    if diag is None:
        raise ValueError(f"{source} has no diagnostics.nc: no ring tracking.")
    missing = [v for v in ("ring_centre", "ring_radius", "ring_axis") if v not in diag]
    if missing:
        raise ValueError(f"{diag.attrs.get('run_dir', 'the run')} has no rings (no "
                         f"{', '.join(missing)} in its diagnostics).")
    t = np.asarray(diag[TIME].values, dtype=np.float64)
    if t.size < 2:
        raise ValueError("ring speeds need at least two diagnostics rows.")
    centre = np.asarray(diag["ring_centre"].values, dtype=np.float64)
    axis = np.asarray(diag["ring_axis"].values, dtype=np.float64)
    velocity = np.gradient(centre, t, axis=0, edge_order=2 if t.size > 2 else 1)
    coords = {TIME: (TIME, t, time_attrs())}
    if "ring" in diag.coords:
        coords["ring"] = diag["ring"].values
    dims3, dims2 = (TIME, "ring", "component"), (TIME, "ring")
    return xr.Dataset({
        "centre": (dims3, centre, variable_attrs("L", "ring centre")),
        "axis": (dims3, axis, variable_attrs("1", "ring axis (unit vector)")),
        "radius": (dims2, np.asarray(diag["ring_radius"].values, dtype=np.float64),
                   variable_attrs("L", "ring radius")),
        "position": (dims2, np.einsum("trc,trc->tr", centre, axis),
                     variable_attrs("L", "centre projected on the ring axis")),
        "velocity": (dims3, velocity, variable_attrs(
            "L/T", "velocity of the ring centre, numpy.gradient over time")),
        "speed": (dims2, np.einsum("trc,trc->tr", velocity, axis), variable_attrs(
            "L/T", "speed of the ring centre along its axis")),
    }, coords=coords, attrs={"run_dir": diag.attrs.get("run_dir", "")})


def spectral_slope(k, E, kmin, kmax):
    """The least-squares slope of log E against log k over kmin <= k <= kmax (the
    points with E > 0).  ValueError with fewer than two such points."""
    k, E = np.asarray(k, dtype=np.float64), np.asarray(E, dtype=np.float64)
    use = (k >= kmin) & (k <= kmax) & (k > 0) & (E > 0) & np.isfinite(E)
    if use.sum() < 2:
        raise ValueError(f"fewer than two wavenumbers with E > 0 in [{kmin}, {kmax}].")
    return float(np.polyfit(np.log(k[use]), np.log(E[use]), 1)[0])
