"""Leaf transforms on the occupied boxes only (vortexsim/fmm/operators.py: occupied_boxes,
leaf_boxes, Operators.compress/decompress with boxes, the leaf level's M2M and L2L).
CPU; the CuPy twin is marked ``gpu``."""
import numpy as np
import pytest

from vortexsim import induced_velocity
from vortexsim.backend import Device, gpu_available
from vortexsim.fmm import FMM
from vortexsim.fmm import expansions as E
from vortexsim.fmm.operators import Cache, Operators, leaf_boxes, occupied_boxes
from vortexsim.fmm.tree import build_tree, root_cube

P = 6


def _csr(rng, n_boxes, n_occupied):
    """A CSR start (n_boxes + 1,) with n_occupied random boxes holding 1..3 points."""
    counts = np.zeros(n_boxes, dtype=np.int64)
    counts[rng.choice(n_boxes, n_occupied, replace=False)] = rng.integers(1, 4, n_occupied)
    return np.concatenate([[0], np.cumsum(counts)])


def _expansions(rng, start):
    """Normalized multipoles M (B, n, 3), zero in the empty boxes, and compressed locals
    Lh (r, B, 3)."""
    B = start.shape[0] - 1
    n, r = E.multi_indices(P).n, (P + 1) ** 2
    occ = (start[1:] > start[:-1])
    return rng.normal(size=(B, n, 3)) * occ[:, None, None], rng.normal(size=(r, B, 3))


@pytest.mark.parametrize("capacity", [None, 1, 7, 12, 40])
def test_occupied_boxes_lists_and_spills(capacity):
    rng = np.random.default_rng(3)
    start = _csr(rng, 64, 12)
    truth = np.flatnonzero(start[1:] > start[:-1])
    idx, spill = occupied_boxes(start, np, capacity)
    if capacity is None:
        assert spill is None and np.array_equal(idx, truth)
        return
    assert idx.shape == (capacity,)
    kept = truth[:capacity]
    assert np.array_equal(idx[:kept.size], kept)
    assert np.all(idx[kept.size:] == truth[0])                 # padding repeats the first
    assert np.array_equal(np.flatnonzero(spill), truth[capacity:])


def test_occupied_boxes_of_an_empty_level_pad_with_an_empty_box():
    start = np.zeros(9, dtype=np.int64)
    idx, spill = occupied_boxes(start, np, 3)
    assert np.array_equal(idx, [0, 0, 0]) and not spill.any()


@pytest.mark.parametrize("capacity", [None, 3, 12, 20])
def test_sparse_compress_and_decompress_equal_dense(capacity):
    rng = np.random.default_rng(5)
    ops = Operators(Device("cpu"), Cache(Device("cpu")))
    start = _csr(rng, 64, 12)
    M, Lh = _expansions(rng, start)
    boxes = occupied_boxes(start, np, capacity)
    dense_m, sparse_m = ops.compress(M, P), ops.compress(M, P, boxes)
    np.testing.assert_allclose(sparse_m, dense_m, rtol=0, atol=1e-13 * np.abs(dense_m).max())
    full = ops.decompress(Lh, P)
    got = ops.decompress(Lh, P, boxes)
    occ = start[1:] > start[:-1]
    np.testing.assert_allclose(got[occ], full[occ], rtol=0, atol=1e-13 * np.abs(full).max())
    assert not got[~occ].any()                                   # leaves without targets
    assert got.flags.c_contiguous


def _leaf_pass_case():
    """A leaf level of 512 boxes, 12 occupied: (start, occupied mask, leaf multipoles Mh,
    parent locals Lp, leaf locals Lh, the dense M2M's parents, the dense L2L's leaves)."""
    rng = np.random.default_rng(8)
    start = _csr(rng, 512, 12)
    occ = start[1:] > start[:-1]
    r = (P + 1) ** 2
    Mh = rng.normal(size=(r, 512, 3)) * occ[None, :, None]
    Lp, Lh = rng.normal(size=(r, 64, 3)), rng.normal(size=(r, 512, 3))
    up, down = _dense_m2m_l2l(Operators(Device("cpu"), Cache(Device("cpu"))), Mh, Lp, Lh)
    return start, occ, Mh, Lp, Lh, up, down


def _dense_m2m_l2l(ops, Mh, Lp, Lh):
    """The dense M2M out of and L2L into a leaf level (upward.py, downward.py)."""
    Tc, Rc = ops.compressed_shift(P)
    r, B = Mh.shape[0], Mh.shape[1]
    bp = B // 8
    up = (Tc @ Mh.reshape(r, bp, 8, 3).transpose(2, 0, 1, 3).reshape(8 * r, bp * 3))
    down = Lh + (Rc @ Lp.reshape(r, bp * 3)).reshape(8, r, bp, 3).transpose(1, 2, 0, 3) \
        .reshape(r, B, 3)
    return up.reshape(r, bp, 3), down


