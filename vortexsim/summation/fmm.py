r"""The FMM summation (free space or the periodic box) and its policy over a time-stepping
run: the root cube, the tree depth and its refresh, the sizes of a sync-free step.

:class:`FMMSum` sums with a reusable :class:`vortexsim.fmm.evaluator.FMM` on the
level-uniform tree.
The FMM itself (:class:`vortexsim.fmm.evaluator.FMM`) evaluates one call; a time stepper
makes four calls per RK4 step at nearly the same positions and must not stall the GPU with
host transfers inside them.  :class:`FMMPlanner` decides, once per step on the host:

* the **root cube**: the box of the points (elements, images, tracers) at the step's start,
  widened on each side by max(``root_slack`` × its width, 2 dt U), with U the largest speed
  of the previous step, so that the points stay inside over every stage
  (:meth:`vortexsim.geometry.Domain.root_cube`);
* the **tree depth**: chosen by the FMM's cost model at the first call after a refresh
  (every :attr:`FMMPlanner.refresh` steps; choosing costs one device-to-host transfer) and
  reused by every call until the next refresh;
* the **M2L sizes** of the step (GPU, sparse M2L): measured once at the step's first call
  with a depth, so that the other calls need no transfer.

A step's decisions travel in a :class:`StepPlan` handed to the summation.  Queries outside
the time loop (diagnostics, :meth:`vortexsim.Simulation.velocity`) get a read-only plan from
:meth:`FMMPlanner.query`: they reuse the depth but never change the planner.

The planner's state (depth in use, last speed, the box) is part of the simulation state, so
that a restart continues bitwise: :meth:`state_dict` / :meth:`load_state_dict`.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..fmm.evaluator import FMM
from ..fmm.plan import target_sets
from ..kernels.cutoff import check_general_kernel
from .auto import PERIODIC_FMM_KERNELS
from .base import Summation

__all__ = ["FMMSum", "FMMPlanner", "StepPlan", "DEPTH_REFRESH"]

#: steps between two choices of the FMM tree depth (each choice costs one device-to-host
#: transfer; the depth in use is part of the state, so restarts stay bitwise)
DEPTH_REFRESH = 20


@dataclasses.dataclass
class StepPlan:
    """What the summation calls of one step (or one query) share.

    Attributes
    ----------
    root : (device array (3,), float) or None, lower corner [L] and edge [L] of the FMM root
        cube; None: each call takes the bounding cube of its points (and checks nothing)
    depth : int or None, the tree depth to use; None: the first call chooses it
    capacity : the FMM's M2L sizes for sync-free calls (``FMM.m2l_capacity``) or None
    capacity_due : bool, the sizes are still to be measured (once, at the step's first call
        that knows its depth)
    records : bool, a depth chosen by a call is kept for the plan's later calls (a step);
        False for read-only queries, which change nothing
    """

    root: tuple | None = None
    depth: int | None = None
    capacity: object = None
    capacity_due: bool = False
    records: bool = True

    @property
    def sync_free(self):
        """Whether the calls make no device-to-host transfer: the root cube and the depth
        are known on the host (the caller then guarantees that the points are inside)."""
        return self.root is not None and self.depth is not None


class FMMPlanner:
    """Root cube, depth and M2L sizes of each time step (see the module docstring).

    Parameters
    ----------
    domain : :class:`vortexsim.geometry.Domain`, gives the images' box and the cube
    xp : array namespace of the simulation's device
    active : bool, the summation is an FMM (otherwise every plan is empty)
    root_slack : float, margin of the root cube as a fraction of the box width
    refresh : int, steps between two depth choices (:data:`DEPTH_REFRESH`)

    State: ``depth`` (int or None), ``speed`` (max |u| of the last step [L/T]) and ``box``
    ((lo, hi) host arrays of the points at the current state).
    """

    def __init__(self, domain, xp, *, active, root_slack, refresh=DEPTH_REFRESH):
        self.domain = domain
        self.xp = xp
        self.active = bool(active)
        self.root_slack = float(root_slack)
        self.refresh = int(refresh)
        self.depth = None
        self.speed = 0.0
        self.box = None
        #: the plan of the latest step (its depth and M2L sizes, for inspection)
        self.last = None

    # -- the box of the points -------------------------------------------------------
    def observe_box(self, stats):
        """Set the box from host numbers [lo x (3), hi x (3)] of the elements, optionally
        followed by [lo y (3), hi y (3)] of the tracers (ignored when not finite)."""
        lo, hi = self.domain.extend_box(stats[0:3], stats[3:6])
        if len(stats) >= 12 and np.isfinite(stats[6:12]).all():
            lo, hi = np.minimum(lo, stats[6:9]), np.maximum(hi, stats[9:12])
        self.box = (lo, hi)

    # -- plans -----------------------------------------------------------------------
    def root(self, dt):
        """FMM root cube for a step of ``dt`` [T] from the current box and speed:
        ((device corner (3,), edge), margin [L]); (None, 0.0) when no FMM runs."""
        if not self.active:
            return None, 0.0
        lo, hi = self.box
        corner, edge, margin = self.domain.root_cube(lo, hi, self.root_slack,
                                                     2.0 * dt * self.speed)
        return (self.xp.asarray(corner, dtype=np.float64), edge), margin

    def step(self, iteration, dt):
        """The plan of step ``iteration`` (0-based count of completed steps) of size ``dt``
        and its root-cube margin [L].  Every :attr:`refresh` steps the depth is chosen
        anew by the step's first call; the planner keeps its depth until :meth:`commit`
        (a failed step leaves it as it was)."""
        root, margin = self.root(dt)
        depth = None if iteration % self.refresh == 0 else self.depth
        self.last = StepPlan(root=root, depth=depth, capacity_due=True)
        return self.last, margin

    def query(self, root=None):
        """A read-only plan for an evaluation outside the time loop: the depth in use,
        ``root`` (default: none, the bounding cube), nothing recorded."""
        return StepPlan(root=root, depth=self.depth, records=False)

    def commit(self, plan, speed, stats):
        """A step succeeded: keep its depth, its largest speed [L/T] and the new box."""
        self.depth = plan.depth
        self.speed = float(speed)
        self.observe_box(stats)

    def invalidate(self):
        """Forget the depth (the particle set changed: the next call chooses again)."""
        self.depth = None

    # -- state -------------------------------------------------------------------------
    def state_dict(self):
        """Host values: ``fmm_depth`` (−1: none chosen) and ``speed`` [L/T]."""
        return {"fmm_depth": -1 if self.depth is None else int(self.depth),
                "speed": self.speed}

    def load_state_dict(self, state):
        """Restore :meth:`state_dict` (states without ``speed`` keep this run's estimate)."""
        if state.get("speed") is not None:
            self.speed = float(state["speed"])
        depth = int(state.get("fmm_depth", -1))
        self.depth = None if depth < 0 else depth
        return self


class FMMSum(Summation):
    """The FMM summation (:class:`vortexsim.fmm.evaluator.FMM`, level-uniform tree) in free
    space or, with ``box``, in the periodic box (the root is the box; kernels whose far
    field is 1/r, :data:`~vortexsim.summation.auto.PERIODIC_FMM_KERNELS`).

    Parameters as :class:`vortexsim.summation.base.Summation`.  A call's ``plan``
    (:class:`StepPlan`) carries the root cube, the depth and the M2L sizes that the
    calls of one step share: with it the calls make no host transfer (free space).
    """

    name = "fmm"
    BYTES_PER_SOURCE = 10_000
    BYTES_PER_TARGET = 600

    def __init__(self, kernel="gaussian", tol=1e-6, precision="float64", device=None,
                 box=None):
        super().__init__(kernel, tol, precision, device, box)
        # the level-uniform tree: the step plan reuses its depth and M2L sizes
        # without transfers (the adaptive tree sizes itself on the host each call)
        self.fmm = FMM(self.kernel, tol=self.tol, precision=self.precision,
                       device=self.device, tree="uniform")

    def check_method(self):
        if self.box is not None and self.kernel.name not in PERIODIC_FMM_KERNELS:
            raise ValueError(f"the periodic FMM needs a kernel whose far field is 1/r "
                             f"{PERIODIC_FMM_KERNELS}; got kernel="
                             f"{self.kernel.name!r}. Use kernel='gaussian'.")
        check_general_kernel(self.kernel, "method='fmm'")

    def _size_m2l(self, x, targets, gradient, sigma_range, plan):
        # one small transfer at the step's first call with a depth, at the step's start
        # positions: the sizes are a function of the state, and the step's other calls
        # need none
        if plan.capacity_due and plan.root is not None and plan.depth is not None \
                and sigma_range is not None:
            sets = tuple(pts for _, pts, _ in target_sets(targets, gradient))
            plan.capacity = self.fmm.m2l_capacity(x, sigma_range, plan.root, plan.depth,
                                                  targets=sets)
            plan.capacity_due = False

    def evaluate(self, x, alpha, sigma, targets, *, gradient, sigma_range, plan):
        plan = StepPlan(records=False) if plan is None else plan
        if self.box is not None:
            # the periodic FMM: the root is the box, the step plan keeps the depth
            u, grad_u = self.fmm.evaluate(x, alpha, sigma, targets, gradient=gradient,
                                          sigma_range=sigma_range, depth=plan.depth,
                                          box=self.box, check_sources=False)
            if plan.records:
                plan.depth = self.fmm.config.depth
            return u, grad_u
        self._size_m2l(x, targets, gradient, sigma_range, plan)
        u, grad_u = self.fmm.evaluate(x, alpha, sigma, targets, gradient=gradient,
                                      sigma_range=sigma_range, root=plan.root,
                                      check_root=plan.root is None, depth=plan.depth,
                                      m2l_capacity=plan.capacity, ranks=self.sharing_ranks)
        if plan.records:
            plan.depth = self.fmm.config.depth
            self._size_m2l(x, targets, gradient, sigma_range, plan)  # now with a depth
        return u, grad_u
