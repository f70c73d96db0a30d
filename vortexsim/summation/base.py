r"""The summation interface: u and ∇u of vortex elements at targets, one class per method.

A summation turns sources (the elements and their images, :mod:`vortexsim.geometry`) and
targets (the elements, then tracers) into the velocity u (M, 3) [L/T] and its gradient
∇u (M, 3, 3) [1/T] (``grad_u[i, a, b] = ∂u_a/∂x_b``) on the simulation's device, with no
host transfer inside a time step.  The siblings:

* :class:`vortexsim.summation.direct.DirectSum` (``"direct"``): every pair, exact to
  round-off;
* :class:`vortexsim.summation.fmm.FMMSum` (``"fmm"``): a reusable FMM in free space or
  in the periodic box, driven by the step plans of its
  :class:`~vortexsim.summation.fmm.FMMPlanner`;
* :class:`vortexsim.summation.periodic_spectral.PeriodicSpectralSum` (``"spectral"``):
  the periodic box's Fourier series of Gaussian blobs, by non-uniform FFTs
  (:mod:`vortexsim.summation.spectral`); at the nodes of the box's lattice by plain
  FFTs (:mod:`vortexsim.summation.lattice`).

:func:`vortexsim.summation.make_summation` makes the one a method name asks for
(``"auto"``: :func:`vortexsim.summation.auto.choose_method`).

Where new summations plug in
----------------------------
A new method is a subclass of :class:`Summation` that sets :attr:`Summation.name`,
checks its requirements in :meth:`Summation.check_method` and sums the pairs in
:meth:`Summation.evaluate`; an entry in :data:`vortexsim.summation.factory.SUMMATIONS`
makes it a ``method`` (the particle-mesh solve of the periodic box, ``"mesh"``, is one:
:mod:`vortexsim.summation.periodic_mesh`).  Around any of them,
:class:`vortexsim.summation.distributed.SharedTargets` shares the targets among the ranks
of a communicator (``make_summation(..., communicator=)``).

Self pairs
----------
The first ``n_self`` targets are the first ``n_self`` sources; their own pair (r = 0) is
removed analytically from ∇u by :meth:`Summation.__call__` (it adds nothing to u; for
smooth kernels it adds (1/4π) A(0, σ_p) α_p × · to ∇u, with A the pair factor q/r³), so
one call serves elements and tracers on every backend.
"""
from __future__ import annotations

import abc
import logging

import numpy as np

from ..backend import Device, check_precision
from ..fmm.evaluator import FMM
from ..fmm.plan import check_tol
from ..kernels.cutoff import GAUSSIAN_ORDERS, get_kernel
from ..kernels.direct import INV_4PI, subtract_skew
from ..state import uniform_core_radius
from .lattice import LatticeSum
from .spectral import SpectralSum

logger = logging.getLogger(__name__)

__all__ = ["Summation"]


