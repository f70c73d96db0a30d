r"""The summation strategy of a simulation: the direct sum or a reusable FMM.

Sources (elements and images, :mod:`vortexsim.physics.domain`) and targets (elements, then
tracers) in, u and ∇u out, on the simulation's device with no host transfer inside a
step: the FMM's root cube, depth and M2L sizes come from the step's
:class:`vortexsim.physics.planner.StepPlan`.  The self pair of each element is removed
analytically from ∇u (it adds nothing to u; for smooth kernels it adds (1/4π) A(0, σ_p)
α_p × · to ∇u, with A the pair factor q/r³), so one call serves elements and tracers on
every backend.
"""
from __future__ import annotations

import logging

import numpy as np

from .._names import did_you_mean
from ..backend import Device, check_precision
from ..fmm.evaluator import target_sets
from ..fmm.plan import check_tol
from ..kernels.cutoff import GAUSSIAN_ORDERS, check_general_kernel, get_kernel
from ..kernels.direct import INV_4PI, direct_sum_cuda, direct_sum_numpy, skew
from ..state import uniform_core_radius
from ..summation import (CALL_METHODS, PERIODIC_FMM_KERNELS, auto_method,
                         periodic_auto_method)
from .planner import StepPlan

logger = logging.getLogger(__name__)

__all__ = ["Summation", "choice"]


def choice(what, value, choices):
    """``value`` if it is one of ``choices``, else a ValueError naming the closest."""
    if value in choices:
        return value
    raise ValueError(f"Unknown {what} {value!r}; expected one of {list(choices)}."
                     f"{did_you_mean(value, choices)}")


