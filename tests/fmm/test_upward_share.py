"""The upward pass shared by ranks (vortexsim.fmm.upward.Upward.shared_leaves, FMM.evaluate's
``ranks``): ranks played by threads, each with the same sources and its own Morton share
of the targets; each makes the multipoles of its run of the occupied leaves, the runs are
gathered (pickled, or through ``allgather_array`` as the MPI and NCCL communicators
have it).  Against one rank's evaluation at the same depth: the same algorithm, so
round-off only (the GEMMs over a run's leaves round differently from those over every
leaf).  Ranks whose trees differ, or whose run of leaves is empty, are covered too."""
import numpy as np
import pytest

from thread_ranks import ThreadRanks, on_ranks  # tests/thread_ranks.py

from vortexsim.backend import resolve_device, to_host
from vortexsim.fmm import FMM
from vortexsim.summation.distributed import share_targets

#: the tolerance of these evaluations: the shared and the one-rank pass run the same
#: algorithm, so any order shows the round-off agreement (a low one keeps CI short)
TOL = 1e-3


class GatherRanks(ThreadRanks):
    """ThreadRanks with ``allgather_array`` on NumPy or CuPy arrays, checking the counts."""

    def allgather_array(self, array, counts=None):
        parts = self.allgather(array)
        assert counts is None or list(counts) == [p.shape[0] for p in parts], counts
        xp = np if isinstance(array, np.ndarray) else __import__("cupy")
        return xp.concatenate(parts)


def blobs(n, seed):
    rng = np.random.default_rng(seed)
    return (rng.random((n, 3)), 1e-3 * rng.standard_normal((n, 3)), np.full(n, 0.01))


def shared_vs_one(device, size, ranks_class, x, alpha, sigma, depth=3):
    """(u, ∇u, timings) of each rank's Morton share of the sources as targets, evaluated
    with ``ranks``, and one rank's (u, ∇u) at every source (the same depth)."""
    dev = resolve_device(device)
    xp = dev.xp
    xd, ad, sd = xp.asarray(x), xp.asarray(alpha), xp.asarray(sigma)
    one = FMM("gaussian", tol=TOL, device=dev, tree="uniform")
    want = one.evaluate(xd, ad, sd, xd, depth=depth)

    def work(comm):
        mine = share_targets(xd, xd.shape[0], comm.rank, comm.size, xp).mine
        fmm = FMM("gaussian", tol=TOL, device=dev, tree="uniform")
        u, g = fmm.evaluate(xd, ad, sd, xd[mine], depth=depth, ranks=comm)
        return to_host(mine), to_host(u), to_host(g), dict(fmm.timings)
    return on_ranks(size, work, ranks_class), tuple(to_host(a) for a in want)


def check_round_off(results, want):
    scale_u, scale_g = np.abs(want[0]).max(), np.abs(want[1]).max()
    for mine, u, g, timings in results:
        assert "p2m_gather" in timings, "the ranks did not share the upward pass"
        np.testing.assert_allclose(u, want[0][mine], rtol=0, atol=1e-13 * scale_u)
        np.testing.assert_allclose(g, want[1][mine], rtol=0, atol=1e-13 * scale_g)


@pytest.mark.parametrize("size, ranks_class", [(2, ThreadRanks), (3, GatherRanks)])
def test_ranks_share_the_upward_pass_to_round_off_of_one_rank(size, ranks_class):
    x, alpha, sigma = blobs(1500, 1)
    results, want = shared_vs_one("cpu", size, ranks_class, x, alpha, sigma)
    check_round_off(results, want)


def test_a_rank_without_occupied_leaves_of_its_own_still_takes_part():
    """Sources in two leaves of a depth-2 tree, three ranks: the runs of occupied leaves
    are 0, 1 and 1 leaves long; rank 0 gathers the others' multipoles."""
    rng = np.random.default_rng(4)
    x = np.concatenate([0.1 + 0.1 * rng.random((40, 3)), 0.8 + 0.1 * rng.random((40, 3))])
    alpha, sigma = 1e-3 * rng.standard_normal((80, 3)), np.full(80, 0.02)
    results, want = shared_vs_one("cpu", 3, GatherRanks, x, alpha, sigma, depth=2)
    check_round_off(results, want)


def test_ranks_whose_trees_differ_each_make_the_whole_upward_pass():
    """Rank 0 asks for depth 2, rank 1 for depth 3: their plans disagree, so neither
    shares (and neither waits for the other); each gets its own one-rank answer."""
    x, alpha, sigma = blobs(1000, 2)

    def work(comm):
        fmm = FMM("gaussian", tol=TOL, device="cpu", tree="uniform")
        u, g = fmm.evaluate(x, alpha, sigma, x[:300], depth=2 + comm.rank, ranks=comm)
        return u, g, dict(fmm.timings)
    for depth, (u, g, timings) in zip((2, 3), on_ranks(2, work)):
        assert "p2m_gather" not in timings
        want = FMM("gaussian", tol=TOL, device="cpu", tree="uniform").evaluate(
            x, alpha, sigma, x[:300], depth=depth)
        np.testing.assert_array_equal(u, want[0])
        np.testing.assert_array_equal(g, want[1])


@pytest.mark.gpu
@pytest.mark.parametrize("size", [2, 3])
def test_ranks_share_the_upward_pass_on_the_gpu(size):
    pytest.importorskip("cupy")
    x, alpha, sigma = blobs(20000, 3)
    results, want = shared_vs_one("gpu", size, GatherRanks, x, alpha, sigma, depth=4)
    check_round_off(results, want)


def test_shared_targets_share_the_fmms_upward_pass_for_their_call_only():
    """make_summation(..., communicator=): the shares of the elements, every rank making
    the call, so the FMM's upward pass is shared; the method is left without ranks after
    the call (a call of it on one rank alone must not wait for the others)."""
    from vortexsim.summation import make_summation
    x, alpha, _ = blobs(6000, 5)
    sigma = np.full(6000, 0.005)                     # cores small enough for depth 2
    want = make_summation("fmm", tol=TOL)(x, alpha, sigma, x, n_self=6000, gradient=True)

    def work(comm):
        shared = make_summation("fmm", tol=TOL, communicator=comm)
        u, g = shared(x, alpha, sigma, x, n_self=6000, gradient=True)
        return u, g, dict(shared.inner.fmm.timings), shared.inner.sharing_ranks
    for u, g, timings, left in on_ranks(2, work, GatherRanks):
        assert "p2m_gather" in timings and left is None
        assert np.linalg.norm(u - want[0]) <= 10 * TOL * np.linalg.norm(want[0])
        assert np.linalg.norm(g - want[1]) <= 10 * TOL * np.linalg.norm(want[1])