class Summation(abc.ABC):
    """Velocity (and gradient) summation: the interface of the methods.

    Parameters
    ----------
    kernel : str or CutoffKernel, the cutoff kernel (``physics.md``)
    tol : float, relative accuracy of the approximate methods (1e-6 ≤ tol < 1 for the FMM;
        ignored by the direct sum)
    precision : {"float64", "float32"}, arithmetic precision of the sums
    device : :class:`vortexsim.Device` (default: the CPU)
    box : float [L] or None, the edge of the periodic box [0, L)³

    Call ``summation(x, alpha, sigma, targets, n_self=0, gradient=True,
    sigma_range=None, plan=None)`` with device arrays: sources x, alpha (N, 3), sigma
    (N,), targets (M, 3).  The first ``n_self`` targets must be the first ``n_self``
    sources (same points, same order): their self pairs are removed.  ``gradient``:
    True, False, or an integer k ≥ n_self for ∇u at the first k targets only.
    ``sigma_range``: host (min σ, max σ) when known.  ``plan``: a
    :class:`vortexsim.summation.fmm.StepPlan` shared by the calls of a time step (None: a
    stand-alone call).  Returns u (M, 3) [L/T] and ∇u (M or k, 3, 3) [1/T] (or None) in
    ``precision``.  Inputs are not validated (the simulation validates its state once,
    at construction).

    Attributes
    ----------
    name, method : str, the method ("direct", "fmm", "spectral")
    kernel, tol, precision, device, box : the settings above
    fmm : :class:`vortexsim.fmm.FMM` or None, the evaluator of an FMM summation
    """

    #: the method's name (the ``method`` of the config)
    name = ""
    #: memory model of :meth:`memory_estimate` [bytes per source, per target]: upper
    #: estimates measured on the CPU (peak RSS of small runs)
    BYTES_PER_SOURCE = 1_000
    BYTES_PER_TARGET = 300
    #: the ranks that make each call together on the same sources, each with its own
    #: targets (set by :class:`~vortexsim.summation.distributed.SharedTargets` for a
    #: call that every rank makes); a method may share its source-side work among them
    #: (the FMM: the upward pass), or ignore it
    sharing_ranks = None

    def __init__(self, kernel="gaussian", tol=1e-6, precision="float64",
                 device: Device | None = None, box=None):
        self.kernel = get_kernel(kernel)
        check_precision(precision)
        self.precision = precision
        self.device = device if device is not None else Device("cpu")
        self.box = None if box is None else float(box)
        self.check_method()
        self.tol = check_tol(tol)
        self.fmm = None
        self.spectral = None                # the SpectralSum of spectral_sum (one σ)
        self._lattice = None                # (key, LatticeSum) of lattice_sum
        self._fields_fmm = None
        self._self_pairs = None             # (σ array, n, A(0, σ)) of _self_factors

    @property
    def method(self):
        """The method's name (:attr:`name`)."""
        return self.name

    # -- what each method defines ------------------------------------------------------
    @abc.abstractmethod
    def check_method(self):
        """Raise ValueError unless this method can sum with this kernel (and box)."""

    @abc.abstractmethod
    def evaluate(self, x, alpha, sigma, targets, *, gradient, sigma_range, plan):
        """u and ∇u at ``targets`` with every pair in (the self pairs too), in
        ``precision`` (arguments as :meth:`__call__`)."""

    # -- the call ------------------------------------------------------------------------
    def __call__(self, x, alpha, sigma, targets, *, n_self=0, gradient=True,
                 sigma_range=None, plan=None):
        u, grad_u = self.evaluate(x, alpha, sigma, targets, gradient=gradient,
                                  sigma_range=sigma_range, plan=plan)
        if gradient and n_self:
            self.remove_self_pairs(grad_u, alpha, sigma, 0, n_self, reuse=plan is not None)
        return u, grad_u

    def remove_self_pairs(self, grad_u, alpha, sigma, lo, hi, reuse=False):
        """Take the self pairs (r = 0) of the sources ``lo .. hi - 1`` out of ``grad_u``
        (its rows 0 .. hi − lo − 1 are those sources as targets), in place: (1/4π)
        A(0, σ_p) α_p × · (A(0) := 0 where infinite), six strided updates, no (N, 3, 3)
        temporary at the step's peak.  ``reuse``: a time stepper's call (cached factors,
        :meth:`_self_factors`)."""
        if hi <= lo:
            return grad_u
        a0 = self._self_factors(sigma, hi, self.device.xp, reuse=reuse)[lo:hi]
        subtract_skew(grad_u[:hi - lo], INV_4PI * (a0[:, None] * alpha[lo:hi]))
        return grad_u

    def remove_self_pairs_of(self, grad_u, alpha, sigma, rows, n, reuse=False):
        """:meth:`remove_self_pairs` for the sources ``rows`` (k,) int (each below
        ``n``, the sources whose self pairs are out), whose self pairs ``grad_u``'s k rows
        hold (a rank's share of the elements, :mod:`vortexsim.summation.distributed`).
        Each row gets the bits that :meth:`remove_self_pairs` gives it (the factors are
        element by element); without ``reuse`` the factors are made for these rows
        only."""
        if rows.shape[0] == 0:
            return grad_u
        xp = self.device.xp
        if reuse:
            a0 = self._self_factors(sigma, n, xp, reuse=True)[rows]
        else:
            a0 = self._self_factors(sigma[rows], rows.shape[0], xp, reuse=False)
        subtract_skew(grad_u, INV_4PI * (a0[:, None] * alpha[rows]))
        return grad_u

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

    # -- field sums of the diagnostics ---------------------------------------------------
    def fields(self, x, alpha, sigma, targets=None, target_sigma=None, symmetric=False):
        """u, ψ and ω at blob targets in O(N + M) (:meth:`vortexsim.fmm.FMM.fields`;
        arguments and result there): the energy, enstrophy and helicity of the
        diagnostics in free space.  Runs on this summation's FMM; the other methods make
        one for it on first use (float64, level-uniform tree, this tol)."""
        if self._fields_fmm is None:
            self._fields_fmm = self.fmm if self.fmm is not None else FMM(
                self.kernel, tol=self.tol, device=self.device, tree="uniform")
        return self._fields_fmm.fields(x, alpha, sigma, targets, target_sigma, symmetric)

    # -- the periodic box's series (with a box) ------------------------------------------
    def spectral_sum(self, sigma, sigma_range=None):
        """The :class:`vortexsim.summation.spectral.SpectralSum` of this box for cores
        ``sigma`` (one σ: host ``sigma_range`` when known, else one transfer), made once
        per σ: the spectral sum of the method ``"spectral"`` and the field sums of the
        diagnostics of every periodic method (Gaussian kernels)."""
        lo = uniform_core_radius(*(sigma_range if sigma_range is not None else (
            float(sigma.min()), float(sigma.max()))), "the periodic box's spectral sum")
        if self.spectral is None or self.spectral.sigma != lo:
            self.spectral = SpectralSum(self.box, lo, self.tol,
                                        order=GAUSSIAN_ORDERS[self.kernel.name])
        return self.spectral

    def field_sums(self, x, alpha, sigma, sigma_range=None, lattice=None):
        """The seven quadratic field sums of the periodic box's diagnostics rows
        (:meth:`vortexsim.summation.spectral.SpectralSum.field_sums`: a dict of host
        floats) of the elements ``x``, ``alpha`` of cores ``sigma``; ``lattice`` = n when
        they sit on the periodic n³ lattice in remesh order (then by plain FFTs,
        :class:`vortexsim.summation.lattice.LatticeSum`).  The series of the spectral
        sum, the reference; the particle-mesh solve sums its own."""
        if lattice is not None:
            return self.lattice_sum(lattice, sigma_range).field_sums(alpha)
        return self.spectral_sum(sigma, sigma_range).field_sums(x, alpha)

    def check_core(self, sigma):
        """ValueError unless this summation can sum elements of core radius ``sigma`` [L]
        (the core a remeshing sets, checked before the first step); the periodic spectral
        sum checks the size of its series; the others need nothing."""
        del sigma

    def lattice_sum(self, n, sigma_range):
        """The :class:`vortexsim.summation.lattice.LatticeSum` of the periodic n³ lattice
        for the cores of host ``sigma_range`` (one σ), made once per (n, σ)."""
        spectral = self.spectral_sum(None, sigma_range)
        key = (int(n), spectral.sigma, spectral.tol, id(spectral))
        if self._lattice is None or self._lattice[0] != key:
            self._lattice = (key, LatticeSum(spectral, n, self.device.xp))
        return self._lattice[1]

    def on_lattice(self, alpha, n, sigma_range):
        """u (n³, 3) and ∇u (n³, 3, 3) at the nodes of the periodic n³ lattice of strengths
        ``alpha`` (n³, 3) in remesh order, each node's own blob out, in the summation's
        precision: the spectral sum's series by plain FFTs
        (:class:`vortexsim.summation.lattice.LatticeSum`, made once per (n, σ); its
        symbols are folded on the host, deterministically)."""
        u, grad_u = self.lattice_sum(n, sigma_range).evaluate(alpha)
        dtype = np.dtype(self.precision)
        return u.astype(dtype, copy=False), grad_u.astype(dtype, copy=False)

    # -- what it is, what it costs, its state --------------------------------------------
    def describe(self):
        """Resolved settings as a plain dict (the keys of the run's config)."""
        return {"method": self.method, "kernel": self.kernel.name, "tol": self.tol,
                "precision": self.precision}

    def memory_estimate(self, n_sources, n_targets):
        """Bytes [B] the method's working memory takes for ``n_sources`` sources (images
        included) and ``n_targets`` targets: an upper estimate from
        :attr:`BYTES_PER_SOURCE` and :attr:`BYTES_PER_TARGET` (on the summation's device)."""
        return int(self.BYTES_PER_SOURCE * int(n_sources)
                   + self.BYTES_PER_TARGET * int(n_targets))

    def state_dict(self):
        """Host values to restore (none: a summation holds caches only; the FMM's depth
        and root cube belong to the :class:`~vortexsim.summation.fmm.FMMPlanner`)."""
        return {}

    def load_state_dict(self, state):
        """Restore :meth:`state_dict` (nothing to restore); returns self."""
        del state
        return self
