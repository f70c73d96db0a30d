r"""A summation whose targets the ranks of a communicator share: the first version of the
distributed sum over ranks, with the sources replicated.

Every rank holds every source (the elements and their images) and the same targets;
rank r sums its share of the M targets with its own copy of the method
(:meth:`vortexsim.summation.base.Summation.__call__`, no self pairs), the ranks gather the
shares in rank order, put them back in the caller's order and take the self pairs out, so
that every rank ends with the same u (M, 3) and ∇u, bit for bit.  The FMM's error is that
of each rank's own evaluation (its tolerance); a direct sum gives the one-rank result to
round-off.

The shares are runs of the Morton (Z-order) curve (:func:`share_targets`), so that each
rank's targets fill a compact part of space: its FMM's target tree holds targets in the
leaves of its part only, and the near field and L2P shrink with the number of ranks,
and so do the M2L and L2L, which translate only into the boxes leading to the rank's
targets (:mod:`vortexsim.fmm.targets`; a level with fewer such boxes than source boxes
takes the dense M2L into them rather than the sparse M2L over every source box).  The
source tree is repeated on every rank; the FMM's upward pass is shared (each rank makes
the multipoles of its run of the occupied leaves, ``Summation.sharing_ranks``) in calls
that may transfer (not those of a time step's plan after its first, which are sync-free:
there every rank makes the whole pass).  Shares hold equal target counts, made anew
at every call from the targets' positions: the shares follow the flow.  Shares cut by a
modelled cost on the FMM's leaves were tried and were slower (``benchmarks/RESULTS.md``,
"Several GPUs").

The gather stays on the device where the communicator can (``allgather_array``: NCCL on
GPU ranks, :class:`vortexsim.backend.nccl.NCCLCommunicator`; mpi4py's Allgatherv of host
buffers on CPU ranks); a communicator without it gathers pickled host arrays
(:meth:`vortexsim.backend.communicator.Communicator.allgather`).  The rows go back to
the caller's order by a gather through the inverse permutation on the GPU
(:mod:`vortexsim.kernels.permute`).

What it does not do yet: weight the shares by measured cost, or exchange only the
sources each rank needs (a locally essential tree): ``docs/parallel.md``.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..backend import stable_argsort, to_host
from ..fmm.plan import gradient_count
from ..kernels.morton import bounding_cube, morton_keys
from ..kernels.permute import inverse_permutation, unpermute_rows

__all__ = ["SharedTargets", "TargetShares", "share_targets", "target_share", "SHARE_BITS"]

#: bits per axis of the Morton keys that order the targets into shares: 2^30 cells of the
#: targets' bounding cube (keys fit a uint32, which sorts in half the radix passes of a
#: uint64; finer order than this changes the shares by a few targets at their ends)
SHARE_BITS = 10


def target_share(m, rank, size):
    """(lo, hi): rank ``rank``'s contiguous share of ``m`` items among ``size`` ranks,
    the shares as even as whole items allow, in rank order."""
    return rank * m // size, (rank + 1) * m // size


@dataclasses.dataclass(frozen=True)
class TargetShares:
    """How the ranks share M targets of which the first k get ∇u.

    Attributes
    ----------
    order : int64 array (M,) of the targets' namespace, the target indices in share order:
        rank 0's targets with ∇u, then its other targets, then rank 1's, ...
    grad_order : int64 array (k,), the indices of the targets with ∇u in share order (the
        ∇u rows that the ranks' shares gather into)
    counts : tuple of int, the targets of each rank's share
    grad_counts : tuple of int, the targets with ∇u at the start of each rank's share
    rank : int, the rank that holds these shares
    """

    order: object
    grad_order: object
    counts: tuple
    grad_counts: tuple
    rank: int

    @property
    def mine(self):
        """The indices (m_r,) of this rank's targets (its ∇u targets first)."""
        start = sum(self.counts[:self.rank])
        return self.order[start:start + self.counts[self.rank]]


def share_targets(targets, k, rank, size, xp):
    """The ranks' shares (:class:`TargetShares`) of ``targets`` (M ≥ 1, 3) of which the
    first ``k`` get ∇u: runs of the Morton curve of equal counts.

    The targets with ∇u (0 .. k − 1, the elements) and the others (the tracers) are
    ordered separately, each by its Morton key (:func:`vortexsim.kernels.morton.morton_keys`,
    :data:`SHARE_BITS` per axis, in the bounding cube of all targets; a stable sort keeps
    equal keys in index order), and each ordered group is cut into ``size`` runs of
    nearly equal counts (:func:`target_share`): rank r sums its run of each group, the
    ∇u targets first.  Ordering the groups apart keeps every share's count and ∇u count
    a function of (M, k, size) alone, known on the host without a transfer, and each
    kernel launch of a rank uniform (∇u or not); a rank's two runs may lie in different
    parts of space where the tracers do not follow the elements.

    The keys, the sort and therefore the shares are the same on every rank (the same
    target bits, deterministic arithmetic).  Arrays of ``xp`` (NumPy or CuPy)."""
    m = targets.shape[0]
    lo, width = bounding_cube(targets, xp)
    keys = morton_keys(targets, lo, width, SHARE_BITS, xp).astype(xp.uint32)
    groups = [(first, last) for first, last in ((0, k), (k, m)) if last > first]
    ordered = [stable_argsort(keys[first:last], xp).astype(xp.int64) + first
               for first, last in groups]
    parts, counts, grad_counts = [], [], []
    for r in range(size):
        count = with_grad = 0
        for (first, last), order in zip(groups, ordered):
            lo_r, hi_r = target_share(last - first, r, size)
            parts.append(order[lo_r:hi_r])
            count += hi_r - lo_r
            if first == 0 and k > 0:
                with_grad = hi_r - lo_r
        counts.append(count)
        grad_counts.append(with_grad)
    grad_order = ordered[0] if k > 0 else xp.zeros(0, dtype=xp.int64)
    return TargetShares(xp.concatenate(parts), grad_order, tuple(counts),
                        tuple(grad_counts), rank)


class SharedTargets:
    """``inner`` (a :class:`vortexsim.summation.base.Summation`) with its targets shared
    by the ranks of ``communicator`` along the Morton curve; everything but the call is
    the inner summation's (its method, kernel, device, FMM, lattice paths)."""

    def __init__(self, inner, communicator):
        self.inner = inner
        self.communicator = communicator

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def shares(self, targets, gradient=True):
        """The ranks' :class:`TargetShares` of ``targets`` for a call with ``gradient``
        (what :meth:`__call__` sums; a benchmark times a rank's share alone with it)."""
        comm = self.communicator
        k = gradient_count(gradient, targets.shape[0], False)
        return share_targets(targets, k, comm.rank, comm.size, self.inner.device.xp)

    def __call__(self, x, alpha, sigma, targets, *, n_self=0, gradient=True,
                 sigma_range=None, plan=None):
        """u (M, 3) and ∇u (k, 3, 3) as :meth:`vortexsim.summation.base.Summation.__call__`
        gives them on one rank, each rank summing its share of the targets."""
        comm, inner = self.communicator, self.inner
        xp = inner.device.xp
        m = targets.shape[0]
        if m < comm.size:
            # fewer targets than ranks: every rank makes the call itself (the same inputs
            # and a deterministic method give the same bits everywhere)
            return inner(x, alpha, sigma, targets, n_self=n_self, gradient=gradient,
                         sigma_range=sigma_range, plan=plan)
        k = gradient_count(gradient, m, False)      # ∇u at the first k targets
        shares = share_targets(targets, k, comm.rank, comm.size, xp)
        count, with_grad = shares.counts[comm.rank], shares.grad_counts[comm.rank]
        # the rank's gradient argument: a bool as given (its share is all ∇u targets or
        # none), else the count of its ∇u targets, which come first in its share
        own = gradient if isinstance(gradient, (bool, np.bool_)) else with_grad
        dtype = np.dtype(inner.precision)
        # the self pairs of the elements 0 .. n_self − 1 (Summation.__call__'s
        # correction): where every ∇u target is an element, each rank takes them out of
        # its own share's rows (its elements' factors only, the same bits per row as one
        # rank's); else every rank takes them all out after the gather
        own_self = bool(n_self) and n_self == k
        if count:
            # every pair in, the self pairs too (they come out below).  The ranks share
            # the method's source-side work (the FMM's upward pass) when every one of
            # them makes the call: every share holds targets (the counts are the same on
            # every rank); for this call only, so that no other call of the method waits
            # for ranks that do not make it
            inner.sharing_ranks = comm if all(shares.counts) else None
            try:
                u, grad_u = inner(x, alpha, sigma, targets[shares.mine], n_self=0,
                                  gradient=own, sigma_range=sigma_range, plan=plan)
            finally:
                inner.sharing_ranks = None
        else:                                 # both of this rank's runs are empty
            u, grad_u = xp.zeros((0, 3), dtype), xp.zeros((0, 3, 3), dtype)
        if own_self and with_grad:
            inner.remove_self_pairs_of(grad_u, alpha, sigma, shares.mine[:with_grad], n_self,
                                       reuse=plan is not None)
        # the gathered rows go back to the caller's order (a gather through the inverse
        # on the GPU)
        inv = inverse_permutation(shares.order, xp) if xp is not np else None
        if gradient is False or k == 0:
            # no ∇u rows anywhere: the call's own answer (None, or an empty array for
            # gradient=0 where the method returns one; every rank's share holds targets
            # then, M ≥ size) is the same on every rank
            u_all, _ = self._gather(u, None, shares, False)
        else:
            if grad_u is None:                      # a share without ∇u targets
                grad_u = xp.zeros((0, 3, 3), u.dtype)
            u_all, grad_all = self._gather(u, grad_u, shares, True)
            # where every target has ∇u, their order is the targets': one inverse serves
            grad_u = unpermute_rows(grad_all, shares.grad_order, xp, inv if k == m else None)
        u = unpermute_rows(u_all, shares.order, xp, inv)
        if grad_u is not None and grad_u.shape[0] and n_self and not own_self:
            inner.remove_self_pairs(grad_u, alpha, sigma, 0, n_self, reuse=plan is not None)
        return u, grad_u

    def _gather(self, u, grad_u, shares, with_grad):
        """(u of every share, ∇u of every share or None), concatenated in rank order, on
        the summation's device: through the communicator's ``allgather_array`` where it
        has one (device buffers with NCCL), else pickled host arrays."""
        comm, xp = self.communicator, self.inner.device.xp
        gather = getattr(comm, "allgather_array", None)
        if gather is not None:
            u_all = gather(u, counts=shares.counts)
            grad_all = gather(grad_u, counts=shares.grad_counts) if with_grad else None
            return u_all, grad_all
        parts = comm.allgather((to_host(u), to_host(grad_u) if with_grad else None))
        u_all = xp.asarray(np.concatenate([p[0] for p in parts]))
        grad_all = xp.asarray(np.concatenate([p[1] for p in parts])) if with_grad else None
        return u_all, grad_all
