r"""The periodic box's spectral summation (``method="spectral"``): Gaussian blobs of one core.

The velocity of Gaussian blobs of one σ in the box [0, L)³ is a Fourier series
(:mod:`vortexsim.summation.spectral`: its non-uniform FFTs, the series cut at ``tol``);
this summation keeps one :class:`~vortexsim.summation.spectral.SpectralSum` per σ and, on
the box's lattice, one :class:`~vortexsim.summation.lattice.LatticeSum` per (n, σ)
(:meth:`~vortexsim.summation.base.Summation.on_lattice`).
"""
from __future__ import annotations

import numpy as np

from ..kernels.cutoff import GAUSSIAN_ORDERS
from ..kernels.nufft import fine_grid_size, kernel_width
from .base import Summation
from .spectral import SpectralSum, check_spectral

__all__ = ["PeriodicSpectralSum"]


class PeriodicSpectralSum(Summation):
    """The spectral sum of the periodic box (needs ``box``; the Gaussian kernels; one σ).

    Parameters as :class:`vortexsim.summation.base.Summation`.  Sums in float64 and
    returns ``precision``; ``plan`` is ignored (the series needs no tree)."""

    name = "spectral"
    BYTES_PER_SOURCE = 2_000
    BYTES_PER_TARGET = 600
    #: bytes per point of the own NUFFT's fine grid (three real grids and three half
    #: spectra of a type-1 or type-2 transform at once, a temporary)
    BYTES_PER_GRID_POINT = 64

    def check_method(self):
        if self.box is None:
            raise ValueError("method='spectral' sums a periodic box: set boundary='periodic' "
                             "and box = L.")
        check_spectral(self.kernel.name, self.device.is_gpu)

    def check_core(self, sigma):
        """ValueError when the series for cores ``sigma`` [L] has more modes than any
        machine holds (:data:`vortexsim.summation.spectral.MAX_MODES`)."""
        SpectralSum(self.box, float(sigma), self.tol, order=GAUSSIAN_ORDERS[self.kernel.name])

    def evaluate(self, x, alpha, sigma, targets, *, gradient, sigma_range, plan):
        del plan                               # the series: nothing to plan
        dtype = np.dtype(self.precision)
        u, grad_u = self.spectral_sum(sigma, sigma_range).evaluate(
            x, alpha, targets, gradient=gradient)
        return u.astype(dtype, copy=False), (
            None if grad_u is None else grad_u.astype(dtype, copy=False))

    def memory_estimate(self, n_sources, n_targets):
        """:meth:`Summation.memory_estimate` plus the own NUFFT's fine grid of the current
        core (:attr:`BYTES_PER_GRID_POINT` per point; none before the first call)."""
        grid = 0
        if self.spectral is not None:
            grid = fine_grid_size(self.spectral.m_max, kernel_width(self.spectral.eps)) ** 3
        return super().memory_estimate(n_sources, n_targets) + self.BYTES_PER_GRID_POINT * grid
