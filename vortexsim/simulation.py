r"""The simulation driver: state, right-hand side, integrator, time step, safety checks.

    sim = vortexsim.make_case("leapfrog")            # or Simulation(elements, tracers, dt=...)
    sim.run(t_end=20.0)                              # or sim.step(), sim.run(steps=10)
    sim.t, sim.iteration, sim.elements.x, sim.tracers.x, sim.diagnostics()

The run loop (:meth:`Simulation.run`, modelled on Oceananigans' ``Simulation``) owns the
stop criteria (``stop_time``, ``stop_iteration``, ``wall_time_limit``), the ordered dicts
``callbacks`` and ``output_writers`` (name → object with a schedule from
:mod:`vortexsim.schedules`), one progress bar, and restarts: ``run(pickup=...)``
restores the simulation and the state of every writer, callback and schedule.  It knows
writers only through their protocol (``write(sim)``, ``schedule``, ``state_dict()``, ...;
see :meth:`Simulation.run`); the netCDF writers are in :mod:`vortexsim.output.writers`.
Their files are written on the run's output thread (:mod:`vortexsim.writer_thread`,
through :meth:`Simulation.submit_output`) while the next steps run; ``run`` returns
once every file is on disk.

One step (:meth:`Simulation.step`), in this order::

    dt   = step size (fixed, or adaptive: C / max‖∇u‖ of the previous step), shortened to
           land on t_end
    root = FMM root cube: the box of elements, images and tracers at t_n, widened on
           each side by max(`root_slack` × its width, 2 dt U), U = max |u| over the
           stages of the previous step (host numbers from the last check; U is part of
           the state, so restarts stay bitwise)
    y    = scheme.step((x, α, y_tracers), t_n, dt, rhs)   # one summation per stage
    σ    = sqrt(σ² + 2ν dt)                              # core spreading, ν > 0 only
    check (one device→host transfer of 15 numbers): finite state, max |u| over the stages
           ≤ max_speed, stage displacement dt·max|u| within the root slack, elements and
           tracers above a ground plane.  A failed check raises SimulationError and leaves
           the simulation at its last good state (t_n).
    commit: t ← t_n + dt, iteration += 1

Adaptive rule (``adaptive=True``): dt_{n+1} = min(dt_max, max(dt_min, C / G_n)) with
G_n = max over the elements and the stages of step n of the Frobenius norm ‖∇u‖_F
[1/T] and C = ``courant`` (default 0.1); ∇u sets the rates of stretching and of the swirl
around the cores, so C/G bounds the rotation of a core per step.  dt_0 uses an evaluation
at t_0; ``dt`` is dt_max.

Restart: :meth:`Simulation.state_dict` returns t, iteration, the next dt and host copies of
every array; :meth:`Simulation.load_state_dict` restores them, so that a run continued
from a saved state is bitwise identical to an uninterrupted one (same config, same
device).  :attr:`Simulation.config` holds every resolved parameter (plain JSON-able
values); :func:`vortexsim.cases.from_config` rebuilds a case simulation from it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import sys
import time

import numpy as np

from ._names import did_you_mean
from .backend import Device, resolve_device, to_host
from .fmm.fields import CoresNotUniform
from .kernels.cutoff import GAUSSIAN_ORDERS
from .kernels.morton import column_range
from .integrators import get_scheme
from .physics import FMMPlanner, Summation, VortexRHS, make_domain
from .physics.domain import PeriodicBox
from .schedules import due, load_schedule_state, schedule_state
from .spectral import FIELD_SUMS
from .state import (ElementGroup, Elements, Tracers, check_group_ranges, group_labels,
                    make_elements, make_tracers)
from .writer_thread import Job, WriterThread
from . import diagnostics as D

logger = logging.getLogger(__name__)

__all__ = ["Simulation", "SimulationError", "Callback", "RUN_DEFAULTS"]

#: Run parameters of :class:`Simulation` and their defaults (everything but the state).
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


#: devices on which a step that starts on the periodic lattice sums its first stage by
#: plain FFTs (:class:`vortexsim.spectral_lattice.LatticeSum`, the PSE of
#: :mod:`vortexsim.physics.pse_lattice`) and its diagnostics rows fold their field sums
#: (the CuPy path is the same code through ``xp.fft``; its tests, marker ``gpu``, pass on
#: an H200: tests/physics/test_spectral_lattice.py and test_pse_lattice.py)
LATTICE_SUM_DEVICES = ("cpu", "gpu")

#: the statistics of :func:`vortexsim.turbulence.flow_statistics` that a periodic run's
#: diagnostics rows carry under their own names (:meth:`Simulation._lattice_statistics`)
LATTICE_STATISTICS = ("u_rms", "integral_scale", "taylor_scale", "re_lambda",
                      "kolmogorov_eta", "k_max_eta", "skewness", "flatness")

#: element × source pairs up to which the diagnostics' energy and enstrophy are direct
#: double sums (cheaper there than an FMM pass); beyond, the O(N) fields of the FMM
#: (:meth:`vortexsim.physics.summation.Summation.fields`)
DIRECT_DIAGNOSTICS_PAIRS = {"cpu": 1 << 23, "gpu": 1 << 24}


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


class Simulation:
    """Vortex elements and passive tracers advanced in time on one device.

    Parameters
    ----------
    elements : :class:`vortexsim.state.Elements` or tuple (x (N, 3) [L], alpha (N, 3)
        [L³/T], sigma (N,) or scalar [L]), host or device arrays
    tracers : array (M, 3) [L], :class:`vortexsim.state.Tracers` or None
    groups : sequence of :class:`vortexsim.state.ElementGroup` (or dicts), e.g. one per
        ring, for per-ring diagnostics
    t0 : float [T], initial time
    case : str, optional, name of the case that built the state (recorded in ``config``)
    case_params : dict, optional, the case's resolved parameters (recorded in ``config``)
    callbacks : callables ``f(sim)`` called by :meth:`run` after every step (a bare
        :meth:`step` calls none), :class:`Callback` objects
        (a function and its schedule), or a dict name → either; see :meth:`run`
    output_writers : dict name → writer (an object with ``schedule`` and ``write(sim)``,
        e.g. :mod:`vortexsim.output.writers`) or a sequence of writers
    stop_iteration : int, optional, stop :meth:`run` at this iteration
    wall_time_limit : float [s], optional, stop :meth:`run` after this much wall time
    async_output : bool, default True: during :meth:`run` the writers' files are written
        on a background thread (:mod:`vortexsim.writer_thread`) while the next steps run;
        False: each write blocks the run (see :meth:`submit_output`)
    **run : the run parameters of :data:`RUN_DEFAULTS`:

        dt [T] (required), t_end [T], integrator {"euler", "rk2", "rk4"},
        kernel, method {"direct", "fmm", "auto"}, tol, precision {"float64",
        "float32"}, device {"auto", "cpu", "gpu"}, stretching {"transpose",
        "classical"}, nu [L²/T], viscous {"core_spreading", "pse"}, pse_order {2, 4}
        (:func:`vortexsim.physics.pse.pse_rate`), boundary
        {"free", "ground", "periodic"}, ground_z [L], box [L] (the periodic box's edge;
        method "spectral" or "auto", Gaussian kernel, one σ, CPU or GPU), adaptive, courant, dt_min [T],
        max_speed [L/T], root_slack, remesh_every (steps; 0: never), remesh_spacing
        [L], remesh_overlap, remesh_threshold, remesh_project (:meth:`remesh`), progress;
        ``t_end`` is the
        default ``stop_time``

    Attributes
    ----------
    t, iteration, dt (the next step's dt), elements, tracers, groups, config, device,
    summation, rhs, scheme, callbacks, output_writers, stop_time, stop_iteration,
    wall_time_limit, async_output, stop_reason (why the last run stopped), run_timings and
    output_timings (where the last run's wall time went), gil_switch_interval (the thread
    switch interval during :meth:`run`)
    """

    #: [s] the interpreter's thread switch interval during :meth:`run` (None: leave it as
    #: it is; Python's default is 5 ms).  The stepping thread launches a GPU step's ~1 800
    #: kernels, so it must get the GIL back at once whenever another thread (the output
    #: thread's Python between its netCDF calls) took it while the stepping thread waited
    #: on the device: with 5 ms slices each such wait could cost up to 5 ms more.  On an
    #: H100 the leapfrog GPU run's 200 steps took 12.3 s with 5 ms and 11.5 s with 0.2 ms
    #: (the run without output: 11.2 s; ``benchmarks/RESULTS.md``, session 17).
    gil_switch_interval = 2e-4
    #: whether :meth:`run` computes a due diagnostics row during the next step, between
    #: the launch of that step's work and its wait for the device (on the GPU on a second
    #: CUDA stream, beside the step's kernels), instead of before the step
    #: (:meth:`defer_row`); False: at once, as any other output
    overlap_rows = True

    def __init__(self, elements, tracers=None, *, groups=(), t0=0.0, case=None,
                 case_params=None, callbacks=(), output_writers=None, stop_iteration=None,
                 wall_time_limit=None, async_output=True, **run):
        unknown = sorted(set(run) - set(RUN_DEFAULTS))
        if unknown:
            hint = "; ".join(f"{k!r}{did_you_mean(k, RUN_DEFAULTS, parenthetical=True)}"
                             for k in unknown)
            raise TypeError(f"Unknown run parameter(s) {hint}; expected some of "
                            f"{sorted(RUN_DEFAULTS)}.")
        cfg = {**RUN_DEFAULTS, **run}
        self.device: Device = resolve_device(cfg["device"])
        # -- state, validated once -------------------------------------------
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
        n, m = len(self.elements), len(self.tracers)
        for g in self.groups:
            if g.stop > n:
                raise ValueError(f"group {g.name!r} ends at element {g.stop} but there are "
                                 f"only {n} elements.")
        self.elements.group = self.device.xp.asarray(group_labels(self.groups, n))
        # -- time stepping ------------------------------------------------------
        dt = cfg["dt"]
        if dt is None or not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be a finite number > 0 (the time step [T], the largest "
                             f"step when adaptive=True), got {dt!r}.")
        self.scheme = get_scheme(cfg["integrator"])
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
        # -- physics --------------------------------------------------------------
        self.domain = make_domain(cfg["boundary"], cfg["ground_z"], cfg["box"])
        self.domain.check(self.elements.x, "elements")
        self.domain.check(self.tracers.x, "tracers")
        periodic = isinstance(self.domain, PeriodicBox)
        if periodic:
            self.domain.check_strengths(self.elements.alpha)
        n_src = n * (1 + self.domain.n_images_per_element)
        self.summation = Summation(cfg["method"], cfg["kernel"], cfg["tol"], cfg["precision"],
                                   self.device, n_sources=n_src, n_targets=n + m,
                                   box=self.domain.box if periodic else None)
        self.rhs = VortexRHS(self.summation, self.domain, cfg["stretching"], cfg["nu"],
                             cfg["viscous"], cfg["pse_order"])
        self._check_remeshing(cfg)
        self.planner = FMMPlanner(self.domain, self.device.xp,
                                  active=self.summation.method == "fmm",
                                  root_slack=cfg["root_slack"])
        self._run = cfg
        self.t = float(t0)
        self.iteration = 0
        self._sigma_range = self._host_sigma_range()
        self._warned_direct_diagnostics = False
        self._row_sums = None
        self._lattice_checked = None       # elements on the lattice at iteration 0 (viscous)
        self.planner.observe_box(self._host_box_stats())
        # -- an evaluation at t0: the blow-up bound and the first adaptive dt ---
        speed, grad = self._initial_maxima()
        self.planner.speed = speed
        if cfg["max_speed"] is None:
            cfg["max_speed"] = 100.0 * speed if speed > 0 else math.inf
        if not float(cfg["max_speed"]) > 0:
            raise ValueError(f"max_speed must be > 0, got {cfg['max_speed']!r}.")
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
        self.dt = self._adaptive_dt(grad) if cfg["adaptive"] else float(dt)
        self.config = {"case": case, **(case_params or {}), **cfg, "t0": float(t0),
                       "groups": [g.as_dict() for g in self.groups],
                       "n_elements": n, "n_tracers": m}
        logger.info("Simulation %s: %d elements, %d tracers, %s on %s, %s dt=%g",
                    case or "", n, m, self.summation.method, self.device.describe(),
                    self.scheme.name, self.dt)
        self._init_loop(callbacks, output_writers, stop_iteration, wall_time_limit,
                        async_output)

    # -- host-side bookkeeping ------------------------------------------------
    def _host_sigma_range(self):
        s = to_host(self.elements.sigma)
        return float(s.min()), float(s.max())

    def _host_box_stats(self):
        """Host [lo, hi] of the elements, then of the tracers (one transfer)."""
        xp = self.device.xp
        stats = xp.concatenate(column_range(self.elements.x, xp))
        if len(self.tracers):
            stats = xp.concatenate([stats, *column_range(self.tracers.x, xp)])
        return to_host(stats)

    def _initial_maxima(self):
        """Host max |u| (elements and tracers) and max ‖∇u‖_F (elements) at the current
        state, from an evaluation planned like a step's first stage (its depth is kept)."""
        plan, _ = self.planner.step(self.iteration, 0.0)
        self._rates_with(plan)
        self.planner.depth = plan.depth
        s = to_host(self.rhs.stage_max)
        if not np.isfinite(s).all():
            raise ValueError("the initial state gives a non-finite velocity; check that "
                             "sigma > 0 and that no two elements coincide with a singular kernel.")
        return float(np.sqrt(s[0])), float(np.sqrt(s[1]))

    def _adaptive_dt(self, grad):
        cfg = self._run
        if not grad > 0:
            return float(cfg["dt"])
        return float(min(cfg["dt"], max(cfg["dt_min"], cfg["courant"] / grad)))

    # -- stepping -----------------------------------------------------------------
    def step(self, t_end=None):
        """Advance by one step (shortened so as not to pass ``t_end``); see the module docstring.

        Raises :class:`SimulationError` (state unchanged) when a safety check fails.
        Inside :meth:`run`, the diagnostics rows waiting for this step
        (:meth:`defer_row`) run between the launch of its work and its one transfer.
        """
        dt = self.dt
        if t_end is not None:
            remaining = float(t_end) - self.t
            if remaining <= 0:
                raise ValueError(f"t_end = {t_end} is not after the current time t = {self.t}.")
            if remaining < dt * (1 + 1e-9):
                dt = remaining
        if not (math.isfinite(dt) and dt > 0):
            raise SimulationError(f"non-finite or non-positive time step dt = {dt} at step "
                                  f"{self.iteration + 1}, t = {self.t}.", self.iteration + 1,
                                  self.t, self.state_dict())
        xp = self.device.xp
        el, tr = self.elements, self.tracers
        diffuse = self._lattice_diffusion()
        alpha0 = el.alpha if diffuse is None else diffuse(el.alpha, 0.5 * dt)
        plan, margin = self.planner.step(self.iteration, dt)
        self.rhs.begin_step(self.t, el.sigma, self._sigma_range, plan=plan,
                            volume=el.volume, lattice=self._lattice_start())
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
        if self._rows:
            # the rows of the state this step started from, while its work runs on the
            # device (nothing is committed yet: they see that state)
            self._run_rows(window=True)
        stats = to_host(stats)
        self._check(stats, dt, margin)
        # commit
        self.elements = dataclasses.replace(el, x=x1, alpha=alpha1, sigma=sigma1)
        self.tracers = Tracers(y1)
        self.t += dt
        self.iteration += 1
        self.planner.commit(plan, np.sqrt(stats[1]), stats[3:])
        # the cores' range as the viscous term moves it (core spreading: σ² + 2ν dt; PSE
        # keeps the cores)
        self._sigma_range = self.rhs.advance_sigma_range(self._sigma_range, dt)
        grad = float(np.sqrt(stats[2]))
        if self._run["adaptive"]:
            self.dt = self._adaptive_dt(grad)
        every = self._run["remesh_every"]
        if every and self.iteration % every == 0:
            self.remesh()
        if diffuse is not None:                     # the second half of the split step
            self.elements = dataclasses.replace(self.elements,
                                                alpha=diffuse(self.elements.alpha, 0.5 * dt))
        return self

    def _lattice_diffusion(self):
        """``diffuse(alpha, tau)`` of :func:`vortexsim.physics.lattice_viscosity.diffuse_lattice`
        on this run's lattice when ``viscous = "lattice"`` and ν > 0 (the step is then
        split: half a step of exact lattice diffusion, the inviscid step, the remeshing,
        the other half), else None.  The elements start every step on the lattice in
        remesh order (remesh_every = 1); at iteration 0 they must have been placed there
        (a clear error otherwise)."""
        if not (self.rhs.viscous == "lattice" and self.rhs.nu > 0):
            return None
        from .physics.lattice_viscosity import diffuse_lattice  # noqa: PLC0415
        from .physics.remesh import periodic_nodes  # noqa: PLC0415
        box = self.domain.box
        n = periodic_nodes(box, float(self._run["remesh_spacing"]))
        if self.iteration == 0 and not self._starts_on_lattice(n):
            raise ValueError(
                "viscous='lattice' needs the elements on the remeshing lattice at the start "
                f"(the {n}^3 nodes (i, j, k) L/n in the order (i n + j) n + k, as the "
                "periodic cases place them); remesh them first (Simulation.remesh()) or use "
                "viscous='pse'.")
        nu = self.rhs.nu
        return lambda alpha, tau: diffuse_lattice(alpha, n, box, nu, tau)

    def _starts_on_lattice(self, n):
        """Whether the elements are the n³ lattice nodes in remesh order (host check, once
        per construction)."""
        if self._lattice_checked is None:
            x = to_host(self.elements.x)
            ok = x.shape == (n ** 3, 3)
            if ok:
                h = self.domain.box / n
                g = np.arange(n) * h
                nodes = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
                ok = bool(np.abs(x - nodes).max() <= 1e-9 * h)
            self._lattice_checked = ok
        return self._lattice_checked

    def _lattice_start(self):
        """``(n, x)`` when this step starts with the elements ``x`` on the periodic n³
        lattice in remesh order and its first stage can sum on it by plain FFTs
        (:class:`vortexsim.spectral_lattice.LatticeSum`): the spectral sum, no tracers,
        and a remeshing at the end of the last step, on the devices of
        :data:`LATTICE_SUM_DEVICES`.  A function of (iteration, config) alone, so that a
        restart takes the same path and continues bitwise; else None."""
        n = self._on_lattice()
        if n is None or self.summation.method != "spectral" or len(self.tracers):
            return None
        return n, self.elements.x

    def _on_lattice(self):
        """:meth:`_remeshed_lattice` on a device of :data:`LATTICE_SUM_DEVICES`; else
        None."""
        return self._remeshed_lattice() if self.device.kind in LATTICE_SUM_DEVICES else None

    def _remeshed_lattice(self):
        """n when the elements sit on the periodic n³ lattice in remesh order because the
        last step ended with a remeshing; else None (a function of the iteration and the
        config alone)."""
        every = self._run["remesh_every"]
        if not (every and self.iteration > 0 and self.iteration % every == 0
                and isinstance(self.domain, PeriodicBox)):
            return None
        from .physics.remesh import periodic_nodes  # noqa: PLC0415
        return periodic_nodes(self.domain.box, float(self._run["remesh_spacing"]))

    def _check_remeshing(self, cfg):
        """Validate the remeshing parameters (``remesh_*``) once, at construction."""
        every = cfg["remesh_every"]
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 0:
            raise ValueError(f"remesh_every must be an integer >= 0 (steps between two "
                             f"remeshings; 0: never), got {every!r}.")
        project = cfg["remesh_project"]
        if not isinstance(project, (bool, np.bool_)):
            raise ValueError(f"remesh_project must be true or false, got {project!r}.")
        if project and not (every and isinstance(self.domain, PeriodicBox)):
            raise ValueError("remesh_project = true projects the periodic lattice's strengths "
                             "after each remeshing: it needs boundary = 'periodic' and "
                             f"remesh_every > 0 (got boundary = {self.domain.name!r}, "
                             f"remesh_every = {every}).")
        if self.rhs.nu > 0 and self.rhs.viscous == "lattice" and every != 1:
            raise ValueError("viscous='lattice' diffuses the remeshing lattice around every "
                             f"step: it needs remesh_every = 1 (got {every}).")
        if not every:
            return
        h = cfg["remesh_spacing"]
        if h is None or not (isinstance(h, (int, float)) and math.isfinite(h) and h > 0):
            raise ValueError(f"remesh_every = {every} needs the lattice spacing "
                             f"remesh_spacing = h > 0 [L], got {h!r}.")
        if not float(cfg["remesh_overlap"]) > 0:
            raise ValueError(f"remesh_overlap must be > 0, got {cfg['remesh_overlap']!r}.")
        if not 0 <= float(cfg["remesh_threshold"]) < 1:
            raise ValueError(f"remesh_threshold must be in [0, 1), got "
                             f"{cfg['remesh_threshold']!r}.")
        if self.rhs.nu > 0 and self.rhs.viscous == "core_spreading":
            raise ValueError("remeshing resets every core to remesh_overlap × h, which undoes "
                             "core spreading: with nu > 0 remesh with viscous='pse', or set "
                             "remesh_every = 0.")
        if self.domain.n_images_per_element:
            raise ValueError(f"remeshing with boundary={self.domain.name!r} is not built yet "
                             "(the lattice would reach below the plane); use free space or "
                             "the periodic box, or remesh_every = 0.")
        if self.rhs.viscous == "pse" and self.rhs.nu > 0 and len(self.groups) > 1 \
                and not isinstance(self.domain, PeriodicBox):
            raise ValueError("viscous='pse' with remeshing of several groups in free space is "
                             "not built yet: each group is remeshed onto its own lattice, and "
                             "PSE would count the volume of the nodes they share twice.")
        if isinstance(self.domain, PeriodicBox):
            from .physics.remesh import periodic_nodes  # noqa: PLC0415
            periodic_nodes(self.domain.box, float(h))   # L/h an integer >= 4, or a clear error

    def remesh(self):
        """Interpolate the elements onto the lattice of spacing ``remesh_spacing`` with M4′
        (:func:`vortexsim.physics.remesh.remesh`): in the periodic box all (L/h)³ nodes,
        in free space the nodes above ``remesh_threshold``; σ = ``remesh_overlap`` × h,
        V = h³.  Called by :meth:`step` every ``remesh_every`` steps (the schedule is the
        iteration count, so a restart keeps it).  In free space each group (a ring) is
        remeshed on its own and keeps its elements (nodes may then coincide across
        groups), so that per-group diagnostics go on; in the box the lattice holds them
        all and the groups are dropped, and with ``remesh_project`` the lattice strengths
        are made divergence-free with zero sum
        (:func:`vortexsim.physics.projection.project_solenoidal`)."""
        from .physics.remesh import periodic_nodes, remesh  # noqa: PLC0415
        cfg, el, xp = self._run, self.elements, self.device.xp
        if cfg.get("remesh_spacing") is None:
            raise ValueError("remesh() needs the lattice spacing: build the simulation with "
                             "remesh_spacing = h [L].")
        h, overlap = float(cfg["remesh_spacing"]), float(cfg["remesh_overlap"])
        if isinstance(self.domain, PeriodicBox):
            out = remesh(el.x, el.alpha, h, box_length=self.domain.box, overlap=overlap)
            alpha = out.alpha
            if cfg["remesh_project"]:
                from .physics.projection import project_solenoidal  # noqa: PLC0415
                alpha = project_solenoidal(alpha, periodic_nodes(self.domain.box, h))
            return self.replace_elements(out.x, alpha, out.sigma, volume=out.volume)
        # free space: the groups' ranges, then the elements outside every group
        ranges = [(g.start, g.stop) for g in self.groups]
        inside = np.zeros(len(el), dtype=bool)
        for a, b in ranges:
            inside[a:b] = True
        rest = np.nonzero(~inside)[0]
        parts = [(el.x[a:b], el.alpha[a:b], i) for i, (a, b) in enumerate(ranges)]
        if rest.size:
            idx = xp.asarray(rest)
            parts.append((el.x[idx], el.alpha[idx], -1))
        outs = [(remesh(x, a, h, threshold=float(cfg["remesh_threshold"]), overlap=overlap),
                 label) for x, a, label in parts]
        x, alpha, sigma, volume = (xp.concatenate([getattr(o, name) for o, _ in outs])
                                   for name in ("x", "alpha", "sigma", "volume"))
        labels = np.concatenate([np.full(len(o.x), label) for o, label in outs])
        return self.replace_elements(x, alpha, sigma, volume=volume, group=labels)

    def _check(self, stats, dt, margin):
        """Raise SimulationError (naming step, time and likely cause) when a check fails."""
        step, t = self.iteration + 1, self.t
        finite = stats[0] == 1.0 and np.isfinite(stats[1:3]).all()
        speed = float(np.sqrt(stats[1])) if np.isfinite(stats[1]) else math.inf
        grad = float(np.sqrt(stats[2])) if np.isfinite(stats[2]) else math.inf
        cause = (f"Likely causes: dt too large (dt = {dt:g}, dt·max|∇u| = {dt * grad:.3g}; keep "
                 f"it ≲ 0.5, or use adaptive=True), or σ too small for the element spacing "
                 f"(min σ = {self._sigma_range[0]:g}; the spacing should not exceed σ).")
        problem = None
        if not finite:
            problem = "the state became NaN/inf"
        elif speed > self._run["max_speed"]:
            problem = (f"max |u| = {speed:.4g} exceeds the bound max_speed = "
                       f"{self._run['max_speed']:.4g} (blow-up)")
        elif margin and dt * speed > margin:
            problem = (f"points moved up to {dt * speed:.3g} within one step, beyond the FMM "
                       f"root-cube margin {margin:.3g} (raise root_slack = "
                       f"{self._run['root_slack']:g}, or lower dt)")
        elif self.domain.name == "ground":
            # stats: [finite, |u|², ‖∇u‖², lo x1 (3), hi x1 (3), lo y1 (3), hi y1 (3)]
            lo_z = min(stats[5], stats[11] if len(stats) == 15 else math.inf)
            lo, hi = self.planner.box
            if lo_z < self.domain.z0 - 1e-12 * max(1.0, float((hi - lo).max())):
                problem = (f"a point crossed the ground plane z0 = {self.domain.z0} "
                           f"(min z = {lo_z:.4g})")
        if problem is not None:
            msg = (f"Simulation stopped at step {step} (t = {t:.6g} → {t + dt:.6g}): {problem}. "
                   f"{cause} The simulation keeps the last good state (t = {t:.6g}); "
                   "SimulationError.state holds it for a checkpoint.")
            logger.error(msg)
            raise SimulationError(msg, step, t, self.state_dict())

    # -- the run loop ----------------------------------------------------------------
    def _init_loop(self, callbacks, output_writers, stop_iteration, wall_time_limit,
                   async_output):
        """The run loop's part of the constructor: ``callbacks`` and ``output_writers``
        become ordered dicts (:class:`Components`), the stop criteria are set (the
        config's ``t_end`` is the default ``stop_time``), and the output mode."""
        self.callbacks = Components("callback", callbacks)
        self.output_writers = Components("output writer", output_writers or {})
        t_end = self._run["t_end"]
        self.stop_time = None if t_end is None else float(t_end)
        self.stop_iteration = None if stop_iteration is None else \
            _whole("stop_iteration", stop_iteration)
        if wall_time_limit is not None and not (math.isfinite(float(wall_time_limit))
                                                and float(wall_time_limit) > 0):
            raise ValueError(f"wall_time_limit must be a number of seconds > 0 or None, got "
                             f"{wall_time_limit!r}.")
        self.wall_time_limit = None if wall_time_limit is None else float(wall_time_limit)
        self.stop_reason = None
        self._stop_requested = False
        self.async_output = bool(async_output)
        self.run_timings, self.output_timings, self._output_waited = {}, {}, 0.0
        self._setup_seconds = 0.0
        self.step_extremes = {}
        self._writer = None            # the run's WriterThread (async_output, inside run())
        self._output_call = None       # the writer being called: _OutputCall
        self._owed = []                # (schedule, state) of writes being undone
        self._held = None              # a writer's deferred write, not queued yet: _Held
        self._defer_ctx = None         # (name, schedule, state before) of defer_row
        self._rows = []                # rows waiting for the next step: (ctx, job)
        self._window_seconds = 0.0     # main-thread time of rows run inside steps
        self._row_stream = None        # the GPU's second CUDA stream for those rows

    def run(self, t_end=None, steps=None, progress=None, *, pickup=None):
        """Step until a stop criterion is met; callbacks and output writers act on their
        schedules after each step, and each step is shortened so as to land exactly on
        the stop time and on the next time of every time-based schedule.

        Parameters
        ----------
        t_end : float [T], optional, stop at this time (``stop_time``)
        steps : int, optional, stop after this many more steps (``stop_iteration =
            iteration + steps``).  Given ``t_end`` or ``steps``, both criteria are set
            from them (None where not given); with neither, the criteria stay as they
            are: the config's ``t_end``, those set on the simulation, or those restored
            by ``pickup``.  ``wall_time_limit`` [s] always applies when set.
        progress : bool, a progress bar (t, steps/s, ETA); default: the config's
        pickup : continue from a checkpoint first (:meth:`pickup`): a snapshot path,
            ``"latest"``/True or an iteration (read by the output writer with
            ``read_checkpoint``), or a dict (:meth:`checkpoint_state`, or a
            :meth:`state_dict` alone).  ``run(pickup=p)`` is ``pickup(p); run()``.

        Returns self, once every file of the run is on disk; :attr:`stop_reason` says
        why the run stopped: ``"stop_time"``, ``"stop_iteration"``,
        ``"wall_time_limit"`` or ``"interrupted"`` (after :meth:`request_stop`, e.g.
        from a signal handler).

        Raises ValueError("No stopping criterion ...") when nothing would stop the run,
        :class:`SimulationError` when a step fails a safety check (the simulation stays
        at its last good state, which the writers have checkpointed), and the exception
        of a failed file write (after the ``"error"`` checkpoint).

        Order of operations::

            pickup(pickup)                       # if given
            stop_time, stop_iteration ← t_end, iteration + steps   # if given
            initialize()                         # schedules, callbacks, writers
            for each writer:   if writer.schedule(sim): writer.write(sim)   # initial output
            for each callback: callback.schedule(sim)    # brought up to date, not called
            while not (t ≥ stop_time or iteration ≥ stop_iteration or wall ≥ limit):
                if request_stop() was called: finalize("interrupted"); return
                target = min(stop_time, next_time of every schedule after t)
                step(target)                     # dt shortened to land on target
                    SimulationError: finalize("failed"); raise
                raise the error of a background write that failed, if any
                for each callback: if schedule is None or schedule(sim): callback(sim)
                for each writer:   if schedule is not None and schedule(sim): write(sim)
            finalize("done")
            any other exception: finalize("error"); raise
            KeyboardInterrupt (e.g. a second Ctrl-C): give up the pending writes; raise

            finalize(reason): flush the output thread (wait for every pending write);
                              finalize(sim, reason) of each callback and writer;
                              flush again

        "t ≥ stop_time" and the schedules' times count as reached within a relative
        1e-10 (:func:`vortexsim.schedules.due`).  ``finalize(reason)`` calls
        ``finalize(sim, reason)`` of every callback and writer that has one, in order
        (the snapshot writer writes the final, interrupted, last good or error state;
        the diagnostics writer a final row; the plot writer the plot).  Callbacks are
        ``func(sim)`` (plain callables: after every step) or :class:`Callback`; writers
        have ``schedule`` (None: acts only in ``finalize``) and ``write(sim)``, and
        optionally ``initialize(sim)``, ``finalize(sim, reason)``, ``state_dict()`` and
        ``load_state_dict(state)`` (what checkpoints store and :meth:`pickup` restores).

        Output (:attr:`async_output`, default True): a writer captures what it writes on
        the main thread and hands the file I/O to :meth:`submit_output`, which queues it
        on the run's output thread (:class:`vortexsim.writer_thread.WriterThread`: one
        thread, submission order, at most 2 pending writes); a writer without it writes
        at once.  A write that fails on the thread is raised here at the next step, the
        next write or the flush of ``finalize``, and the run then ends like a failed
        write of a synchronous run: the output stays owed by its schedule and the
        writers' state is that of the files on disk, ``finalize("error")`` checkpoints
        the state of the last completed step, and the write's exception is raised.
        """
        if pickup is not None:
            self.pickup(pickup)
        if steps is not None and (int(steps) != steps or steps < 0):
            raise ValueError(f"steps must be an integer >= 0, got {steps!r}.")
        if t_end is not None and not math.isfinite(float(t_end)):
            raise ValueError(f"t_end must be finite, got {t_end!r}.")
        if t_end is not None or steps is not None:
            self.stop_time = None if t_end is None else float(t_end)
            self.stop_iteration = None if steps is None else self.iteration + int(steps)
        if self.stop_time is None and self.stop_iteration is None and \
                self.wall_time_limit is None:
            raise ValueError("No stopping criterion: pass t_end or steps (or set t_end in the "
                             "config, or stop_time, stop_iteration or wall_time_limit on the "
                             "simulation).")
        show = self._run["progress"] if progress is None else progress
        t_setup = time.perf_counter()
        # the writers import their libraries here, before the first step (on a thread
        # beside the steps, Python holding the GIL would hold up their kernel launches)
        self.initialize()
        self._setup_seconds = time.perf_counter() - t_setup
        self.stop_reason = None
        #: main-thread wall seconds and counts of this run's parts: "steps" and each
        #: writer and callback by name ({name: [seconds, count]}; waits for the output
        #: thread excluded), logged at the end with output_timings
        self.run_timings = {"steps": [0.0, 0]}
        #: this run's first step and slowest step: {"first": seconds, "slowest": (seconds,
        #: iteration)} (first-use costs — kernel loads, tables of a new tree depth — show
        #: there; logged with the steps' total)
        self.step_extremes = {}
        #: the output thread's part, by writer name: {name: {"write": seconds written
        #: on the thread, "waited": seconds the main thread waited for them, "jobs":
        #: outputs written, "files": file writes (fewer where deferred writes were
        #: replaced, see submit_output)}}
        self.output_timings, self._output_waited = {}, 0.0
        self._window_seconds = 0.0
        switch = _GilSlices(self.gil_switch_interval)
        self._writer = WriterThread() if self.async_output else None
        start, n0, t_start = time.perf_counter(), self.iteration, self.t
        bar = _ProgressBar(False, self)
        try:
            for name, writer in self.output_writers.items():   # the state at the start
                self._write_if_due(name, writer)
            for callback in self.callbacks.values():
                if callback.schedule is not None:
                    callback.schedule(self)
            bar = _ProgressBar(show, self)
            while not self._stop_criterion(start):
                if self._stop_requested:
                    self._stop_requested = False
                    self.stop_reason = "interrupted"
                    bar.close()
                    self._finalize("interrupted")
                    self._close_output()
                    self._log_timings(time.perf_counter() - start)
                    return self
                try:
                    before, rows = self.run_timings["steps"][0], self._window_seconds
                    with self._timed("steps"):
                        self.step(self._next_target())
                    # the rows run inside the step count as their writer's time
                    self.run_timings["steps"][0] -= self._window_seconds - rows
                    self._note_step(self.run_timings["steps"][0] - before)
                except SimulationError:
                    bar.close()
                    self._finalize("failed")
                    raise
                self._poll_output()              # a background write that failed
                for name, callback in self.callbacks.items():
                    if callback.schedule is None or callback.schedule(self):
                        self._run_rows()         # a callback acts on the state after them
                        with self._timed(name):
                            callback(self)
                for name, writer in self.output_writers.items():
                    self._write_if_due(name, writer)
                bar.update(self)
            bar.close()      # (a stop requested during the last step: the run is complete)
            self._finalize("done")
        except (SimulationError, KeyboardInterrupt):
            bar.close()
            raise
        except Exception:
            bar.close()
            self._finalize("error")
            raise
        finally:        # after an interruption (a second Ctrl-C): gives up pending writes
            try:
                self._drop_rows()
                self._close_output()
            finally:        # even when a Ctrl-C cuts that short
                switch.restore()
        wall = time.perf_counter() - start
        done = self.iteration - n0
        if done:
            logger.info("ran %d steps (t %.6g → %.6g) in %.3g s: %.3g steps/s, %.3g element "
                        "steps/s", done, t_start, self.t, wall, done / wall,
                        done * len(self.elements) / wall)
        self._log_timings(wall)
        return self

    def _stop_criterion(self, start):
        """Set and return :attr:`stop_reason` when a stop criterion is met (else None)."""
        if self.stop_iteration is not None and self.iteration >= self.stop_iteration:
            self.stop_reason = "stop_iteration"
        elif self.stop_time is not None and due(self.t, self.stop_time):
            self.stop_reason = "stop_time"
        elif self.wall_time_limit is not None and \
                time.perf_counter() - start >= self.wall_time_limit:
            self.stop_reason = "wall_time_limit"
        return self.stop_reason

    def _next_target(self):
        """The time the next step must not pass: the stop time and the next time of every
        time-based schedule (None: no such time)."""
        target = self.stop_time
        for comp in (*self.callbacks.values(), *self.output_writers.values()):
            t_next = getattr(comp.schedule, "next_time", None)
            if t_next is not None and t_next > self.t and (target is None or t_next < target):
                target = t_next
        return target

    def _finalize(self, reason):
        """Flush the pending writes, ``finalize(sim, reason)`` of every callback and writer,
        flush again.  With ``reason == "error"`` nothing raises (the run's own exception
        is the one to report): failures are logged."""
        self._stop_requested = False      # a request is spent by the run that ends here
        if reason == "error":
            self._drop_rows()
        else:
            self._run_rows()
        self._flush_after(reason)
        for name, comp in (*self.callbacks.items(), *self.output_writers.items()):
            finalize = getattr(comp, "finalize", None)
            if finalize is None:
                continue
            if reason != "error":
                with self._timed(name), self._calling(name):
                    finalize(self, reason)
                continue
            try:                      # the run's own exception is the one to report
                with self._calling(name):
                    finalize(self, reason)
            except Exception as exc:  # noqa: BLE001
                logger.error("%s could not finalize after the error: %s",
                             type(comp).__name__, exc)
        self._flush_after(reason)

    def _flush_after(self, reason):
        if reason != "error":
            self.flush_output()
            return
        try:
            self.flush_output()
        except Exception as exc:  # noqa: BLE001 - the run's own exception is the one to report
            logger.error("an output write failed after the error: %s", exc)

    # -- output: the writers' files, at once or on the output thread -------------------------
    def submit_output(self, func, undo=None, *, defer=False):
        """Write files: ``func()`` runs on the run's output thread (inside :meth:`run`, with
        :attr:`async_output`), after every write submitted before it, or at once.

        The output protocol for writers: a writer's ``write(sim)`` or ``finalize(sim,
        reason)`` captures what it writes (host copies) and hands the file I/O to this.
        ``func`` must use only what was captured (no device arrays, no simulation
        state): it runs while the next steps are computed.  ``undo()`` (optional, main
        thread) forgets what the writer recorded for this output if the write fails or
        is discarded after an earlier failure; the writer's schedule is then restored
        as well (to its state before the newest such output), so that the output stays
        owed.  Raises the exception of a write that failed before (see :meth:`run`);
        waits while two writes are pending.

        ``defer=True`` (a file rewritten in full at every output, e.g. the diagnostics
        file): the write may wait.  Inside :meth:`run` a writer's deferred write is held,
        not queued, until the first of: the same writer submits again (the newer write
        replaces it, so it must write everything the held one would have), another
        writer or a callback submits a write (which then follows it: a snapshot
        finds the files written before it complete), or a flush (:meth:`flush_output`,
        and so the end of every run, whatever its reason).  A replaced write keeps its
        ``undo`` and schedule: when the write that replaced it fails, both are undone,
        newest first, as if each had been written and failed.  Elsewhere (outside
        :meth:`run`, or not from a writer) ``defer`` writes at once.
        """
        call = self._output_call
        name, schedule, before = ("output", None, None) if call is None else \
            (call.name, call.schedule, call.before)
        if call is not None:
            call.submitted = True

        def rollback():
            if undo is not None:
                undo()
            if schedule is not None:
                self._owed.append((schedule, before))

        with self._owing():
            held, self._held = self._held, None
            rollbacks, outputs = [rollback], 1
            if held is not None and held.name == name:     # replaced by this write
                rollbacks += held.rollbacks
                outputs += held.outputs
            elif held is not None:
                self._write(held, discarded=rollback)
            if defer and call is not None:
                held = _Held(name, func, rollbacks, outputs)
                if self._writer is not None:     # waits and fails as a submission would
                    self._writer.admit(Job(name, func, held.undo))
                self._held = held
                return
            self._write(_Held(name, func, rollbacks, outputs))

    def _write(self, held, discarded=None):
        """Queue the write ``held`` (:class:`_Held`) on the output thread, or write it now.

        ``discarded``: the rollback of the write that is to follow this one, which is
        then not queued if this one cannot be (an earlier failure raised here, or this
        one failed when written now); it is undone first, being the newer."""
        queued = False

        def undo():
            if discarded is not None and not queued:
                discarded()
            held.undo()

        if self._writer is not None:
            self._writer.submit(Job(held.name, held.func, undo, outputs=held.outputs))
            queued = True
            return
        try:
            held.func()
        except BaseException:
            undo()
            raise
        queued = True

    def flush_output(self):
        """Write the deferred writes (see :meth:`submit_output`) and wait until every file
        handed to :meth:`submit_output` is on disk; raises the exception of a write that
        failed.  Nothing to do outside :meth:`run`."""
        with self._owing():
            held, self._held = self._held, None
            if held is not None:
                self._write(held)
            if self._writer is not None:
                self._writer.flush()

    def _poll_output(self):
        """Raise the exception of a write that failed on the output thread (no wait)."""
        if self._writer is not None:
            with self._owing():
                self._writer.poll()

    @contextlib.contextmanager
    def _owing(self):
        """Restore the schedules of the writes undone in the block (failed, or discarded
        after a failure; undone newest first): each writer's to its state before the
        newest of them, so that one output stays owed, as after a failed synchronous
        write, and a restart writes it at once and is back on its times."""
        try:
            yield
        finally:
            owed, self._owed = self._owed, []
            for schedule, before in reversed(owed):      # oldest first: the newest wins
                load_schedule_state(schedule, before)

    @contextlib.contextmanager
    def _calling(self, name, schedule=None, before=None):
        """The writer ``name`` is being called (for :meth:`submit_output`): its schedule
        and the schedule's state before it fired (None: a finalize)."""
        outer = self._output_call
        self._output_call = call = _OutputCall(name, schedule, before)
        try:
            yield call
        finally:
            self._output_call = outer

    def _waited(self):
        return 0.0 if self._writer is None else self._writer.waited

    def _close_output(self):
        """Stop the run's output thread and keep its timings in :attr:`output_timings`.
        Idle after the final flush; with writes still pending (a KeyboardInterrupt, e.g.
        a second Ctrl-C, cut the run short) it is aborted: the queued writes are given
        up and the one in flight gets up to 5 s to finish (no partial file)."""
        writer, self._writer = self._writer, None
        held, self._held = self._held, None
        with self._owing():
            if held is not None:            # never queued: given up like the queued ones
                held.undo()
            if writer is None:
                return
            if writer.pending:
                writer.abort(timeout=5.0)
            else:
                writer.close()
        self.output_timings = {name: {"write": w, "waited": d, "jobs": n, "files": f}
                               for name, (w, d, n, f) in writer.timings.items()}
        self._output_waited = writer.waited

    @contextlib.contextmanager
    def _timed(self, name, count=True):
        """Add the main-thread wall time of the block (less its waits for the output
        thread) to ``run_timings[name]`` (and count it, unless ``count`` is False: the
        rest of a call already counted, a row of :meth:`defer_row`)."""
        t0, w0 = time.perf_counter(), self._waited()
        try:
            yield
        finally:
            entry = self.run_timings.setdefault(name, [0.0, 0])
            entry[0] += time.perf_counter() - t0 - (self._waited() - w0)
            entry[1] += int(count)

    def _note_step(self, seconds):
        """Record a completed step's wall time in :attr:`step_extremes`."""
        ext = self.step_extremes
        ext.setdefault("first", seconds)
        if seconds > ext.get("slowest", (-1.0, 0))[0]:
            ext["slowest"] = (seconds, self.iteration)

    def _log_timings(self, wall):
        """Where the run's wall time went: one line for the main thread (steps, each writer
        and callback, the waits for the output thread), one for the output thread."""
        waited = self._output_waited
        ext = self.step_extremes

        def entry(name, sec, n):
            if name == "steps" and "slowest" in ext:
                slow, at = ext["slowest"]
                return (f"steps {sec:.3g} s ({n}; first {ext['first']:.3g} s, slowest "
                        f"{slow:.3g} s at iteration {at})")
            return f"{name} {sec:.3g} s ({n})"
        parts = [entry(name, sec, n) for name, (sec, n) in self.run_timings.items() if n]
        if self._window_seconds:
            parts.append(f"of these, rows run inside steps "
                         f"{self._window_seconds:.3g} s")
        if self.output_timings:
            parts.append(f"waiting for the output thread {waited:.3g} s")
        rest = wall - sum(sec for sec, _ in self.run_timings.values()) - waited
        logger.info("time: %s; other %.3g s; wall %.3g s (set-up before the first step "
                    "%.3g s)", ", ".join(parts), rest, wall, self._setup_seconds)
        if self.output_timings:
            out = self.output_timings.values()
            written = sum(o["write"] for o in out)
            logger.info("output thread: %s; %.3g s of %.3g s overlapped with the run",
                        ", ".join(f"{name} {o['write']:.3g} s ({_jobs(o)}, waited "
                                  f"{o['waited']:.3g} s)"
                                  for name, o in self.output_timings.items()),
                        max(written - sum(o["waited"] for o in out), 0.0), written)

    def _write_if_due(self, name, writer):
        """``writer.write(self)`` when its schedule is due; a write that raises leaves the
        schedule as it was (a checkpoint then still owes that output): here, or through
        :meth:`submit_output` when the write fails on the output thread."""
        if writer.schedule is None:
            return
        before = schedule_state(writer.schedule)
        if writer.schedule(self):
            self._run_rows()                      # a writer acts on the state after them
            self._defer_ctx = (name, writer.schedule, before)
            try:
                self._writer_call(name, writer.schedule, before, lambda: writer.write(self))
            finally:
                self._defer_ctx = None

    def _writer_call(self, name, schedule, before, fn, count=True):
        """``fn()`` as a call of the writer ``name`` whose ``schedule`` fired from the
        state ``before``: timed under its name (and counted, unless ``count`` is False),
        and when it raises, the schedule is left as it was unless a submitted write's
        rollback already restored it."""
        with self._calling(name, schedule, before) as call:
            try:
                with self._timed(name, count):
                    fn()
            except BaseException:
                if not call.submitted:            # (else its rollback restored it)
                    load_schedule_state(schedule, before)
                raise

    def defer_row(self, job):
        """Run ``job()``, a writer's computation of a diagnostics row of the current state
        (:meth:`diagnostics`) and what it does with it, during the next step.

        Inside :meth:`run` (:attr:`overlap_rows`), from a writer's ``write``: ``job`` runs
        in the next :meth:`step` between the launch of its work and its wait for the
        device, while nothing of that step is committed (so it sees this state), on the
        GPU on a second CUDA stream: the row's kernels and host round trips overlap the
        step's kernels instead of leaving the device idle between steps (on an H100 a
        leapfrog GPU row took 8–11 ms of a 50 ms step).  It runs before that instead when
        anything else acts first (a due callback or writer, the end of the run), and is
        given up with its schedule rolled back when the run fails or a second Ctrl-C
        cuts it short.  Elsewhere, or where a row could share device tables with the step
        (:meth:`_rows_overlap`), ``job()`` runs at once.  A ``job`` that raises inside a
        step fails the run before the step commits, as a failed write does."""
        if self._defer_ctx is None or not self.overlap_rows or not self._rows_overlap():
            job()
            return
        self._rows.append((self._defer_ctx, job))

    def _rows_overlap(self):
        """Whether a row may run beside a step's kernels: on the CPU always (it runs
        between the step's work and its commit); on the GPU where the row's O(N) fields
        pass has device tables of its own (the FMM's fields stages, a kernel with a
        reach, free space, beyond the direct sums' size): any table it shared with the
        step's evaluations could be read on the second stream before the step's stream
        made it."""
        if not self.device.is_gpu:
            return True
        fmm = self.summation.fmm
        if fmm is None or self.summation.box is not None:
            return False
        n = len(self.elements)              # (images only add sources: n² is a bound)
        return (fmm.field_stages()[0] is not fmm.stages
                and n * n > DIRECT_DIAGNOSTICS_PAIRS[self.device.kind])

    def _run_rows(self, window=False):
        """Run the rows of :meth:`defer_row`, in order, each as its writer's call
        (its schedule rolled back if it raises); ``window``: inside a step, on the GPU's
        second stream, their time kept apart (:attr:`_window_seconds`)."""
        rows, self._rows = self._rows, []
        t0 = time.perf_counter()
        try:
            with self._window_stream() if window else contextlib.nullcontext():
                for i, (ctx, job) in enumerate(rows):
                    try:
                        self._writer_call(*ctx, job, count=False)
                    except BaseException:
                        self._rows = rows[i + 1:]
                        self._drop_rows()
                        raise
        finally:
            if window:
                self._window_seconds += time.perf_counter() - t0

    def _drop_rows(self):
        """Give up the rows waiting for a step (the run fails or is cut short): their
        schedules are rolled back, so that a checkpoint still owes them."""
        rows, self._rows = self._rows, []
        for (_, schedule, before), _ in reversed(rows):
            load_schedule_state(schedule, before)

    def _window_stream(self):
        """The second CUDA stream of the rows run inside a step (made once), or a null
        context on the CPU."""
        if not self.device.is_gpu:
            return contextlib.nullcontext()
        if self._row_stream is None:
            self._row_stream = self.device.xp.cuda.Stream(non_blocking=True)
        return self._row_stream

    def request_stop(self):
        """Ask the running :meth:`run` to stop after the step in progress: the writers
        then checkpoint (``finalize(sim, "interrupted")``) and ``run`` returns with
        ``stop_reason == "interrupted"``.  Safe to call from a signal handler."""
        self._stop_requested = True

    def initialize(self):
        """Prepare a run: ``initialize(sim)`` of every callback's and writer's schedule and
        of the callbacks and writers themselves (fill in start times, open or resume
        files).  Idempotent; :meth:`run` and :meth:`pickup` call it."""
        for comp in (*self.callbacks.values(), *self.output_writers.values()):
            for obj in (comp.schedule, comp):
                init = getattr(obj, "initialize", None)
                if init is not None:
                    init(self)
        return self

    def pickup(self, source):
        """Continue from a checkpoint: restore the state (:meth:`load_state_dict`), the
        stop criteria and the state of every callback, output writer and schedule
        (:meth:`load_run_state_dict`), then :meth:`initialize`.

        ``source``: a dict ``{"state": ..., "run": ...}`` (:meth:`checkpoint_state`) or a
        :meth:`state_dict` alone (the writers keep their state); anything else (a
        snapshot path, ``"latest"`` or True, an iteration, a read snapshot) is handed to
        the first output writer with ``read_checkpoint(source)``, which returns such a
        dict (:class:`vortexsim.output.writers.SnapshotWriter`).
        """
        if isinstance(source, dict):
            checkpoint = source if "state" in source else {"state": source}
        else:
            readers = [w for w in self.output_writers.values() if hasattr(w, "read_checkpoint")]
            if not readers:
                raise ValueError(f"pickup={source!r} needs an output writer that reads "
                                 "checkpoints (read_checkpoint(source), e.g. vortexsim.output."
                                 "writers.SnapshotWriter); attach one, or pass a state dict.")
            checkpoint = readers[0].read_checkpoint(source)
        self.load_state_dict(checkpoint["state"])
        if checkpoint.get("run") is not None:
            self.load_run_state_dict(checkpoint["run"])
        self.initialize()
        logger.info("picked up t = %.10g, iteration %d", self.t, self.iteration)
        return self

    def checkpoint_state(self):
        """Everything a restart needs: ``{"state": state_dict(), "run": run_state_dict()}``."""
        return {"state": self.state_dict(), "run": self.run_state_dict()}

    def run_state_dict(self):
        """The run loop's state: the stop criteria and ``state_dict()`` of every callback and
        output writer (with their schedules' states), by name."""
        def states(components):
            return {name: c.state_dict() for name, c in components.items()
                    if hasattr(c, "state_dict")}
        return {"stop_time": self.stop_time, "stop_iteration": self.stop_iteration,
                "output_writers": states(self.output_writers),
                "callbacks": states(self.callbacks)}

    def load_run_state_dict(self, run):
        """Restore a :meth:`run_state_dict`: the stop criteria it holds, and each callback's
        and writer's state under its name (names it lacks keep their state)."""
        if "stop_time" in run:
            self.stop_time = None if run["stop_time"] is None else float(run["stop_time"])
        if "stop_iteration" in run:
            self.stop_iteration = None if run["stop_iteration"] is None else \
                int(run["stop_iteration"])
        for key, components in (("output_writers", self.output_writers),
                                ("callbacks", self.callbacks)):
            for name, state in (run.get(key) or {}).items():
                comp = components.get(name)
                if comp is None:
                    logger.info("pickup: no %s named %r here; its state is ignored",
                                components.kind, name)
                elif hasattr(comp, "load_state_dict"):
                    comp.load_state_dict(state)
        return self

    # -- diagnostics -----------------------------------------------------------
    def rates(self):
        """Time derivatives (dx/dt, dα/dt, dy/dt) of the current state (device arrays):
        one right-hand-side evaluation, as the integrator's first stage sees it."""
        return self._rates_with(self.planner.query(root=self.planner.root(0.0)[0]))

    def _rates_with(self, plan):
        """One right-hand-side evaluation of the current state under ``plan``."""
        el = self.elements
        self.rhs.begin_step(self.t, el.sigma, self._sigma_range, plan=plan,
                            volume=el.volume)
        return self.rhs((el.x, el.alpha, self.tracers.x), self.t)

    def velocity(self, targets=None, gradient=False):
        """u (and ∇u) at ``targets`` (M, 3) (default: the elements, without self pairs),
        including the images of a ground plane; arrays of the simulation's device."""
        el = self.elements
        n_self = 0
        if targets is None:
            targets, n_self = el.x, len(el)
        else:
            targets = self.device.xp.asarray(targets, dtype=el.x.dtype)
        return self.rhs.velocity(el.x, el.alpha, el.sigma, targets, gradient=gradient,
                                 n_self=n_self if gradient else 0,
                                 sigma_range=self._sigma_range, plan=self.planner.query())

    def diagnostics(self):
        """Integral diagnostics of the current state (host values; ``physics.md``).

        Returns a dict: ``t``, ``iteration``, ``total_vorticity`` (3,) [L³/T],
        ``linear_impulse`` (3,) [L⁴/T], ``angular_impulse`` (3,) [L⁵/T], ``energy``
        [L⁵/T²], ``helicity`` [L⁴/T²], ``enstrophy`` [L³/T²] (formulas in
        :mod:`vortexsim.diagnostics`; with a ground plane: of the real elements, the
        energy and helicity of the fluid above the plane, images included as sources),
        and for ring groups ``ring_names``, ``ring_centre`` (R, 3) [L] (impulse-based
        centre: |α|-weighted centroid across the axis, r²|α|-weighted along it, the axis
        n̂ = sign(Γ)P/|P| of the ring), ``ring_radius`` (R,) [L] (sqrt(|P·n̂|/(π|Γ|))) and
        ``ring_axis`` (R, 3); in the periodic box also ``mean_energy`` ½⟨|u|²⟩ [L²/T²]
        and ``dissipation`` ν⟨|∇×u|²⟩ [L²/T³] (box averages of the induced velocity), and
        ``particle_energy`` ½⟨ω_p·ψ⟩ [L²/T²] and ``particle_dissipation`` ν⟨ω_p·ω⟩
        [L²/T³] (the energy the method keeps and its viscous loss:
        :meth:`vortexsim.spectral.SpectralSum.field_sums`), and with remeshing the
        turbulence statistics and energy spectrum of the lattice's vorticity
        (:meth:`_lattice_statistics`: ``lattice_energy``, ``lattice_dissipation``, …,
        ``energy_spectrum``; their FFTs on the device, a few host transfers).  On
        the device: the quadratic sums' pass, one elementwise kernel and one product
        (:class:`vortexsim.diagnostics.RowSums`), one transfer.
        """
        el = self.elements
        fields, direct = self._quadratic_diagnostics()
        sums = self.row_sums()
        v = sums.finish(to_host(sums(el.x, el.alpha, fields, extra=direct or ())))
        energy, enstrophy, helicity = v["field_sums"] if fields is not None else v["extra"][:3]
        if fields is not None and fields.omega is None:
            enstrophy = math.nan                       # the kernel has no ζ
        out = {"t": self.t, "iteration": self.iteration,
               **{k: v[k] for k in ("total_vorticity", "linear_impulse", "angular_impulse")},
               "energy": float(energy), "helicity": float(helicity),
               "enstrophy": float(enstrophy)}
        if isinstance(self.domain, PeriodicBox):
            # box averages of the induced velocity: ½⟨|u|²⟩, ν⟨|∇×u|²⟩; of the method's
            # own energy and its viscous loss: ½⟨ω_p·ψ⟩, ν⟨ω_p·ω⟩
            kinetic, curl, e_p, z_p = (float(a) for a in v["extra"][3:7])
            volume = self.domain.box ** 3
            out.update(mean_energy=kinetic / volume, dissipation=self.rhs.nu * curl / volume,
                       particle_energy=e_p / volume,
                       particle_dissipation=self.rhs.nu * z_p / volume)
            out.update(self._lattice_statistics())
        rings = [g for g in self.groups if g.is_ring]
        if rings:
            out.update(ring_names=[g.name for g in rings],
                       **{k: v[k] for k in ("ring_centre", "ring_radius", "ring_axis")})
        return out

    def _lattice_statistics(self):
        """The turbulence statistics of the remeshing lattice's vorticity (periodic box,
        ``remesh_every`` > 0; else {}): ω_n = α_n/h³ at the n³ nodes — the strengths in
        lattice order when the last step ended with a remeshing, else the elements'
        M4′ interpolation onto the lattice (:func:`vortexsim.physics.remesh.remesh`,
        exact for elements on the nodes) — and its Biot–Savart velocity without the
        blobs' smoothing (:func:`vortexsim.turbulence.vorticity_statistics`): what a grid
        code holds, and the field compared with a spectral code.  Row keys
        ``lattice_energy`` ½⟨|u|²⟩, ``lattice_dissipation`` 2ν⟨s_ij s_ij⟩,
        ``lattice_enstrophy`` ⟨|ω|²⟩, ``u_rms``, ``integral_scale``, ``taylor_scale``,
        ``re_lambda``, ``kolmogorov_eta``, ``k_max_eta``, ``skewness``, ``flatness``,
        and ``wavenumber`` and ``energy_spectrum`` (host arrays, shells of
        :func:`vortexsim.turbulence.energy_spectrum`)."""
        every = self._run["remesh_every"]
        if not (every and isinstance(self.domain, PeriodicBox)):
            return {}
        from .physics.remesh import periodic_nodes, remesh  # noqa: PLC0415
        from .turbulence import vorticity_statistics  # noqa: PLC0415
        box, el, xp = self.domain.box, self.elements, self.device.xp
        n = periodic_nodes(box, float(self._run["remesh_spacing"]))
        h = box / n
        if self._remeshed_lattice() == n and len(el) == n ** 3:
            alpha = el.alpha                        # remeshed: the nodes in lattice order
        else:
            alpha = remesh(el.x, el.alpha, h, box_length=box).alpha
        omega = alpha.astype(xp.float64).reshape(n, n, n, 3) / h ** 3
        stats, k, e = vorticity_statistics(omega, box, self.rhs.nu)
        out = {f"lattice_{key}": stats[key] for key in ("energy", "dissipation", "enstrophy")}
        out.update({key: stats[key] for key in LATTICE_STATISTICS})
        out.update(wavenumber=to_host(k), energy_spectrum=to_host(e))
        return out

    def row_sums(self):
        """The :class:`vortexsim.diagnostics.RowSums` of the elements and their ring
        groups (made once per particle set)."""
        rings = [g for g in self.groups if g.is_ring]
        key = (len(self.elements), tuple((g.start, g.stop) for g in rings))
        if self._row_sums is None or self._row_sums[0] != key:
            self._row_sums = (key, D.RowSums(
                [(g.start, g.stop) for g in rings], [g.circulation for g in rings],
                [g.axis for g in rings], len(self.elements), self.device.xp))
        return self._row_sums[1]

    def _quadratic_diagnostics(self):
        """(fields, None) with the elements' :class:`~vortexsim.fmm.fields.Fields` (or
        shares) of one O(N) FMM pass (:meth:`Summation.fields`, float64) beyond
        :data:`DIRECT_DIAGNOSTICS_PAIRS` element × source pairs; else (None, (E, Ω₂, H))
        as 0-d device arrays by the direct double sums (also where the pass cannot run:
        an algebraic kernel with cores of several sizes); in the periodic box (None, (E,
        Ω₂, H, ½∫|u|², ∫|∇×u|², ½∫ω_p·ψ, ∫ω_p·ω)) from the modes
        (:meth:`vortexsim.spectral.SpectralSum.field_sums`)."""
        el = self.elements
        if self.summation.box is not None:              # the periodic box: from the modes
            xp = self.device.xp
            if self.summation.kernel.name not in GAUSSIAN_ORDERS:
                # the modes are the Gaussian blobs' (the periodic FMM's other kernels)
                return None, tuple(xp.asarray(math.nan) for _ in FIELD_SUMS)
            n = self._on_lattice()
            if n is not None:                            # the lattice's own modes, plain FFTs
                sums = self.summation.lattice_sum(n, self._sigma_range).field_sums(el.alpha)
            else:
                sums = self.summation.spectral_sum(el.sigma, self._sigma_range).field_sums(
                    el.x, el.alpha)
            return None, tuple(xp.asarray(sums[k]) for k in FIELD_SUMS)
        xs, alpha_s, sigma_s = self.domain.sources(el.x, el.alpha, el.sigma)
        if len(el) * xs.shape[0] > DIRECT_DIAGNOSTICS_PAIRS[self.device.kind]:
            images = xs.shape[0] != len(el)
            try:
                # no images: the symmetric pass (shares whose sums are exact)
                return self.summation.fields(xs, alpha_s, sigma_s,
                                             el.x if images else None,
                                             el.sigma if images else None,
                                             symmetric=not images), None
            except CoresNotUniform as exc:
                if not self._warned_direct_diagnostics:
                    logger.warning("diagnostics by direct double sums, O(N^2): %s", exc)
                    self._warned_direct_diagnostics = True
        u, _ = self.velocity()
        energy, enstrophy = D.energy_and_enstrophy(el.x, el.alpha, el.sigma,
                                                   self.summation.kernel.name,
                                                   sources=(xs, alpha_s, sigma_s))
        return None, (energy, enstrophy, D.helicity(el.alpha, u.astype(el.x.dtype)))

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

    def _replace_elements(self, x, alpha, sigma, volume, group, old_groups):
        """:meth:`replace_elements` with the labels indexing ``old_groups`` (a sequence
        of :class:`ElementGroup`; their ranges are rebuilt from the labels)."""
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
        self._sigma_range = self._host_sigma_range()
        self._lattice_checked = None
        self.planner.invalidate()
        self.planner.observe_box(self._host_box_stats())
        self.config.update(n_elements=len(self.elements),
                           groups=[g.as_dict() for g in self.groups])
        return self

    # -- state for checkpoints and restarts ---------------------------------------
    def state_dict(self):
        """Full state as host values: t, iteration, dt (next step), the σ range, the
        planner's state, the arrays (``elements``: x, alpha, sigma, volume, group labels;
        ``tracers``: x) and ``groups`` (:meth:`ElementGroup.as_dict` of each group).

        float64 arrays copied to the host are bitwise equal to the device ones, so
        :meth:`load_state_dict` of this dict continues bitwise like the original run.
        """
        return {"t": self.t, "iteration": self.iteration, "dt": self.dt,
                "sigma_range": list(self._sigma_range), **self.planner.state_dict(),
                "elements": self.elements.to_host(), "tracers": self.tracers.to_host(),
                "groups": [g.as_dict() for g in self.groups]}

    def load_state_dict(self, state):
        """Restore a :meth:`state_dict`.

        A state with element volumes, group labels and groups (``elements["volume"]``,
        ``elements["group"]``, ``groups``: snapshot format 3) may hold any number of
        elements (remeshing changes it): its set goes in through :meth:`replace_elements`.
        An older state (formats 1 and 2) must have this simulation's sizes and keeps its
        volumes and groups.  Either way the time, iteration, dt, σ range and planner state
        are then set exactly as stored (the σ range is not recomputed), and the number of
        tracers must match.
        """
        e, tr = state["elements"], state["tracers"]
        full = "volume" in e and "group" in e and state.get("groups") is not None
        n, m = (np.shape(e["x"])[0] if full else len(self.elements)), len(self.tracers)
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
                        and self._run.get("remesh_every") else "")
                raise ValueError(f"state {name} has shape {tuple(got)}; this simulation has "
                                 f"{want}. Load a state of the same case and sizes.{hint}")
        dtype = self.elements.x.dtype
        if full:
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
        self._sigma_range = tuple(float(v) for v in state["sigma_range"])
        self.planner.load_state_dict(state)
        self.planner.observe_box(self._host_box_stats())
        return self


