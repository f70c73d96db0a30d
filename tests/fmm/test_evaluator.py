"""The whole FMM against the regularized direct sum (CPU, NumPy)."""
import numpy as np
import pytest

import vortexsim
from vortexsim.fmm.evaluator import FMM as _FMM, near_field_reach, order_for_tol
from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import direct_sum_numpy



def FMM(*args, **kwargs):
    """The CPU evaluator: these tests check the NumPy path even on a GPU machine."""
    return _FMM(*args, device="cpu", **kwargs)


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _uniform(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 3)), rng.normal(size=(n, 3))


def _reference(kernel, x, alpha, sigma, targets=None):
    if targets is None:
        return direct_sum_numpy(get_kernel(kernel), x, alpha, sigma, x, exclude_self=True)
    return direct_sum_numpy(get_kernel(kernel), x, alpha, sigma, targets)


@pytest.mark.parametrize("kernel", ["singular", "algebraic", "winckelmans", "polynomial",
                                    "gaussian"])
@pytest.mark.parametrize("tol", [1e-3, 1e-6])
def test_fmm_meets_tolerance_uniform(kernel, tol):
    n = 2500
    x, alpha = _uniform(n)
    h = n ** (-1 / 3)
    sigma = np.full(n, 0.5 * h if kernel in ("gaussian", "polynomial") else h)
    fmm = FMM(kernel, tol=tol, leaf_size=16)
    u, g = fmm.evaluate(x, alpha, sigma)
    ud, gd = _reference(kernel, x, alpha, sigma)
    assert fmm.config.depth >= 2, "the test must exercise the far field"
    assert _rel(u, ud) <= tol
    assert _rel(g, gd) <= 10 * tol


@pytest.mark.parametrize("tol", [1e-6, 1e-9])
def test_fmm_separate_targets_outside_the_sources(tol):
    x, alpha = _uniform(2000, seed=1)
    targets = np.random.default_rng(2).random((700, 3)) * 1.6 - 0.3
    sigma = np.full(2000, 0.02)
    fmm = FMM("gaussian", tol=tol, leaf_size=16)
    u, g = fmm.evaluate(x, alpha, sigma, targets)
    assert fmm.config.depth >= 2
    ud, gd = _reference("gaussian", x, alpha, sigma, targets)
    assert _rel(u, ud) <= tol and _rel(g, gd) <= 10 * tol


def test_fmm_gaussian_varying_sigma():
    x, alpha = _uniform(2500, seed=3)
    sigma = 0.03 * (1 + 2 * np.random.default_rng(4).random(2500))     # factor 3
    fmm = FMM("gaussian", tol=1e-3, leaf_size=16)
    u, g = fmm.evaluate(x, alpha, sigma)
    # a far field in play (test_evaluator_2e4.py counts on it for σ varying by 3 at 1e-3)
    assert fmm.config.depth >= 2
    ud, gd = _reference("gaussian", x, alpha, sigma)
    assert _rel(u, ud) <= 1e-3 and _rel(g, gd) <= 1e-2


def test_fmm_algebraic_varying_sigma_is_refused():
    x, alpha = _uniform(100)
    sigma = np.linspace(0.05, 0.1, 100)
    with pytest.raises(ValueError, match="uniform sigma"):
        FMM("algebraic", tol=1e-6).evaluate(x, alpha, sigma)


@pytest.mark.parametrize("tol", [1e-6, 1e-9])
@pytest.mark.parametrize("case", ["one", "coincident", "empty_targets"])
def test_fmm_edge_cases(case, tol):
    if case == "one":
        x, alpha = np.zeros((1, 3)), np.ones((1, 3))
        u, g = FMM("gaussian", tol=tol).evaluate(x, alpha, np.ones(1))
        assert np.all(u == 0) and np.all(g == 0)
    elif case == "coincident":
        x = np.full((300, 3), 0.25)
        alpha = np.random.default_rng(0).normal(size=(300, 3))
        targets = np.random.default_rng(1).random((50, 3))
        u, g = FMM("gaussian", tol=tol).evaluate(x, alpha, np.full(300, 0.1), targets)
        ud, gd = _reference("gaussian", x, alpha, np.full(300, 0.1), targets)
        assert _rel(u, ud) <= tol and _rel(g, gd) <= 10 * tol
    else:
        x, alpha = _uniform(50)
        u, g = FMM("gaussian", tol=tol).evaluate(x, alpha, np.full(50, 0.1), np.zeros((0, 3)))
        assert u.shape == (0, 3) and g.shape == (0, 3, 3)


