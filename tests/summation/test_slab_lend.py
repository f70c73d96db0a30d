"""The slab mesh solve of a state partitioned by slab (vortexsim.summation.slab_lend): each
rank holds the elements of its slab's lattice nodes, jittered by up to ±0.9 h (so some sit
in a neighbour's slab, across the periodic face at x = 0 too), and lends those to their
owners.  On 2 and 3 thread ranks (tests/thread_ranks.py), n = 8 and 9, σ = h at order 6:
u and ∇u are the one-rank MeshSolve's rows to 1e-12 of the largest value, the same bits on
repeated runs; the remeshed strengths are the one-rank remesh's rows to 1e-13; without
gradient ∇u is None; ranks holding nothing or owning nothing take part; the CuPy path
(GPU only)."""
import numpy as np
import pytest
from thread_ranks import on_ranks  # tests/thread_ranks.py

from vortexsim.geometry.remesh import remesh
from vortexsim.geometry.slab import Slabs
from vortexsim.summation.mesh import MeshSolve
from vortexsim.summation.slab_lend import evaluate_lent, p2m_lent, remesh_lent
from vortexsim.summation.slab_mesh import SlabMeshSolve

BOX = 2 * np.pi
ORDER = 6
#: the ranks' values are the one-rank values to 1e-12 of their largest (issue 37)
TOLERANCE = 1e-12


def _lattice(n, seed):
    """The n³ nodes (remesh order) jittered by uniform displacements up to ±0.9 h per
    component, random strengths (Σα = 0), and each element's node plane i."""
    rng = np.random.default_rng(seed)
    h = BOX / n
    i, j, k = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij")
    nodes = np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1) * h
    x = nodes + rng.uniform(-0.9, 0.9, nodes.shape) * h
    alpha = 1e-2 * rng.standard_normal(nodes.shape)
    alpha -= alpha.mean(axis=0)
    return x, alpha, i.ravel()


def _holdings(n, size, plane):
    """held[r]: the elements of rank r, those whose unjittered node is in its slab."""
    owner = Slabs(n, size).owner(plane)
    return [np.flatnonzero(owner == r) for r in range(size)]


def _run(size, n, x, alpha, held, gradient=True, xp=np, repeat=1):
    """[(u, ∇u, remeshed rows) of evaluate_lent / remesh_lent on rank r] on ``size``
    thread ranks, rank r holding the elements ``held[r]`` (host arrays back)."""
    def work(comm):
        solve = SlabMeshSolve(BOX, n, BOX / n, ORDER, comm, xp)
        mine_x, mine_a = xp.asarray(x[held[comm.rank]]), xp.asarray(alpha[held[comm.rank]])
        out = []
        for _ in range(repeat):
            u, grad = evaluate_lent(solve, mine_x, mine_a, gradient=gradient)
            rows = remesh_lent(solve, mine_x, mine_a)
            omega = p2m_lent(solve, mine_x, mine_a)
            out.append(tuple(None if a is None else (a.get() if hasattr(a, "get") else a)
                             for a in (u, grad, rows, omega)) + (solve.x_planes,))
        return out
    return on_ranks(size, work)


def _lent_counts(n, size, x, held):
    """Per rank: its elements owned by another rank, and those across x = 0."""
    owner = Slabs(n, size).owner(np.floor(x[:, 0] / (BOX / n)).astype(np.int64) % n)
    return ([int(np.count_nonzero(owner[h] != r)) for r, h in enumerate(held)],
            int(np.count_nonzero(x[held[0], 0] < 0)))


@pytest.mark.parametrize("n", [8, 9])
@pytest.mark.parametrize("size", [2, 3])
def test_lent_evaluation_is_the_one_rank_solve(size, n):
    x, alpha, plane = _lattice(n, seed=10 * size + n)
    held = _holdings(n, size, plane)
    lent, across = _lent_counts(n, size, x, held)
    assert all(count > 0 for count in lent) and across > 0      # strays, across x = 0 too
    want_u, want_grad = MeshSolve(BOX, n, BOX / n, order=ORDER).evaluate(x, alpha)
    whole = remesh(x, alpha, BOX / n, box_length=BOX)
    first, again = _run(size, n, x, alpha, held, repeat=2), _run(size, n, x, alpha, held)
    scale_u, scale_g = np.abs(want_u).max(), np.abs(want_grad).max()
    scale_a = np.abs(whole.alpha).max()
    for rank, (runs, rerun) in enumerate(zip(first, again)):
        u, grad, rows, omega, (i0, i1) = runs[0]
        mine = held[rank]
        assert u.shape == (len(mine), 3) and grad.shape == (len(mine), 3, 3)
        assert u.dtype == grad.dtype == np.float64
        assert np.abs(u - want_u[mine]).max() <= TOLERANCE * scale_u
        assert np.abs(grad - want_grad[mine]).max() <= TOLERANCE * scale_g
        # the remeshed strengths: the one-rank remesh's rows of this slab, = ω h³
        assert rows.shape == (n * n * (i1 - i0), 3)
        assert np.array_equal(whole.x[i0 * n * n], [i0 * BOX / n, 0.0, 0.0])
        assert np.abs(rows - whole.alpha[i0 * n * n:i1 * n * n]).max() <= 1e-13 * scale_a
        assert omega.shape == (3, i1 - i0, n, n)
        assert np.abs(omega.reshape(3, -1).T * (BOX / n) ** 3 - rows).max() \
            <= 1e-13 * scale_a
        # the same bits: twice in one run, and in another run (other thread timing)
        for other in (runs[1], rerun[0]):
            assert all(a.tobytes() == b.tobytes() for a, b in zip(runs[0][:4], other[:4]))


