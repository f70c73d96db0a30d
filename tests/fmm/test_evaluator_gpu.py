"""GPU FMM against the float64 direct sum and the CPU FMM (marker ``gpu``)."""
import numpy as np
import pytest

from vortexsim.backend import gpu_available
from vortexsim.fmm.evaluator import FMM
from vortexsim.inputs import rings
from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import direct_sum_at_elements, direct_sum_numpy

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - b) / np.linalg.norm(b))


def _gpu_eval(fmm, x, alpha, sigma, targets=None):
    import cupy as cp
    u, g = fmm.evaluate(cp.asarray(x), cp.asarray(alpha), cp.asarray(sigma),
                        None if targets is None else cp.asarray(targets))
    return u.get(), g.get()


_KERNELS = ("gaussian", "algebraic", "winckelmans", "polynomial", "singular")
_N20 = 1 << 20


@pytest.fixture(scope="module")
def uniform_2_20():
    """2^20 uniform points (x, alpha host arrays) and 200 sampled target indices."""
    rng = np.random.default_rng(0)
    x, alpha = rng.random((_N20, 3)), rng.normal(size=(_N20, 3))
    return x, alpha, rng.choice(_N20, 200, replace=False)


def _check_2_20(kernel, tol, x, alpha, sigma, sample):
    import cupy as cp
    fmm = FMM(kernel, tol=tol, device="gpu")
    u, g = _gpu_eval(fmm, x, alpha, sigma)
    # float64 CUDA direct sum (itself tested against NumPy to 1e-12 in test_gpu_direct.py)
    ud, gd = (a.get() for a in direct_sum_at_elements(
        get_kernel(kernel), *(cp.asarray(a) for a in (x, alpha, sigma)), sample))
    assert _rel(u[sample], ud) <= tol
    assert _rel(g[sample], gd) <= 10 * tol
    return fmm


@pytest.mark.parametrize("kernel,tol,sigma_h", [
    (k, tol, sh) for k in _KERNELS for tol in (1e-3, 1e-6, 1e-9) for sh in (1.0, 2.0)
    if sh == 1.0 or tol < 1e-3])
def test_gpu_fmm_uniform_2_20_sampled(uniform_2_20, kernel, tol, sigma_h):
    """Issue-3 acceptance on the GPU: every kernel, tol 1e-3 / 1e-6 / 1e-9, σ = h and 2h,
    2^20 points, u ≤ tol and ∇u ≤ 10·tol on 200 sampled targets (tol 1e-9: the wide
    separation)."""
    x, alpha, sample = uniform_2_20
    sigma = np.full(_N20, sigma_h * _N20 ** (-1 / 3))
    fmm = _check_2_20(kernel, tol, x, alpha, sigma, sample)
    assert fmm.separation == (2 if tol < 1e-6 else 1)
    assert fmm.config.tree == "uniform"               # what tree="auto" picks here


@pytest.mark.parametrize("tol,smallest", [(1e-3, 1.0), (1e-6, 1 / 3), (1e-9, 1 / 3)])
def test_gpu_fmm_2_20_gaussian_sigma_varying_by_3(uniform_2_20, tol, smallest):
    """σ from ``smallest``·h to 3× that, as in the CPU test at 2×10^4 points."""
    x, alpha, sample = uniform_2_20
    h = _N20 ** (-1 / 3)
    sigma = smallest * h * (1 + 2 * np.random.default_rng(1).random(_N20))
    _check_2_20("gaussian", tol, x, alpha, sigma, sample)


@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-9])
def test_gpu_fmm_2_20_ring_elements_and_tracers(tol):
    """2^15 ring elements and 2^20 tracers around them (sources ≠ targets)."""
    rng = np.random.default_rng(5)
    n = 1 << 15
    x, alpha, tracers = rings(n, _N20, rng, core=0.02, centres_z=(0.5,), cloud=0.2)
    sigma = np.full(n, 0.01)
    u, g = _gpu_eval(FMM("gaussian", tol=tol, device="gpu"), x, alpha, sigma, tracers)
    sample = rng.choice(_N20, 300, replace=False)
    ud, gd = direct_sum_numpy(get_kernel("gaussian"), x, alpha, sigma, tracers[sample])
    assert _rel(u[sample], ud) <= tol and _rel(g[sample], gd) <= 10 * tol