def test_induced_velocity_method_fmm():
    x, alpha = _uniform(1500, seed=5)
    u, g = vortexsim.induced_velocity(x, alpha, 0.08, method="fmm", tol=1e-6, device="cpu")
    ud, gd = vortexsim.induced_velocity(x, alpha, 0.08, method="direct", device="cpu")
    assert _rel(u, ud) <= 1e-6 and _rel(g, gd) <= 1e-5


def test_parameter_rules():
    assert order_for_tol(1e-2) < order_for_tol(1e-3) < order_for_tol(1e-6)
    with pytest.raises(ValueError, match="below what this version's FMM"):
        order_for_tol(1e-9)
    # Gaussian reach from fmm.md: 1 − q, 1 − f/3 < tol/10 beyond ρ*
    k = get_kernel("gaussian")
    for tol in (1e-3, 1e-6, 1e-9):
        rho = near_field_reach("gaussian", tol, 1.0)
        assert 1 - k.q(np.array(rho), np) < tol / 10 and 1 - k.f(np.array(rho), np) / 3 < tol / 10
    assert near_field_reach("algebraic", 1e-6, 1.0) == 0.0


def test_fmm_ring_with_tracers():
    """Elements in a Gaussian-core ring (R = 0.3) and tracers in a cloud around it."""
    rng = np.random.default_rng(8)
    n_phi, n_core = 160, 8
    phi = np.repeat(2 * np.pi * np.arange(n_phi) / n_phi, n_core)
    s = rng.normal(scale=0.02, size=(n_phi * n_core, 2))          # position in the core
    rad = 0.3 + s[:, 0]
    x = np.stack([0.5 + rad * np.cos(phi), 0.5 + rad * np.sin(phi), 0.5 + s[:, 1]], axis=1)
    tangent = np.stack([-np.sin(phi), np.cos(phi), np.zeros_like(phi)], axis=1)
    alpha = (2 * np.pi * 0.3 / n_phi / n_core) * tangent
    tracers = 0.5 + rng.normal(scale=0.2, size=(1500, 3))
    sigma = np.full(len(x), 0.02)
    for kernel, tol in (("gaussian", 1e-6), ("algebraic", 1e-3)):
        fmm = FMM(kernel, tol=tol, leaf_size=16)
        u, g = fmm.evaluate(x, alpha, sigma, tracers)
        ud, gd = _reference(kernel, x, alpha, sigma, tracers)
        assert fmm.config.depth >= 2
        assert _rel(u, ud) <= tol and _rel(g, gd) <= 10 * tol


def test_fmm_float32_near_field():
    x, alpha = _uniform(2000, seed=9)
    sigma = np.full(2000, 0.06)
    u, g = vortexsim.induced_velocity(x, alpha, sigma, method="fmm", tol=1e-4,
                                      precision="float32", device="cpu")
    assert u.dtype == np.float32 and g.dtype == np.float32
    ud, gd = _reference("gaussian", x, alpha, sigma)
    assert _rel(u, ud) <= 1e-4 and _rel(g, gd) <= 1e-3


def test_fmm_with_given_sigma_range_and_root():
    x, alpha = _uniform(2000, seed=12)
    sigma = np.full(2000, 0.04)
    fmm = FMM("gaussian", tol=1e-6, leaf_size=16)
    u0, g0 = fmm.evaluate(x, alpha, sigma)
    root = (np.array([-0.1, -0.1, -0.1]), 1.3)
    u, g = fmm.evaluate(x, alpha, sigma, sigma_range=(0.04, 0.04), root=root, check_root=False)
    ud, gd = _reference("gaussian", x, alpha, sigma)
    assert _rel(u, ud) <= 1e-6 and _rel(g, gd) <= 1e-5 and _rel(u, u0) <= 2e-6
    with pytest.raises(ValueError, match="outside the root cube"):
        fmm.evaluate(x, alpha, sigma, root=(np.zeros(3), 0.5))
    with pytest.raises(ValueError, match="sigma_range"):
        fmm.evaluate(x, alpha, sigma, sigma_range=(0.0, 0.04))