@dataclasses.dataclass
class _Held:
    """A write of :meth:`Simulation.submit_output` not yet queued: the writer's name, its
    ``func``, the rollbacks of the outputs it writes (newest first: its own and those of
    the deferred writes it replaced) and their number."""

    name: str
    func: object
    rollbacks: list
    outputs: int = 1

    def undo(self):
        for rollback in self.rollbacks:
            rollback()


@dataclasses.dataclass
class _OutputCall:
    """The writer that :meth:`Simulation.run` is calling: its name, its schedule and the
    schedule's state before it fired (None in ``finalize``), and whether it handed a
    write to :meth:`Simulation.submit_output` (whose rollback then owns the schedule)."""

    name: str
    schedule: object = None
    before: object = None
    submitted: bool = False


def _jobs(timing):
    """``101`` (outputs written), or ``101 in 12 files`` when deferred writes were
    replaced by later ones (:meth:`Simulation.submit_output`)."""
    n, files = timing["jobs"], timing["files"]
    return f"{n}" if n == files else f"{n} in {files} files"


def _whole(name, value):
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise ValueError(f"{name} must be an integer >= 0 or None, got {value!r}.")
    return int(value)


class Callback:
    """A function and its schedule (Oceananigans' ``Callback``): ``func(sim)``, or
    ``func(sim, parameters)`` when ``parameters`` is given, after each step at which
    ``schedule(sim)`` is True; ``schedule=None``: after every step.

    Example::

        sim.callbacks["log"] = Callback(lambda s: print(s.t), TimeInterval(1.0))
    """

    def __init__(self, func, schedule=None, parameters=None):
        if not callable(func):
            raise TypeError(f"Callback needs a callable func(sim), got {type(func).__name__}.")
        if schedule is not None and not callable(schedule):
            raise TypeError(f"Callback schedule must be a schedule (callable schedule(sim) -> "
                            f"bool, vortexsim.schedules) or None, got {type(schedule).__name__}.")
        self.func, self.schedule, self.parameters = func, schedule, parameters

    def __call__(self, sim):
        if self.parameters is None:
            return self.func(sim)
        return self.func(sim, self.parameters)

    def state_dict(self):
        return schedule_state(self.schedule)

    def load_state_dict(self, state):
        load_schedule_state(self.schedule, state)
        return self

    def __repr__(self):
        name = getattr(self.func, "__name__", type(self.func).__name__)
        return f"Callback({name}, schedule={self.schedule!r})"


