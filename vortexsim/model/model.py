r"""The vortex model: state, clock, domain, summation and terms, advanced one step at a time.

    model = VortexModel((x, alpha, sigma), tracers, dt=0.1, method="fmm")
    model.time_step(model.dt)                       # one step
    model.rates(), model.velocity(targets), model.state_dict()

The model knows nothing of a run (stop criteria, output, callbacks): that is
:class:`vortexsim.simulation.Simulation`, which owns one model.

One step (:meth:`VortexModel.time_step`), in this order::

    α    = before_step of every term (lattice diffusion: half a step of it)
    root = FMM root cube: the box of elements, images and tracers at t_n, widened on
           each side by max(`root_slack` × its width, 2 dt U), U = max |u| over the
           stages of the previous step (host numbers from the last check; U is part of
           the state, so restarts stay bitwise)
    y    = scheme.step((x, α, y_tracers), t_n, dt, rhs)   # one summation per stage
    σ    = sqrt(σ² + 2ν dt)                              # core spreading, ν > 0 only
    during()                                             # optional: work beside the step
    check (one device→host transfer of 15 numbers): finite state, max |u| over the stages
           ≤ max_speed, stage displacement dt·max|u| within the root slack, elements and
           tracers above a ground plane.  A failed check raises SimulationError and leaves
           the model at its last good state (t_n).
    commit: t ← t_n + dt, iteration += 1; the next adaptive dt
    updaters: remeshing every `remesh_every` steps; then after_step of every term

Adaptive rule (``adaptive=True``): dt_{n+1} = min(dt_max, max(dt_min, C / G_n)) with
G_n = max over the elements and the stages of step n of the Frobenius norm ‖∇u‖_F
[1/T] and C = ``courant`` (default 0.1); ∇u sets the rates of stretching and of the swirl
around the cores, so C/G bounds the rotation of a core per step.  dt_0 uses an evaluation
at t_0; ``dt`` is dt_max.

Restart: :meth:`VortexModel.state_dict` returns t, iteration, the next dt and host copies
of every array; :meth:`VortexModel.load_state_dict` restores them, so that a run continued
from a saved state is bitwise identical to an uninterrupted one (same config, same
device).  :attr:`VortexModel.config` holds every resolved parameter (plain JSON-able
values); :func:`vortexsim.cases.from_config` rebuilds a case from it.

Several ranks (``communicator``): a periodic run with the particle-mesh solve, remeshed
every step, splits its state by x-slabs (:mod:`.slab_partition`: each rank steps its
slab's elements; :meth:`VortexModel.assemble` gathers the whole state for output);
any other run keeps the whole state on every rank and shares the summation's targets.
"""
from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np

from ..backend import Device, SingleProcess, resolve_device, to_host
from ..config import check_limits
from ..kernels.morton import column_range
from ..geometry import PeriodicBox, make_domain
from ..physics import VortexRHS
from ..summation import FMMPlanner, make_summation
from ..state import (ElementGroup, Elements, Tracers, check_group_ranges, group_labels,
                     make_elements, make_tracers)
from .adaptive import AdaptiveTimeStep
from .checks import SimulationError, check_step
from .integrators import REAL_AXIS_STABILITY, get_scheme
from .parameters import RUN_DEFAULTS, check_dt, check_run_names, check_step_bounds
from .remeshing import Remeshing
from .slab_partition import SlabSplit

logger = logging.getLogger(__name__)

__all__ = ["VortexModel", "LATTICE_SUM_DEVICES"]

#: devices on which a step that starts on the periodic lattice sums its first stage by
#: plain FFTs (:class:`vortexsim.summation.lattice.LatticeSum`, the PSE of
#: :mod:`vortexsim.physics.pse_lattice`) and its diagnostics rows fold their field sums
LATTICE_SUM_DEVICES = ("cpu", "gpu")


#: the largest dt x max |grad u| of the initial state accepted for a fixed step: 40 times
#: the cases' defaults (near 0.25), 3.5 times the real-axis stability interval of RK4
#: (2.8; the core's rotation, which dominates max |grad u|, does not destabilise a step);
#: beyond it runs blow up in their first steps
MAX_STEP_STRAIN = 10.0