def test_memory_budget_caps_the_depth_not_the_accuracy():
    x, alpha = _uniform(3000, seed=13)
    sigma = np.full(3000, 0.05)
    deep = FMM("algebraic", tol=1e-3, leaf_size=8)
    u1, g1 = deep.evaluate(x, alpha, sigma)
    per_box = 6 * 165 * 3 * 8                               # P = 8: n = 165 coefficients
    capped = FMM("algebraic", tol=1e-3, leaf_size=8, memory_budget=64 * per_box)
    u2, g2 = capped.evaluate(x, alpha, sigma)
    assert deep.config.depth == 3 and capped.config.depth == 2
    ud, gd = _reference("algebraic", x, alpha, sigma)
    for u, g in ((u1, g1), (u2, g2)):
        assert _rel(u, ud) <= 1e-3 and _rel(g, gd) <= 1e-2


def test_near_pair_counts_match_the_trees():
    """The depth model's pair counts equal Σ_leaf targets × stencil sources of real trees."""
    from vortexsim.fmm.plan import near_pairs_by_depth as _near_pairs_by_depth
    from vortexsim.fmm.tree import build_tree, neighbor_table
    rng = np.random.default_rng(3)
    x, y = rng.random((3000, 3)) ** 2, rng.random((2000, 3))        # clustered sources
    for radius in (1, 2):
        pairs, occupied = _near_pairs_by_depth(x, y, np.zeros(3), 1.0, 4, radius, np)
        for depth in range(5):
            tree = build_tree(x, y, depth, np, lo=np.zeros(3), width=1.0)
            nbr = neighbor_table(depth, radius, np)
            cs, ct = np.diff(tree.src_start), np.diff(tree.tgt_start)
            ref = sum(int(ct[leaf]) * int(cs[nbr[leaf][nbr[leaf] >= 0]].sum())
                      for leaf in range(8 ** depth))
            assert pairs[depth] == ref, (radius, depth)
            assert occupied[depth] == np.count_nonzero(ct), (radius, depth)


def test_explicit_depth_is_used_and_checked():
    x, alpha = _uniform(600, seed=4)
    sigma = np.full(600, 0.05)        # the reach caps the depth at 3 (0.02: 5, 15 s)
    fmm = FMM("gaussian", tol=1e-3)
    u2, _ = fmm.evaluate(x, alpha, sigma, depth=2)
    assert fmm.config.depth == 2
    ud, _ = _reference("gaussian", x, alpha, sigma)
    assert _rel(u2, ud) <= 1e-3
    u9, _ = fmm.evaluate(x, alpha, sigma, depth=9)        # capped at the reach's level
    assert fmm.config.depth < 9 and _rel(u9, ud) <= 1e-3
    with pytest.raises(ValueError, match="depth must be a non-negative integer"):
        fmm.evaluate(x, alpha, sigma, depth=-1)


@pytest.mark.parametrize("order", [4, 10, 16])
def test_gpu_l2p_tables_reproduce_l2p_box(order):
    """The GPU L2P's coefficient tables, evaluated here in NumPy exactly as l2p_targets
    does (ĥ monomials, 12 values per monomial), equal expansions.l2p_box."""
    from vortexsim.fmm import expansions as E
    from vortexsim.fmm.downward import l2p_coefficient_tables as _l2p_coefficient_tables
    from vortexsim.fmm.downward import l2p_loop_order as _l2p_loop_order
    rng = np.random.default_rng(order)
    n = E.multi_indices(order).n
    Lt = rng.normal(size=(n, 3))                         # normalized local expansion L̃
    w = 0.37
    h = rng.uniform(-0.5, 0.5, size=(40, 3)) * w        # targets − centre
    idx, fu, fg = _l2p_coefficient_tables(order)
    f = fu / w + fg / w ** 2
    C = (Lt.reshape(-1)[idx[0]] * f[0] + Lt.reshape(-1)[idx[1]] * f[1]).reshape(-1, 12)
    mono = E.monomials(h / w, order - 1, np)[:, _l2p_loop_order(order)]   # the rows' order
    u, g = mono @ C[:, :3], (mono @ C[:, 3:]).reshape(-1, 3, 3)
    ur, gr = E.l2p_box(Lt, h / w, order, np)
    assert np.allclose(u, ur / w, rtol=1e-12, atol=1e-12 * np.abs(ur / w).max())
    assert np.allclose(g, gr / w ** 2, rtol=1e-12, atol=1e-12 * np.abs(gr / w ** 2).max())


