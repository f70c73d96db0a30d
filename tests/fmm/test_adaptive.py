"""The adaptive octree FMM (``FMM(tree="adaptive")``) on the CPU, against the float64
direct sum and the level-uniform FMM."""
import numpy as np
import pytest

from vortexsim.fmm.evaluator import FMM
from vortexsim.cases.inputs import clustered, rings
from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import direct_sum_at_elements, direct_sum_numpy


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _deepest_leaf(plan, x):
    """The deepest level holding leaves of the adaptive tree of ``plan`` (the sources x
    as the targets), from the refinement rule alone: a box above ``plan.depth`` is
    refined while it holds more than ``plan.leaf_size`` points, sources and targets
    counted (``vortexsim.fmm.adaptive``)."""
    lo, deepest = np.asarray(plan.lo), 2
    for level in range(2, plan.depth):
        cells = np.floor((x - lo) / plan.width * 2 ** level).astype(np.int64)
        if 2 * np.unique(cells, axis=0, return_counts=True)[1].max() > plan.leaf_size:
            deepest = level + 1
    return deepest


@pytest.fixture(scope="module")
def plummer():
    """2000 points: the leaves still reach level 7 for every case below (6000 points,
    the earlier size: 7, and 8 for the Gaussian at 1e-9), asserted; the wide
    separation's M2L costs about the same per level at any size."""
    rng = np.random.default_rng(21)
    x, alpha, _ = clustered(2000, rng)
    return x, alpha, rng.choice(2000, 300, replace=False)


# the Gaussian at 1e-6 takes the wide separation as at 1e-9: 1e-9 covers it
@pytest.mark.parametrize("kernel,tol", [("singular", 1e-3), ("singular", 1e-6),
                                        ("gaussian", 1e-3), ("polynomial", 1e-6),
                                        ("gaussian", 1e-9)])
def test_adaptive_tree_meets_tol_on_a_plummer_cloud(plummer, kernel, tol):
    x, alpha, sample = plummer
    sigma = np.full(x.shape[0], 2e-3)
    fmm = FMM(kernel, tol=tol, device="cpu", tree="adaptive", leaf_size=32)
    plan = fmm.plan(x, sigma)
    assert plan.tree == "adaptive" and _deepest_leaf(plan, x) >= 7
    u, g = fmm.evaluate(x, alpha, sigma)
    assert fmm.config.depth >= 5 and fmm.config.leaf_size == 32
    ud, gd = direct_sum_at_elements(get_kernel(kernel), x, alpha, sigma, sample)
    assert _rel(u[sample], ud) <= tol and _rel(g[sample], gd) <= 10 * tol


def test_adaptive_tree_equals_the_uniform_one_where_it_refines_uniformly():
    """Points one per cell of a 16³ grid: with leaf_size 7 every level-3 box (8 points)
    is refined and every level-4 box is a leaf, so the adaptive FMM is the uniform
    one of depth 4 (same operators, other summation order)."""
    rng = np.random.default_rng(2)
    g = (np.stack(np.meshgrid(*(np.arange(16),) * 3, indexing="ij"), -1).reshape(-1, 3)
         + 0.5 + rng.uniform(-0.3, 0.3, (4096, 3))) / 16
    alpha = rng.normal(size=(4096, 3))
    sigma = np.full(4096, 0.01)
    # tol 1e-3: order 8 on both (the same operators at any order; 1e-6's 16 took 35 s)
    adaptive = FMM("singular", tol=1e-3, device="cpu", tree="adaptive", leaf_size=7)
    ua, ga = adaptive.evaluate(g, alpha, sigma)
    uu, gu = FMM("singular", tol=1e-3, device="cpu", near_radius=1,
                 order=adaptive.order).evaluate(g, alpha, sigma, depth=4)
    assert adaptive.order == 8
    assert _rel(ua, uu) <= 1e-12 and _rel(ga, gu) <= 1e-12