class Components(dict):
    """An ordered dict name → callback or output writer (:attr:`Simulation.callbacks`,
    :attr:`Simulation.output_writers`) that checks what it is given.

    Callbacks: a :class:`Callback` (or any callable with a ``schedule`` attribute) or a
    plain callable ``f(sim)``, stored as ``Callback(f)`` (after every step).  Output
    writers: objects with ``schedule`` and ``write(sim)``.  ``append(obj)`` adds under
    a generated name (``f.__name__`` or the class name, made unique).
    """

    def __init__(self, kind, items=()):
        super().__init__()
        self.kind = kind
        if isinstance(items, dict):
            self.update(items)
        else:
            for obj in items:
                self.append(obj)

    def _checked(self, obj):
        if self.kind == "callback":
            if not callable(obj):
                raise TypeError(f"a callback must be callable (f(sim) or a Callback), got "
                                f"{type(obj).__name__}.")
            return obj if hasattr(obj, "schedule") else Callback(obj)
        if not (callable(getattr(obj, "write", None)) and hasattr(obj, "schedule")):
            raise TypeError(f"an output writer needs write(sim) and a schedule attribute "
                            f"(e.g. vortexsim.output.writers), got {type(obj).__name__}.")
        return obj

    def __setitem__(self, name, obj):
        super().__setitem__(str(name), self._checked(obj))

    def update(self, *args, **kwargs):
        for name, obj in dict(*args, **kwargs).items():
            self[name] = obj

    def setdefault(self, name, obj=None):
        if name not in self:
            self[name] = obj
        return self[name]

    def append(self, obj, name=None):
        """Add ``obj`` under ``name`` (default: generated, unique); returns the name."""
        if name is None:
            base = getattr(obj, "__name__", None) or type(obj).__name__
            base = base.strip("<>") or self.kind
            name, k = base, 1
            while name in self:
                k += 1
                name = f"{base}_{k}"
        self[name] = obj
        return name