def test_sparse_m2l_tables_reproduce_the_dense_classes():
    """The sparse M2L's tables (source-class stacked cores, per-target-class source class
    and row block), applied here in NumPy as the GPU does, give the dense class GEMMs."""
    from vortexsim.fmm import expansions as E
    from vortexsim.fmm.m2l import class_cores as _class_cores
    P, level, sep = 4, 3, 2
    fmm = FMM("singular", tol=1e-2, order=P)
    K = E.unit_m2l_cores(P)
    r, B = K.shape[0], 8 ** level
    rng = np.random.default_rng(8)
    Mt = rng.normal(size=(r, B, 3)) * (rng.random(B) < 0.3)[None, :, None]  # sparse sources
    classes = fmm.stages.m2l.classes(level, sep)
    # dense reference: per target class, cores (offset-major) against gathered multipoles
    Mcm = np.concatenate([Mt, np.zeros((r, 1, 3))], axis=1)
    dense = np.zeros((r, B, 3))
    for p, (offsets, gather) in enumerate(classes):
        X = Mcm[:, gather.T, :].transpose(1, 0, 2, 3).reshape(len(offsets) * r, -1)
        dense[:, p::8, :] = (_class_cores(K, offsets) @ X).reshape(r, -1, 3)
    # sparse: Y_c for every box of source class c, then sum each target's blocks
    tables = fmm.stages.m2l.sparse_tables(P, sep)
    Y = [Mt[:, c::8, :].transpose(1, 2, 0).reshape(-1, r) @ tables["Kt"][c] for c in range(8)]
    sparse = np.zeros((r, B, 3))
    for p, (offsets, gather) in enumerate(classes):
        qcls, qidx = (t[p] for t in tables["q_all"])
        for j in range(B // 8):
            for q in range(len(offsets)):
                s = gather[j, q]
                if s >= B:
                    continue
                c, col = int(qcls[q]), s // 8
                blk = Y[c][3 * col:3 * col + 3, qidx[q] * r:(qidx[q] + 1) * r]   # (3, r)
                sparse[:, p + 8 * j, :] += blk.T
    assert np.allclose(sparse, dense, rtol=1e-12, atol=1e-12 * np.abs(dense).max())


def test_shallow_trees_use_the_measured_lower_order():
    """Singular at tol 1e-6: P = 14 on trees of depth ≤ 4 (measured to meet tol/2 there),
    the table's 16 deeper, and an explicit order is always kept."""
    from vortexsim.fmm.evaluator import order_for_tol, shallow_order
    assert order_for_tol(1e-6, "singular") == 16
    assert shallow_order(1e-6, "singular", 4, 16) == 14
    assert shallow_order(3e-6, "singular", 2, 16) == 14
    assert shallow_order(1e-6, "singular", 5, 16) == 16
    assert shallow_order(1e-6, "gaussian", 3, 16) == 16
    assert shallow_order(1e-4, "singular", 3, 10) == 10
    x, alpha = _uniform(3000, seed=14)
    sigma = np.full(3000, 0.05)
    fmm = FMM("singular", tol=1e-6)
    u, g = fmm.evaluate(x, alpha, sigma, depth=3)
    assert fmm.config.order == 14
    ud, gd = _reference("singular", x, alpha, sigma)
    assert _rel(u, ud) <= 1e-6 and _rel(g, gd) <= 1e-5
    fixed = FMM("singular", tol=1e-6, order=16)
    fixed.evaluate(x, alpha, sigma, depth=3)
    assert fixed.config.order == 16


def test_default_near_radius_by_device_and_kernel():
    """CPU: 2 for kernels with a near-field reach (half-width leaves, fewer pairs), 1 for
    the others; an explicit value is kept."""
    assert FMM("gaussian").near_radius == 2
    assert FMM("polynomial").near_radius == 2
    assert FMM("singular").near_radius == 1
    assert FMM("algebraic").near_radius == 1
    assert FMM("gaussian", near_radius=1).near_radius == 1
    with pytest.raises(ValueError, match="near_radius"):
        FMM("gaussian", near_radius=3)


def test_gradient_at_the_first_targets_only():
    """gradient=k: ∇u at the first k targets only (elements), u everywhere (tracers);
    same values as gradient=True, and still within tol of the direct sum."""
    x, alpha = _uniform(2000, seed=21)
    sigma = np.full(2000, 0.05)
    targets = np.concatenate([x[:300], np.random.default_rng(22).random((900, 3))])
    fmm = FMM("gaussian", tol=1e-6, leaf_size=16)
    u_all, g_all = fmm.evaluate(x, alpha, sigma, targets)
    u, g = fmm.evaluate(x, alpha, sigma, targets, gradient=300)
    assert fmm.config.depth >= 2 and g.shape == (300, 3, 3)
    assert _rel(u, u_all) <= 1e-13 and _rel(g, g_all[:300]) <= 1e-13
    ud, gd = _reference("gaussian", x, alpha, sigma, targets)
    assert _rel(u, ud) <= 1e-6 and _rel(g, gd[:300]) <= 1e-5
    u0, g0 = fmm.evaluate(x, alpha, sigma, targets, gradient=0)
    assert g0.shape == (0, 3, 3) and _rel(u0, u_all) <= 1e-13


@pytest.mark.parametrize("bad", [-1, 1201, 2.5, "yes"])
def test_gradient_count_is_checked(bad):
    x, alpha = _uniform(50, seed=23)
    fmm = FMM("gaussian", tol=1e-3)
    with pytest.raises(ValueError, match="gradient must be"):
        fmm.evaluate(x, alpha, 0.1, np.zeros((1200, 3)), gradient=bad)
    with pytest.raises(ValueError, match="part of the targets"):
        fmm.evaluate(x, alpha, 0.1, gradient=10)


def test_sparse_m2l_levels_follow_each_levels_box_counts():
    """With a step plan, sparse or dense is decided per level from that level's counts
    of non-empty boxes (a loop variable once shadowed them: every level after the first
    sparse one was forced sparse).  Array code, run here on NumPy."""
    from vortexsim.fmm.tree import build_tree
    x, _ = _uniform(3000, seed=41)
    tree = build_tree(x, x, 4, np, lo=np.zeros(3), width=1.0)
    fmm = FMM("singular", tol=1e-3)
    P = 4
    counts = np.array([[1] * 8, [60] * 8, [20] * 8])      # levels 2, 3 (94 % full), 4
    cap = counts + 4
    out = fmm.stages.m2l.sparsity(tree, P, capacity=cap, counts=counts)
    assert out[2] is not None and out[4] is not None
    assert out[3] is None, "level 3 holds sources in 94 % of its boxes: dense"
    classes = out[4][0]
    assert [n for n, _ in classes] == list(cap[2])


def test_pair_capacities_from_one_transfer_split_per_level():
    """The sparse M2L by offset's capacities of several levels, read from their pair
    counts concatenated in one transfer (M2L.pair_caps_of), are each level's own
    (pair_bucket_caps): its bucket maxima, plus the plan's slack.  Host code, run here
    on NumPy."""
    m2l = FMM("singular", tol=1e-3).stages.m2l
    rng = np.random.default_rng(44)
    L, levels = 4, [4, 3, 2]                       # the plan's order: deepest first
    seps = [m2l.separation_at(level, L) for level in levels]
    parts = [rng.integers(0, 50, len(m2l.pair_slots(sep)[0])) for sep in seps]
    host = np.concatenate(parts)
    for slack in (None, 8):
        caps = m2l.pair_caps_of(levels, host, L, slack)
        assert list(caps) == levels
        for level, sep, part in zip(levels, seps, parts):
            _, bucket = m2l.pair_slots(sep)
            expect = np.array([part[bucket == b].max() if (bucket == b).any() else 0
                               for b in range(4)])
            if slack:
                expect = expect + expect // slack + 4
            assert np.array_equal(caps[level], expect)
    assert m2l.pair_levels([2, 3, 4]) == [], "the NumPy M2L has no pairs variant"


def test_sparse_m2l_lists_from_a_plans_layouts_equal_those_made_in_the_call():
    """A step plan's prepared layouts and tables (M2LPlan.layouts, copied to the device
    once per step) give the same GEMM lists, column maps and output layout as the
    layouts the call makes itself.  Array code, run here on NumPy."""
    from vortexsim.fmm.tree import build_tree
    x, _ = _uniform(3000, seed=43)
    tree = build_tree(x, x, 4, np, lo=np.zeros(3), width=1.0)
    fmm = FMM("singular", tol=1e-3)
    P = 4
    counts = np.array([[1] * 8, [60] * 8, [3] * 8])
    cap = counts + 2
    prepared = {}
    for row, level in enumerate(range(2, 5)):
        lay = fmm.stages.m2l.sparse_layout(4, level, P, cap[row], int(counts[row].sum()))
        prepared[level] = None if lay is None else (lay, lay["tables"])
    assert prepared[3] is None and prepared[4] is not None
    own = fmm.stages.m2l.sparsity(tree, P, capacity=cap, counts=counts)
    planned = fmm.stages.m2l.sparsity(tree, P, capacity=cap, counts=counts, prepared=prepared)
    assert own.keys() == planned.keys()
    for level in own:
        assert (own[level] is None) == (planned[level] is None)
        if own[level] is None:
            continue
        (ca, ma, ta, ya), (cb, mb, tb, yb) = own[level], planned[level]
        assert [n for n, _ in ca] == [n for n, _ in cb] == list(cap[level - 2])
        assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(ca, cb))
        assert np.array_equal(ma, mb) and np.array_equal(ta, tb)
        assert ya[:2] == yb[:2] and np.array_equal(ya[2], yb[2])
        # every non-empty source box is in a list (≥ 0) or overflows (−2)
        occupied = np.diff(tree.src_start).reshape(-1, 8 ** (4 - level)).sum(axis=1) > 0
        assert np.array_equal(mb != -1, occupied)


