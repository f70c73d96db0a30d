"""The M2L and L2L into the boxes that lead to targets only (vortexsim.fmm.targets).

A rank of the distributed summation evaluates all sources at its Morton share of the
targets (half of a uniform cube for 2 ranks).  Its u and ∇u must equal those of an
evaluation at every target, selected to the share (the same tree: the same root cube
and depth), to round-off; and the FMM's own error against the direct sum is unchanged.
"""
import numpy as np
import pytest

from vortexsim.fmm.evaluator import FMM
from vortexsim.fmm.targets import target_boxes
from vortexsim.fmm.tree import build_tree
from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import direct_sum_numpy
from vortexsim.summation.distributed import share_targets

DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


def _rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _points(n, seed=3):
    rng = np.random.default_rng(seed)
    return rng.random((n, 3)), rng.normal(size=(n, 3))


def _share_vs_all(fmm, x, alpha, sigma, size, **kw):
    """Max relative differences of u, ∇u between each rank's share evaluated alone and
    every target evaluated, then selected (one root cube and depth for both)."""
    xp = fmm.device.xp
    xd, ad, sd = (xp.asarray(a) for a in (x, alpha, sigma))
    root = (np.zeros(3), 1.0) if "box" not in kw else None
    opts = dict(kw, **({} if root is None else {"root": root, "check_root": False}))
    u_all, g_all = (_host(a) for a in fmm.evaluate(xd, ad, sd, xd.copy(), **opts))
    worst = 0.0
    for rank in range(size):
        mine = _host(share_targets(x, x.shape[0], rank, size, np).mine)
        u, g = (_host(a) for a in fmm.evaluate(xd, ad, sd, xd[xp.asarray(mine)], **opts))
        worst = max(worst, _rel(u, u_all[mine]), _rel(g, g_all[mine]))
    return worst


def test_target_boxes_of_a_half_cube_are_half_of_each_level():
    g = (np.arange(32) + 0.5) / 32           # a lattice: 8 points in every leaf
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    half = x[x[:, 2] < 0.5]                  # the first half of the Morton curve
    tree = build_tree(x, half, 4, np, lo=np.zeros(3), width=1.0, check=False)
    boxes = target_boxes(tree.tgt_start, 4, np)
    assert boxes[1] is not None
    for level in range(1, 5):
        tb = boxes[level]
        assert tb.boxes.tolist() == list(range(8 ** level // 2))
        for p in range(8):                   # row j of class p is box p + 8j
            assert (p + 8 * tb.rows[p]).tolist() == [b for b in tb.boxes if b % 8 == p]
    # targets in every leaf: nothing listed (the unrestricted M2L, as before)
    tree = build_tree(x, x, 3, np, lo=np.zeros(3), width=1.0, check=False)
    assert all(v is None for v in target_boxes(tree.tgt_start, 3, np).values())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [2, 4])
def test_share_equals_all_targets_selected_dense_m2l(device, size):
    n = 4000
    x, alpha = _points(n)
    sigma = np.full(n, 0.15 * n ** (-1 / 3))
    fmm = FMM("gaussian", tol=1e-6, device=device)
    if fmm.stages.m2l.sparse_capable:        # the GPU: the dense M2L on every level
        fmm.SPARSE_M2L_FRACTION = 0.0
    assert _share_vs_all(fmm, x, alpha, sigma, size, depth=3) <= 1e-12
    assert fmm.config.depth == 3


@pytest.mark.parametrize("device", [pytest.param("gpu", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("pairs, ratio", [(False, 0.0), (True, 0.0), (False, 1.0)])
def test_share_equals_all_targets_selected_sparse_m2l(device, pairs, ratio):
    """The sparse M2L (GPU only): every level sparse, by class or by offset (ratio 0:
    kept for the share); or the share's levels moved to the dense M2L into its target
    boxes (ratio 1: fewer target boxes than source boxes)."""
    n = 4000
    x, alpha = _points(n)
    sigma = np.full(n, 0.15 * n ** (-1 / 3))
    fmm = FMM("gaussian", tol=1e-6, device=device)
    fmm.SPARSE_M2L_FRACTION, fmm.SPARSE_M2L_PAIRS = 2.0, pairs
    fmm.TARGET_DENSE_RATIO, fmm.TARGET_DENSE_MIN_BOXES = ratio, 0
    assert _share_vs_all(fmm, x, alpha, sigma, 2, depth=3) <= 1e-12


@pytest.mark.parametrize("device", DEVICES)
def test_share_equals_all_targets_selected_regularized_and_periodic(device):
    n = 3000
    x, alpha = _points(n, seed=5)
    sigma = np.full(n, n ** (-1 / 3))
    # the regularized far field (its own L2L on full expansions)
    fmm = FMM("algebraic", tol=1e-3, device=device)
    assert _share_vs_all(fmm, x, alpha, sigma, 2, depth=3) <= 1e-12
    # the periodic box (M2L from level 1, wrapped)
    alpha = alpha - alpha.mean(axis=0)
    fmm = FMM("gaussian", tol=1e-6, device=device)
    assert _share_vs_all(fmm, x, alpha, 0.3 * sigma, 2, depth=3, box=1.0) <= 1e-12


@pytest.mark.parametrize("device", DEVICES)
def test_share_meets_tolerance_against_direct_sum(device):
    n, tol = 4000, 1e-6
    x, alpha = _points(n, seed=7)
    sigma = np.full(n, 0.15 * n ** (-1 / 3))
    fmm = FMM("gaussian", tol=tol, device=device)
    xp = fmm.device.xp
    mine = share_targets(x, n, 1, 2, np).mine
    sample = np.random.default_rng(0).choice(mine, 300, replace=False)
    u, g = (_host(a) for a in fmm.evaluate(xp.asarray(x), xp.asarray(alpha),
                                           xp.asarray(sigma), xp.asarray(x[sample]),
                                           depth=3))
    assert fmm.config.depth == 3
    ud, gd = direct_sum_numpy(get_kernel("gaussian"), x, alpha, sigma, x[sample])
    assert np.linalg.norm(u - ud) / np.linalg.norm(ud) <= tol
    assert np.linalg.norm(g - gd) / np.linalg.norm(gd) <= 10 * tol
