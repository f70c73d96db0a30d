r"""Right-hand side of the vortex-particle equations and the summation strategy behind it.

For elements p (position x_p, strength α_p, core σ_p) and passive tracers y_t
(``physics.md``):

    dx_p/dt = u(x_p)
    dα_p/dt = (∇u(x_p))ᵀ α_p        (stretching="transpose", default; conserves Σ α_p)
            = (α_p·∇) u(x_p)        (stretching="classical")
    dy_t/dt = u(y_t)

where u and ∇u are the regularized Biot–Savart sums over the elements and, with a
ground plane, their images (:mod:`vortexsim.images`; generated here, never stored).
Each stage makes **one** summation call: the sources are the elements (+ images), the
targets the elements followed by the tracers.  The self pair of each element is removed
analytically from ∇u (it adds nothing to u; for smooth kernels it adds
(1/4π) A(0, σ_p) α_p × · to ∇u, with A the pair factor q/r³), so the same call serves
elements and tracers on every backend.

Viscous diffusion (ν > 0): ``viscous="core_spreading"`` (Gaussian core spreading,
σ² ← σ² + 2ν Δt for all elements alike, applied exactly: at stage time t the cores are
σ(t)² = σ(t_n)² + 2ν(t − t_n)).  It is consistent only with remeshing, which vortexsim
does not do yet.  Particle strength exchange (``"pse"``) is not implemented yet and is
refused.

No host transfer happens inside a stage: the strategy calls the direct sum or a reusable
:class:`vortexsim.fmm.evaluator.FMM` on validated device arrays, with the core-radius
range and the root cube passed from the host (``sigma_range``, ``root``,
``check_root=False``); the running maxima of |u| and ‖∇u‖ over the stages stay on the
device until the simulation's once-per-step check.
"""
from __future__ import annotations

import logging

import numpy as np

from ._names import did_you_mean
from .backend import Device
from .kernels.cutoff import get_kernel, stretching as stretching_rhs
from .kernels.direct import INV_4PI, direct_sum_cuda, direct_sum_numpy, skew
from .summation import METHODS, PRECISIONS, auto_method

logger = logging.getLogger(__name__)

__all__ = ["Summation", "VortexRHS", "STRETCHING_SCHEMES", "VISCOUS_SCHEMES"]

STRETCHING_SCHEMES = ("transpose", "classical")
VISCOUS_SCHEMES = ("core_spreading", "pse")


def _choice(what, value, choices):
    if value in choices:
        return value
    raise ValueError(f"Unknown {what} {value!r}; expected one of {list(choices)}."
                     f"{did_you_mean(value, choices)}")