def test_gpu_fmm_rings_and_tracers_float32():
    rng = np.random.default_rng(1)
    n, m = 1 << 14, 1 << 17
    x, alpha, tracers = rings(n, m, rng, core=0.02, centres_z=(0.5,), cloud=0.2)
    sigma = np.full(n, 0.02)
    sample = rng.choice(m, 300, replace=False)
    ud, gd = direct_sum_numpy(get_kernel("gaussian"), x, alpha, sigma, tracers[sample])
    for precision, tol in (("float64", 1e-6), ("float32", 1e-4)):
        u, g = _gpu_eval(FMM("gaussian", tol=tol, precision=precision, device="gpu"),
                         x, alpha, sigma, tracers)
        assert u.dtype == np.dtype(precision)
        assert _rel(u[sample], ud) <= tol and _rel(g[sample], gd) <= 10 * tol


@pytest.mark.parametrize("kernel,near_radius", [("gaussian", 1), ("gaussian", 2),
                                                ("algebraic", 1)])
def test_gpu_and_cpu_fmm_agree(kernel, near_radius):
    """The same algorithm (same stencil: the devices' defaults differ) on both devices."""
    rng = np.random.default_rng(2)
    x, alpha = rng.random((3000, 3)), rng.normal(size=(3000, 3))
    sigma = np.full(3000, 0.05)
    targets = rng.random((500, 3)) * 1.4 - 0.2
    kw = dict(tol=1e-6, leaf_size=16, near_radius=near_radius)
    for tg in (None, targets):
        ug, gg = _gpu_eval(FMM(kernel, device="gpu", **kw), x, alpha, sigma, tg)
        uc, gc = FMM(kernel, device="cpu", **kw).evaluate(x, alpha, sigma, tg)
        assert _rel(ug, uc) <= 1e-9 and _rel(gg, gc) <= 1e-9


def test_gpu_fmm_edge_cases_and_determinism():
    import cupy as cp
    fmm = FMM("gaussian", tol=1e-6, device="gpu")
    u, g = fmm.evaluate(cp.zeros((1, 3)), cp.ones((1, 3)), cp.ones(1))
    assert float(cp.abs(u).max()) == 0 and float(cp.abs(g).max()) == 0
    x = cp.full((300, 3), 0.25)
    a = cp.asarray(np.random.default_rng(0).normal(size=(300, 3)))
    u, g = fmm.evaluate(x, a, cp.full(300, 0.1), cp.zeros((0, 3)))
    assert u.shape == (0, 3)
    rng = np.random.default_rng(3)
    xs, al = cp.asarray(rng.random((50000, 3))), cp.asarray(rng.normal(size=(50000, 3)))
    u1, g1 = fmm.evaluate(xs, al, cp.full(50000, 0.01))
    u2, g2 = fmm.evaluate(xs, al, cp.full(50000, 0.01))
    assert bool((u1 == u2).all()) and bool((g1 == g2).all())      # bitwise reproducible


