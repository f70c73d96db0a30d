"""The particle-mesh summation split by x-slabs over ranks with the state replicated
(vortexsim.summation.slab_shares.SlabShares) against the one-rank PeriodicMeshSum: 2 and 3
ranks played by threads (tests/thread_ranks.py), gathered as pickled host arrays or by
``allgather_array``; u and ∇u to 1e-12 of the largest value with ∇u at all targets, at
the first k, at none (0, False), the elements' self pairs out or kept, tracers; at the
lattice nodes (on_lattice, slabs of equal and unequal width); every rank the same bits.
The factory's choice, the refusal of slabs thinner than the ghost width, the delegated
attributes; a Taylor–Green model stepped on 2 thread ranks against 1 rank; the CuPy path
(GPU only)."""
import numpy as np
import pytest
from thread_ranks import on_ranks  # tests/thread_ranks.py

from vortexsim.backend import Communicator, Device, SingleProcess, array_namespace
from vortexsim.summation import make_summation
from vortexsim.summation.distributed import SharedTargets
from vortexsim.summation.periodic_mesh import PeriodicMeshSum
from vortexsim.summation.slab_shares import SlabShares, share_order

BOX = 2 * np.pi
SIGMA = 0.5
#: the ranks' result is the one-rank result to 1e-12 of its largest value
TOLERANCE = 1e-12


class ArrayGather(Communicator):
    """A thread rank with ``allgather_array`` (as the MPI and NCCL communicators have
    it): the parts gathered through the rank's allgather, the counts that SlabShares
    passes checked against the parts."""

    def __init__(self, ranks):
        self.ranks, self.rank, self.size = ranks, ranks.rank, ranks.size
        self.gathered = 0

    def barrier(self):
        self.ranks.barrier()

    def allgather(self, obj):
        return self.ranks.allgather(obj)

    def allreduce_sum(self, array):
        return self.ranks.allreduce_sum(array)

    def bcast(self, obj, root=0):
        return self.ranks.bcast(obj, root)

    def allgather_array(self, array, counts=None):
        parts = self.allgather(array)
        assert counts is not None and list(counts) == [p.shape[0] for p in parts], counts
        self.gathered += 1
        return array_namespace(array).concatenate(parts)


