"""FMM.plan / FMM.execute (vortexsim/fmm/plan.py, the facade in evaluator.py), CPU."""
import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from vortexsim.fmm import FMM as _FMM, Plan
from vortexsim.cases.inputs import clustered


def FMM(*args, **kwargs):
    return _FMM(*args, device="cpu", **kwargs)


def _points(n, seed):
    rng = np.random.default_rng(seed)
    return rng.random((n, 3)), rng.normal(size=(n, 3))


@pytest.mark.parametrize("tree", ["uniform", "adaptive"])
def test_execute_of_plan_equals_evaluate_bitwise(tree):
    x, alpha = _points(1500, 1)
    y = np.concatenate([x[:200], np.random.default_rng(2).random((300, 3))])
    sigma = np.full(1500, 0.02)
    fmm = FMM("gaussian", tol=1e-4, tree=tree, leaf_size=32)
    u0, g0 = fmm.evaluate(x, alpha, sigma, y, gradient=200)
    plan = fmm.plan(x, sigma, y, gradient=200)
    assert isinstance(plan, Plan) and plan.tree == fmm.config.tree
    assert (plan.depth, plan.order, plan.reach) == (fmm.config.depth, fmm.config.order,
                                                    fmm.config.reach)
    u1, g1 = fmm.execute(plan, x, alpha, sigma, y, gradient=200)
    assert u1.tobytes() == u0.tobytes() and g1.tobytes() == g0.tobytes()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.depth = 1


def test_plan_says_which_tree_and_whether_sync_free():
    x, alpha, _ = clustered(3000, np.random.default_rng(3))
    fmm = FMM("singular", tol=1e-3, tree="auto")
    plan = fmm.plan(x, 0.01)
    assert plan.tree in ("uniform", "adaptive") and not plan.sync_free
    root = (np.full(3, -2.0), 4.0)
    free = FMM("singular", tol=1e-3, tree="uniform").plan(
        x, 0.01, sigma_range=(0.01, 0.01), root=root, check_root=False, depth=2)
    assert free.sync_free and free.tree == "uniform" and free.depth == 2
    with pytest.raises(ValueError, match="sync_free=True needs"):
        fmm.plan(x, 0.01, sync_free=True)
    assert fmm.plan(np.zeros((0, 3)), 0.01).tree == "empty"


def test_execute_refuses_a_plan_of_other_inputs():
    x, alpha = _points(400, 4)
    fmm = FMM("singular", tol=1e-3)
    plan = fmm.plan(x, 0.05)
    with pytest.raises(ValueError, match="Make the plan with the same arguments"):
        fmm.execute(plan, x[:300], alpha[:300], 0.05)
    with pytest.raises(ValueError, match="Make the plan with the same arguments"):
        fmm.execute(plan, x, alpha, 0.05, gradient=False)


def test_fmm_imports_without_cupy():
    code = ("import sys, vortexsim.fmm.evaluator, vortexsim.fmm.cuda; "
            "sys.exit('cupy' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_depth_counts_count_each_tree_on_its_own_cube():
    """depth_counts gives every depth the pairs and occupancy of a tree on that depth's
    own (stretched only where needed) cube, not of the deepest tree's cube."""
    from vortexsim.fmm.plan import depth_counts, near_pairs_by_depth, stretched_width
    rng = np.random.default_rng(5)
    x = rng.random((600, 3)) * np.array([1.0, 1.0, 3.0])          # a tall cloud
    y = np.concatenate([x, rng.random((900, 3)) * np.array([1.0, 1.0, 3.0])])
    lo, width, min_leaf = np.zeros(3), 3.0, 0.15
    depth_max = 5                          # 3 / 2^5 < 0.15: the deepest tree is stretched
    pairs, occ = depth_counts(x, y, lo, width, depth_max, min_leaf, 1, np)
    assert pairs.shape == (depth_max + 1,) and occ.shape == (depth_max + 1,) * 2
    for d in range(depth_max + 1):
        w = stretched_width(width, d, min_leaf)
        ref_pairs, ref_occ = near_pairs_by_depth(x, y, lo, w, d, 1, np)
        assert pairs[d] == ref_pairs[d]
        np.testing.assert_array_equal(occ[d, :d + 1], ref_occ)
    # the shallower trees' leaves are narrower than on the stretched cube: fewer pairs
    wide, _ = near_pairs_by_depth(x, y, lo, stretched_width(width, depth_max, min_leaf),
                                  depth_max, 1, np)
    assert pairs[depth_max - 1] < wide[depth_max - 1]


def test_sparse_far_field_model_deepens_trees_of_stretched_clouds():
    """On the GPU's sparse M2L the far field costs what the occupied boxes cost: for a
    cloud that fills few boxes of a deep level the model takes the deeper tree, which
    the dense model (every box translated) never does; a uniform cloud keeps its depth."""
    from vortexsim.fmm import expansions as E
    from vortexsim.fmm.plan import Planner
    planner = Planner("gaussian", 1e-6, 16, False, 1, 1, None, 20e9, "gpu", "float64")
    green = E.green_function("gaussian", 0.05)
    # depth 4 → 5 cuts the near pairs 4.6× while only 1 600 of 32 768 leaves hold points
    # (the leapfrog case at t = 20 on the H100, benchmarks/RESULTS.md)
    pairs = np.array([2.5e10, 2.5e10, 2.5e10, 1.6e10, 6.3e9, 1.36e9])
    occ = np.zeros((6, 6))
    for d in range(6):
        occ[d, :d + 1] = [1, 2, 16, 70, 313, 1598][:d + 1]
    assert planner.cheapest_depth(pairs, green) == 4                # dense model
    assert planner.cheapest_depth(pairs, green, occ) == 5
    # a cube full of points: the same pair ratio, every box occupied, stays at depth 4
    full = np.zeros((6, 6))
    for d in range(6):
        full[d, :d + 1] = 8.0 ** np.arange(d + 1)
    uniform = np.array([1e12, 1e12, 2.7e11, 4.5e10, 6.5e9, 5.5e9])
    assert planner.cheapest_depth(uniform, green, full) == 4
    cpu = dataclasses.replace(planner, device_kind="cpu")      # no sparse M2L on the CPU
    assert cpu.cheapest_depth(pairs, green, occ) == cpu.cheapest_depth(pairs, green)