class Summation:
    """Velocity (and gradient) summation strategy: the direct sum, a reusable FMM (free
    space or the periodic box), or the periodic box's spectral sum.

    Parameters
    ----------
    method : {"direct", "fmm", "spectral", "auto"}
        ``"auto"`` is resolved here, once, from the problem size ``n_sources`` ×
        ``n_targets`` (the crossovers of :func:`vortexsim.induced_velocity`); with a
        ``box``, the spectral sum for the Gaussian kernel (:mod:`vortexsim.spectral`),
        else the periodic FMM (``method="fmm"`` with a box:
        :meth:`vortexsim.fmm.FMM.evaluate` with ``box``; its root is the box).
    kernel : str, cutoff kernel (``physics.md``)
    tol : float, relative accuracy of the FMM (1e-6 ≤ tol < 1; ignored by ``direct``)
    precision : {"float64", "float32"}, arithmetic precision of the sums
    device : :class:`vortexsim.Device`
    n_sources, n_targets : int, sizes used to resolve ``"auto"``
    box : float [L] or None, the edge of the periodic box [0, L)³ (``boundary="periodic"``)

    Call ``summation(x, alpha, sigma, targets, n_self=0, gradient=True,
    sigma_range=None, plan=None)`` with device arrays: sources x, alpha (N, 3), sigma
    (N,), targets (M, 3).  The first ``n_self`` targets must be the first ``n_self``
    sources (same points, same order): their self pairs are removed.  ``gradient``:
    True, False, or an integer k ≥ n_self for ∇u at the first k targets only.
    ``sigma_range``: host (min σ, max σ) when known.  ``plan``: a
    :class:`vortexsim.physics.planner.StepPlan` with the FMM's root cube, depth and M2L
    sizes shared by the calls of a step (None: a stand-alone call).  Returns u (M, 3)
    [L/T] and ∇u (M or k, 3, 3) [1/T] (or None) in ``precision``.  Inputs are not
    validated (the simulation validates its state once, at construction).
    """

    def __init__(self, method="direct", kernel="gaussian", tol=1e-6, precision="float64",
                 device: Device | None = None, n_sources=None, n_targets=None, box=None):
        self.kernel = get_kernel(kernel)
        check_precision(precision)
        self.precision = precision
        self.device = device if device is not None else Device("cpu")
        method = choice("summation method", method, CALL_METHODS)
        self.box = None if box is None else float(box)
        self.spectral = None
        self._lattice = None                # (key, LatticeSum) of on_lattice
        if self.box is not None:
            method = self._periodic_method(method)
        elif method == "spectral":
            raise ValueError("method='spectral' sums a periodic box: set boundary='periodic' "
                             "and box = L.")
        if method == "auto":
            if n_sources is None or n_targets is None:
                raise ValueError("method='auto' needs n_sources and n_targets to choose.")
            method = auto_method(n_sources, n_targets, tol, self.device.is_gpu)
        if method != "spectral":
            check_general_kernel(self.kernel, f"method={method!r}")
        self.method = method
        self.tol = check_tol(tol)
        self.fmm = None
        self._fields_fmm = None
        self._self_pairs = None             # (σ array, n, A(0, σ)) of _self_factors
        if method == "fmm":
            from ..fmm.evaluator import FMM  # noqa: PLC0415
            # the level-uniform tree: the step plan reuses its depth and M2L sizes
            # without transfers (the adaptive tree sizes itself on the host each call)
            self.fmm = FMM(self.kernel, tol=self.tol, precision=self.precision,
                           device=self.device, tree="uniform")

    def _self_factors(self, sigma, n, xp, reuse):
        """A(0, σ_p) (n,) of the self pairs (0 where infinite); with ``reuse`` (a time
        stepper's evaluation, ``plan`` given) made once per core array: a run without core
        spreading passes the same σ array to every evaluation, and the kernel's factors
        are ~50 array operations (each a kernel launch on the GPU, where the host
        launching a step's kernels is most of the step).  The cache holds the array
        itself, so an equal identity means the same cores: the driver never changes its
        σ arrays in place (a caller's own arrays, without ``plan``, are not cached)."""
        cached = self._self_pairs
        if reuse and cached is not None and cached[0] is sigma and cached[1] == n:
            return cached[2]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            a0, _ = self.kernel.factors(xp.zeros(n, dtype=sigma.dtype), sigma[:n], xp)
        a0 = xp.where(xp.isfinite(a0), a0, 0.0)
        if reuse:
            self._self_pairs = (sigma, n, a0)
        return a0

    def _periodic_method(self, method):
        """The method of a periodic box, with its requirements checked: the spectral sum
        or the periodic FMM (``"auto"``: :func:`vortexsim.summation.periodic_auto_method`;
        the FMM's root is the box, its depth kept by the step plan)."""
        if method not in ("spectral", "fmm", "auto"):
            raise ValueError(f"boundary='periodic' is summed by method='spectral' or "
                             f"'fmm' (or 'auto'); method={method!r} has no periodic "
                             "version.")
        if method == "auto":
            method = periodic_auto_method(self.kernel.name)
        if method == "fmm":
            if self.kernel.name not in PERIODIC_FMM_KERNELS:
                raise ValueError(f"the periodic FMM needs a kernel whose far field is 1/r "
                                 f"{PERIODIC_FMM_KERNELS}; got kernel="
                                 f"{self.kernel.name!r}. Use kernel='gaussian'.")
            return "fmm"
        from ..spectral import check_spectral  # noqa: PLC0415
        check_spectral(self.kernel.name, self.device.is_gpu)
        return "spectral"

    def fields(self, x, alpha, sigma, targets=None, target_sigma=None, symmetric=False):
        """u, ψ and ω at blob targets in O(N + M) (:meth:`vortexsim.fmm.FMM.fields`;
        arguments and result there): the energy, enstrophy and helicity of the
        diagnostics.  Runs on this summation's FMM; the direct method makes one for it
        on first use (float64, level-uniform tree, this tol)."""
        if self._fields_fmm is None:
            from ..fmm.evaluator import FMM  # noqa: PLC0415
            self._fields_fmm = self.fmm if self.fmm is not None else FMM(
                self.kernel, tol=self.tol, device=self.device, tree="uniform")
        return self._fields_fmm.fields(x, alpha, sigma, targets, target_sigma, symmetric)

    def spectral_sum(self, sigma, sigma_range=None):
        """The :class:`vortexsim.spectral.SpectralSum` of this box for cores ``sigma``
        (one σ: host ``sigma_range`` when known, else one transfer), made once per σ."""
        from ..spectral import SpectralSum  # noqa: PLC0415
        lo = uniform_core_radius(*(sigma_range if sigma_range is not None else (
            float(sigma.min()), float(sigma.max()))), "the periodic box's spectral sum")
        if self.spectral is None or self.spectral.sigma != lo:
            self.spectral = SpectralSum(self.box, lo, self.tol,
                                        order=GAUSSIAN_ORDERS[self.kernel.name])
        return self.spectral

    def lattice_sum(self, n, sigma_range):
        """The :class:`vortexsim.spectral_lattice.LatticeSum` of the periodic n³ lattice for
        the cores of host ``sigma_range`` (one σ), made once per (n, σ)."""
        from ..spectral_lattice import LatticeSum  # noqa: PLC0415
        spectral = self.spectral_sum(None, sigma_range)
        key = (int(n), spectral.sigma, spectral.tol, id(spectral))
        if self._lattice is None or self._lattice[0] != key:
            self._lattice = (key, LatticeSum(spectral, n, self.device.xp))
        return self._lattice[1]

    def on_lattice(self, alpha, n, sigma_range):
        """u (n³, 3) and ∇u (n³, 3, 3) at the nodes of the periodic n³ lattice of strengths
        ``alpha`` (n³, 3) in remesh order, each node's own blob out, in the summation's
        precision: the spectral sum's series by plain FFTs
        (:class:`vortexsim.spectral_lattice.LatticeSum`, made once per (n, σ); its symbols
        are folded on the host, deterministically)."""
        u, grad_u = self.lattice_sum(n, sigma_range).evaluate(alpha)
        dtype = np.dtype(self.precision)
        return u.astype(dtype, copy=False), grad_u.astype(dtype, copy=False)

    def describe(self):
        """Resolved settings as a plain dict."""
        return {"method": self.method, "kernel": self.kernel.name, "tol": self.tol,
                "precision": self.precision}

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

    def __call__(self, x, alpha, sigma, targets, *, n_self=0, gradient=True,
                 sigma_range=None, plan=None):
        xp = self.device.xp
        dtype = np.dtype(self.precision)
        if self.method == "spectral":
            u, grad_u = self.spectral_sum(sigma, sigma_range).evaluate(
                x, alpha, targets, gradient=gradient)
            u, grad_u = u.astype(dtype, copy=False), (
                None if grad_u is None else grad_u.astype(dtype, copy=False))
        elif self.method == "fmm" and self.box is not None:
            # the periodic FMM: the root is the box, the step plan keeps the depth
            plan = StepPlan(records=False) if plan is None else plan
            u, grad_u = self.fmm.evaluate(x, alpha, sigma, targets, gradient=gradient,
                                          sigma_range=sigma_range, depth=plan.depth,
                                          box=self.box, check_sources=False)
            if plan.records:
                plan.depth = self.fmm.config.depth
        elif self.method == "fmm":
            plan = StepPlan(records=False) if plan is None else plan
            self._size_m2l(x, targets, gradient, sigma_range, plan)
            u, grad_u = self.fmm.evaluate(x, alpha, sigma, targets, gradient=gradient,
                                          sigma_range=sigma_range, root=plan.root,
                                          check_root=plan.root is None, depth=plan.depth,
                                          m2l_capacity=plan.capacity)
            if plan.records:
                plan.depth = self.fmm.config.depth
                self._size_m2l(x, targets, gradient, sigma_range, plan)  # now with a depth
        else:
            if x.dtype != dtype:
                x, alpha, sigma, targets = (a.astype(dtype) for a in (x, alpha, sigma, targets))
            direct = direct_sum_cuda if self.device.is_gpu else direct_sum_numpy
            # ∇u at the first k targets only when gradient = k: one call per target set
            outs = [direct(self.kernel, x, alpha, sigma, pts, gradient=grad)
                    for _, pts, grad in target_sets(targets, gradient)]
            u = outs[0][0] if len(outs) == 1 else xp.concatenate([o[0] for o in outs])
            grad_u = outs[0][1]
        if gradient and n_self:
            # remove the self pairs (r = 0): (1/4π) A(0, σ_p) α_p × ·  (A(0) := 0 when infinite)
            a0 = self._self_factors(sigma, n_self, xp, reuse=plan is not None)
            grad_u[:n_self] -= (INV_4PI * skew(a0[:, None] * alpha[:n_self])).astype(
                grad_u.dtype, copy=False)
        return u, grad_u
