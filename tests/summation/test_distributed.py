"""Targets shared among ranks (vortexsim.summation.distributed.SharedTargets): two or
three ranks played by threads whose communicator gathers through a barrier (pickled
objects, or with ``allgather_array`` as the MPI and NCCL communicators have it); the
shares along the Morton curve, the gathered u and ∇u back in the caller's order against
one rank's call (the direct sum to round-off: NumPy's blocked sums round by block, the
FMM to its tolerance), the self pairs of the elements, ∇u at the first k targets and
tracers; the ranks agree to the bit."""
import numpy as np
import pytest

from thread_ranks import ThreadRanks, on_ranks  # tests/thread_ranks.py

from vortexsim.kernels.morton import bounding_cube, morton_keys
from vortexsim.summation import make_summation
from vortexsim.summation.distributed import (SHARE_BITS, SharedTargets, share_targets,
                                             target_share)


class ArrayRanks(ThreadRanks):
    """ThreadRanks with ``allgather_array`` (the MPI and NCCL communicators' gather of
    arrays), which checks the counts that SharedTargets passes."""

    def allgather_array(self, array, counts=None):
        parts = self.allgather(array)
        assert counts is None or list(counts) == [p.shape[0] for p in parts], counts
        return np.concatenate(parts)


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


# -- the shares along the Morton curve ------------------------------------------------
def share_list(targets, k, size):
    return [share_targets(targets, k, r, size, np) for r in range(size)]


@pytest.mark.parametrize("size", [1, 2, 3, 5])
@pytest.mark.parametrize("k", [0, 1, 150, 171, 190])
def test_morton_shares_cover_the_targets_once_gradient_targets_first(size, k):
    """Every target in exactly one share; each rank's ∇u targets (index < k) first in its
    share, then its others; the counts as even as whole targets allow in each group; the
    shares the same whichever rank computes them."""
    targets = blobs(150, 40)[3]
    m = targets.shape[0]
    shares = share_list(targets, k, size)
    first = shares[0]
    for sh in shares:
        np.testing.assert_array_equal(sh.order, first.order)
        assert sh.counts == first.counts and sh.grad_counts == first.grad_counts
    assert sorted(first.order.tolist()) == list(range(m))
    assert sum(first.counts) == m and sum(first.grad_counts) == k
    np.testing.assert_array_equal(np.sort(first.grad_order), np.arange(k))
    for r, sh in enumerate(shares):
        mine = sh.mine
        assert mine.shape == (sh.counts[r],)
        a = sh.grad_counts[r]
        assert (mine[:a] < k).all() and (mine[a:] >= k).all()
        lo, hi = target_share(k, r, size)
        assert a == hi - lo
        np.testing.assert_array_equal(mine[:a], first.grad_order[lo:hi])


def test_morton_shares_are_runs_of_the_curve_and_compact_in_space():
    """The keys of rank r's targets all precede rank r + 1's, and on a uniform cube each
    of 8 shares fills about one octant: it touches about 64 of the 512 boxes of the
    octree's level 3 (an index share of 500 random points touches ~320)."""
    rng = np.random.default_rng(4)
    targets = rng.random((4000, 3))
    lo, width = bounding_cube(targets, np)
    keys = morton_keys(targets, lo, width, SHARE_BITS, np)
    shares = share_list(targets, 4000, 8)
    runs = [keys[sh.mine] for sh in shares]
    assert all(a.max() <= b.min() for a, b in zip(runs, runs[1:]))

    def boxes(pts):                    # the level-3 boxes holding these points
        return np.unique(morton_keys(pts, lo, width, 3, np)).size
    assert max(boxes(targets[sh.mine]) for sh in shares) <= 80
    assert boxes(targets[:500]) > 250


# -- the shared sums against one rank ---------------------------------------------------
@pytest.mark.parametrize("ranks", [ThreadRanks, ArrayRanks])
@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("gradient, n_self", [(True, 150), (150, 150), (0, 150),
                                              (False, 150), (170, 150), (190, 120),
                                              (150, 0)])