@pytest.mark.parametrize("unified", [None, True, False])
def test_gpu_sparse_m2l_equals_dense(unified):
    """Rings in a mostly empty cube take the sparse M2L (either GEMM variant); it must
    equal the dense one."""
    import cupy as cp
    from vortexsim.fmm.tree import build_tree
    rng = np.random.default_rng(11)
    x, alpha, tracers = (cp.asarray(a) for a in rings(1 << 13, 1 << 15, rng))
    sigma = cp.full(x.shape[0], 0.01)
    sparse = FMM("gaussian", tol=1e-6, device="gpu")
    sparse.SPARSE_M2L_UNIFIED = unified
    dense = FMM("gaussian", tol=1e-6, device="gpu")
    dense.SPARSE_M2L_FRACTION = 0.0
    us, gs = (a.get() for a in sparse.evaluate(x, alpha, sigma, tracers, depth=4))
    assert sparse.config.depth == 4
    tree = build_tree(x, tracers, 4, cp)
    assert sparse.stages.m2l.sparsity(tree, sparse.config.order)[4] is not None, "the input must exercise the sparse path"
    ud, gd = (a.get() for a in dense.evaluate(x, alpha, sigma, tracers, depth=4))
    assert _rel(us, ud) <= 1e-12 and _rel(gs, gd) <= 1e-12


def test_gpu_near_pair_counts_equal_numpy():
    """The depth model's CUDA counting kernel gives the NumPy counts exactly."""
    import cupy as cp
    from vortexsim.fmm.plan import near_pairs_by_depth as _near_pairs_by_depth
    rng = np.random.default_rng(12)
    x, y = rng.random((20000, 3)) ** 3, rng.random((7000, 3))        # clustered sources
    for radius in (1, 2):
        for ys in (x, y):
            ref = _near_pairs_by_depth(x, ys, np.zeros(3), 1.0, 5, radius, np)
            xd = cp.asarray(x)
            yd = xd if ys is x else cp.asarray(ys)
            got = _near_pairs_by_depth(xd, yd, cp.zeros(3), 1.0, 5, radius, cp)
            assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])


