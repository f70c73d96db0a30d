r"""The slab mesh solve (:class:`.slab_mesh.SlabMeshSolve`) of a state partitioned by
slab, without redistributing it: each rank lends its elements that lie in a neighbour's
slab to that neighbour for one evaluation (or one P2M) and gets their values back.

Why
---
In the partitioned design every rank holds the elements of its own x-slab: after each
remeshing exactly its slab's lattice nodes (:func:`remesh_lent` gives their strengths).
During a time step's stages the elements move by less than a cell, so a few of them (those
within a cell of the slab's faces) have crossed into a neighbour's slab, the one that
:meth:`.slab_mesh.SlabMeshSolve.owner_of` names (⌊x/h⌋ mod n in its x-planes).
:meth:`.slab_mesh.SlabMeshSolve.evaluate` and :meth:`~.slab_mesh.SlabMeshSolve.p2m`
need every point on its owner; rather than move the state for each stage (and keep track
of the moves), the holder keeps its elements and lends the strays for the evaluation.

What
----
:func:`evaluate_lent` (collective, every rank with its own elements, any positions):

1. each rank names the owner of its elements (``owner_of``); those it owns stay, the
   others are packed, grouped by owner and in index order within a group, as one
   (k, 6) float64 array per destination (x then α) and sent by one
   ``communicator.alltoall``;
2. each rank evaluates ``solve.evaluate(points, strengths)`` with its owned elements (in
   index order) followed by the received ones (in rank order, then in the sender's
   order) as both the blobs and the targets;
3. the received points' u (and ∇u), packed as (k, 3) or (k, 12), go back to their
   holders by a second alltoall and are put in the caller's order.

Each rank ends with u (N_r, 3) and ∇u (N_r, 3, 3) of its own elements, float64, as the
one-rank :class:`.mesh.MeshSolve` of all ranks' elements gives them (to round-off).  The
values include each blob's own contribution (the self pair), as ``MeshSolve`` does: its
removal is the caller's (for ∇u: subtract :func:`.spectral.self_gradient` of the
strengths, as :class:`.slab_shares.SlabShares` does).

:func:`p2m_lent` lends the strays the same way (one alltoall) and returns the lattice
vorticity slab ω (3, n_x, n, n) of all ranks' elements; :func:`remesh_lent` the remeshed
strengths α = ω h³ of this rank's slab nodes as rows in remesh order, the rows
[i0 n², i1 n²) of :func:`vortexsim.geometry.remesh.remesh` on one rank (to round-off).

Cost
----
Beyond the solve's own collectives, two small alltoalls per evaluation (one per P2M): the
lent points out, 48 B each, and their values back, 24 B each (u) or 96 B (u and ∇u), plus
the ``owner_of`` of the rank's N_r elements, O(N_r), a stable sort of the k lent ones and
one host read of P + 1 offsets (a device sync on CuPy).  Points exactly owned need no
exchange: with elements moving less than a cell per stage only neighbouring ranks exchange,
at most about a plane of nodes per face (k ≲ 2 n² per rank against n_x n² held).  The
owner evaluates the lent points as its own (its P2M and M2P work grows by k).  On CuPy
everything stays on the device (boolean masks, ``xp.nonzero``); the alltoalls move device
buffers with :class:`vortexsim.backend.nccl.NCCLCommunicator` (NCCL send/recv, the shapes
over MPI first) and go through the host otherwise.

Determinism
-----------
Everything is ordered by rank, then by index: the points that each rank gives its solve
(its own in index order, then the received in sender-rank order and the sender's index
order), the replies and the scatter back.  The solve is deterministic on such input (P2M
in a fixed order, the ghost and transform exchanges summed in rank order), so the same
inputs give the same bits whatever the thread or process timing.

The shape checks here raise before any collective, on the rank at fault alone (an
argument error, as a wrong array would be anywhere); the solve's own checks (the
``gradient`` agreement) raise on every rank.
"""
from __future__ import annotations

import numpy as np

from ..backend import array_namespace, stable_argsort, to_host
from ..geometry import m4_slab
from ..geometry.slab import add_ghost_planes

__all__ = ["evaluate_lent", "p2m_lent", "remesh_lent"]


def _check(solve, x, alpha):
    """The namespace of ``x`` and ``alpha``, checked against the solve and each other."""
    xp = array_namespace(x, alpha)
    if xp is not solve.xp:
        raise TypeError("the elements must live on the mesh solve's device.")
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"x has shape {x.shape}; expected (N, 3).")
    if alpha.shape != x.shape:
        raise ValueError(f"alpha has shape {alpha.shape}; expected {x.shape} to match x.")
    return xp