def test_shared_direct_sum_equals_one_rank_to_round_off(size, gradient, n_self, ranks):
    """∇u at the elements only (gradient = 150 of 150 + 40 targets), at the elements and
    the first 20 tracers (170), at all targets (True, or 190 with only the first 120
    elements' self pairs out), at none (0, False); self pairs out or kept (n_self = 0);
    gathered as pickled host arrays or by allgather_array; every rank the same bits."""
    x, alpha, sigma, targets = blobs(150, 40)
    one = make_summation("direct", "gaussian")
    want = one(x, alpha, sigma, targets, n_self=n_self, gradient=gradient)

    def work(comm):
        shared = make_summation("direct", "gaussian", communicator=comm)
        assert isinstance(shared, SharedTargets) and shared.method == "direct"
        return shared(x, alpha, sigma, targets, n_self=n_self, gradient=gradient)
    results = on_ranks(size, work, ranks)
    for u, grad in results:
        np.testing.assert_array_equal(u, results[0][0])
        np.testing.assert_allclose(u, want[0], rtol=1e-12, atol=1e-15)
        if want[1] is None:
            assert grad is None
        else:
            assert grad.shape == want[1].shape
            np.testing.assert_array_equal(grad, results[0][1])
            np.testing.assert_allclose(grad, want[1], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("m, size, gradient", [(2, 3, True), (3, 3, 1), (4, 3, 1),
                                               (1, 2, False)])
def test_fewer_targets_than_ranks_or_empty_shares(m, size, gradient):
    """Fewer targets than ranks (every rank sums them all), and shares of which some
    hold no target at all (3 targets, 1 with ∇u, 3 ranks: rank 0 has none)."""
    x, alpha, sigma, _ = blobs(40, 0)
    targets = x[:m]
    n_self = min(m, 1 if gradient is not True else m)
    want = make_summation("direct")(x, alpha, sigma, targets, n_self=n_self,
                                    gradient=gradient)

    def work(comm):
        return make_summation("direct", communicator=comm)(
            x, alpha, sigma, targets, n_self=n_self, gradient=gradient)
    for ranks in (ThreadRanks, ArrayRanks):
        for u, grad in on_ranks(size, work, ranks):
            np.testing.assert_allclose(u, want[0], rtol=1e-12, atol=1e-15)
            if want[1] is None:
                assert grad is None
            else:
                np.testing.assert_allclose(grad, want[1], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("size", [2, 3])
def test_shared_fmm_matches_one_rank_to_its_tolerance_and_ranks_agree(size):
    """The FMM with elements and tracers (∇u at the elements, their self pairs out), on
    2 and 3 ranks, gathered both ways: within the tolerance of one rank's call, the
    ranks the same bits, and the two gathers the same bits."""
    x, alpha, sigma, targets = blobs(3000, 500, seed=1)
    one = make_summation("fmm", "gaussian", tol=1e-6)
    u1, g1 = one(x, alpha, sigma, targets, n_self=3000, gradient=3000)

    def work(comm):
        shared = make_summation("fmm", "gaussian", tol=1e-6, communicator=comm)
        return shared(x, alpha, sigma, targets, n_self=3000, gradient=3000)
    pickled = on_ranks(size, work)
    arrays = on_ranks(size, work, ArrayRanks)
    ua, ga = pickled[0]
    for u, g in pickled + arrays:
        np.testing.assert_array_equal(u, ua)
        np.testing.assert_array_equal(g, ga)
    assert ua.shape == u1.shape and ga.shape == g1.shape == (3000, 3, 3)
    assert np.linalg.norm(ua - u1) <= 1e-5 * np.linalg.norm(u1)
    assert np.linalg.norm(ga - g1) <= 1e-5 * np.linalg.norm(g1)


def test_shared_fmm_with_all_gradients_and_no_self_pairs():
    """gradient=True at every target (tracers too), the elements' self pairs out; and
    targets apart from the sources (n_self = 0)."""
    x, alpha, sigma, targets = blobs(2000, 300, seed=2)
    one = make_summation("fmm", tol=1e-6)
    for n_self, tg in ((2000, targets), (0, targets[2000:])):
        u1, g1 = one(x, alpha, sigma, tg, n_self=n_self, gradient=True)

        def work(comm, tg=tg, n_self=n_self):
            return make_summation("fmm", tol=1e-6, communicator=comm)(
                x, alpha, sigma, tg, n_self=n_self, gradient=True)
        (ua, ga), (ub, gb) = on_ranks(2, work, ArrayRanks)
        np.testing.assert_array_equal(ua, ub)
        np.testing.assert_array_equal(ga, gb)
        assert np.linalg.norm(ua - u1) <= 1e-5 * np.linalg.norm(u1)
        assert np.linalg.norm(ga - g1) <= 1e-5 * np.linalg.norm(g1)


def test_one_rank_is_the_method_itself():
    from vortexsim.backend import SingleProcess
    s = make_summation("direct", communicator=SingleProcess())
    assert not isinstance(s, SharedTargets)


@pytest.mark.parametrize("reuse", [False, True])
def test_self_pairs_of_a_share_are_the_rows_of_the_whole_correction(reuse):
    """Summation.remove_self_pairs_of (a rank's share of the elements, in any order) gives
    each row the bits that remove_self_pairs gives it for all elements at once, with the
    factors made for the share alone or taken from the step's cache."""
    rng = np.random.default_rng(7)
    alpha, sigma = rng.standard_normal((50, 3)), 0.05 + 0.01 * rng.random(50)
    grad = rng.standard_normal((50, 3, 3))
    s = make_summation("direct")
    whole = s.remove_self_pairs(grad.copy(), alpha, sigma, 0, 50, reuse=reuse)
    rows = rng.permutation(50)[:20]
    part = s.remove_self_pairs_of(grad[rows].copy(), alpha, sigma, rows, 50, reuse=reuse)
    np.testing.assert_array_equal(part, whole[rows])
    assert not np.array_equal(part, grad[rows])