@pytest.mark.parametrize("capacity", [None, 3, 12, 20])
def test_sparse_leaf_m2m_and_l2l_equal_dense(capacity):
    """The leaf level's M2M on the occupied leaves' parents and L2L into the listed
    leaves give the dense passes' values there, spilled boxes included (capacity < 12:
    boxes beyond the list); M2M parents without occupied children are zero."""
    ops = Operators(Device("cpu"), Cache(Device("cpu")))
    start, occ, Mh, Lp, Lh, up, down = _leaf_pass_case()
    boxes = occupied_boxes(start, np, capacity)
    got_up = ops.m2m_from_leaves(Mh, P, boxes)
    np.testing.assert_allclose(got_up, up, rtol=0, atol=1e-13 * np.abs(up).max())
    got_down = ops.l2l_to_leaves(Lp, Lh.copy(), P, boxes)
    np.testing.assert_allclose(got_down[:, occ], down[:, occ], rtol=0,
                               atol=1e-13 * np.abs(down).max())


def test_leaf_boxes_only_for_sparse_levels():
    rng = np.random.default_rng(0)
    sparse, dense = _csr(rng, 512, 40), _csr(rng, 512, 400)
    assert leaf_boxes(dense, np) is None and leaf_boxes(sparse, np, None) is None
    idx, spill = leaf_boxes(sparse, np)
    assert idx.size == 40 and spill is None
    assert leaf_boxes(sparse, np, 300) is None                  # a bound above 1/4 of 512
    assert leaf_boxes(sparse, np, 50)[0].shape == (50,)


def test_stretched_cloud_fmm_with_sparse_leaves_matches_direct():
    """A cloud that fills few leaves of its cube (two small clusters far apart) runs
    the sparse leaf transforms on the CPU; the result is the direct sum's."""
    rng = np.random.default_rng(7)
    a = rng.normal(scale=0.03, size=(300, 3))
    x = np.concatenate([a, a[:200] + [0.0, 0.0, 1.0]])
    alpha = rng.normal(size=x.shape)
    sigma = 0.02
    fmm = FMM("gaussian", tol=1e-4, device="cpu", tree="uniform")
    u, g = fmm.evaluate(x, alpha, sigma, depth=3)
    lo, w = root_cube(x, x, np)
    occupied = np.count_nonzero(np.diff(build_tree(x, x, 3, np, lo=lo, width=w).src_start))
    assert occupied < 0.25 * 8 ** 3                             # the sparse path runs
    ud, gd = induced_velocity(x, alpha, sigma, kernel="gaussian", method="direct")
    assert np.linalg.norm(u - ud) / np.linalg.norm(ud) < 1e-4
    assert np.linalg.norm(g - gd) / np.linalg.norm(gd) < 1e-3


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("capacity", [3, 12, 20])
def test_gpu_sparse_transforms_with_spills_equal_numpy(capacity):
    import cupy as cp
    rng = np.random.default_rng(5)
    start = _csr(rng, 64, 12)
    M, Lh = _expansions(rng, start)
    host = Operators(Device("cpu"), Cache(Device("cpu")))
    dev = Operators(Device("gpu"), Cache(Device("gpu")))
    boxes = occupied_boxes(cp.asarray(start), cp, capacity)
    got_m = cp.asnumpy(dev.compress(cp.asarray(M), P, boxes))
    got_l = cp.asnumpy(dev.decompress(cp.asarray(Lh), P, boxes))
    ref_m = host.compress(M, P)
    ref_l = host.decompress(Lh, P, occupied_boxes(start, np))
    np.testing.assert_allclose(got_m, ref_m, rtol=0, atol=1e-13 * np.abs(ref_m).max())
    np.testing.assert_allclose(got_l, ref_l, rtol=0, atol=1e-13 * np.abs(ref_l).max())


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("capacity", [3, 12, 20])
def test_gpu_sparse_leaf_m2m_and_l2l_with_spills_equal_dense(capacity):
    """The GPU's leaf-level M2M and L2L, their spill kernels (m2m_spilled, l2l_spilled)
    included, against NumPy's dense passes."""
    import cupy as cp
    dev = Operators(Device("gpu"), Cache(Device("gpu")))
    start, occ, Mh, Lp, Lh, up, down = _leaf_pass_case()
    boxes = occupied_boxes(cp.asarray(start), cp, capacity)
    got_up = cp.asnumpy(dev.m2m_from_leaves(cp.asarray(Mh), P, boxes))
    got_down = cp.asnumpy(dev.l2l_to_leaves(cp.asarray(Lp), cp.asarray(Lh), P, boxes))
    np.testing.assert_allclose(got_up, up, rtol=0, atol=1e-13 * np.abs(up).max())
    np.testing.assert_allclose(got_down[:, occ], down[:, occ], rtol=0,
                               atol=1e-13 * np.abs(down).max())
