"""FMM.plan / FMM.execute (vortexsim/fmm/plan.py, the facade in evaluator.py), CPU."""
import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from vortexsim.fmm import FMM as _FMM, Plan
from vortexsim.inputs import clustered


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
