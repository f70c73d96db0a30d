r"""Right-hand side of the vortex-particle equations, as a list of terms.

For elements p (position x_p, strength α_p, core σ_p) and passive tracers y_t
(``physics.md``):

    dx_p/dt = u(x_p)
    dα_p/dt = (∇u(x_p))ᵀ α_p        (stretching="transpose", default; conserves Σ α_p)
            = (α_p·∇) u(x_p)        (stretching="classical"; in the periodic box minus
                                      its mean over the elements, so Σα stays 0)
            [+ ν (Δα)_p by particle strength exchange, viscous="pse"]
            [viscous="lattice": no rate here; the term diffuses the remeshing lattice
             exactly around each step, :mod:`vortexsim.physics.lattice_viscosity`]
    dy_t/dt = u(y_t)

where u and ∇u are the regularized Biot–Savart sums over the elements and their images
(:mod:`vortexsim.geometry`; generated here, never stored).  Each stage makes **one**
summation call (:class:`vortexsim.summation.Summation`): the sources are the
elements (+ images), the targets the elements followed by the tracers.

The rates of α are the sum of the :class:`~vortexsim.physics.terms.Term` objects of
:attr:`VortexRHS.terms` (:mod:`vortexsim.physics.terms`); each
gets the stage's :class:`Stage` (state, cores and the evaluated velocity field) and returns
its dα/dt (N, 3) or None.  Viscous terms may also act on the cores: core spreading
(``viscous="core_spreading"``, σ² ← σ² + 2ν Δt for all elements alike, applied exactly:
at stage time t the cores are σ(t)² = σ(t_n)² + 2ν(t − t_n)) changes σ and no rate.
Particle strength exchange (``viscous="pse"``, :class:`PSE`,
:func:`vortexsim.physics.pse.pse_rate`) exchanges strength between neighbours with the
kernel of width ε = σ/√2 (Winckelmans & Leonard's choice for Gaussian blobs), of order
2 or 4 (``pse_order``), and the element volumes (CPU or GPU, one σ, free space or the
periodic box).  A new term (a sub-grid
model) is a new :class:`Term` in that list.

No host transfer happens inside a stage; the running maxima of |u| and ‖∇u‖ over the
stages stay on the device until the simulation's once-per-step check.
"""
from __future__ import annotations

import logging

import numpy as np

from .._names import choice
from ..summation import StepPlan, Summation
from .terms import PSE, CoreSpreading, LatticeDiffusion, Stage, Stretching, Term

logger = logging.getLogger(__name__)

__all__ = ["VortexRHS", "Stage", "Term", "Stretching", "CoreSpreading", "PSE",
           "LatticeDiffusion", "VISCOUS_SCHEMES"]

VISCOUS_SCHEMES = ("core_spreading", "pse", "lattice")