def _blobs(count=300, tracers=60, seed=0):
    """Elements (Σα = 0; a third on the x-planes of an 8-, 9- and 12-node lattice, some
    beyond the box) and tracers."""
    rng = np.random.default_rng(seed)
    x = rng.random((count, 3)) * BOX
    x[:count // 3, 0] = rng.integers(0, 73, count // 3) * BOX / 72
    x[count // 3:count // 2] += BOX * rng.choice([-1.0, 1.0], (count // 2 - count // 3, 3))
    alpha = 1e-2 * rng.standard_normal((count, 3))
    alpha -= alpha.mean(axis=0)
    return x, alpha, np.full(count, SIGMA), rng.random((tracers, 3)) * BOX


def _mesh(n, communicator=None, device=None, precision="float64"):
    summation = make_summation("mesh", "gaussian", precision=precision, device=device,
                               box=BOX, communicator=communicator)
    summation.bind_lattice(n)
    return summation


def _relative(got, want):
    return np.abs(got - want).max() / np.abs(want).max()


def _same_bits(results):
    """Every rank's arrays are rank 0's, bit for bit (None where rank 0's is None)."""
    for result in results:
        for a, b in zip(result, results[0]):
            assert (a is None) == (b is None)
            if a is not None:
                assert a.dtype == b.dtype and a.shape == b.shape
                assert a.tobytes() == b.tobytes()


#: (gradient, n_self, with tracers): ∇u at all targets with the self pairs out; at the
#: elements only (k = N) among tracers; at the first 200 with the first 100 self pairs
#: out; at all with the self pairs kept; at none (0 and False)
CALLS = [(True, 300, False), (300, 300, True), (200, 100, True), (True, 0, True),
         (0, 0, True), (False, 0, True)]


@pytest.mark.parametrize("gather", ["pickled", "allgather_array"])
@pytest.mark.parametrize("gradient, n_self, tracers", CALLS)
@pytest.mark.parametrize("size, n", [(2, 12), (3, 12), (3, 9)])
def test_the_slab_shares_are_the_one_rank_sum(size, n, gradient, n_self, tracers, gather):
    x, alpha, sigma, y = _blobs(seed=size + n)
    targets = np.concatenate([x, y]) if tracers else x
    want_u, want_grad = _mesh(n)(x, alpha, sigma, targets, n_self=n_self, gradient=gradient)

    def work(comm):
        comm = ArrayGather(comm) if gather == "allgather_array" else comm
        shares = _mesh(n, comm)
        assert isinstance(shares, SlabShares)
        out = shares(x, alpha, sigma, targets, n_self=n_self, gradient=gradient)
        if gather == "allgather_array":
            assert comm.gathered == (1 if out[1] is None else 2)
        return out
    results = on_ranks(size, work)
    _same_bits(results)
    u, grad = results[0]
    assert u.shape == want_u.shape and _relative(u, want_u) <= TOLERANCE
    if want_grad is None:
        assert grad is None
    else:
        assert grad.shape == want_grad.shape and _relative(grad, want_grad) <= TOLERANCE


def test_the_self_pairs_come_out_as_on_one_rank():
    """The self pairs removed by SlabShares are those the one-rank call removes: the
    difference of n_self = N and n_self = 0 is the same on both."""
    n = 12
    x, alpha, sigma, _ = _blobs(seed=4)
    one = _mesh(n)
    want = one(x, alpha, sigma, x)[1] - one(x, alpha, sigma, x, n_self=300)[1]

    def work(comm):
        shares = _mesh(n, comm)
        return (shares(x, alpha, sigma, x)[1] - shares(x, alpha, sigma, x, n_self=300)[1],)
    results = on_ranks(2, work)
    _same_bits(results)
    assert _relative(results[0][0], want) <= TOLERANCE


@pytest.mark.parametrize("size, n", [(2, 8), (2, 9), (3, 9), (3, 12)])
def test_on_lattice_is_the_one_rank_solve_at_the_nodes(size, n):
    rng = np.random.default_rng(n + size)
    alpha = 1e-2 * rng.standard_normal((n ** 3, 3))
    alpha -= alpha.mean(axis=0)
    sigma_range = (BOX / n, BOX / n)
    want_u, want_grad = _mesh(n).on_lattice(alpha, n, sigma_range)

    def work(comm):
        return _mesh(n, comm).on_lattice(alpha, n, sigma_range)
    results = on_ranks(size, work)
    _same_bits(results)
    u, grad = results[0]
    assert u.shape == (n ** 3, 3) and grad.shape == (n ** 3, 3, 3)
    assert _relative(u, want_u) <= TOLERANCE and _relative(grad, want_grad) <= TOLERANCE


def test_on_lattice_through_allgather_array():
    n, rng = 10, np.random.default_rng(2)
    alpha = 1e-2 * rng.standard_normal((n ** 3, 3))
    want_u, want_grad = _mesh(n).on_lattice(alpha, n, (0.6, 0.6))

    def work(comm):
        comm = ArrayGather(comm)
        out = _mesh(n, comm).on_lattice(alpha, n, (0.6, 0.6))
        assert comm.gathered == 2
        return out
    results = on_ranks(3, work)
    _same_bits(results)
    assert _relative(results[0][0], want_u) <= TOLERANCE
    assert _relative(results[0][1], want_grad) <= TOLERANCE


def test_float32_sums_in_float64_and_returns_float32():
    n = 12
    x, alpha, sigma, y = _blobs(seed=8)
    targets = np.concatenate([x, y])
    want_u, want_grad = _mesh(n, precision="float32")(x, alpha, sigma, targets,
                                                      n_self=300, gradient=300)

    def work(comm):
        return _mesh(n, comm, precision="float32")(x, alpha, sigma, targets, n_self=300,
                                                   gradient=300)
    results = on_ranks(2, work)
    _same_bits(results)
    u, grad = results[0]
    assert u.dtype == grad.dtype == np.float32
    assert _relative(u, want_u) <= 1e-6 and _relative(grad, want_grad) <= 1e-6


def test_the_share_order_lists_each_ranks_gradient_targets_first():
    owner = np.array([1, 0, 2, 1, 0, 0, 2, 1])
    order, bounds = share_order(owner, 4, 3, np)
    assert order.tolist() == [1, 4, 5, 0, 3, 7, 2, 6]
    assert bounds == (0, 1, 3, 5, 6, 7, 8)
    order, bounds = share_order(owner, 0, 3, np)
    assert order.tolist() == [1, 4, 5, 0, 3, 7, 2, 6] and bounds == (0, 0, 3, 3, 6, 6, 8)
    order, bounds = share_order(owner[:0], 0, 2, np)
    assert order.tolist() == [] and bounds == (0,) * 5


def test_the_factory_splits_the_mesh_by_slabs_and_the_others_by_targets():
    def work(comm):
        mesh = make_summation("mesh", box=BOX, communicator=comm)
        direct = make_summation("direct", communicator=comm)
        return type(mesh), type(mesh.inner), type(direct)
    assert on_ranks(2, work) == [(SlabShares, PeriodicMeshSum, SharedTargets)] * 2
    assert type(make_summation("mesh", box=BOX, communicator=SingleProcess())) \
        is PeriodicMeshSum


def test_slabs_thinner_than_the_ghost_width_are_refused_on_every_rank():
    def work(comm):
        shares = make_summation("mesh", box=BOX, communicator=comm)
        with pytest.raises(ValueError, match=r"n = 8 allows at most 4 ranks.*n >= 10"):
            shares.bind_lattice(8)
        with pytest.raises(ValueError, match="remesh_every > 0"):
            shares.bind_lattice(None)
        shares.bind_lattice(10)
        return shares.n
    assert on_ranks(5, work) == [10] * 5


def test_the_rest_is_the_inner_summation():
    """What the model uses besides the call: the inner summation's, delegated."""
    n = 12
    x, alpha, sigma, _ = _blobs(seed=6)
    one = _mesh(n)

    def work(comm):
        shares = _mesh(n, comm)
        assert (shares.method, shares.name, shares.box, shares.n, shares.fmm) == \
            ("mesh", "mesh", BOX, n, None)
        assert shares.kernel is shares.inner.kernel and shares.device is shares.inner.device
        assert shares.describe() == one.describe()
        assert shares.memory_estimate(10, 20) == one.memory_estimate(10, 20)
        assert shares.state_dict() == one.state_dict()
        shares.check_core(0.5)
        assert shares.field_sums(x, alpha, sigma) == one.field_sums(x, alpha, sigma)
        with pytest.raises(ValueError, match="8\\^3 lattice but the mesh solve's is 12\\^3"):
            shares.on_lattice(np.zeros((512, 3)), 8, (0.5, 0.5))
        return True
    assert on_ranks(2, work) == [True, True]


@pytest.mark.parametrize("tracers", [0, 20])
def test_a_taylor_green_model_on_two_thread_ranks_follows_one_rank(tracers):
    """make_case("taylor_green", n=8) with the mesh solve split over 2 thread ranks: two
    steps (the first stage of each on the lattice nodes; with tracers, every stage
    through the call, the state replicated; without, the state split by slabs and then
    assembled) give the one-rank state to 1e-12, the same bits on both ranks."""
    import vortexsim
    args = {"n": 8, "tracers": tracers, "device": "cpu", "progress": False}
    one = vortexsim.make_case("taylor_green", **args)
    for _ in range(2):
        one.step()

    def work(comm):
        sim = vortexsim.make_case("taylor_green", communicator=comm, **args)
        assert isinstance(sim.model.summation, SlabShares)
        assert (sim.model.partition is None) == bool(tracers)
        for _ in range(2):
            sim.step()
        if not tracers:
            assert len(sim.model.elements) == 8 ** 3 // 2      # this rank's slab
        sim.model.assemble()
        return sim.model.elements.x, sim.model.elements.alpha, sim.model.tracers.x
    results = on_ranks(2, work)
    _same_bits(results)
    for got, want in zip(results[0], (one.model.elements.x, one.model.elements.alpha,
                                      one.model.tracers.x)):
        assert got.shape == want.shape
        if want.size:
            assert _relative(got, want) <= TOLERANCE


@pytest.mark.gpu
@pytest.mark.parametrize("size", [2, 3])
def test_the_slab_shares_on_cupy_are_the_one_rank_sum(size):
    import cupy as cp
    n, gpu = 12, Device("gpu")
    x, alpha, sigma, y = _blobs(seed=13)
    x, alpha, sigma, targets = (cp.asarray(a) for a in (x, alpha, sigma,
                                                         np.concatenate([x, y])))
    want_u, want_grad = _mesh(n, device=gpu)(x, alpha, sigma, targets, n_self=300,
                                             gradient=300)
    lattice_alpha = cp.asarray(1e-2 * np.random.default_rng(1).standard_normal((n ** 3, 3)))
    want_nodes = _mesh(n, device=gpu).on_lattice(lattice_alpha, n, (0.5, 0.5))

    def work(comm):
        shares = _mesh(n, comm, device=gpu)
        u, grad = shares(x, alpha, sigma, targets, n_self=300, gradient=300)
        return (cp.asnumpy(u), cp.asnumpy(grad),
                *(cp.asnumpy(a) for a in shares.on_lattice(lattice_alpha, n, (0.5, 0.5))))
    results = on_ranks(size, work)
    _same_bits(results)
    for got, want in zip(results[0], (want_u, want_grad, *want_nodes)):
        assert got.shape == want.shape
        assert _relative(got, cp.asnumpy(want)) <= TOLERANCE
