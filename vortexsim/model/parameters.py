"""The run parameters of a :class:`~vortexsim.model.VortexModel` and their checks.

:data:`RUN_DEFAULTS` lists every parameter that is not the state (``dt``, the method, the
physics, the remeshing, ...) with its default; the checks below raise the same clear
errors at construction, before anything is computed.
"""
from __future__ import annotations

import math

from .._names import did_you_mean

__all__ = ["RUN_DEFAULTS", "check_run_names", "check_dt", "check_step_bounds"]

#: Run parameters of :class:`vortexsim.model.VortexModel` and their defaults.
RUN_DEFAULTS = {
    "dt": None,                    # [T] step (dt_max with adaptive=True); required
    "t_end": None,                 # [T] default stop time of run()
    "integrator": "rk4",           # euler | rk2 | rk4
    "kernel": "gaussian",
    "method": "direct",            # direct | fmm | auto
    "tol": 1e-6,                   # FMM relative accuracy
    "precision": "float64",
    "device": "auto",              # auto | cpu | gpu
    "stretching": "transpose",     # transpose | classical
    "nu": 0.0,                     # [L²/T]
    "viscous": "core_spreading",   # core_spreading | pse (free space, periodic box)
    "pse_order": 2,                # order in ε of the PSE kernel: 2 | 4
    "boundary": "free",            # free | ground | periodic
    "ground_z": 0.0,               # [L] height of the ground plane
    "box": None,                   # [L] edge of the periodic box [0, L)³
    "remesh_every": 0,             # steps between two remeshings (0: never)
    "remesh_spacing": None,        # [L] lattice spacing h of the remeshing
    "remesh_overlap": None,        # σ = overlap × h after a remeshing (None: 1, or the case's)
    "remesh_threshold": 1e-6,      # free space: nodes with |α| ≤ this × max|α| dropped
    "remesh_project": False,       # periodic box: α made divergence-free after remeshing
    "adaptive": False,
    "courant": 0.1,                # C of the adaptive rule dt = C / max‖∇u‖
    "dt_min": None,                # [T] lower bound of the adaptive dt (default dt/1000)
    "max_speed": None,             # [L/T] blow-up bound on |u| (default 100 × max|u| at t0)
    "root_slack": 0.05,            # FMM root cube margin, fraction of the box width
    #                                (a wider cube makes wider leaves: at 0.25 the leapfrog
    #                                GPU case had 0.40 instead of 0.32 and 1.8× the pairs)
    "progress": True,              # progress bar in run()
}


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
