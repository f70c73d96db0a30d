"""The safety checks of a time step, and the error a failed check raises."""
from __future__ import annotations

import logging
import math

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["SimulationError", "check_step", "GROUND_ROUND_OFF"]

#: how far below a ground plane, relative to the size of the domain, a point may end a
#: step and still count as on it (then put back on it): elements remeshed onto the
#: plane have zero normal velocity only up to round-off, which a run accumulates
GROUND_ROUND_OFF = 1e-9


class SimulationError(RuntimeError):
    """A step failed a safety check; the simulation stays at its last good state.

    Attributes
    ----------
    step : int, the iteration that failed (1-based number of the attempted step)
    t : float, the time at the start of that step (the last good time)
    state : dict, :meth:`Simulation.state_dict` of the last good state (for a checkpoint)
    """

    def __init__(self, message, step, t, state):
        super().__init__(message)
        self.step, self.t, self.state = step, t, state


def check_step(model, stats, dt, margin):
    """Raise :class:`SimulationError` (naming step, time and likely cause) when the step
    of ``model`` from its time t by ``dt`` failed a check.

    ``stats`` (host float64): [finite, max|u|², max‖∇u‖², lo x1 (3), hi x1 (3), and for
    tracers lo y1 (3), hi y1 (3)]; ``margin`` [L]: the FMM root cube's margin (0: none).
    """
    step, t = model.iteration + 1, model.t
    limits = model.parameters
    finite = stats[0] == 1.0 and np.isfinite(stats[1:3]).all()
    speed = float(np.sqrt(stats[1])) if np.isfinite(stats[1]) else math.inf
    grad = float(np.sqrt(stats[2])) if np.isfinite(stats[2]) else math.inf
    cause = (f"Likely causes: dt too large (dt = {dt:g}, dt·max|∇u| = {dt * grad:.3g}; keep "
             f"it ≲ 0.5, or use adaptive=True), or σ too small for the element spacing "
             f"(min σ = {model.sigma_range[0]:g}; the spacing should not exceed σ).")
    problem = None
    if not finite:
        problem = "the state became NaN/inf"
    elif speed > limits["max_speed"]:
        problem = (f"max |u| = {speed:.4g} exceeds the bound max_speed = "
                   f"{limits['max_speed']:.4g} (blow-up)")
    elif margin and dt * speed > margin:
        problem = (f"points moved up to {dt * speed:.3g} within one step, beyond the FMM "
                   f"root-cube margin {margin:.3g} (raise root_slack = "
                   f"{limits['root_slack']:g}, or lower dt)")
    elif model.domain.name == "ground":
        lo_z = min(stats[5], stats[11] if len(stats) == 15 else math.inf)
        lo, hi = model.planner.box
        if lo_z < model.domain.z0 - GROUND_ROUND_OFF * max(1.0, float((hi - lo).max())):
            problem = (f"a point crossed the ground plane z0 = {model.domain.z0} "
                       f"(min z = {lo_z:.4g})")
    if problem is not None:
        msg = (f"Simulation stopped at step {step} (t = {t:.6g} → {t + dt:.6g}): {problem}. "
               f"{cause} The simulation keeps the last good state (t = {t:.6g}); "
               "SimulationError.state holds it for a checkpoint.")
        logger.error(msg)
        raise SimulationError(msg, step, t, model.whole_state_dict())