@pytest.mark.parametrize("P", [4, 9, 16])
def test_compressed_m2m_l2l_equal_the_cartesian_shifts(P):
    """The 1/r far field runs M2M and L2L on compressed expansions (r = (P+1)² per box
    instead of n(P)): exact, because shifts keep potential-free multipoles potential-free
    and harmonic locals harmonic.  Any multipoles, also with potential-free parts."""
    from vortexsim.fmm import expansions as E
    fmm = FMM("singular", tol=1e-6)
    T, R = fmm.stages.operators.shift(P)
    Tc, Rc = fmm.stages.operators.compressed_shift(P)
    U, V = E.harmonic_bases(P)
    n, r = U.shape
    rng = np.random.default_rng(P)
    M = rng.standard_normal((8 * n, 3))                  # eight children, arbitrary
    parent = V.T @ (T @ M)
    compressed = Tc @ np.concatenate([V.T @ M[c * n:(c + 1) * n] for c in range(8)])
    assert np.abs(compressed - parent).max() <= 1e-12 * np.abs(parent).max()
    Lh = rng.standard_normal((r, 3))                     # a harmonic parent local U L̂
    children = R @ (U @ Lh)
    via = np.concatenate([U @ blk for blk in np.split(Rc @ Lh, 8)])
    assert np.abs(via - children).max() <= 1e-12 * np.abs(children).max()


