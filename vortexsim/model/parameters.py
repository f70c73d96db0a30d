"""The run parameters of a :class:`~vortexsim.model.VortexModel` and their checks.

:data:`RUN_DEFAULTS` (from the one parameter table, :data:`vortexsim.config.TABLE`)
lists every parameter that is not the state (``dt``, the method, the physics, the
remeshing, ...) with its default; the checks below raise clear errors at construction,
before anything is computed.
"""
from __future__ import annotations

import math

from .._names import did_you_mean
from ..config import RUN_DEFAULTS

__all__ = ["RUN_DEFAULTS", "check_run_names", "check_dt", "check_step_bounds"]

def check_run_names(run):
    """Raise TypeError naming every key of ``run`` that is not a run parameter."""
    unknown = sorted(set(run) - set(RUN_DEFAULTS))
    if unknown:
        hint = "; ".join(f"{k!r}{did_you_mean(k, RUN_DEFAULTS, parenthetical=True)}"
                         for k in unknown)
        raise TypeError(f"Unknown run parameter(s) {hint}; expected some of "
                        f"{sorted(RUN_DEFAULTS)}.")


def check_dt(cfg):
    """The step ``dt`` [T] of the run parameters ``cfg``, checked (finite, > 0)."""
    dt = cfg["dt"]
    if dt is None or not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a finite number > 0 (the time step [T], the largest "
                         f"step when adaptive=True), got {dt!r}.")
    return dt


def check_step_bounds(cfg):
    """Check t_end, courant, dt_min and root_slack of the run parameters ``cfg`` and fill
    in the defaults that depend on dt (``dt_min`` = dt/1000, ``remesh_overlap`` = 1);
    ``cfg`` is changed in place."""
    dt = cfg["dt"]
    if cfg["t_end"] is not None and not math.isfinite(float(cfg["t_end"])):
        raise ValueError(f"t_end must be finite or None, got {cfg['t_end']!r}.")
    if not 0 < float(cfg["courant"]) <= 2:
        raise ValueError(f"courant must be in (0, 2], got {cfg['courant']!r}.")
    if cfg["dt_min"] is None:
        cfg["dt_min"] = float(dt) / 1000.0
    if cfg["remesh_overlap"] is None:
        cfg["remesh_overlap"] = 1.0
    if not 0 < float(cfg["dt_min"]) <= float(dt):
        raise ValueError(f"dt_min must be in (0, dt], got {cfg['dt_min']!r} with dt = {dt}.")
    if not 0 < float(cfg["root_slack"]) <= 10:
        raise ValueError(f"root_slack must be in (0, 10], got {cfg['root_slack']!r}.")