def _lend(solve, x, alpha):
    """The lending exchange (one alltoall).  Returns (points, strengths, own, lent,
    sent, received): the points this rank then owns (M, 3) float64 with their strengths,
    its own elements first (index order) and the received ones after (rank order, then
    the sender's order); ``own``/``lent`` the indices into ``x`` of the kept elements and
    of the lent ones (grouped by owner, index order within); ``sent``/``received`` the
    rows sent to / received from each rank (host ints)."""
    xp = _check(solve, x, alpha)
    comm, rank, size = solve.communicator, int(solve.communicator.rank), \
        int(solve.communicator.size)
    f64 = xp.float64
    owner = solve.owner_of(x)
    own = xp.nonzero(owner == rank)[0]
    lent = xp.nonzero(owner != rank)[0]
    lent = lent[stable_argsort(owner[lent], xp)]                  # by owner, then index
    offsets = [int(o) for o in to_host(
        xp.searchsorted(owner[lent], xp.arange(size + 1, dtype=owner.dtype)))]
    packed = xp.empty((lent.shape[0], 6), dtype=f64)
    packed[:, :3] = x[lent]
    packed[:, 3:] = alpha[lent]
    got = comm.alltoall([packed[offsets[q]:offsets[q + 1]] for q in range(size)])
    del packed
    for q, part in enumerate(got):
        if part.ndim != 2 or part.shape[1] != 6 or (q == rank and part.shape[0]):
            raise RuntimeError(f"rank {q} lent a part of shape {part.shape}, expected "
                               f"(k, 6){' with k = 0' if q == rank else ''}: do all ranks "
                               "lend with the same solve?")
    sent = [offsets[q + 1] - offsets[q] for q in range(size)]
    received = [int(part.shape[0]) for part in got]
    m_own = int(own.shape[0])
    points = xp.empty((m_own + sum(received), 3), dtype=f64)
    strengths = xp.empty_like(points)
    points[:m_own] = x[own]
    strengths[:m_own] = alpha[own]
    at = m_own
    for part in got:
        points[at:at + part.shape[0]] = part[:, :3]
        strengths[at:at + part.shape[0]] = part[:, 3:]
        at += part.shape[0]
    return points, strengths, own, lent, sent, received


def evaluate_lent(solve, x, alpha, gradient=True):
    """u (N, 3) [L/T] and ∇u (N, 3, 3) [1/T] (None without ``gradient``), float64 in the
    caller's order, at this rank's elements ``x`` (N, 3) [L] with strengths ``alpha``
    (N, 3) [L³/T], of the blobs of all ranks, through the slab mesh ``solve``
    (:class:`.slab_mesh.SlabMeshSolve`): the elements that another rank owns
    (``solve.owner_of``) are lent to it for the evaluation (module docstring: one
    alltoall out, one back).  Positions anywhere (the box periodic).  The values include
    each blob's own contribution (the self pair), as :meth:`.mesh.MeshSolve.evaluate`
    does: removing it is the caller's.  Collective: every rank calls it with the same
    ``gradient``; the same bits whatever the timing."""
    points, strengths, own, lent, sent, received = _lend(solve, x, alpha)
    xp, comm, rank = solve.xp, solve.communicator, int(solve.communicator.rank)
    u, grad = solve.evaluate(points, strengths, gradient=gradient)
    del points, strengths
    m_own = int(own.shape[0])
    # the received points' values back to their holders, in the order they came
    width = 12 if gradient else 3
    reply = xp.empty((u.shape[0] - m_own, width), dtype=xp.float64)
    reply[:, :3] = u[m_own:]
    if gradient:
        reply[:, 3:] = grad[m_own:].reshape(-1, 9)
    bounds = np.concatenate([[0], np.cumsum(received)]).astype(int)
    back = comm.alltoall([reply[bounds[q]:bounds[q + 1]] for q in range(len(received))])
    del reply
    for q, part in enumerate(back):
        if part.ndim != 2 or part.shape != (sent[q], width):
            raise RuntimeError(f"rank {q} returned values of shape {part.shape} for the "
                               f"{sent[q]} points lent to it, expected ({sent[q]}, "
                               f"{width}).")
    n = x.shape[0]
    u_out = xp.empty((n, 3), dtype=xp.float64)
    u_out[own] = u[:m_own]
    grad_out = xp.empty((n, 3, 3), dtype=xp.float64) if gradient else None
    if gradient:
        grad_out[own] = grad[:m_own]
    del u, grad
    if lent.shape[0]:
        values = xp.concatenate([part for q, part in enumerate(back) if q != rank])
        u_out[lent] = values[:, :3]
        if gradient:
            grad_out[lent] = values[:, 3:].reshape(-1, 3, 3)
    return u_out, grad_out


def p2m_lent(solve, x, alpha):
    """ω on this rank's slab, (3, n_x, n, n) [1/T], of the blobs of all ranks, each rank
    passing its own elements ``x`` (N, 3) [L] and ``alpha`` (N, 3) [L³/T] (positions
    anywhere): the elements that another rank owns lent to it (one alltoall), then
    ``solve.p2m`` of the points each rank owns.  Collective; the same bits whatever the
    timing."""
    points, strengths, *_ = _lend(solve, x, alpha)
    return solve.p2m(points, strengths)


def remesh_lent(solve, x, alpha):
    """The remeshed strengths α [L³/T] of this rank's slab nodes, (n_x n², 3) with rows in
    remesh order (row (i − i0) n² + j n + k for node (i, j, k)), of the elements of all
    ranks (each passing its own ``x``, ``alpha``; the lending of :func:`p2m_lent`): the
    M4′ sums Σ_p W α_p themselves, ω h³ of :func:`p2m_lent` transposed (to round-off),
    and the rows [i0 n², i1 n²) of the one-rank
    ``vortexsim.geometry.remesh.remesh(x, alpha, h, box_length=L).alpha`` (to
    round-off).  Collective; the same bits whatever the timing."""
    points, strengths, *_ = _lend(solve, x, alpha)
    i0, i1 = solve.x_planes
    block = m4_slab.slab_p2m(points, strengths, solve.n, solve.h, i0, i1, scale=1.0)
    del points, strengths
    own = add_ghost_planes(block, solve.slabs, solve.communicator)
    del block
    return solve.xp.ascontiguousarray(own.reshape(3, -1).T)
