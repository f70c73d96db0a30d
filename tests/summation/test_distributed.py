"""Targets shared among ranks (vortexsim.summation.distributed.SharedTargets): two ranks
played by two threads whose communicator gathers through a barrier; the shares, the self
pairs of a share and the gathered u and ∇u against one rank's call (the direct sum to
round-off: NumPy's blocked sums round by block, the FMM to its tolerance); the ranks
agree to the bit."""
import threading

import numpy as np
import pytest

from vortexsim.backend import Communicator
from vortexsim.summation import make_summation
from vortexsim.summation.distributed import SharedTargets, target_share


class ThreadRanks(Communicator):
    """Rank ``rank`` of ``size`` threads: allgather through a shared list and a barrier."""

    def __init__(self, rank, size, board, barrier):
        self.rank, self.size, self.board, self._barrier = rank, size, board, barrier

    def barrier(self):
        self._barrier.wait()

    def allgather(self, obj):
        self.board[self.rank] = obj
        self._barrier.wait()
        out = list(self.board)
        self._barrier.wait()                  # nobody overwrites before all have read
        return out

    def allreduce_sum(self, array):
        return sum(self.allgather(array))

    def bcast(self, obj, root=0):
        return self.allgather(obj)[root]


def on_ranks(size, work):
    """[work(communicator) of rank 0, 1, ...], each rank a thread."""
    board, barrier, out = [None] * size, threading.Barrier(size), [None] * size

    def run(rank):
        out[rank] = work(ThreadRanks(rank, size, board, barrier))
    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(o is not None for o in out), "a rank did not finish"
    return out


def test_the_shares_cover_the_targets_once_in_order():
    for m in (0, 1, 7, 100):
        for size in (1, 2, 3, 5):
            shares = [target_share(m, r, size) for r in range(size)]
            assert shares[0][0] == 0 and shares[-1][1] == m
            assert all(a[1] == b[0] for a, b in zip(shares, shares[1:]))
            assert max(h - l for l, h in shares) - min(h - l for l, h in shares) <= 1


def blobs(n, m, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 3))
    alpha = 1e-3 * rng.standard_normal((n, 3))
    sigma = np.full(n, 0.05)
    targets = np.concatenate([x, rng.random((m, 3))])       # the elements, then tracers
    return x, alpha, sigma, targets


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("gradient", [True, 150, 0])
def test_shared_direct_sum_equals_one_rank_to_round_off(size, gradient):
    """The elements' ∇u only (gradient = 150 elements of 150 + 40 targets), all ∇u, or
    none; shares that cut the elements and the tracers anywhere; every rank the same
    bits."""
    x, alpha, sigma, targets = blobs(150, 40)
    one = make_summation("direct", "gaussian")
    want = one(x, alpha, sigma, targets, n_self=150, gradient=gradient)

    def work(comm):
        shared = make_summation("direct", "gaussian", communicator=comm)
        assert isinstance(shared, SharedTargets) and shared.method == "direct"
        return shared(x, alpha, sigma, targets, n_self=150, gradient=gradient)
    results = on_ranks(size, work)
    for u, grad in results:
        np.testing.assert_array_equal(u, results[0][0])
        np.testing.assert_allclose(u, want[0], rtol=1e-12, atol=1e-15)
        if want[1] is None:
            assert grad is None
        else:
            np.testing.assert_array_equal(grad, results[0][1])
            np.testing.assert_allclose(grad, want[1], rtol=1e-12, atol=1e-15)


def test_shared_fmm_matches_one_rank_to_its_tolerance_and_ranks_agree():
    x, alpha, sigma, targets = blobs(3000, 500, seed=1)
    one = make_summation("fmm", "gaussian", tol=1e-6)
    u1, g1 = one(x, alpha, sigma, targets, n_self=3000, gradient=3000)

    def work(comm):
        shared = make_summation("fmm", "gaussian", tol=1e-6, communicator=comm)
        return shared(x, alpha, sigma, targets, n_self=3000, gradient=3000)
    (ua, ga), (ub, gb) = on_ranks(2, work)
    np.testing.assert_array_equal(ua, ub)
    np.testing.assert_array_equal(ga, gb)
    assert ua.shape == u1.shape and ga.shape == g1.shape == (3000, 3, 3)
    assert np.linalg.norm(ua - u1) <= 1e-5 * np.linalg.norm(u1)
    assert np.linalg.norm(ga - g1) <= 1e-5 * np.linalg.norm(g1)


def test_one_rank_is_the_method_itself():
    from vortexsim.backend import SingleProcess
    s = make_summation("direct", communicator=SingleProcess())
    assert not isinstance(s, SharedTargets)