class Summation:
    """Velocity (and gradient) summation strategy: the direct sum or a reusable FMM.

    Parameters
    ----------
    method : {"direct", "fmm", "auto"}
        ``"auto"`` is resolved here, once, from the problem size ``n_sources`` ×
        ``n_targets`` (the crossovers of :func:`vortexsim.induced_velocity`).
    kernel : str, cutoff kernel (``physics.md``)
    tol : float, relative accuracy of the FMM (1e-6 ≤ tol < 1; ignored by ``direct``)
    precision : {"float64", "float32"}, arithmetic precision of the sums
    device : :class:`vortexsim.Device`
    n_sources, n_targets : int, sizes used to resolve ``"auto"``

    Call ``summation(x, alpha, sigma, targets, n_self=0, gradient=True,
    sigma_range=None, root=None)`` with device arrays: sources x, alpha (N, 3), sigma
    (N,), targets (M, 3).  The first ``n_self`` targets must be the first ``n_self``
    sources (same points, same order): their self pairs are removed.  ``gradient``:
    True, False, or an integer k ≥ n_self for ∇u at the first k targets only.  Returns
    u (M, 3) [L/T] and ∇u (M or k, 3, 3) [1/T] (or None) in ``precision``.  Inputs are not validated
    (the simulation validates its state once, at construction).
    """

    def __init__(self, method="direct", kernel="gaussian", tol=1e-6, precision="float64",
                 device: Device | None = None, n_sources=None, n_targets=None):
        self.kernel = get_kernel(kernel)
        self.precision = _choice("precision", precision, PRECISIONS)
        self.device = device if device is not None else Device("cpu")
        method = _choice("summation method", method, METHODS)
        if method == "auto":
            if n_sources is None or n_targets is None:
                raise ValueError("method='auto' needs n_sources and n_targets to choose.")
            method = auto_method(n_sources, n_targets, tol, self.device.is_gpu)
        self.method = method
        self.tol = float(tol)
        self.fmm = None
        #: FMM tree depth reused by later calls (choosing it costs one device-to-host
        #: transfer); None makes the next call choose it again (see VortexRHS.begin_step)
        self.depth = None
        #: sizes of the GPU's sparse M2L for this step's sync-free calls
        #: (FMM.m2l_capacity of the step's first sources), and whether they are due
        self.m2l_capacity = None
        self._capacity_due = False
        if method == "fmm":
            from .fmm.evaluator import FMM  # noqa: PLC0415
            # the level-uniform tree: the step plan reuses its depth and M2L sizes
            # without transfers (the adaptive tree sizes itself on the host each call)
            self.fmm = FMM(self.kernel, tol=self.tol, precision=self.precision,
                           device=self.device, tree="uniform")

    def describe(self):
        """Resolved settings as a plain dict."""
        return {"method": self.method, "kernel": self.kernel.name, "tol": self.tol,
                "precision": self.precision}

    def new_step(self):
        """A time step begins: its first call sizes the sparse M2L (GPU) for the step."""
        self.m2l_capacity = None
        self._capacity_due = True

    def _size_m2l(self, x, targets, gradient, sigma_range, root):
        # one small transfer at the step's first call, at the step's start positions:
        # the sizes are a function of the state, and the step's other calls need none
        if self._capacity_due and root is not None and self.depth is not None \
                and sigma_range is not None:
            from .fmm.evaluator import target_sets  # noqa: PLC0415
            sets = tuple(pts for _, pts, _ in target_sets(targets, gradient))
            self.m2l_capacity = self.fmm.m2l_capacity(x, sigma_range, root, self.depth,
                                                      targets=sets)
            self._capacity_due = False

    def __call__(self, x, alpha, sigma, targets, *, n_self=0, gradient=True,
                 sigma_range=None, root=None):
        xp = self.device.xp
        dtype = np.dtype(self.precision)
        if self.method == "fmm":
            self._size_m2l(x, targets, gradient, sigma_range, root)
            u, grad_u = self.fmm.evaluate(x, alpha, sigma, targets, gradient=gradient,
                                          sigma_range=sigma_range, root=root,
                                          check_root=root is None, depth=self.depth,
                                          m2l_capacity=self.m2l_capacity)
            self.depth = self.fmm.config.depth
            self._size_m2l(x, targets, gradient, sigma_range, root)   # after it chose the depth
        else:
            if x.dtype != dtype:
                x, alpha, sigma, targets = (a.astype(dtype) for a in (x, alpha, sigma, targets))
            from .fmm.evaluator import target_sets  # noqa: PLC0415
            direct = direct_sum_cuda if self.device.is_gpu else direct_sum_numpy
            # ∇u at the first k targets only when gradient = k: one call per target set
            outs = [direct(self.kernel, x, alpha, sigma, pts, gradient=grad)
                    for _, pts, grad in target_sets(targets, gradient)]
            u = outs[0][0] if len(outs) == 1 else xp.concatenate([o[0] for o in outs])
            grad_u = outs[0][1]
        if gradient and n_self:
            # remove the self pairs (r = 0): (1/4π) A(0, σ_p) α_p × ·  (A(0) := 0 when infinite)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                a0, _ = self.kernel.factors(xp.zeros(n_self, dtype=sigma.dtype),
                                            sigma[:n_self], xp)
            a0 = xp.where(xp.isfinite(a0), a0, 0.0)
            grad_u[:n_self] -= (INV_4PI * skew(a0[:, None] * alpha[:n_self])).astype(
                grad_u.dtype, copy=False)
        return u, grad_u