def test_gpu_near_field_crowded_leaves_self_excluded():
    """Leaves holding thousands of targets are split over many blocks (target chunks);
    with sources = targets each chunk must still skip exactly its own records."""
    rng = np.random.default_rng(13)
    n = 40000
    x = np.concatenate([0.5 + 0.01 * rng.normal(size=(n // 2, 3)), rng.random((n // 2, 3))])
    alpha, sigma = rng.normal(size=(n, 3)), np.full(n, 0.004)
    sample = rng.choice(n, 300, replace=False)
    fmm = FMM("gaussian", tol=1e-6, device="gpu", tree="uniform")
    u, g = _gpu_eval(fmm, x, alpha, sigma)
    counts = np.diff(build_tree_counts(fmm, x))
    assert counts.max() > 1000, "the input must put thousands of targets in one leaf"
    ud, gd = direct_sum_at_elements(get_kernel("gaussian"), x, alpha, sigma, sample)
    assert _rel(u[sample], ud) <= 1e-6 and _rel(g[sample], gd) <= 1e-5
    u2, g2 = _gpu_eval(fmm, x, alpha, sigma)
    assert np.array_equal(u, u2) and np.array_equal(g, g2)


def build_tree_counts(fmm, x):
    """Target CSR starts of the tree at the depth ``fmm`` chose (in the same cube)."""
    from vortexsim.fmm.tree import build_tree
    tree = build_tree(x, x, fmm.config.depth, np)
    return tree.tgt_start


def test_gpu_tiled_l2p_on_crowded_leaves_equals_cpu():
    """The leaf-tiled L2P (coefficient tiles in shared memory, several blocks per
    crowded leaf) gives the CPU FMM's result on a tracer cloud."""
    import cupy as cp
    rng = np.random.default_rng(15)
    x, alpha, tracers = rings(1 << 12, 1 << 16, rng)
    sigma = np.full(x.shape[0], 0.01)
    fmm = FMM("gaussian", tol=1e-6, device="gpu")
    ug, gg = (a.get() for a in fmm.evaluate(cp.asarray(x), cp.asarray(alpha),
                                             cp.asarray(sigma), cp.asarray(tracers), depth=4))
    assert fmm.config.depth == 4
    counts = np.diff(build_tree_counts_targets(x, tracers, 4))
    assert counts.max() > 256, "leaves must span several blocks"
    cpu = FMM("gaussian", tol=1e-6, device="cpu", near_radius=fmm.near_radius)
    uc, gc = cpu.evaluate(x, alpha, sigma, tracers, depth=4)
    assert _rel(ug, uc) <= 1e-9 and _rel(gg, gc) <= 1e-9


def build_tree_counts_targets(x, y, depth):
    """Target CSR starts of a tree of ``depth`` over sources x and targets y."""
    from vortexsim.fmm.tree import build_tree
    return build_tree(x, y, depth, np).tgt_start


def test_gpu_gradient_at_the_first_targets_only():
    """Elements with ∇u and tracers with u only (the time stepper's call) on the GPU:
    the same values as gradient=True, and the same as the CPU FMM."""
    import cupy as cp
    rng = np.random.default_rng(5)
    n, m = 1 << 13, 1 << 16
    x, alpha, tracers = rings(n, m, rng, core=0.02, centres_z=(0.5,), cloud=0.2)
    sigma = np.full(n, 0.02)
    targets = np.concatenate([x, tracers])
    xd, ad, sd, td = (cp.asarray(a) for a in (x, alpha, sigma, targets))
    fmm = FMM("gaussian", tol=1e-6, device="gpu")
    u_all, g_all = (a.get() for a in fmm.evaluate(xd, ad, sd, td))
    u, g = (a.get() for a in fmm.evaluate(xd, ad, sd, td, gradient=n))
    assert g.shape == (n, 3, 3)
    assert _rel(u, u_all) <= 1e-13 and _rel(g, g_all[:n]) <= 1e-13
    kw = dict(tol=1e-6, leaf_size=64, near_radius=1)
    ug, gg = (a.get() for a in FMM("gaussian", device="gpu", **kw).evaluate(
        xd, ad, sd, td, gradient=n))
    uc, gc = FMM("gaussian", device="cpu", **kw).evaluate(x, alpha, sigma, targets, gradient=n)
    assert _rel(ug, uc) <= 1e-9 and _rel(gg, gc) <= 1e-9


@pytest.mark.parametrize("unified", [True, False])
@pytest.mark.parametrize("shrink", [1, 3, 0])
def test_gpu_sync_free_sparse_m2l_with_capacities(unified, shrink):
    """The time stepper's sync-free call with M2L capacities (m2l_capacity) equals the
    dense M2L, also when the capacities are too small (shrink: capacities divided by it,
    0: no room at all) and boxes overflow into the gather-sum kernel's own path."""
    import cupy as cp
    rng = np.random.default_rng(12)
    x, alpha, tracers = (cp.asarray(a) for a in rings(1 << 13, 1 << 15, rng))
    sigma = cp.full(x.shape[0], 0.01)
    pts = cp.concatenate([x, tracers])
    lo = pts.min(axis=0) - 1e-3
    root = (lo, float((pts.max(axis=0) - lo).max()) + 1e-3)
    kw = dict(sigma_range=(0.01, 0.01), root=root, check_root=False, depth=4)
    fmm = FMM("gaussian", tol=1e-6, device="gpu")
    fmm.SPARSE_M2L_UNIFIED = unified
    plan = fmm.m2l_capacity(x, (0.01, 0.01), root, 4, targets=(tracers,))
    depth, cap, occ, *_ = plan
    assert depth == 4 and cap.shape == (3, 8) and 0 < occ[0] <= 8 ** 4
    cap = cap // shrink if shrink else 0 * cap
    dense = FMM("gaussian", tol=1e-6, device="gpu")
    ud, gd = (a.get() for a in dense.evaluate(x, alpha, sigma, tracers, **kw))
    us, gs = (a.get() for a in fmm.evaluate(x, alpha, sigma, tracers, **kw,
                                            m2l_capacity=(depth, cap, occ)))
    assert _rel(us, ud) <= 1e-12 and _rel(gs, gd) <= 1e-12
    # sparse really ran (the level-4 lists exist with these capacities)
    from vortexsim.fmm.tree import build_tree
    tree = build_tree(x, tracers, 4, cp, lo=root[0], width=root[1], check=False)
    assert fmm.stages.m2l.sparsity(tree, fmm.config.order, cap)[4] is not None
    # twice the same call: bitwise the same
    u2, g2 = (a.get() for a in fmm.evaluate(x, alpha, sigma, tracers, **kw,
                                            m2l_capacity=(depth, cap, occ)))
    assert np.array_equal(u2, us) and np.array_equal(g2, gs)
    if shrink == 1:
        # the plan's own layouts and device tables (the time stepper's path, no copy
        # inside the call): bitwise the same as the layouts made in the call from the
        # same capacities and box counts (the counts decide sparse or dense per level)
        u3, g3 = (a.get() for a in fmm.evaluate(x, alpha, sigma, tracers, **kw,
                                                m2l_capacity=plan))
        u4, g4 = (a.get() for a in fmm.evaluate(x, alpha, sigma, tracers, **kw,
                                                m2l_capacity=tuple(plan[:4])))
        assert plan.layouts[4] is not None
        assert np.array_equal(u3, u4) and np.array_equal(g3, g4)
        assert _rel(u3, ud) <= 1e-12 and _rel(g3, gd) <= 1e-12


@pytest.mark.parametrize("kernel", ["gaussian", "algebraic", "singular", "polynomial"])
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_gpu_near_field_uniform_records_are_bitwise_the_per_source_ones(kernel, precision):
    """With one σ the near field stages records without per-source parameters (and with
    them else): same arithmetic, bitwise the same u and ∇u, self-excluded or not, with
    and without ∇u; and the FMM takes that path when the σ range is one value."""
    import cupy as cp
    from vortexsim.fmm.tree import build_tree
    rng = np.random.default_rng(21)
    n, m = 6000, 5000
    x, y = cp.asarray(rng.random((n, 3))), cp.asarray(rng.random((m, 3)))
    alpha, sigma = cp.asarray(rng.normal(size=(n, 3))), cp.full(n, 0.02)
    tol = 1e-6 if precision == "float64" else 1e-4
    fmm = FMM(kernel, tol=tol, device="gpu", precision=precision)
    for targets, exclude in ((y, False), (x, True)):
        tree = build_tree(x, targets, 3, cp, lo=cp.zeros(3), width=1.0)
        xs, a_s, s_s = x[tree.src_order], alpha[tree.src_order], sigma[tree.src_order]
        ys = xs if exclude else targets[tree.tgt_order]
        for grad in (True, False):
            out = [fmm.stages.near(tree, xs, a_s, s_s, ys, exclude, grad, uniform=uni)
                   for uni in (False, True)]
            assert np.array_equal(out[0][0].get(), out[1][0].get())
            if grad:
                assert np.array_equal(out[0][1].get(), out[1][1].get())
    u, g = fmm.evaluate(x, alpha, sigma, y, depth=3)
    assert fmm.config.depth == 3
    ud, gd = direct_sum_numpy(get_kernel(kernel), x.get(), alpha.get(), sigma.get(), y.get())
    assert _rel(u.get(), ud) <= tol and _rel(g.get(), gd) <= 10 * tol


def test_gpu_auto_takes_the_fmm_down_to_1e9_and_the_direct_sum_below():
    """method='auto' on the GPU: the (wide-separation) FMM at tol 1e-9 above the
    crossover, within tol of the direct sum; below 1e-9 the direct sum itself."""
    import cupy as cp
    import vortexsim
    rng = np.random.default_rng(3)
    n = 70000
    x, alpha = cp.asarray(rng.random((n, 3))), cp.asarray(rng.normal(size=(n, 3)))
    ud, _ = vortexsim.induced_velocity(x, alpha, 0.01, method="direct", device="gpu")
    u, _ = vortexsim.induced_velocity(x, alpha, 0.01, method="auto", tol=1e-9, device="gpu")
    assert not np.array_equal(u.get(), ud.get()) and _rel(u.get(), ud.get()) <= 1e-9
    u, _ = vortexsim.induced_velocity(x, alpha, 0.01, method="auto", tol=1e-10, device="gpu")
    assert np.array_equal(u.get(), ud.get())
    with pytest.raises(ValueError, match="method='direct'"):
        FMM("gaussian", tol=1e-10, device="gpu")


@pytest.mark.parametrize("kernel", ["singular", "gaussian"])
def test_gpu_wide_separation_equals_cpu(kernel):
    """The wide separation (tol < 1e-6): GPU and CPU agree to round-off, and both hold
    the direct sum at 1e-8."""
    import cupy as cp
    rng = np.random.default_rng(17)
    n = 20000
    x, alpha = rng.random((n, 3)), rng.normal(size=(n, 3))
    sigma = np.full(n, n ** (-1 / 3))
    gpu = FMM(kernel, tol=1e-8, device="gpu")
    assert gpu.separation == 2
    ug, gg = (a.get() for a in gpu.evaluate(cp.asarray(x), cp.asarray(alpha),
                                            cp.asarray(sigma), depth=3))
    uc, gc = FMM(kernel, tol=1e-8, device="cpu").evaluate(x, alpha, sigma, depth=3)
    assert _rel(ug, uc) <= 1e-11 and _rel(gg, gc) <= 1e-11
    sample = rng.choice(n, 300, replace=False)
    ud, gd = direct_sum_at_elements(get_kernel(kernel), x, alpha, sigma, sample)
    assert _rel(ug[sample], ud) <= 1e-8 and _rel(gg[sample], gd) <= 1e-7


@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-9])
def test_gpu_adaptive_tree_on_a_plummer_cloud_2_20(tol):
    """The default tree="auto" runs the adaptive tree on 2^20 points of a Plummer cloud
    (σ from the half-mass spacing, Gaussian): u ≤ tol and ∇u ≤ 10·tol on 200 sampled
    targets."""
    import cupy as cp
    from vortexsim.inputs import clustered
    rng = np.random.default_rng(11)
    x, alpha, _ = clustered(_N20, rng)
    r_half = 1.305 * 0.05
    sigma = np.full(_N20, (0.5 * _N20 / (4 / 3 * np.pi * r_half ** 3)) ** (-1 / 3))
    sample = rng.choice(_N20, 200, replace=False)
    fmm = FMM("gaussian", tol=tol, device="gpu")          # tree="auto" takes the adaptive one
    u, g = _gpu_eval(fmm, x, alpha, sigma)
    assert fmm.config.tree == "adaptive" and fmm.config.depth >= 6
    ud, gd = (a.get() for a in direct_sum_at_elements(
        get_kernel("gaussian"), *(cp.asarray(a) for a in (x, alpha, sigma)), sample))
    assert _rel(u[sample], ud) <= tol and _rel(g[sample], gd) <= 10 * tol


@pytest.mark.parametrize("kernel,tol", [("singular", 1e-6), ("gaussian", 1e-6),
                                        ("gaussian", 1e-8)])
def test_gpu_adaptive_tree_equals_cpu(kernel, tol):
    """GPU and CPU adaptive trees agree to round-off, sources = targets and ≠."""
    import cupy as cp
    from vortexsim.inputs import clustered
    rng = np.random.default_rng(12)
    x, alpha, _ = clustered(20000, rng)
    sigma = np.full(20000, 2e-3)
    y = rng.random((3000, 3))
    for targets in (None, y):
        ug, gg = _gpu_eval(FMM(kernel, tol=tol, device="gpu", tree="adaptive", leaf_size=64),
                           x, alpha, sigma, targets)
        uc, gc = FMM(kernel, tol=tol, device="cpu", tree="adaptive", leaf_size=64).evaluate(
            x, alpha, sigma, targets)
        assert _rel(ug, uc) <= 1e-10 and _rel(gg, gc) <= 1e-10
