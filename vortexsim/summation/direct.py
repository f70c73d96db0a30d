r"""The direct summation: every source–target pair, exact to round-off.

u(y) = (1/4π) Σ_p q(ρ) α_p × r / r³ and its gradient (``physics.md``), by the NumPy
pair sums on the CPU and the CUDA kernel on the GPU
(:mod:`vortexsim.kernels.direct`): O(N M) time, O(N + M) memory.
"""
from __future__ import annotations

import numpy as np

from ..fmm.plan import target_sets
from ..kernels.cutoff import check_general_kernel
from ..kernels.direct import direct_sum_cuda, direct_sum_numpy
from .base import Summation

__all__ = ["DirectSum"]


class DirectSum(Summation):
    """All pairs (:func:`vortexsim.kernels.direct.direct_sum_numpy` on the CPU,
    :func:`~vortexsim.kernels.direct.direct_sum_cuda` on the GPU) in free space (with a
    ground plane's images among the sources).  Parameters as
    :class:`vortexsim.summation.base.Summation` (``tol`` is not used); ``plan`` is
    ignored."""

    name = "direct"

    def check_method(self):
        check_general_kernel(self.kernel, "method='direct'")

    def __call__(self, x, alpha, sigma, targets, *, n_self=0, gradient=True,
                 sigma_range=None, plan=None):
        # the pair sums and the self pairs' removal in the summation's precision
        dtype = np.dtype(self.precision)
        if x.dtype != dtype:
            x, alpha, sigma, targets = (a.astype(dtype) for a in (x, alpha, sigma, targets))
        return super().__call__(x, alpha, sigma, targets, n_self=n_self, gradient=gradient,
                                sigma_range=sigma_range, plan=plan)

    def evaluate(self, x, alpha, sigma, targets, *, gradient, sigma_range, plan):
        del sigma_range, plan                  # every pair: nothing to plan
        xp = self.device.xp
        direct = direct_sum_cuda if self.device.is_gpu else direct_sum_numpy
        # ∇u at the first k targets only when gradient = k: one call per target set
        outs = [direct(self.kernel, x, alpha, sigma, pts, gradient=grad)
                for _, pts, grad in target_sets(targets, gradient)]
        u = outs[0][0] if len(outs) == 1 else xp.concatenate([o[0] for o in outs])
        return u, outs[0][1]