class VortexRHS:
    """Time derivatives of the state tuple ``(x, alpha, y)`` (elements and tracers).

    Parameters
    ----------
    summation : :class:`Summation`
    boundary : :class:`vortexsim.images.FreeSpace` or :class:`~vortexsim.images.GroundPlane`
    stretching : {"transpose", "classical"}
    nu : float [L²/T], kinematic viscosity (0: inviscid)
    viscous : {"core_spreading", "pse"}; only core spreading is implemented

    Before each step the simulation calls :meth:`begin_step` with the step's start time,
    cores and FMM root cube; ``rhs(state, t)`` then returns ``(dx/dt, dα/dt, dy/dt)``
    in the state's dtype.  :attr:`stage_max` holds, on the device, the maxima over the
    stages so far of |u|² (elements and tracers) and ‖∇u‖²_F (elements).
    """

    def __init__(self, summation: Summation, boundary, stretching="transpose", nu=0.0,
                 viscous="core_spreading"):
        self.summation = summation
        self.boundary = boundary
        self.stretching = _choice("stretching scheme", stretching, STRETCHING_SCHEMES)
        nu = float(nu)
        if not (np.isfinite(nu) and nu >= 0):
            raise ValueError(f"viscosity nu must be a finite number >= 0, got {nu!r}.")
        self.nu = nu
        self.viscous = _choice("viscous scheme", viscous, VISCOUS_SCHEMES)
        if nu > 0 and self.viscous == "pse":
            raise ValueError(
                "viscous='pse' (particle strength exchange) is not implemented yet; use "
                "viscous='core_spreading' or nu=0.")
        self.xp = summation.device.xp
        self._t0 = 0.0
        self._sigma0 = None
        self._sigma_range0 = None
        self._root = None
        self.stage_max = None
        self.evaluations = 0

    # -- step-level quantities ------------------------------------------------
    def begin_step(self, t0, sigma0, sigma_range0, root=None):
        """Set the step's start time t0, cores σ(t0) (N,), their host (min, max) and root."""
        self._t0 = float(t0)
        self._sigma0 = sigma0
        self._sigma_range0 = (float(sigma_range0[0]), float(sigma_range0[1]))
        self._root = root
        self.stage_max = self.xp.zeros(2, dtype=self.xp.float64)
        self.summation.new_step()

    def sigma_at(self, t):
        """Cores at time t of the current step: σ(t)² = σ(t0)² + 2ν(t − t0)."""
        if self.nu == 0.0 or t == self._t0:
            return self._sigma0
        return self.xp.sqrt(self._sigma0 * self._sigma0 + 2.0 * self.nu * (t - self._t0))

    def sigma_range_at(self, t):
        """Host (min σ, max σ) at time t of the current step."""
        lo, hi = self._sigma_range0
        if self.nu == 0.0 or t == self._t0:
            return lo, hi
        grow = 2.0 * self.nu * (t - self._t0)
        return float(np.sqrt(lo * lo + grow)), float(np.sqrt(hi * hi + grow))

    # -- evaluations --------------------------------------------------------------
    def velocity(self, x, alpha, sigma, targets, *, gradient, n_self, sigma_range, root):
        """u (and ∇u) at ``targets`` induced by the elements and their images."""
        xs, alpha_s, sigma_s = self.boundary.sources(x, alpha, sigma)
        self.evaluations += 1
        return self.summation(xs, alpha_s, sigma_s, targets, n_self=n_self, gradient=gradient,
                              sigma_range=sigma_range, root=root)

    def __call__(self, state, t):
        xp = self.xp
        x, alpha, y = state
        n = x.shape[0]
        sigma = self.sigma_at(t)
        targets = xp.concatenate([x, y]) if y.shape[0] else x
        # ∇u at the elements only: the tracers need u alone (half the near-field work)
        u, grad_u = self.velocity(x, alpha, sigma, targets, gradient=n, n_self=n,
                                  sigma_range=self.sigma_range_at(t), root=self._root)
        dtype = x.dtype
        u = u.astype(dtype, copy=False)
        grad_e = grad_u[:n].astype(dtype, copy=False)
        dalpha = stretching_rhs(alpha, grad_e, self.stretching)
        # running maxima (device scalars; NaN propagates)
        speed2 = (u * u).sum(axis=1).max()
        grad2 = (grad_e * grad_e).sum(axis=(1, 2)).max()
        self.stage_max = xp.maximum(self.stage_max, xp.stack([speed2, grad2]).astype(xp.float64))
        return u[:n], dalpha, u[n:]
