"""A summation whose targets the ranks of a communicator share: the first version of the
distributed sum over ranks, with the sources replicated.

Every rank holds every source (the elements and their images) and the same targets;
rank r sums its contiguous share ``target_share(M, r, P)`` of the M targets with its own
copy of the method (:meth:`vortexsim.summation.base.Summation.evaluate`, the self pairs
of its share taken out), and the ranks gather the shares in rank order
(:meth:`vortexsim.backend.communicator.Communicator.allgather`), so that every rank ends
with the same u (M, 3) and ∇u, bit for bit.  The FMM's error is that of each rank's own
evaluation (its tolerance); a direct sum gives the one-rank result to round-off.

What it does not do yet: balance the shares by measured cost along the Morton curve,
exchange only the sources each rank needs (a locally essential tree), or gather device
arrays without the host (NCCL): ``docs/parallel.md``.
"""
from __future__ import annotations

import numpy as np

from ..backend import to_host
from ..fmm.plan import gradient_count

__all__ = ["SharedTargets", "target_share"]


def target_share(m, rank, size):
    """(lo, hi): rank ``rank``'s contiguous share of ``m`` targets among ``size`` ranks,
    the shares as even as whole targets allow, in rank order."""
    return rank * m // size, (rank + 1) * m // size


class SharedTargets:
    """``inner`` (a :class:`vortexsim.summation.base.Summation`) with its targets shared
    by the ranks of ``communicator``; everything but the call is the inner summation's
    (its method, kernel, device, FMM, lattice paths)."""

    def __init__(self, inner, communicator):
        self.inner = inner
        self.communicator = communicator

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __call__(self, x, alpha, sigma, targets, *, n_self=0, gradient=True,
                 sigma_range=None, plan=None):
        """u (M, 3) and ∇u (k, 3, 3) as :meth:`vortexsim.summation.base.Summation.__call__`
        gives them on one rank, each rank summing its share of the targets."""
        comm, inner = self.communicator, self.inner
        xp = inner.device.xp
        m = targets.shape[0]
        lo, hi = target_share(m, comm.rank, comm.size)
        with_gradient = gradient_count(gradient, m, False)       # ∇u at the first k
        own = gradient if isinstance(gradient, (bool, np.bool_)) else \
            max(0, min(with_gradient, hi) - lo)
        u, grad_u = inner.evaluate(x, alpha, sigma, targets[lo:hi], gradient=own,
                                   sigma_range=sigma_range, plan=plan)
        if grad_u is not None and n_self:
            inner.remove_self_pairs(grad_u, alpha, sigma, lo, min(n_self, hi),
                                    reuse=plan is not None)
        parts = comm.allgather((to_host(u), None if grad_u is None else to_host(grad_u)))
        u = xp.asarray(np.concatenate([p[0] for p in parts]))
        grads = [p[1] for p in parts if p[1] is not None]      # shares with ∇u rows
        return u, (xp.asarray(np.concatenate(grads)) if grads else None)