class VortexModel(SlabSplit):
    """Vortex elements and passive tracers on one device, and how they evolve.

    Parameters
    ----------
    elements : :class:`vortexsim.state.Elements` or tuple (x (N, 3) [L], alpha (N, 3)
        [L³/T], sigma (N,) or scalar [L][, volume (N,) [L³]]), host or device arrays
    tracers : array (M, 3) [L], :class:`vortexsim.state.Tracers` or None
    groups : sequence of :class:`vortexsim.state.ElementGroup` (or dicts), e.g. one per
        ring, for per-ring diagnostics
    t0 : float [T], initial time
    case, case_params : the name and resolved parameters of the case that built the
        state (recorded in ``config``)
    communicator : :class:`vortexsim.backend.Communicator` of the processes that run this
        model together, each with the whole state (default: one process); their
        summation shares its targets among them
        (:class:`vortexsim.summation.distributed.SharedTargets`)
    own_slab : bool, ``elements`` are this rank's rows of a lattice state that the ranks
        hold split by slabs (:mod:`.slab_partition`; a case built by slabs:
        :func:`vortexsim.cases.make_case`), not the whole state; ValueError where the
        run cannot split
    **run : the run parameters of :data:`vortexsim.model.parameters.RUN_DEFAULTS`
        (``dt`` is required; ``docs/parameters.md`` lists each with its unit)

    Attributes
    ----------
    t, iteration, dt (the next step's dt), elements, tracers, groups, config, parameters
    (the resolved run parameters), device, domain, summation, rhs (the terms), scheme,
    planner, remeshing, adaptive (None with a fixed dt), sigma_range (host (min σ, max σ)),
    step_strain (dt·max‖∇u‖_F of the last step; at t0 of the first step and the initial
    field; restored by :meth:`load_state_dict`, nan from a state without it until the next
    step)
    """

    def __init__(self, elements, tracers=None, *, groups=(), t0=0.0, case=None,
                 case_params=None, communicator=None, own_slab=False, **run):
        check_run_names(run)
        check_limits(run)        # every number within the range of the parameter table
        # the state split by slabs over ranks: set up by _init_partition (none until then)
        self.partition = None
        cfg = {**RUN_DEFAULTS, **run}
        self.device: Device = resolve_device(cfg["device"])
        self._init_state(elements, tracers, groups)
        self.communicator = communicator if communicator is not None else SingleProcess()
        n, m = len(self.elements), len(self.tracers)
        if own_slab:                     # the elements of every rank's slab
            n = int(self.communicator.allreduce_sum(np.array([n], dtype=np.int64))[0])
        dt = check_dt(cfg)
        self.scheme = get_scheme(cfg["integrator"])
        check_step_bounds(cfg)
        # -- physics --------------------------------------------------------------
        self.domain = make_domain(cfg["boundary"], cfg["ground_z"], cfg["box"])
        self.domain.check(self.elements.x, "elements")
        self.domain.check(self.tracers.x, "tracers")
        periodic = isinstance(self.domain, PeriodicBox)
        if periodic:
            self.domain.check_strengths(self.elements.alpha,
                                        self.communicator if own_slab else None)
        n_src = n * (1 + self.domain.n_images_per_element)
        # the ranks of a run share the summation's targets (one rank: the method itself)
        self.summation = make_summation(cfg["method"], cfg["kernel"], cfg["tol"],
                                        cfg["precision"], self.device, n_sources=n_src,
                                        n_targets=n + m,
                                        box=self.domain.box if periodic else None,
                                        communicator=self.communicator)
        self.rhs = VortexRHS(self.summation, self.domain, cfg["stretching"], cfg["nu"],
                             cfg["viscous"], cfg["pse_order"])
        self.remeshing = Remeshing(cfg, self.domain, self.rhs, self.groups)
        self.rhs.bind_lattice(self.remeshing.lattice_nodes())
        self.planner = FMMPlanner(self.domain, self.device.xp,
                                  active=self.summation.method == "fmm",
                                  root_slack=cfg["root_slack"])
        self.parameters = cfg
        self.t = float(t0)
        self.iteration = 0
        self.sigma_range = self._host_sigma_range()
        if self.remeshing.every and not periodic and self.elements.volume_unknown():
            # free-space remeshing: elements built without volumes (a ring's stations)
            # start on the lattice, so that every element has one (PSE weighs by them)
            # and the run is the same remeshed discretisation from its first step
            self.config = {}
            self.remesh()
            n = len(self.elements)
        if own_slab:                     # σ and the box of every rank's slab
            lo, hi = np.array(self.communicator.allgather(self.sigma_range)).T
            self.sigma_range = (float(lo.min()), float(hi.max()))
        self._check_viscous_step(cfg, dt)
        self._init_partition(own_slab)
        self.planner.observe_box(self._host_box_stats())
        # -- an evaluation at t0: the blow-up bound and the first adaptive dt ---
        speed, grad = self._initial_maxima()
        self.planner.speed = speed
        if cfg["max_speed"] is None:
            cfg["max_speed"] = 100.0 * speed if speed > 0 else math.inf
        if not float(cfg["max_speed"]) > 0:
            raise ValueError(f"max_speed must be > 0, got {cfg['max_speed']!r}.")
        if not cfg["adaptive"] and float(dt) * grad > MAX_STEP_STRAIN:
            raise ValueError(f"dt = {float(dt):g} is far beyond the flow's time scale: dt x "
                             f"max |grad u| = {float(dt) * grad:.4g} at the start, more than "
                             f"{MAX_STEP_STRAIN:g} (the cases' defaults are near 0.25); set "
                             f"dt <= {MAX_STEP_STRAIN / grad:.6g} or adaptive = true.")
        cfg.update(self.summation.describe())
        cfg.update(device=self.device.kind, integrator=self.scheme.name,
                   stretching=self.rhs.stretching, nu=self.rhs.nu, viscous=self.rhs.viscous,
                   pse_order=self.rhs.pse_order,
                   boundary=self.domain.name, dt=float(dt), dt_min=float(cfg["dt_min"]),
                   max_speed=float(cfg["max_speed"]), courant=float(cfg["courant"]),
                   adaptive=bool(cfg["adaptive"]), ground_z=float(cfg["ground_z"]),
                   t_end=None if cfg["t_end"] is None else float(cfg["t_end"]))
        if periodic:
            cfg["box"] = self.domain.box
        # recorded where they apply (a config holds no None: it round-trips through TOML)
        for key in ("box", "remesh_spacing"):
            if cfg[key] is None:
                cfg.pop(key)
        self.adaptive = AdaptiveTimeStep(cfg["courant"], cfg["dt_min"], cfg["dt"]) \
            if cfg["adaptive"] else None
        self.dt = self.adaptive.next_dt(grad) if self.adaptive else float(dt)
        self.step_strain = self.dt * grad
        self.config = {"case": case, **(case_params or {}), **cfg, "t0": float(t0),
                       "groups": [g.as_dict() for g in self.groups],
                       "n_elements": n, "n_tracers": m}
        logger.info("Simulation %s: %d elements, %d tracers, %s on %s, %s dt=%g",
                    case or "", n, m, self.summation.method, self.device.describe(),
                    self.scheme.name, self.dt)

    def _init_state(self, elements, tracers, groups):
        """The elements, tracers and groups, validated once and put on the device."""
        if isinstance(elements, Elements):
            elements = (elements.x, elements.alpha, elements.sigma, elements.volume)
        x, alpha, sigma, *volume = elements
        self.elements = make_elements(x, alpha, sigma, self.device,
                                      volume=volume[0] if volume else None)
        if isinstance(tracers, Tracers):
            tracers = tracers.x
        self.tracers = make_tracers(tracers, self.device)
        self.groups = tuple(g if isinstance(g, ElementGroup) else ElementGroup.from_dict(g)
                            for g in groups)
        n = len(self.elements)
        for g in self.groups:
            if g.stop > n:
                raise ValueError(f"group {g.name!r} ends at element {g.stop} but there are "
                                 f"only {n} elements.")
        xp = self.device.xp             # (without groups no host array of n labels)
        self.elements.group = xp.asarray(group_labels(self.groups, n)) if self.groups \
            else xp.full(n, -1, dtype=np.int64)

    # -- host-side bookkeeping ------------------------------------------------
    def _check_viscous_step(self, cfg, dt):
        """ValueError when the largest step ``dt`` would make the viscous term unstable
        or wipe the vorticity out in one step, for the smallest core of the run (now or
        after a remeshing): each term that can tell checks it (``check_dt``)."""
        sigma = float(self.sigma_range[0])
        if self.remeshing.every:
            sigma = min(sigma, float(cfg["remesh_overlap"]) * float(cfg["remesh_spacing"]))
        limit = REAL_AXIS_STABILITY.get(self.scheme.name, 2.0)
        for term in self.rhs.terms:
            if hasattr(term, "check_dt"):
                term.check_dt(float(dt), sigma, limit, self.scheme.name)

    def _host_sigma_range(self):
        s = self.elements.sigma
        lo, hi = to_host(self.device.xp.stack([s.min(), s.max()]))
        return float(lo), float(hi)

    def _host_box_stats(self):
        """Host [lo, hi] of the elements, then of the tracers (one transfer); where the
        ranks hold the state split by slabs and not every rank the whole, [lo, hi] of
        all ranks' elements (one host allgather on every rank: a split state has no
        tracers)."""
        xp = self.device.xp
        stats = xp.concatenate(column_range(self.elements.x, xp))
        if len(self.tracers):
            stats = xp.concatenate([stats, *column_range(self.tracers.x, xp)])
        stats = to_host(stats)
        if self.partition is not None and self.partition.whole_on != "all":
            parts = np.array(self.communicator.allgather(stats))
            stats = np.concatenate([parts[:, :3].min(axis=0), parts[:, 3:6].max(axis=0)])
        return stats

    def _initial_maxima(self):
        """Host max |u| (elements and tracers) and max ‖∇u‖_F (elements) at the current
        state, from an evaluation planned like a step's first stage (its depth is kept)."""
        plan, _ = self.planner.step(self.iteration, 0.0)
        if self.partition is None:
            self._rates_with(plan)
            s = to_host(self.rhs.stage_max)
        else:                     # this rank's elements, the maxima of every rank
            own = self.partition.own
            with self.partition.own_stages(self.rhs):
                self.rhs.begin_step(self.t, own.sigma, self.sigma_range, plan=plan,
                                    volume=own.volume)
                self.rhs((own.x, own.alpha, self.tracers.x), self.t)
            s = np.max(self.communicator.allgather(to_host(self.rhs.stage_max)), axis=0)
        self.planner.depth = plan.depth
        if not np.isfinite(s).all():
            raise ValueError("the initial state gives a non-finite velocity; check that "
                             "sigma > 0 and that no two elements coincide with a singular kernel.")
        return float(np.sqrt(s[0])), float(np.sqrt(s[1]))

    # -- stepping -----------------------------------------------------------------
    def time_step(self, dt, during=None):
        """Advance by one step of ``dt`` [T] (see the module docstring).

        ``during()``, when given, runs after the step's work is launched and before its
        one host transfer, while nothing of the step is committed (so it sees the state
        the step started from).  Raises :class:`SimulationError` (state unchanged) when a
        safety check fails.
        """
        if not (math.isfinite(dt) and dt > 0):    # (the same dt on every rank)
            raise SimulationError(f"non-finite or non-positive time step dt = {dt} at step "
                                  f"{self.iteration + 1}, t = {self.t}.", self.iteration + 1,
                                  self.t, self.whole_state_dict())
        if self.partition is None:
            return self._time_step(dt, during)
        self._drop_whole()
        try:
            with self.partition.own_stages(self.rhs):
                return self._time_step(dt, during)
        finally:
            self.partition.keep(self)

    def _time_step(self, dt, during):
        xp = self.device.xp
        el, tr = self.elements, self.tracers
        alpha0 = el.alpha
        for term in self.rhs.terms:                # lattice diffusion: the first half step
            alpha0 = term.before_step(alpha0, el.x, self.iteration, dt)
        plan, margin = self.planner.step(self.iteration, dt)
        self.rhs.begin_step(self.t, el.sigma, self.sigma_range, plan=plan,
                            volume=el.volume, lattice=self.lattice_start())
        x1, alpha1, y1 = self.scheme.step((el.x, alpha0, tr.x), self.t, dt, self.rhs)
        sigma1 = self.rhs.advance_cores(el.sigma, dt)
        # one device→host transfer: [finite, max|u|², max‖∇u‖², box of x1, box of y1]
        finite = xp.isfinite(x1).all() & xp.isfinite(alpha1).all() & xp.isfinite(y1).all() \
            & xp.isfinite(sigma1).all()
        parts = [xp.asarray(finite, dtype=xp.float64).reshape(1), self.rhs.stage_max,
                 *column_range(x1, xp)]
        if y1.shape[0]:
            parts += list(column_range(y1, xp))
        stats = xp.concatenate([xp.asarray(p, dtype=xp.float64) for p in parts])
        if during is not None:
            during()
        stats = to_host(stats)
        if self.partition is not None:             # every rank's maxima and box
            stats = self.partition.combine(stats)
        check_step(self, stats, dt, margin)
        if self.domain.name == "ground":
            # points within round-off below the plane back onto it (check_step has
            # refused any farther below)
            x1 = _onto_plane(x1, self.domain.z0, xp)
            y1 = _onto_plane(y1, self.domain.z0, xp)
        # commit
        self.elements = dataclasses.replace(el, x=x1, alpha=alpha1, sigma=sigma1)
        self.tracers = Tracers(y1)
        self.t += dt
        self.iteration += 1
        self.planner.commit(plan, np.sqrt(stats[1]), stats[3:])
        # the cores' range as the viscous term moves it (core spreading: σ² + 2ν dt; PSE
        # keeps the cores)
        self.sigma_range = self.rhs.advance_sigma_range(self.sigma_range, dt)
        self.step_strain = dt * float(np.sqrt(stats[2]))
        if self.adaptive is not None:
            self.dt = self.adaptive.next_dt(float(np.sqrt(stats[2])))
        if self.remeshing.due(self.iteration):
            self.remesh()
        alpha = self.elements.alpha
        for term in self.rhs.terms:                # lattice diffusion: the second half
            alpha = term.after_step(alpha, dt)
        if alpha is not self.elements.alpha:
            self.elements = dataclasses.replace(self.elements, alpha=alpha)
        return self

    def lattice_start(self):
        """``(n, x)`` when this step starts with the elements ``x`` on the periodic n³
        lattice in remesh order and its first stage can sum on it by plain FFTs
        (:class:`vortexsim.summation.lattice.LatticeSum`; the mesh solve without its P2M
        and M2P): the spectral sum or the mesh solve, no tracers,
        and a remeshing at the end of the last step, on the devices of
        :data:`LATTICE_SUM_DEVICES`.  A function of (iteration, config) alone, so that a
        restart takes the same path and continues bitwise; else None."""
        n = self.on_lattice()
        if n is None or self.summation.method not in ("spectral", "mesh") or len(self.tracers):
            return None
        return n, self.elements.x

    def on_lattice(self):
        """n when the elements sit on the periodic n³ lattice in remesh order because the
        last step ended with a remeshing, on a device of :data:`LATTICE_SUM_DEVICES`;
        else None."""
        if self.device.kind not in LATTICE_SUM_DEVICES:
            return None
        return self.remeshing.remeshed_lattice(self.iteration)

    def remesh(self):
        """Interpolate the elements onto the lattice of spacing ``remesh_spacing`` with M4′
        (:func:`vortexsim.geometry.remesh.remesh`): in the periodic box all (L/h)³ nodes,
        in free space the nodes above ``remesh_threshold``; σ = ``remesh_overlap`` × h,
        V = h³.  Called by :meth:`time_step` every ``remesh_every`` steps (the schedule
        is the iteration count, so a restart keeps it).  In free space all elements go
        onto one lattice (origin 0; no two nodes coincide) and each node takes the label
        of the group (a ring) whose own contribution to it is the largest, the groups kept
        contiguous, so that per-group diagnostics go on
        (:func:`vortexsim.physics.remesh_groups.remesh_groups`).  Above a ground plane
        z₀ the elements and their images are remeshed on the lattice through the plane
        (origin (0, 0, z₀)); the nodes above it are kept, those on it at half strength
        (normal component only), so that the kept nodes with their images are the
        remeshed field of elements + images.  In the box the lattice holds them all and
        the groups are dropped, and with ``remesh_project`` the lattice strengths are made
        divergence-free with zero sum
        (:func:`vortexsim.physics.projection.project_solenoidal`)."""
        if self.partition is not None:
            self._drop_whole()
        return self.remeshing.apply(self)

    # -- evaluations of the current state ------------------------------------------
    def rates(self):
        """Time derivatives (dx/dt, dα/dt, dy/dt) of the current state (device arrays):
        one right-hand-side evaluation, as the integrator's first stage sees it."""
        self.assemble()
        return self._rates_with(self.planner.query(root=self.planner.root(0.0)[0]))

    def _rates_with(self, plan):
        """One right-hand-side evaluation of the current state under ``plan``."""
        el = self.elements
        self.rhs.begin_step(self.t, el.sigma, self.sigma_range, plan=plan,
                            volume=el.volume)
        return self.rhs((el.x, el.alpha, self.tracers.x), self.t)

    def velocity(self, targets=None, gradient=False):
        """u (and ∇u) at ``targets`` (M, 3) (default: the elements, without self pairs),
        including the images of a ground plane; arrays of the model's device."""
        self.assemble()
        el = self.elements
        n_self = 0
        if targets is None:
            targets, n_self = el.x, len(el)
        else:
            targets = self.device.xp.asarray(targets, dtype=el.x.dtype)
        return self.rhs.velocity(el.x, el.alpha, el.sigma, targets, gradient=gradient,
                                 n_self=n_self if gradient else 0,
                                 sigma_range=self.sigma_range, plan=self.planner.query())

    # -- a new particle set -------------------------------------------------------------
    def replace_elements(self, x, alpha, sigma, volume=None, group=None):
        """Replace the vortex elements by a new set of any size N' (what remeshing does).

        x (N', 3) [L], alpha (N', 3) [L³/T], sigma (N',) or scalar [L], volume (N',) [L³]
        (default: not known), group (N',) labels (default: none; each group's elements
        must stay contiguous, so that its index range can be rebuilt).  Everything that
        depends on the particle set is reset here and only here: the σ range, the FMM
        planner's depth and box, the group ranges and the recorded sizes.

        :meth:`state_dict` holds the volumes, labels and groups (snapshot format 3), so
        that :meth:`load_state_dict` rebuilds such a set through this method.  Bad input
        raises before anything changes.
        """
        return self._replace_elements(x, alpha, sigma, volume, group, self.groups)

    def onto_lattice(self, nodes, alpha):
        """The elements onto the periodic lattice's nodes with strengths ``alpha`` (n³, 3)
        [L³/T]: :meth:`replace_elements` for the box's remeshing, whose set is the same
        nodes (``nodes``: x, σ, V of a :class:`vortexsim.geometry.remesh.Remeshed`) every
        time.  The first call goes through :meth:`replace_elements`; later calls, with
        the elements already a set of that size without groups, keep its σ range, box
        and labels and only reset what depends on positions (no host transfer)."""
        el = self.elements
        known = getattr(self, "_lattice_nodes", None)
        if known is None or known[0] is not nodes or len(el) != len(nodes) or self.groups \
                or len(self.tracers):
            if self.groups or len(self.tracers):
                self.replace_elements(nodes.x, alpha, nodes.sigma, volume=nodes.volume)
            else:
                self._first_lattice_set(nodes, alpha)
            self._lattice_nodes = (nodes, self._host_box_stats())
            return self
        self.elements = dataclasses.replace(el, x=nodes.x, alpha=alpha.astype(el.x.dtype,
                                                                              copy=False),
                                            sigma=nodes.sigma, volume=nodes.volume)
        for term in self.rhs.terms:
            term.reset()
        self.planner.invalidate()
        self.planner.observe_box(known[1])
        return self

    def _first_lattice_set(self, nodes, alpha):
        """:meth:`replace_elements` for the remesher's own nodes and strengths (device
        arrays, finite: a step commits only finite states), without its host copies of
        the arrays (seconds at 512³): the same resets, groups none."""
        xp, dtype = self.device.xp, self.elements.x.dtype
        self._lattice_nodes = None
        self.elements = Elements(*(xp.asarray(a, dtype=dtype) for a in (
            nodes.x, alpha, nodes.sigma, nodes.volume)),
            group=xp.full(len(nodes), -1, dtype=xp.int64))
        self.groups = ()
        self._new_set()

    def _new_set(self):
        """Reset what depends on the particle set, once ``elements`` and ``groups`` are
        the new set's: the σ range, the terms' checks, the FMM planner's depth and box,
        the recorded sizes."""
        self.sigma_range = self._host_sigma_range()
        for term in self.rhs.terms:
            term.reset()
        self.planner.invalidate()
        self.planner.observe_box(self._host_box_stats())
        self.config.update(n_elements=len(self.elements) if self.partition is None else self.partition.n ** 3,
            groups=[g.as_dict() for g in self.groups])

    def _replace_elements(self, x, alpha, sigma, volume, group, old_groups):
        """:meth:`replace_elements` with the labels indexing ``old_groups`` (a sequence
        of :class:`ElementGroup`; their ranges are rebuilt from the labels).  Where the
        ranks hold the state split by slabs, the new set must be the whole lattice (the
        same on every rank), of which this rank then keeps its rows."""
        partition = self.partition
        if partition is not None:
            partition.check_whole(x, "the new set of elements")
        self._lattice_nodes = None
        elements = make_elements(x, alpha, sigma, self.device, self.elements.x.dtype,
                                 volume=volume, group=group)
        self.domain.check(elements.x, "elements")
        labels = to_host(elements.group)
        if labels.size and labels.max() >= len(old_groups):
            raise ValueError(f"group labels go up to {int(labels.max())} but the simulation "
                             f"has {len(old_groups)} groups (labels -1 .. "
                             f"{len(old_groups) - 1}).")
        groups, remap = [], np.full(len(old_groups) + 1, -1, dtype=np.int64)
        for i, g in enumerate(old_groups):
            where = np.nonzero(labels == i)[0]
            if where.size and where[-1] - where[0] + 1 != where.size:
                raise ValueError(f"the elements of group {g.name!r} are not contiguous; "
                                 "order the new elements group by group.")
            if where.size:                 # a group left without elements is dropped
                remap[i] = len(groups)
                groups.append(dataclasses.replace(g, start=int(where[0]),
                                                  stop=int(where[-1]) + 1))
        self.elements = elements
        self.groups = tuple(groups)
        self.elements.group = self.device.xp.asarray(remap[labels])   # (-1 stays -1)
        self._new_set()
        if partition is not None:
            self.partition.split(self)                 # this rank's rows of the new set
        return self

    # -- state for checkpoints and restarts ---------------------------------------
    def state_dict(self):
        """Full state as host values: t, iteration, dt (next step), the σ range, the
        planner's state, the arrays (``elements``: x, alpha, sigma, volume, group labels;
        ``tracers``: x) and ``groups`` (:meth:`ElementGroup.as_dict` of each group).

        float64 arrays copied to the host are bitwise equal to the device ones, so
        :meth:`load_state_dict` of this dict continues bitwise like the original run.
        Where the ranks hold the state split by slabs it needs the whole state
        (:meth:`assemble`, collective: RuntimeError before it; never a collective here,
        which a rank that failed alone would wait in for ever).
        """
        if not self.assembled:
            raise RuntimeError("the state is split by slabs over the ranks: call "
                               "assemble() on every rank together before state_dict().")
        return {"t": self.t, "iteration": self.iteration, "dt": self.dt,
                "sigma_range": list(self.sigma_range), **self.planner.state_dict(),
                "elements": self.elements.to_host(), "tracers": self.tracers.to_host(),
                "groups": [g.as_dict() for g in self.groups], "step_strain": self.step_strain}

    def whole_state_dict(self):
        """:meth:`state_dict` with the whole state assembled first where the ranks hold
        it split by slabs (collective): for the callers that every rank reaches together
        (a checkpoint; a step that failed on every rank alike, whose check uses the
        maxima of all ranks; a bad dt, which is every rank's)."""
        self.assemble()
        return self.state_dict()

    def load_state_dict(self, state):
        """Restore a :meth:`state_dict`.

        A state with element volumes, group labels and groups (``elements["volume"]``,
        ``elements["group"]``, ``groups``: snapshot format 3) may hold any number of
        elements (remeshing changes it): its set goes in through :meth:`replace_elements`.
        An older state (formats 1 and 2) must have this model's sizes and keeps its
        volumes and groups.  Either way the time, iteration, dt, σ range and planner state
        are then set exactly as stored (the σ range is not recomputed), and the number of
        tracers must match.
        """
        e, tr = state["elements"], state["tracers"]
        full = "volume" in e and "group" in e and state.get("groups") is not None
        n, m = (np.shape(e["x"])[0] if full else len(self.elements)), len(self.tracers)
        self._check_state_shapes(e, tr, n, m, full)
        dtype = self.elements.x.dtype
        rows = state.get("rows")         # this rank's rows of a state split by slabs
        if rows is not None:
            self._load_own_rows(e, rows, full and not state["groups"], dtype)
        elif full:
            groups = tuple(ElementGroup.from_dict(g) for g in state["groups"])
            try:
                check_group_ranges(groups, to_host(e["group"]))
            except ValueError as exc:
                raise ValueError(f"state groups and group labels disagree: {exc}. The "
                                 "state is corrupted; load another.") from None
            # the ranges are those of the labels: rebuilt equal to the stored groups (the
            # σ range and the planner's depth it resets are set from the state below)
            self._replace_elements(e["x"], e["alpha"], e["sigma"], e["volume"],
                                   to_host(e["group"]), groups)
        else:
            self.elements = make_elements(e["x"], e["alpha"], e["sigma"], self.device, dtype,
                                          volume=self.elements.volume,
                                          group=self.elements.group)
        self.tracers = make_tracers(tr["x"], self.device, dtype)
        self.t = float(state["t"])
        self.iteration = int(state["iteration"])
        self.dt = float(state["dt"])
        self.sigma_range = tuple(float(v) for v in state["sigma_range"])
        self.step_strain = float(state.get("step_strain", math.nan))   # NaN: not stored
        self.planner.load_state_dict(state)
        self.planner.observe_box(self._host_box_stats())
        if self.partition is not None and not full and rows is None:
            self.partition.split(self)                 # this rank's rows of the state read
        return self

    def _load_own_rows(self, e, rows, lattice, dtype):
        """:meth:`load_state_dict` of this rank's rows ``rows`` (r0, r1) of a state that
        the ranks hold split by slabs (``lattice``: a format-3 state without groups):
        they must be this rank's own (ValueError); collective."""
        bad = self.partition is None or not lattice or tuple(rows) != self.partition.rows
        if self.communicator.any(bad):                 # on every rank together
            raise ValueError(f"the state holds rows {tuple(rows)} of a lattice state split "
                             "by slabs, which this model does not hold as its own (rows "
                             f"{None if self.partition is None else self.partition.rows}).")
        self.elements = make_elements(e["x"], e["alpha"], e["sigma"], self.device, dtype,
                                      volume=e["volume"], group=e["group"])
        self.groups = ()
        self._lattice_nodes = None
        self.partition.adopt(self)
        self._new_set()

    def _check_state_shapes(self, e, tr, n, m, full):
        """Raise ValueError when a state's arrays do not have the shapes (n, m) expected."""
        shapes = {"elements.x": (np.shape(e["x"]), (n, 3)),
                  "elements.alpha": (np.shape(e["alpha"]), (n, 3)),
                  "elements.sigma": (np.shape(e["sigma"]), (n,)),
                  "tracers.x": (np.shape(tr["x"]), (m, 3))}
        if full:
            shapes.update({"elements.volume": (np.shape(e["volume"]), (n,)),
                           "elements.group": (np.shape(e["group"]), (n,))})
        for name, (got, want) in shapes.items():
            if tuple(got) != want:
                hint = (" Remeshing in free space changed the element count; this state "
                        "(snapshot format 1 or 2) does not store the element volumes and "
                        "groups that a restart of such a run needs: restart from a snapshot "
                        "of format 3." if not full and name.startswith("elements.")
                        and self.parameters.get("remesh_every") else "")
                raise ValueError(f"state {name} has shape {tuple(got)}; this simulation has "
                                 f"{want}. Load a state of the same case and sizes.{hint}")


def _onto_plane(x, z0, xp):
    """``x`` (n, 3) with every z below ``z0`` set to ``z0`` (device arrays, a new array)."""
    if not x.shape[0]:
        return x
    x = x.copy()
    x[:, 2] = xp.maximum(x[:, 2], x.dtype.type(z0))
    return x