def test_adaptive_tree_with_separate_targets_and_edge_cases():
    rng = np.random.default_rng(4)
    k = get_kernel("gaussian")
    x, alpha, tracers = rings(2000, 4000, rng, core=0.02, centres_z=(0.5,), cloud=0.2)
    sigma = np.full(2000, 0.015)
    fmm = FMM("gaussian", tol=1e-6, device="cpu", tree="adaptive", leaf_size=32)
    # tracers, and targets far outside the sources' cube; ∇u at the first 50 only
    y = np.concatenate([tracers, rng.random((200, 3)) * 4 - 1.5])
    u, g = fmm.evaluate(x, alpha, sigma, y, gradient=50)
    ud, gd = direct_sum_numpy(k, x, alpha, sigma, y)
    assert g.shape == (50, 3, 3)
    assert _rel(u, ud) <= 1e-6 and _rel(g, gd[:50]) <= 1e-5
    # float32
    u32, g32 = FMM("gaussian", tol=1e-4, precision="float32", device="cpu",
                   tree="adaptive").evaluate(x, alpha, sigma, tracers)
    assert u32.dtype == np.float32 and _rel(u32, ud[:4000]) <= 1e-4
    # coincident points: the self pair is left out, the others summed
    xc = np.repeat(rng.random((1, 3)), 300, axis=0)
    ac = rng.normal(size=(300, 3))
    u, g = fmm.evaluate(xc, ac, np.full(300, 0.01))
    ud, gd = direct_sum_at_elements(k, xc, ac, np.full(300, 0.01), np.arange(300))
    assert np.allclose(u, ud, atol=1e-12) and np.allclose(g, gd, atol=1e-9)
    # one point, no targets
    u, g = fmm.evaluate(x[:1], alpha[:1], sigma[:1])
    assert np.all(u == 0) and np.all(g == 0)
    u, g = fmm.evaluate(x, alpha, sigma, np.zeros((0, 3)))
    assert u.shape == (0, 3) and g.shape == (0, 3, 3)


def test_adaptive_tree_rejects_bad_options():
    with pytest.raises(ValueError, match="tree must be"):
        FMM("gaussian", tree="octree")
    with pytest.raises(ValueError, match="near_radius = 2 with tree='adaptive'"):
        FMM("gaussian", tol=1e-6, device="cpu", tree="adaptive", near_radius=2, separation=1)
    assert FMM("gaussian", tol=1e-6, device="cpu", tree="adaptive").near_radius \
        == FMM("gaussian", tol=1e-6, device="cpu", tree="adaptive").separation


def test_auto_tree_takes_the_adaptive_tree_for_a_clustered_cloud_only():
    """tree="auto" (the default) runs the adaptive tree where the level-uniform one, at
    its deepest admissible level, keeps more than AUTO_TREE_FACTOR × the near-field
    pairs of balanced leaves: a 2×10^4-point Plummer cloud (singular kernel, ~3.7×),
    not uniform points nor ring elements with tracers; an explicit depth keeps the
    uniform tree."""
    rng = np.random.default_rng(21)
    x, alpha, _ = clustered(20000, rng)
    sigma = np.full(20000, 2e-3)
    fmm = FMM("singular", tol=1e-6, device="cpu")
    assert fmm.tree == "auto"
    u, g = fmm.evaluate(x, alpha, sigma)
    assert fmm.config.tree == "adaptive"
    sample = rng.choice(20000, 200, replace=False)
    ud, gd = direct_sum_at_elements(get_kernel("singular"), x, alpha, sigma, sample)
    assert _rel(u[sample], ud) <= 1e-6 and _rel(g[sample], gd) <= 1e-5
    # the other choices from the plan alone (evaluate is execute(plan(...)), and
    # config.tree is the plan's); the rings are evaluated too, so that this evaluator
    # runs the uniform tree after the adaptive one
    xu = rng.random((3000, 3))
    rng.normal(size=(3000, 3))          # their strengths, drawn as before: the same rings
    assert fmm.plan(xu, np.full(3000, 0.02)).tree == "uniform"
    xr, ar, tr = rings(1000, 3000, rng, core=0.02, centres_z=(0.5,), cloud=0.2)
    fmm.evaluate(xr, ar, np.full(1000, 0.015), tr)
    assert fmm.config.tree == "uniform"
    assert fmm.plan(x[:2000], sigma[:2000], depth=3).tree == "uniform"
    with pytest.raises(ValueError, match="tree must be"):
        FMM("singular", tree="octree")
