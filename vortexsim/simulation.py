r"""The simulation driver: state, right-hand side, integrator, time step, safety checks.

    sim = vortexsim.make_case("leapfrog")            # or Simulation(elements, tracers, dt=...)
    sim.run(t_end=20.0)                              # or sim.step(), sim.run(steps=10)
    sim.t, sim.iteration, sim.elements.x, sim.tracers.x, sim.diagnostics()

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
    commit: t ← t_n + dt, iteration += 1, then callbacks

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

import dataclasses
import logging
import math
import time

import numpy as np

from ._names import did_you_mean
from .backend import Device, resolve_device, to_host
from .integrators import get_scheme
from .physics import FMMPlanner, Summation, VortexRHS, make_domain
from .state import ElementGroup, Elements, Tracers, group_labels, make_elements, make_tracers
from . import diagnostics as D

logger = logging.getLogger(__name__)

__all__ = ["Simulation", "SimulationError", "RUN_DEFAULTS"]

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
    "viscous": "core_spreading",   # core_spreading | pse (not yet)
    "boundary": "free",            # free | ground
    "ground_z": 0.0,               # [L] height of the ground plane
    "adaptive": False,
    "courant": 0.1,                # C of the adaptive rule dt = C / max‖∇u‖
    "dt_min": None,                # [T] lower bound of the adaptive dt (default dt/1000)
    "max_speed": None,             # [L/T] blow-up bound on |u| (default 100 × max|u| at t0)
    "root_slack": 0.05,            # FMM root cube margin, fraction of the box width
    #                                (a wider cube makes wider leaves: at 0.25 the leapfrog
    #                                GPU case had 0.40 instead of 0.32 and 1.8× the pairs)
    "progress": True,              # tqdm bar in run()
}


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
    callbacks : sequence of callables ``f(sim)`` called after every step
    **run : the run parameters of :data:`RUN_DEFAULTS`:

        dt [T] (required), t_end [T], integrator {"euler", "rk2", "rk4"},
        kernel, method {"direct", "fmm", "auto"}, tol, precision {"float64",
        "float32"}, device {"auto", "cpu", "gpu"}, stretching {"transpose",
        "classical"}, nu [L²/T], viscous {"core_spreading", "pse"}, boundary
        {"free", "ground"}, ground_z [L], adaptive, courant, dt_min [T],
        max_speed [L/T], root_slack, progress

    Attributes
    ----------
    t, iteration, dt (the next step's dt), elements, tracers, groups, config, device,
    summation, rhs, scheme, callbacks
    """

    def __init__(self, elements, tracers=None, *, groups=(), t0=0.0, case=None,
                 case_params=None, callbacks=(), **run):
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
        if not 0 < float(cfg["dt_min"]) <= float(dt):
            raise ValueError(f"dt_min must be in (0, dt], got {cfg['dt_min']!r} with dt = {dt}.")
        if not 0 < float(cfg["root_slack"]) <= 10:
            raise ValueError(f"root_slack must be in (0, 10], got {cfg['root_slack']!r}.")
        # -- physics --------------------------------------------------------------
        self.domain = make_domain(cfg["boundary"], cfg["ground_z"])
        self.domain.check(self.elements.x, "elements")
        self.domain.check(self.tracers.x, "tracers")
        n_src = n * (1 + self.domain.n_images_per_element)
        self.summation = Summation(cfg["method"], cfg["kernel"], cfg["tol"], cfg["precision"],
                                   self.device, n_sources=n_src, n_targets=n + m)
        self.rhs = VortexRHS(self.summation, self.domain, cfg["stretching"], cfg["nu"],
                             cfg["viscous"])
        self.planner = FMMPlanner(self.domain, self.device.xp,
                                  active=self.summation.method == "fmm",
                                  root_slack=cfg["root_slack"])
        self.callbacks = list(callbacks)
        self._run = cfg
        self.t = float(t0)
        self.iteration = 0
        self._sigma_range = self._host_sigma_range()
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
                   boundary=self.domain.name, dt=float(dt), dt_min=float(cfg["dt_min"]),
                   max_speed=float(cfg["max_speed"]), courant=float(cfg["courant"]),
                   adaptive=bool(cfg["adaptive"]), ground_z=float(cfg["ground_z"]),
                   t_end=None if cfg["t_end"] is None else float(cfg["t_end"]))
        self.dt = self._adaptive_dt(grad) if cfg["adaptive"] else float(dt)
        self.config = {"case": case, **(case_params or {}), **cfg, "t0": float(t0),
                       "groups": [g.as_dict() for g in self.groups],
                       "n_elements": n, "n_tracers": m}
        logger.info("Simulation %s: %d elements, %d tracers, %s on %s, %s dt=%g",
                    case or "", n, m, self.summation.method, self.device.describe(),
                    self.scheme.name, self.dt)

    # -- host-side bookkeeping ------------------------------------------------
    def _host_sigma_range(self):
        s = to_host(self.elements.sigma)
        return float(s.min()), float(s.max())

    def _host_box_stats(self):
        """Host [lo, hi] of the elements, then of the tracers (one transfer)."""
        xp = self.device.xp
        stats = xp.concatenate([self.elements.x.min(axis=0), self.elements.x.max(axis=0)])
        if len(self.tracers):
            stats = xp.concatenate([stats, self.tracers.x.min(axis=0),
                                    self.tracers.x.max(axis=0)])
        return to_host(stats)

    def _initial_maxima(self):
        """Host max |u| (elements and tracers) and max ‖∇u‖_F (elements) at the current
        state, from an evaluation planned like a step's first stage (its depth is kept)."""
        el = self.elements
        plan, _ = self.planner.step(self.iteration, 0.0)
        self.rhs.begin_step(self.t, el.sigma, self._sigma_range, plan=plan)
        self.rhs((el.x, el.alpha, self.tracers.x), self.t)
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
        plan, margin = self.planner.step(self.iteration, dt)
        self.rhs.begin_step(self.t, el.sigma, self._sigma_range, plan=plan)
        x1, alpha1, y1 = self.scheme.step((el.x, el.alpha, tr.x), self.t, dt, self.rhs)
        nu = self.rhs.nu
        sigma1 = self.rhs.advance_cores(el.sigma, dt)
        # one device→host transfer: [finite, max|u|², max‖∇u‖², box of x1, box of y1]
        finite = xp.isfinite(x1).all() & xp.isfinite(alpha1).all() & xp.isfinite(y1).all() \
            & xp.isfinite(sigma1).all()
        parts = [xp.asarray(finite, dtype=xp.float64).reshape(1), self.rhs.stage_max,
                 x1.min(axis=0), x1.max(axis=0)]
        if y1.shape[0]:
            parts += [y1.min(axis=0), y1.max(axis=0)]
        stats = to_host(xp.concatenate([xp.asarray(p, dtype=xp.float64) for p in parts]))
        self._check(stats, dt, margin)
        # commit
        self.elements = dataclasses.replace(el, x=x1, alpha=alpha1, sigma=sigma1)
        self.tracers = Tracers(y1)
        self.t += dt
        self.iteration += 1
        self.planner.commit(plan, np.sqrt(stats[1]), stats[3:])
        if nu > 0:
            lo, hi = self._sigma_range
            self._sigma_range = (math.sqrt(lo * lo + 2 * nu * dt), math.sqrt(hi * hi + 2 * nu * dt))
        grad = float(np.sqrt(stats[2]))
        if self._run["adaptive"]:
            self.dt = self._adaptive_dt(grad)
        for cb in self.callbacks:
            cb(self)
        return self

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

    def run(self, t_end=None, steps=None, progress=None):
        """Step until ``t_end`` [T] is reached (last step shortened to land on it) or for
        ``steps`` more steps, whichever comes first.

        With neither, the config's ``t_end`` is used; without that either, ValueError
        ("no stopping criterion").  ``progress`` (default: the config's) shows a tqdm bar.

        Pseudocode::

            while not (t >= t_end or n >= steps):
                step(t_end)           # checks, then callbacks
        """
        if t_end is None and steps is None:
            t_end = self._run["t_end"]
            if t_end is None:
                raise ValueError("No stopping criterion: pass t_end or steps (or set t_end "
                                 "in the config).")
        if steps is not None and (int(steps) != steps or steps < 0):
            raise ValueError(f"steps must be an integer >= 0, got {steps!r}.")
        if t_end is not None and not math.isfinite(float(t_end)):
            raise ValueError(f"t_end must be finite, got {t_end!r}.")
        show = self._run["progress"] if progress is None else progress
        bar = None
        if show:
            from tqdm.auto import tqdm  # noqa: PLC0415
            if steps is not None:
                bar = tqdm(total=int(steps), unit="step", leave=False)
            else:
                bar = tqdm(total=round(float(t_end) - self.t, 12), unit="T", leave=False,
                           bar_format="{l_bar}{bar}| t={postfix}")
        start, n0, t_start = time.perf_counter(), self.iteration, self.t
        done = 0
        try:
            while True:
                if steps is not None and done >= steps:
                    break
                if t_end is not None and self.t >= float(t_end) - 1e-12 * max(1.0, abs(float(t_end))):
                    break
                t_before = self.t
                self.step(t_end)
                done += 1
                if bar is not None:
                    bar.update(1 if steps is not None else self.t - t_before)
                    bar.set_postfix_str(f"{self.t:.4g}", refresh=False)
        finally:
            if bar is not None:
                bar.close()
        wall = time.perf_counter() - start
        if done:
            logger.info("ran %d steps (t %.6g → %.6g) in %.3g s: %.3g steps/s, %.3g element "
                        "steps/s", self.iteration - n0, t_start, self.t, wall, done / wall,
                        done * len(self.elements) / wall)
        return self

    # -- diagnostics -----------------------------------------------------------
    def rates(self):
        """Time derivatives (dx/dt, dα/dt, dy/dt) of the current state (device arrays):
        one right-hand-side evaluation, as the integrator's first stage sees it."""
        el = self.elements
        self.rhs.begin_step(self.t, el.sigma, self._sigma_range,
                            plan=self.planner.query(root=self.planner.root(0.0)[0]))
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
        ``ring_axis`` (R, 3).
        """
        el = self.elements
        kernel = self.summation.kernel.name
        u, _ = self.velocity()
        sources = self.domain.sources(el.x, el.alpha, el.sigma)
        energy, enstrophy = D.energy_and_enstrophy(el.x, el.alpha, el.sigma, kernel,
                                                   sources=sources)
        out = {
            "t": self.t,
            "iteration": self.iteration,
            "total_vorticity": to_host(D.total_vorticity(el.alpha)),
            "linear_impulse": to_host(D.linear_impulse(el.x, el.alpha)),
            "angular_impulse": to_host(D.angular_impulse(el.x, el.alpha)),
            "energy": float(to_host(energy)),
            "helicity": float(to_host(D.helicity(el.alpha, u.astype(el.x.dtype)))),
            "enstrophy": float(to_host(enstrophy)),
        }
        rings = [g for g in self.groups if g.is_ring]
        if rings:
            centres, radii, axes = [], [], []
            for g in rings:
                xg, ag = el.x[g.start:g.stop], el.alpha[g.start:g.stop]
                n_hat, origin = D.ring_frame(xg, ag, g.circulation, g.axis)
                centres.append(to_host(D.ring_centre(xg, ag, n_hat, origin)))
                radii.append(float(to_host(D.ring_radius(xg, ag, g.circulation, n_hat))))
                axes.append(to_host(n_hat))
            out.update(ring_names=[g.name for g in rings], ring_centre=np.array(centres),
                       ring_radius=np.array(radii), ring_axis=np.array(axes))
        return out

    # -- a new particle set -------------------------------------------------------------
    def replace_elements(self, x, alpha, sigma, volume=None, group=None):
        """Replace the vortex elements by a new set of any size N' (what remeshing does).

        x (N', 3) [L], alpha (N', 3) [L³/T], sigma (N',) or scalar [L], volume (N',) [L³]
        (default: not known), group (N',) labels (default: none; each group's elements
        must stay contiguous, so that its index range can be rebuilt).  Everything that
        depends on the particle set is reset here and only here: the σ range, the FMM
        planner's depth and box, the group ranges and the recorded sizes.
        """
        self.elements = make_elements(x, alpha, sigma, self.device, self.elements.x.dtype,
                                      volume=volume, group=group)
        self.domain.check(self.elements.x, "elements")
        labels = to_host(self.elements.group)
        groups = []
        for i, g in enumerate(self.groups):
            where = np.nonzero(labels == i)[0]
            if where.size and where[-1] - where[0] + 1 != where.size:
                raise ValueError(f"the elements of group {g.name!r} are not contiguous; "
                                 "order the new elements group by group.")
            if where.size:
                groups.append(dataclasses.replace(g, start=int(where[0]),
                                                  stop=int(where[-1]) + 1))
        self.groups = tuple(groups)
        self._sigma_range = self._host_sigma_range()
        self.planner.invalidate()
        self.planner.observe_box(self._host_box_stats())
        self.config.update(n_elements=len(self.elements),
                           groups=[g.as_dict() for g in self.groups])
        return self

    # -- state for checkpoints and restarts ---------------------------------------
    def state_dict(self):
        """Full state as host values: t, iteration, dt (next step), the σ range and arrays.

        float64 arrays copied to the host are bitwise equal to the device ones, so
        :meth:`load_state_dict` of this dict continues bitwise like the original run.
        """
        return {"t": self.t, "iteration": self.iteration, "dt": self.dt,
                "sigma_range": list(self._sigma_range), **self.planner.state_dict(),
                "elements": self.elements.to_host(), "tracers": self.tracers.to_host()}

    def load_state_dict(self, state):
        """Restore a :meth:`state_dict` (same numbers of elements and tracers)."""
        n, m = len(self.elements), len(self.tracers)
        e, tr = state["elements"], state["tracers"]
        shapes = {"elements.x": (np.shape(e["x"]), (n, 3)),
                  "elements.alpha": (np.shape(e["alpha"]), (n, 3)),
                  "elements.sigma": (np.shape(e["sigma"]), (n,)),
                  "tracers.x": (np.shape(tr["x"]), (m, 3))}
        for name, (got, want) in shapes.items():
            if tuple(got) != want:
                raise ValueError(f"state {name} has shape {tuple(got)}; this simulation has "
                                 f"{want}. Load a state of the same case and sizes.")
        dtype = self.elements.x.dtype
        self.elements = make_elements(e["x"], e["alpha"], e["sigma"], self.device, dtype,
                                      volume=e.get("volume", self.elements.volume),
                                      group=e.get("group", self.elements.group))
        self.tracers = make_tracers(tr["x"], self.device, dtype)
        self.t = float(state["t"])
        self.iteration = int(state["iteration"])
        self.dt = float(state["dt"])
        self._sigma_range = tuple(float(v) for v in state["sigma_range"])
        self.planner.load_state_dict(state)
        self.planner.observe_box(self._host_box_stats())
        return self