class _GilSlices:
    """Sets the interpreter's switch interval to ``interval`` [s] (None: leaves it) until
    :meth:`restore` (``sys.setswitchinterval``; process-wide, so restored by the run that
    set it)."""

    def __init__(self, interval):
        self._saved = None
        if interval is None:
            return
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not (
                math.isfinite(interval) and interval > 0):
            raise ValueError(f"gil_switch_interval must be a number of seconds > 0 or None, "
                             f"got {interval!r}.")
        self._saved = sys.getswitchinterval()
        sys.setswitchinterval(float(interval))

    def restore(self):
        if self._saved is not None:
            sys.setswitchinterval(self._saved)
            self._saved = None


class _ProgressBar:
    """The run's one progress bar (tqdm, on stderr, only on a terminal): simulated time
    towards the stop time (or steps towards the stop iteration), steps/s and the ETA."""

    def __init__(self, enabled, sim):
        self.bar = None
        self.by_steps = sim.stop_iteration is not None or sim.stop_time is None
        self.it_start, self.wall = sim.iteration, time.perf_counter()
        if not enabled:
            return
        import sys  # noqa: PLC0415
        from tqdm.auto import tqdm  # noqa: PLC0415
        if self.by_steps:
            total = None if sim.stop_iteration is None else sim.stop_iteration - sim.iteration
            self.bar = tqdm(total=total, unit="step", file=sys.stderr, desc=f"t = {sim.t:.5g}",
                            disable=None, dynamic_ncols=True,
                            bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                       "steps, ETA {remaining} (elapsed {elapsed})")
        else:
            t0 = sim.config.get("t0", sim.t)
            t0 = sim.t if t0 is None or t0 > sim.t else float(t0)
            self.t0, self.total, self.stop_time = t0, sim.stop_time - t0, sim.stop_time
            self.bar = tqdm(total=self.total, initial=sim.t - t0, file=sys.stderr,
                            desc=f"t = {sim.t:.5g} / {sim.stop_time:.5g}",
                            disable=None, dynamic_ncols=True,
                            bar_format="{desc} {percentage:3.0f}%|{bar}| ETA {remaining} "
                                       "(elapsed {elapsed})")

    def update(self, sim):
        if self.bar is None:
            return
        steps = sim.iteration - self.it_start
        rate = steps / max(time.perf_counter() - self.wall, 1e-9)
        if self.by_steps:
            self.bar.set_description_str(f"t = {sim.t:.5g}, {rate:.3g} steps/s", refresh=False)
            self.bar.update(steps - self.bar.n)
        else:
            self.bar.set_description_str(f"t = {sim.t:.5g} / {self.stop_time:.5g}, "
                                         f"{rate:.3g} steps/s", refresh=False)
            self.bar.update(min(sim.t - self.t0, self.total) - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None
