r"""The periodic box's particle-mesh summation (``method="mesh"``) with its work split over
the ranks of a run by x-slabs of the lattice (:class:`.slab_mesh.SlabMeshSolve`), while
every rank keeps the whole (replicated) state.

Every rank holds every element and the same targets.  One call, on every rank together:

1. each rank names the owner of every source and target
   (:meth:`.slab_mesh.SlabMeshSolve.owner_of`: the rank whose x-planes hold the node
   below, ⌊x/h⌋ mod n), O(N + M) on the replicated arrays, the same masks on every rank;
2. :meth:`.slab_mesh.SlabMeshSolve.evaluate` of its own sources at its own targets: P2M
   onto its slab with the ghost planes added by its neighbours, fifteen slab transforms
   (each one alltoall), M2P at its targets;
3. the ranks gather their targets' u (and ∇u) in rank order and put them back in the
   caller's order, then take the self pairs out as :meth:`.base.Summation.__call__` does:
   every rank ends with the same u (M, 3) and ∇u, bit for bit, whatever the timing (the
   solve's collectives and the gather sum and concatenate in rank order).

Against the one-rank :class:`.periodic_mesh.PeriodicMeshSum` the result agrees to
round-off (the sums of P2M and of the transforms are associated differently), not to
the bit.

At the lattice nodes (:meth:`SlabShares.on_lattice`: the elements on the n³ nodes in
remesh order, rank r's x-slab the rows [i0 n², i1 n²)) each rank solves on its slab with
the slab transforms alone (no P2M or M2P) and the slabs' rows are gathered in rank order,
which is the whole array in order.

The gather stays on the device where the communicator can (``allgather_array``: NCCL on
GPU ranks, mpi4py's ``Allgatherv`` of host buffers on CPU ranks); a communicator without
it gathers pickled host arrays (:meth:`vortexsim.backend.communicator.Communicator.allgather`).

Cost per rank and call, beyond :mod:`.slab_mesh`'s (n_x ≈ n/P planes): the owners of all
N sources and M targets and a stable sort of the M target owners (replicated, O(N + M));
one transfer to the host of 2P counts (the shapes of the shares); the gathers of u
(24 M B) and ∇u (72 k B) received by every rank; the self pairs of all n_self elements
(replicated, O(n_self)).  Memory: the slab solve's (per owned lattice point) and the
whole u and ∇u.

Where it serves: the runs whose state stays whole on every rank (a periodic run with
tracers or PSE); the periodic cases split their state by slabs instead
(:mod:`vortexsim.model.slab_partition`), which uses :meth:`SlabShares.slab_solve` and,
for the whole state assembled at output, :meth:`SlabShares.field_sums` (the inner
summation's, replicated on every rank: its whole-lattice P2M and three transforms).
"""
from __future__ import annotations

import numpy as np

from ..backend import stable_argsort, to_host
from ..fmm.plan import gradient_count
from ..geometry.slab import GHOST_ABOVE, GHOST_BELOW
from ..kernels.cutoff import GAUSSIAN_ORDERS
from ..state import uniform_core_radius
from .slab_mesh import SlabMeshSolve
from .spectral import self_gradient

__all__ = ["SlabShares", "check_slab_lattice", "share_order"]


def check_slab_lattice(n, size):
    """ValueError unless a lattice of ``n`` nodes per edge splits into x-slabs of at least
    the M4′ ghost width (2 planes) on ``size`` ranks: n ≥ 2 × size."""
    if int(n) < GHOST_ABOVE * int(size):
        raise ValueError(
            f"method='mesh' on {size} ranks splits the {n}^3 remeshing lattice into x-slabs, "
            f"one per rank, each of at least {GHOST_ABOVE} planes (M4' reaches "
            f"{GHOST_BELOW} plane below a slab and {GHOST_ABOVE} above, which must come from "
            f"the neighbouring ranks); n = {n} allows at most {int(n) // GHOST_ABOVE} "
            f"ranks. Run on at most {int(n) // GHOST_ABOVE} ranks, or refine the lattice to "
            f"n >= {GHOST_ABOVE * int(size)} (remesh_spacing <= box / "
            f"{GHOST_ABOVE * int(size)}).")