def test_wide_separation_rules():
    """Below tol 1e-6 the FMM translates only between boxes two boxes apart (875 offsets
    per box at every level, 5³ near stencil at the leaves); its order table goes to 1e-9,
    and below that it refuses with the direct sum named."""
    from vortexsim.fmm import expansions as E
    from vortexsim.fmm.evaluator import WIDE_BELOW, fmm_delivers
    from vortexsim.fmm.m2l import interacts as _interacts
    assert order_for_tol(1e-7, "gaussian", 2) < order_for_tol(1e-8, "gaussian", 2) \
        < order_for_tol(1e-9, "gaussian", 2)
    assert order_for_tol(1e-6, "gaussian", 2) < order_for_tol(1e-6, "gaussian", 1)
    assert order_for_tol(1e-5, "gaussian", 2) == order_for_tol(1e-5, "gaussian", 1)
    with pytest.raises(ValueError, match="method='direct'"):
        order_for_tol(1e-10, "gaussian", 2)
    fmm = FMM("gaussian", tol=1e-8)
    assert fmm.separation == 2 and fmm.near_radius == 2 and fmm.parent_radius == 2
    assert FMM("singular", tol=WIDE_BELOW).separation == 1
    # on the CPU the kernels with a reach take it from 1e-5 down (faster there), unless
    # the caller pins the near stencil or the leaf size
    assert FMM("gaussian", tol=WIDE_BELOW).separation == 2
    assert FMM("gaussian", tol=1e-5).separation == 1
    assert FMM("gaussian", tol=WIDE_BELOW, near_radius=2).separation == 1
    assert FMM("polynomial", tol=WIDE_BELOW, leaf_size=32).separation == 1
    assert FMM("singular", tol=1e-3, separation=2).separation == 2
    with pytest.raises(ValueError, match="below the separation"):
        FMM("singular", tol=1e-8, near_radius=1)
    with pytest.raises(ValueError, match="separation must be 1 or 2"):
        FMM("singular", tol=1e-8, separation=3)
    offsets = E.offsets_cube(5)
    assert offsets.shape == (1331, 3) and np.array_equal(E.offsets_cube(3), E.OFFSETS_3)
    for p in range(8):
        bits = np.array([p & 1, (p >> 1) & 1, (p >> 2) & 1])
        ok = _interacts(bits, offsets, 3, 2)
        assert ok.sum() == 875 and np.abs(offsets[ok]).max(axis=1).min() == 3
        assert np.abs(offsets[ok]).max() == 5
    assert fmm_delivers(1e-9) and not fmm_delivers(1e-10)


