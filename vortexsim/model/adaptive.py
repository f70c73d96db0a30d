"""The adaptive time step: an updater that sets the next step's dt from the last one."""
from __future__ import annotations

__all__ = ["AdaptiveTimeStep"]


class AdaptiveTimeStep:
    r"""dt_{n+1} = min(dt_max, max(dt_min, C / G_n)), G_n [1/T] = max over the elements and
    the stages of step n of the Frobenius norm ‖∇u‖_F, C = ``courant``.

    ∇u sets the rates of stretching and of the swirl around the cores, so C/G bounds the
    rotation of a core per step.  A state without gradient (G = 0) keeps dt_max.
    """

    def __init__(self, courant, dt_min, dt_max):
        self.courant, self.dt_min, self.dt_max = float(courant), float(dt_min), float(dt_max)

    def next_dt(self, grad):
        """The next step [T] after a step whose max ‖∇u‖_F was ``grad`` [1/T]."""
        if not grad > 0:
            return self.dt_max
        return float(min(self.dt_max, max(self.dt_min, self.courant / grad)))