def share_order(owner, k, size, xp):
    """The share order of M targets whose ranks are ``owner`` (M,) (of ``size`` ranks) and
    of which the first ``k`` get ∇u: (order (M,) int64 on ``xp``, bounds: a host tuple of
    2 size + 1 ints).  ``order`` lists rank 0's ∇u targets (index < k), then its other
    targets, then rank 1's, …, each run in index order (so a rank's ∇u targets lead its
    share, in the caller's order); run j (rank j // 2, with ∇u when j is even) is
    ``order[bounds[j]:bounds[j + 1]]``.  A stable sort of the keys 2 owner + (index ≥ k),
    16-bit for fewer than 2^14 ranks (NumPy sorts them by radix, in O(M)); one transfer
    of the bounds.  The same on every rank (the same owners, deterministic)."""
    key = (2 * owner).astype(xp.int16 if size < 2 ** 14 else xp.int32)
    key[k:] += 1
    order = stable_argsort(key, xp)
    bounds = xp.searchsorted(key[order], xp.arange(2 * size + 1, dtype=key.dtype))
    return order, tuple(int(b) for b in to_host(bounds))


class SlabShares:
    """``inner`` (a :class:`vortexsim.summation.periodic_mesh.PeriodicMeshSum`) with its
    solve split into x-slabs over the ranks of ``communicator`` (module docstring); the
    call as :meth:`vortexsim.summation.base.Summation.__call__`, and everything else the
    inner summation's (its method, kernel, device, box, lattice n, field sums,
    description, memory estimate, state).

    Parameters
    ----------
    inner : PeriodicMeshSum (``method="mesh"``)
    communicator : :class:`vortexsim.backend.Communicator` of the ranks (each holding the
        whole state; every call collective)
    """

    def __init__(self, inner, communicator):
        if getattr(inner, "name", None) != "mesh":
            raise TypeError(f"SlabShares splits the particle-mesh solve (method='mesh'); "
                            f"got a summation of method {getattr(inner, 'name', inner)!r}. "
                            "Use SharedTargets for the other methods.")
        self.inner = inner
        self.communicator = communicator
        self._solve = None

    def __getattr__(self, name):
        if name in ("inner", "communicator", "_solve"):   # not set yet (copy, unpickle)
            raise AttributeError(name)
        return getattr(self.inner, name)

    def bind_lattice(self, n):
        """The remeshing lattice's nodes per edge (None: no remeshing, refused), which
        must give every rank a slab of 2 planes at least (ValueError: n ≥ 2 × ranks)."""
        self.inner.bind_lattice(n)
        check_slab_lattice(self.inner.n, self.communicator.size)
        self._solve = None

    def slab_solve(self, sigma, sigma_range=None):
        """The :class:`SlabMeshSolve` of this rank for cores ``sigma`` (one σ: host
        ``sigma_range`` when known, else one transfer), made once per σ and lattice."""
        inner = self.inner
        if inner.n is None:
            raise ValueError("method='mesh' has no lattice yet: build it through a model "
                             "with remesh_every > 0 (VortexModel binds the lattice).")
        lo = uniform_core_radius(*(sigma_range if sigma_range is not None else (
            float(sigma.min()), float(sigma.max()))), "the particle-mesh solve")
        solve = self._solve
        if solve is None or solve.sigma != lo or solve.n != inner.n:
            check_slab_lattice(inner.n, self.communicator.size)
            solve = self._solve = SlabMeshSolve(
                inner.box, inner.n, lo, GAUSSIAN_ORDERS[inner.kernel.name],
                self.communicator, inner.device.xp)
        return solve

    def __call__(self, x, alpha, sigma, targets, *, n_self=0, gradient=True,
                 sigma_range=None, plan=None):
        """u (M, 3) and ∇u (k, 3, 3) (None without ``gradient``) as
        :meth:`vortexsim.summation.base.Summation.__call__` gives them on one rank (to
        round-off), each rank solving on its slab with its own sources and targets;
        collective, the same bits on every rank."""
        comm, inner = self.communicator, self.inner
        xp, rank = inner.device.xp, comm.rank
        m = targets.shape[0]
        k = gradient_count(gradient, m, False)          # ∇u at the first k targets
        solve = self.slab_solve(sigma, sigma_range)
        own = solve.owner_of(x) == rank
        order, bounds = share_order(solve.owner_of(targets), k, comm.size, xp)
        counts = tuple(bounds[2 * r + 2] - bounds[2 * r] for r in range(comm.size))
        grad_counts = tuple(bounds[2 * r + 1] - bounds[2 * r] for r in range(comm.size))
        mine = order[bounds[2 * rank]:bounds[2 * rank + 2]]
        f64 = xp.float64
        x_own = x[own].astype(f64, copy=False)
        alpha_own = alpha[own].astype(f64, copy=False)
        # the elements as their own targets: the same rows (index order), one set of weights
        t_own = None if targets is x else targets[mine].astype(f64, copy=False)
        # ∇u at all of the rank's targets when any rank needs it (the gradient's
        # transforms are collective), kept at its first grad_counts[rank]
        u, grad_u = solve.evaluate(x_own, alpha_own, t_own, gradient=bool(gradient))
        del x_own, alpha_own, t_own
        dtype = np.dtype(inner.precision)
        u = self._gather(u.astype(dtype, copy=False), counts)
        u_all = xp.empty((m, 3), dtype)
        u_all[order] = u
        if grad_u is None:
            return u_all, None
        grad_u = self._gather(grad_u[:grad_counts[rank]].astype(dtype, copy=False),
                              grad_counts)
        grad_all = xp.empty((k, 3, 3), dtype)
        grad_all[order if k == m else xp.concatenate(
            [order[bounds[2 * r]:bounds[2 * r + 1]] for r in range(comm.size)])] = grad_u
        del grad_u
        if n_self:
            # the self pairs of the elements 0 .. n_self − 1: the one-rank call's own
            # correction, the same arithmetic on the same bits on every rank
            inner.remove_self_pairs(grad_all, alpha, sigma, 0, n_self, reuse=plan is not None)
        return u_all, grad_all

    def on_lattice(self, alpha, n, sigma_range):
        """u (n³, 3) and ∇u (n³, 3, 3) at the nodes of strengths ``alpha`` (n³, 3) in
        remesh order, each node's own blob out, as
        :meth:`vortexsim.summation.periodic_mesh.PeriodicMeshSum.on_lattice` (to
        round-off): each rank solves on its x-slab, the rows [i0 n², i1 n²), with the
        slab transforms alone (the lattice vorticity α/h³ on the nodes: no P2M or M2P),
        and the slabs are gathered in rank order.  Collective, the same bits on every
        rank."""
        solve = self.slab_solve(None, sigma_range)
        n = int(n)
        if n != solve.n:
            raise ValueError(f"the elements sit on a {n}^3 lattice but the mesh solve's is "
                             f"{solve.n}^3.")
        if alpha.shape != (n ** 3, 3):
            raise ValueError(f"alpha has shape {alpha.shape}; expected ({n ** 3}, 3): the "
                             f"strengths of the {n}^3 lattice nodes in remesh order.")
        (i0, i1), plane = solve.x_planes, n * n
        u, grad_u = self.on_slab_nodes(alpha[i0 * plane:i1 * plane], sigma_range)
        dtype = np.dtype(self.inner.precision)
        counts = tuple(width * plane for width in
                       (b - a for a, b in solve.slabs.bounds))
        return (self._gather(u.astype(dtype, copy=False), counts),
                self._gather(grad_u.astype(dtype, copy=False), counts))

    def on_slab_nodes(self, alpha, sigma_range):
        """u (m, 3) and ∇u (m, 3, 3), float64, at this rank's slab nodes themselves, m =
        n_x n², of their strengths ``alpha`` (m, 3) in remesh order, each node's own blob
        out: the slab solve alone (no P2M or M2P).  Collective."""
        solve = self.slab_solve(None, sigma_range)
        u, grad_u = solve.on_nodes(solve.node_vorticity(alpha))
        grad_u -= self_gradient(alpha.astype(self.inner.device.xp.float64, copy=False),
                                solve.sigma, solve.order)
        return u, grad_u

    def field_sums(self, x, alpha, sigma, sigma_range=None, lattice=None):
        """The diagnostics' field sums: the inner summation's
        (:meth:`vortexsim.summation.periodic_mesh.PeriodicMeshSum.field_sums`), computed
        whole on every rank (replicated, not split: its P2M of all elements and three
        whole-lattice transforms); the same host floats on every rank."""
        return self.inner.field_sums(x, alpha, sigma, sigma_range=sigma_range,
                                     lattice=lattice)

    def _gather(self, part, counts):
        """The ranks' ``part`` (counts[r] rows on rank r) concatenated in rank order on
        the summation's device: the communicator's ``allgather_array`` where it has one
        (device buffers with NCCL), else pickled host arrays."""
        comm = self.communicator
        gather = getattr(comm, "allgather_array", None)
        if gather is not None:
            return gather(part, counts=counts)
        return self.inner.device.xp.asarray(np.concatenate(comm.allgather(to_host(part))))