class VortexRHS:
    """Time derivatives of the state tuple ``(x, alpha, y)`` (elements and tracers).

    Parameters
    ----------
    summation : :class:`vortexsim.summation.Summation`
    domain : :class:`vortexsim.geometry.Domain` (its images join the sources)
    stretching : {"transpose", "classical"}
    nu : float [L²/T], kinematic viscosity (0: inviscid)
    viscous : {"core_spreading", "pse", "lattice"}; PSE in free space or the periodic box;
        "lattice" (periodic box) adds no term: the simulation diffuses the lattice
    pse_order : {2, 4}, the order of the PSE kernel (:func:`vortexsim.physics.pse.pse_rate`)

    Before each step the simulation calls :meth:`begin_step` with the step's start time,
    cores and its :class:`~vortexsim.summation.StepPlan` (or a bare root cube);
    ``rhs(state, t)`` then returns ``(dx/dt, dα/dt, dy/dt)`` in the state's dtype.
    :attr:`terms` are the contributions to dα/dt (:class:`Stretching`, the viscous term);
    :attr:`stage_max` holds, on the device, the maxima over the stages so far of |u|²
    (elements and tracers) and ‖∇u‖²_F (elements).
    """

    def __init__(self, summation: Summation, domain, stretching="transpose", nu=0.0,
                 viscous="core_spreading", pse_order=2):
        self.summation = summation
        self.domain = domain
        nu = float(nu)
        if not (np.isfinite(nu) and nu >= 0):
            raise ValueError(f"viscosity nu must be a finite number >= 0, got {nu!r}.")
        self.nu = nu
        self.viscous = choice("viscous scheme", viscous, VISCOUS_SCHEMES)
        from .pse import check_pse_order  # noqa: PLC0415
        self.pse_order = check_pse_order(pse_order)
        periodic = getattr(domain, "box", None) is not None
        self.terms = [Stretching(stretching, zero_sum=periodic)]
        if nu > 0 and self.viscous == "pse":
            self.terms.append(PSE(nu, getattr(domain, "box", None), self.pse_order,
                                  ground_z=getattr(domain, "z0", None)))
        elif nu > 0 and self.viscous == "lattice":
            if not periodic:
                raise ValueError("viscous='lattice' diffuses the periodic remeshing lattice's "
                                 "strengths: it needs boundary = 'periodic' (use 'pse' or "
                                 "'core_spreading' elsewhere).")
            # no rate: the term diffuses the lattice around each inviscid step
            self.terms.append(LatticeDiffusion(domain.box, nu))
        elif nu > 0:
            self.terms.append(CoreSpreading(nu))
        self.xp = summation.device.xp
        self._t0 = 0.0
        self._volume = None
        self._sigma0 = None
        self._sigma_range0 = None
        self._plan = StepPlan()
        self._lattice = None
        self.stage_max = None
        self.evaluations = 0

    def bind_lattice(self, n):
        """Tell the terms that act on the periodic remeshing lattice its n (nodes per
        edge; None without remeshing)."""
        for term in self.terms:
            if isinstance(term, LatticeDiffusion):
                term.n = n
        if hasattr(self.summation, "bind_lattice"):      # the particle-mesh solve's lattice
            self.summation.bind_lattice(n)

    @property
    def stretching(self):
        """The stretching scheme ("transpose" or "classical")."""
        return self.terms[0].scheme

    # -- step-level quantities ------------------------------------------------
    def begin_step(self, t0, sigma0, sigma_range0, root=None, plan=None, volume=None,
                   lattice=None):
        """Set the step's start time t0, cores σ(t0) (N,), their host (min, max), the
        summation plan (``plan``, or a plan of the bare root cube ``root``), the element
        volumes (N,) [L³] (constant over a step: the flow is incompressible) and
        ``lattice`` = (n, x) when the elements x start the step on the periodic n³
        lattice (the stage at x then sums by plain FFTs:
        :meth:`vortexsim.summation.Summation.on_lattice`)."""
        self._lattice = lattice
        self._volume = volume
        self._t0 = float(t0)
        self._sigma0 = sigma0
        self._sigma_range0 = (float(sigma_range0[0]), float(sigma_range0[1]))
        self._plan = plan if plan is not None else StepPlan(root=root, capacity_due=True)
        self.stage_max = self.xp.zeros(2, dtype=self.xp.float64)

    def sigma_at(self, t):
        """Cores at time t of the current step (every term's action on σ(t0))."""
        return self.advance_cores(self._sigma0, t - self._t0)

    def sigma_range_at(self, t):
        """Host (min σ, max σ) at time t of the current step."""
        rng = self._sigma_range0
        for term in self.terms:
            rng = term.sigma_range_at(rng, t - self._t0)
        return rng

    def advance_sigma_range(self, sigma_range, dt):
        """Host (min σ, max σ) after a step of ``dt`` [T] from ``sigma_range`` (the terms'
        action: core spreading widens it, the other terms keep it)."""
        rng = (float(sigma_range[0]), float(sigma_range[1]))
        for term in self.terms:
            rng = term.sigma_range_at(rng, dt)
        return rng

    def advance_cores(self, sigma, dt):
        """Cores (N,) [L] after a step of ``dt`` [T] from ``sigma`` (the terms' action)."""
        for term in self.terms:
            sigma = term.sigma_at(sigma, dt, self.xp)
        return sigma

    # -- evaluations --------------------------------------------------------------
    def velocity(self, x, alpha, sigma, targets, *, gradient, n_self, sigma_range, plan):
        """u (and ∇u) at ``targets`` induced by the elements and their images."""
        xs, alpha_s, sigma_s = self.domain.sources(x, alpha, sigma)
        self.evaluations += 1
        return self.summation(xs, alpha_s, sigma_s, targets, n_self=n_self, gradient=gradient,
                              sigma_range=sigma_range, plan=plan)

    def __call__(self, state, t):
        xp = self.xp
        x, alpha, y = state
        n = x.shape[0]
        sigma = self.sigma_at(t)
        targets = xp.concatenate([x, y]) if y.shape[0] else x
        lattice = None
        if self._lattice is not None and x is self._lattice[1] and not y.shape[0]:
            # the step's first stage on the periodic lattice: plain FFTs, same series
            lattice = self._lattice[0]
            self.evaluations += 1
            u, grad_u = self.summation.on_lattice(alpha, self._lattice[0],
                                                  self.sigma_range_at(t))
        else:
            # ∇u at the elements only: the tracers need u alone (half the near-field work)
            u, grad_u = self.velocity(x, alpha, sigma, targets, gradient=n, n_self=n,
                                      sigma_range=self.sigma_range_at(t), plan=self._plan)
        dtype = x.dtype
        u = u.astype(dtype, copy=False)
        grad_e = grad_u[:n].astype(dtype, copy=False)
        stage = Stage(x, alpha, sigma, t, u[:n], grad_e, self._volume, self.sigma_range_at(t),
                      lattice)
        dalpha = None
        for term in self.terms:
            rate = term.alpha_rate(stage)
            if rate is not None:
                dalpha = rate if dalpha is None else dalpha + rate
        if dalpha is None:
            dalpha = xp.zeros_like(alpha)
        # running maxima (device scalars; NaN propagates)
        speed2 = (u * u).sum(axis=1).max()
        if xp is np:
            grad2 = (grad_e * grad_e).sum(axis=(1, 2)).max()
        else:                                   # no (N, 3, 3) array of squares
            from ..kernels.modules import sum_of_squares  # noqa: PLC0415
            grad2 = sum_of_squares()(grad_e.reshape(n, 9), axis=1).max()
        self.stage_max = xp.maximum(self.stage_max, xp.stack([speed2, grad2]).astype(xp.float64))
        return u[:n], dalpha, u[n:]