@pytest.mark.parametrize("kernel", ["singular", "gaussian", "algebraic"])
def test_wide_separation_meets_1e8_on_hand_placed_clusters(kernel):
    """Two clusters far apart (all their pairs go through the expansions) and points
    spread between: the wide-separation FMM at tol 1e-8 against the direct sum."""
    rng = np.random.default_rng(31)
    x = np.concatenate([0.1 + 0.05 * rng.random((600, 3)), 0.85 + 0.05 * rng.random((600, 3)),
                        rng.random((1800, 3))])
    alpha, sigma = rng.normal(size=(3000, 3)), np.full(3000, 0.004)
    y = rng.random((500, 3))
    fmm = FMM(kernel, tol=1e-8)
    u, g = fmm.evaluate(x, alpha, sigma, y, depth=3)
    assert fmm.config.depth == 3 and fmm.separation == 2
    ud, gd = direct_sum_numpy(get_kernel(kernel), x, alpha, sigma, y)
    assert _rel(u, ud) <= 1e-8 and _rel(g, gd) <= 1e-7


def test_wide_separation_core_groups_change_only_the_summation_order():
    """The wide separation's CPU M2L cuts its cores in groups of offsets (memory): any
    group size gives the same locals up to round-off."""
    x, alpha = _uniform(3000, seed=47)
    sigma = np.full(3000, 0.01)
    out = []
    for group in (50, 10 ** 6):
        fmm = FMM("singular", tol=1e-8)
        fmm.WIDE_CORE_GROUP = group
        out.append(fmm.evaluate(x, alpha, sigma, depth=3))
        assert fmm.config.depth == 3
    assert _rel(out[0][0], out[1][0]) <= 1e-14 and _rel(out[0][1], out[1][1]) <= 1e-14


def test_float32_refuses_tolerances_it_cannot_meet():
    """float32 pair sums err by ~6e-7 on their own: below tol 1e-6 a float32 evaluator
    refuses and names float64 (instead of returning a silently worse answer)."""
    with pytest.raises(ValueError, match="precision='float64'"):
        FMM("gaussian", tol=1e-8, precision="float32")
    assert FMM("gaussian", tol=1e-6, precision="float32").dtype == np.float32
    with pytest.raises(ValueError, match="precision='float64'"):
        vortexsim.induced_velocity(np.zeros((2, 3)), np.ones((2, 3)), 0.1, method="fmm",
                                   tol=1e-9, precision="float32", device="cpu")