def test_without_gradient_the_gradient_is_none():
    n, size = 8, 2
    x, alpha, plane = _lattice(n, seed=3)
    held = _holdings(n, size, plane)
    with_grad = _run(size, n, x, alpha, held)
    without = _run(size, n, x, alpha, held, gradient=False)
    for (u, grad, *_), (u0, grad0, *_) in zip((r[0] for r in with_grad),
                                              (r[0] for r in without)):
        assert grad0 is None and grad is not None
        assert u0.tobytes() == u.tobytes()


def test_ranks_holding_or_owning_nothing_take_part():
    """3 ranks, n = 9 (slabs [0, 3), [3, 6), [6, 9)): only the nodes of planes 1 to 4
    (the jitter keeps them in planes 0 to 4: rank 2 owns nothing), all held by rank 2
    (ranks 0 and 1 hold nothing; rank 2 lends everything)."""
    n, size = 9, 3
    x, alpha, plane = _lattice(n, seed=5)
    keep = (plane >= 1) & (plane <= 4)
    x, alpha = x[keep], alpha[keep] - alpha[keep].mean(axis=0)
    held = [np.array([], dtype=np.int64)] * 2 + [np.arange(len(x))]
    want_u, want_grad = MeshSolve(BOX, n, BOX / n, order=ORDER).evaluate(x, alpha)
    whole = remesh(x, alpha, BOX / n, box_length=BOX)
    out = _run(size, n, x, alpha, held)
    assert not (Slabs(n, size).owner(np.floor(x[:, 0] / (BOX / n)).astype(np.int64) % n)
                == 2).any()                                  # rank 2 owns none
    for rank in range(size):
        u, grad, rows, _, (i0, i1) = out[rank][0]
        if rank < 2:
            assert u.shape == (0, 3) and grad.shape == (0, 3, 3)
        assert np.abs(rows - whole.alpha[i0 * n * n:i1 * n * n]).max() \
            <= 1e-13 * np.abs(whole.alpha).max()
    u, grad, *_ = out[2][0]
    assert np.abs(u - want_u).max() <= TOLERANCE * np.abs(want_u).max()
    assert np.abs(grad - want_grad).max() <= TOLERANCE * np.abs(want_grad).max()


def test_bad_shapes_are_refused():
    solve = SlabMeshSolve(BOX, 8, BOX / 8, ORDER)
    x = np.zeros((4, 3))
    with pytest.raises(ValueError, match="alpha has shape"):
        evaluate_lent(solve, x, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="x has shape"):
        p2m_lent(solve, np.zeros((4, 2)), np.zeros((4, 2)))


@pytest.mark.gpu
def test_lent_evaluation_on_cupy_is_the_one_rank_solve():
    import cupy as cp
    n, size = 9, 2
    x, alpha, plane = _lattice(n, seed=13)
    held = _holdings(n, size, plane)
    want_u, want_grad = MeshSolve(BOX, n, BOX / n, order=ORDER).evaluate(x, alpha)
    whole = remesh(x, alpha, BOX / n, box_length=BOX)
    for rank, runs in enumerate(_run(size, n, x, alpha, held, xp=cp)):
        u, grad, rows, _, (i0, i1) = runs[0]
        mine = held[rank]
        assert np.abs(u - want_u[mine]).max() <= TOLERANCE * np.abs(want_u).max()
        assert np.abs(grad - want_grad[mine]).max() <= TOLERANCE * np.abs(want_grad).max()
        assert np.abs(rows - whole.alpha[i0 * n * n:i1 * n * n]).max() \
            <= 1e-13 * np.abs(whole.alpha).max()
