"""Tests of the level-uniform octree (``vortexsim/fmm/tree.py``).

References are brute force: per-point Python loops over boxes, histograms of
floor((x − lo) / h), and triple loops over neighbour offsets.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from vortexsim.backend import gpu_available
from vortexsim.fmm.tree import (MAX_DEPTH, Octree, build_tree, child_keys, choose_depth,
                                morton_decode, morton_encode, neighbor_table, parent_keys,
                                root_cube)
from vortexsim.kernels.morton import morton_keys


# --- helpers ---------------------------------------------------------------

def check_tree(tree, sources, targets):
    """Every invariant of an Octree against brute force, on the host."""
    lo, w = np.asarray(tree.lo), float(tree.width)
    h = float(tree.box_width(tree.depth))
    n_cells = 2 ** tree.depth
    centers = tree.box_centers(tree.depth, np)
    assert centers.shape == (tree.n_leaves, 3)
    for pts, order, start in ((sources, tree.src_order, tree.src_start),
                              (targets, tree.tgt_order, tree.tgt_start)):
        n = pts.shape[0]
        assert order.dtype == np.int64 and start.dtype == np.int64
        assert start.shape == (tree.n_leaves + 1,)
        assert np.array_equal(np.sort(order), np.arange(n))          # a permutation
        assert start[0] == 0 and start[-1] == n
        assert np.all(np.diff(start) >= 0)
        # root cube holds every point
        assert np.all(pts >= lo) and np.all(pts <= lo + w)
        # leaf counts equal a brute-force histogram of cell indices
        cell = np.clip(np.floor((pts - lo) / h), 0, n_cells - 1).astype(np.int64)
        keys = morton_encode(cell[:, 0], cell[:, 1], cell[:, 2], np).astype(np.int64)
        assert np.array_equal(np.diff(start), np.bincount(keys, minlength=tree.n_leaves))
        # every point lies (geometrically) inside its leaf box; ties on faces allowed
        leaf = np.repeat(np.arange(tree.n_leaves), np.diff(start))
        sorted_pts = pts[order]
        tol = 1e-12 * max(w, np.abs(lo).max())
        assert np.all(np.abs(sorted_pts - centers[leaf]) <= 0.5 * h + tol)
        # within a leaf: Z-order on the 2**10 grid, ties in original order
        same_leaf = leaf[1:] == leaf[:-1]
        fine = morton_keys(sorted_pts, lo, w, 10, np).astype(np.int64)
        assert np.all(fine[1:][same_leaf] >= fine[:-1][same_leaf])
        tie = same_leaf & (fine[1:] == fine[:-1])
        assert np.all(order[1:][tie] > order[:-1][tie])


# --- Morton keys -----------------------------------------------------------

@pytest.mark.parametrize("bits", [0, 1, 2, 5, 10, 21])
def test_encode_decode_round_trip(rng, bits):
    ijk = rng.integers(0, 2 ** bits, size=(3, 1000))
    keys = morton_encode(*ijk, np)
    assert keys.dtype == np.uint64
    assert np.all(keys < np.uint64(2) ** np.uint64(3 * bits))
    back = morton_decode(keys, bits, np)
    assert all(b.dtype == np.int64 for b in back)
    assert np.array_equal(np.stack(back), ijk)
    # and every key of a small level decodes and re-encodes to itself
    if bits <= 5:
        k = np.arange(8 ** bits, dtype=np.uint64)
        assert np.array_equal(morton_encode(*morton_decode(k, bits, np), np), k)


def test_encode_matches_morton_keys(rng):
    """morton_encode interleaves exactly like kernels.morton.morton_keys (x lowest bit)."""
    bits = 7
    pts = rng.random((500, 3))
    cell = np.floor(pts * 2 ** bits).astype(np.int64)
    keys = morton_keys(pts, np.zeros(3), 1.0, bits, np)
    assert np.array_equal(morton_encode(cell[:, 0], cell[:, 1], cell[:, 2], np), keys)
    assert morton_encode(np.array([1]), np.array([0]), np.array([0]), np)[0] == 1
    assert morton_encode(np.array([0]), np.array([1]), np.array([0]), np)[0] == 2
    assert morton_encode(np.array([0]), np.array([0]), np.array([1]), np)[0] == 4


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_children_in_morton_order_and_inside_parent(level):
    tree = build_tree(np.zeros((1, 3)), np.ones((1, 3)), level + 1, np)
    parents = np.arange(8 ** level, dtype=np.int64)
    kids = child_keys(parents, np)
    assert kids.shape == (8 ** level, 8)
    assert np.array_equal(kids.ravel(), np.arange(8 ** (level + 1)))     # 8k .. 8k+7
    assert np.array_equal(parent_keys(kids.ravel()), np.repeat(parents, 8))
    assert np.array_equal(parent_keys(kids.astype(np.uint64).ravel()),
                          np.repeat(parents, 8).astype(np.uint64))
    pc, cc = tree.box_centers(level, np), tree.box_centers(level + 1, np)
    h = float(tree.box_width(level + 1))
    offset = cc[kids] - pc[:, None, :]                                    # (K, 8, 3)
    assert np.allclose(np.abs(offset), 0.5 * h)                           # inside the parent
    c = np.arange(8)
    octant = np.stack([c & 1, (c >> 1) & 1, (c >> 2) & 1], axis=1)
    assert np.array_equal(offset > 0, np.broadcast_to(octant == 1, offset.shape))


# --- build_tree ------------------------------------------------------------

@pytest.mark.parametrize("depth", [0, 1, 2, 3, 4])
def test_build_tree_random(rng, depth):
    src = rng.normal(size=(2000, 3))
    tgt = rng.random((700, 3)) * 3.0 - 1.0
    tree = build_tree(src, tgt, depth, np)
    assert isinstance(tree, Octree) and tree.depth == depth
    check_tree(tree, src, tgt)


def test_build_tree_clustered_float32(rng):
    """A ring (torus) of elements, float32 positions, points exactly on the cube's faces."""
    phi = rng.random(3000) * 2 * np.pi
    src = np.stack([np.cos(phi), np.sin(phi), 0.05 * rng.normal(size=3000)], axis=1)
    src = src.astype(np.float32)
    tgt = np.array([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0], [1.0, -1.0, 0.0]], dtype=np.float32)
    tree = build_tree(src, tgt, 3, np, lo=[-1.0, -1.0, -1.0], width=2.0)
    assert tree.width == 2.0
    check_tree(tree, src, tgt)
    assert tree.tgt_start[1] == 1                           # lower corner → leaf 0
    assert tree.tgt_start[-2] == 2                          # upper corner → last leaf


def test_single_point():
    src = np.array([[0.3, -2.0, 5.0]])
    for depth in (0, 2, 5):
        tree = build_tree(src, src.copy(), depth, np)
        check_tree(tree, src, src)
        assert float(tree.width) > 0


def test_coincident_points():
    src = np.full((50, 3), 7.25)
    tree = build_tree(src, src[:3], 4, np)
    assert np.isfinite(float(tree.width)) and float(tree.width) > 0
    check_tree(tree, src, src[:3])
    assert tree.src_start[1] == 50                          # all in leaf 0 (the lower corner)
    origin = np.zeros((4, 3))
    check_tree(build_tree(origin, origin, 5, np), origin, origin)
    lo, width = root_cube(origin, origin, np)                 # degenerate cube stays usable
    assert float(width) > 0
    assert np.all(morton_keys(origin, lo, width, 21, np) == 0)


def test_targets_outside_sources_box(rng):
    src = rng.random((300, 3))
    tgt = rng.random((100, 3)) + np.array([5.0, -3.0, 0.0])
    tree = build_tree(src, tgt, 3, np)
    check_tree(tree, src, tgt)
    assert float(tree.width) >= 5.0


@pytest.mark.parametrize("depth", [0, 3])
def test_empty_targets_or_sources(rng, depth):
    pts = rng.random((200, 3))
    empty = np.zeros((0, 3))
    tree = build_tree(pts, empty, depth, np)
    check_tree(tree, pts, empty)
    assert np.all(tree.tgt_start == 0) and tree.tgt_order.shape == (0,)
    tree = build_tree(empty, pts, depth, np)
    check_tree(tree, empty, pts)
    assert np.all(tree.src_start == 0)
    tree = build_tree(pts, None, depth, np)
    assert tree.tgt_order.shape == (0,)


def test_depth_zero(rng):
    src, tgt = rng.random((30, 3)), rng.random((20, 3))
    tree = build_tree(src, tgt, 0, np)
    assert np.array_equal(tree.src_start, [0, 30]) and np.array_equal(tree.tgt_start, [0, 20])
    assert np.array_equal(np.sort(tree.src_order), np.arange(30))     # Z-order in the root
    check_tree(tree, src, tgt)
    assert tree.box_centers(0, np).shape == (1, 3)


def test_root_cube_and_box_geometry(rng):
    src, tgt = rng.random((40, 3)), rng.random((10, 3)) - 1.0
    lo, width = root_cube(src, tgt, np)
    tree = build_tree(src, tgt, 2, np)
    assert np.array_equal(tree.lo, lo) and float(tree.width) == float(width)
    assert float(tree.box_width(2)) == float(width) / 4
    c = tree.box_centers(1, np)
    assert np.allclose(c.min(axis=0), lo + 0.25 * width)
    assert np.allclose(c.max(axis=0), lo + 0.75 * width)


# --- bad input ---------------------------------------------------------------

@pytest.mark.parametrize("depth", [-1, 11, 2.0, True])
def test_bad_depth(depth):
    with pytest.raises(ValueError, match="depth must be an integer in"):
        build_tree(np.zeros((2, 3)), np.zeros((2, 3)), depth, np)


@pytest.mark.parametrize("src, tgt, match", [
    (np.zeros((5, 2)), np.zeros((5, 3)), r"sources has shape \(5, 2\)"),
    (np.zeros((5, 3)), np.zeros(5), r"targets has shape \(5,\)"),
    (np.zeros((5, 3), dtype=np.int64), np.zeros((5, 3)), "float positions"),
    (np.zeros((0, 3)), np.zeros((0, 3)), "both empty"),
])
def test_bad_points(src, tgt, match):
    with pytest.raises(ValueError, match=match):
        build_tree(src, tgt, 2, np)


def test_bad_user_cube(rng):
    pts = rng.random((20, 3))
    with pytest.raises(ValueError, match=r"1 of 20 targets lie outside the root cube"):
        build_tree(pts, np.vstack([pts[:19], [[1.5, 0.5, 0.5]]]), 2, np, lo=np.zeros(3), width=1.0)
    with pytest.raises(ValueError, match="sources lie outside"):
        build_tree(pts, pts, 2, np, lo=np.full(3, 0.5), width=1.0)
    with pytest.raises(ValueError, match="both lo and width"):
        build_tree(pts, pts, 2, np, width=1.0)
    with pytest.raises(ValueError, match="finite positive"):
        build_tree(pts, pts, 2, np, lo=np.zeros(3), width=0.0)
    with pytest.raises(ValueError, match=r"lo has shape \(2,\)"):
        build_tree(pts, pts, 2, np, lo=np.zeros(2), width=1.0)


# --- neighbour table ---------------------------------------------------------

@pytest.mark.parametrize("level", [0, 2, 3])
@pytest.mark.parametrize("radius", [0, 1, 2])
def test_neighbor_table_brute_force(level, radius):
    table = neighbor_table(level, radius, np)
    side = 2 * radius + 1
    n = 2 ** level
    assert table.shape == (8 ** level, side ** 3) and table.dtype == np.int64
    ix, iy, iz = morton_decode(np.arange(8 ** level), level, np)
    key_of = {ijk: k for k, ijk in enumerate(zip(ix.tolist(), iy.tolist(), iz.tolist()))}
    assert len(key_of) == 8 ** level                                  # decode is a bijection
    offsets = list(itertools.product(range(-radius, radius + 1), repeat=3))   # dz fastest
    for k in range(8 ** level):
        expected = [key_of.get((ix[k] + dx, iy[k] + dy, iz[k] + dz), -1) for dx, dy, dz in offsets]
        assert table[k].tolist() == expected
    assert np.array_equal(table[:, (side ** 3 - 1) // 2], np.arange(8 ** level))


def test_neighbor_table_bad_input():
    with pytest.raises(ValueError, match="radius"):
        neighbor_table(2, -1, np)
    with pytest.raises(ValueError, match="level"):
        neighbor_table(11, 1, np)


# --- choose_depth ------------------------------------------------------------

def test_choose_depth_rule_and_monotone():
    assert choose_depth(0, 0, 64) == 0
    assert choose_depth(64, 10, 64) == 0
    assert choose_depth(10, 64 * 8, 64) == 1
    assert choose_depth(64 * 8 ** 3, 0, 64) == 3
    assert choose_depth(10 ** 12, 0, 1) == MAX_DEPTH
    assert choose_depth(10 ** 12, 0, 1, max_depth=4) == 4
    depths = [choose_depth(n, n // 2, 50) for n in np.unique(np.geomspace(1, 1e9, 300).astype(int))]
    assert np.all(np.diff(depths) >= 0) and depths[-1] > depths[0]


def test_choose_depth_respects_min_leaf_width():
    n = 64 * 8 ** 6                                           # wants depth 6
    assert choose_depth(n, n, 64) == 6
    assert choose_depth(n, n, 64, min_leaf_width=1 / 16, width=1.0) == 4   # 1/16 ≥ 1/16
    assert choose_depth(n, n, 64, min_leaf_width=0.07, width=1.0) == 3
    assert choose_depth(n, n, 64, min_leaf_width=2.0, width=1.0) == 0
    for mlw in np.geomspace(1e-4, 1.0, 25):
        d = choose_depth(n, n, 64, min_leaf_width=mlw, width=1.0)
        assert d == 0 or 1.0 / 2 ** d >= mlw
    with pytest.raises(ValueError, match="root cube edge"):
        choose_depth(n, n, 64, min_leaf_width=0.1)
    with pytest.raises(ValueError, match="leaf_size"):
        choose_depth(n, n, 0)
    with pytest.raises(ValueError, match="n_sources"):
        choose_depth(-1, n, 64)


# --- GPU: CuPy gives the same tree as NumPy ----------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("depth", [0, 3, 5])
def test_cupy_matches_numpy(rng, depth):
    import cupy as cp  # noqa: PLC0415

    src, tgt = rng.normal(size=(5000, 3)), rng.random((3000, 3))
    t_np = build_tree(src, tgt, depth, np)
    t_cp = build_tree(cp.asarray(src), cp.asarray(tgt), depth, cp)
    for name in ("lo", "src_order", "tgt_order", "src_start", "tgt_start"):
        assert np.array_equal(cp.asnumpy(getattr(t_cp, name)), getattr(t_np, name)), name
    assert float(t_cp.width) == float(t_np.width)
    assert np.allclose(cp.asnumpy(t_cp.box_centers(depth, cp)), t_np.box_centers(depth, np))
    assert np.array_equal(cp.asnumpy(neighbor_table(min(depth, 3), 2, cp)),
                          neighbor_table(min(depth, 3), 2, np))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("bits", [1, 7, 21])
def test_cupy_morton_keys_match_numpy(rng, bits):
    """The fused CUDA interleave gives NumPy's keys, on every bit of every axis."""
    import cupy as cp  # noqa: PLC0415
    from vortexsim.kernels.morton import morton_keys

    pts = rng.random((20000, 3))
    pts[:8] = [[0, 0, 0], [1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0.5] * 3,
               [1 - 1e-12] * 3]
    ref = morton_keys(pts, np.zeros(3), 1.0, bits, np)
    got = morton_keys(cp.asarray(pts), cp.zeros(3), 1.0, bits, cp)
    assert got.dtype == np.uint64 and np.array_equal(cp.asnumpy(got), ref)
    # another cube, its edge a device scalar, points outside it clamped to its cells
    lo, width = np.array([-0.1, 0.2, 0.05]), 0.9
    pts = 1.4 * pts - 0.2
    ref = morton_keys(pts, lo, width, bits, np)
    got = morton_keys(cp.asarray(pts), cp.asarray(lo), cp.asarray(width), bits, cp)
    assert np.array_equal(cp.asnumpy(got), ref)
    assert morton_keys(cp.zeros((0, 3)), cp.asarray(lo), width, bits, cp).shape == (0,)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m", [1, 255, 300001])
def test_cupy_column_range_matches_numpy(rng, dtype, m):
    """The one-kernel column range gives NumPy's minima and maxima (one block, several,
    the grid-stride loop), in the points' dtype, and a NaN makes its column's NaN."""
    import cupy as cp  # noqa: PLC0415
    from vortexsim.kernels.morton import column_range

    pts = (rng.normal(size=(m, 3)) * [1.0, 1e-3, 1e3]).astype(dtype)
    lo, hi = column_range(cp.asarray(pts), cp)
    assert lo.dtype == dtype and hi.dtype == dtype
    np.testing.assert_array_equal(cp.asnumpy(lo), pts.min(axis=0))
    np.testing.assert_array_equal(cp.asnumpy(hi), pts.max(axis=0))
    pts[m // 2, 1] = np.nan
    lo, hi = column_range(cp.asarray(pts), cp)
    ref_lo, ref_hi = column_range(pts, np)
    np.testing.assert_array_equal(cp.asnumpy(lo), ref_lo)          # NaN where NumPy's is
    np.testing.assert_array_equal(cp.asnumpy(hi), ref_hi)
    assert np.isnan(cp.asnumpy(lo)[1]) and not np.isnan(cp.asnumpy(lo)[0])


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("bits", [0, 3, 6])
def test_cupy_count_cells_and_pair_counts_match_numpy(rng, bits):
    """The one-kernel cell counts give NumPy's, points outside the cube clamped; the
    depth model's pairs and occupied leaves on them too."""
    import cupy as cp  # noqa: PLC0415
    from vortexsim.fmm.plan import near_pairs_by_depth
    from vortexsim.kernels.morton import count_cells

    pts = rng.random((40000, 3)) * 1.2 - 0.1                     # some outside [0, 1)³
    pts[:3] = [[0, 0, 0], [1 - 1e-15, 0.5, 0.25], [0.5, 0.5, 0.5]]
    lo, width = np.zeros(3), 1.0
    ref = count_cells(pts, lo, width, bits, np)
    got = count_cells(cp.asarray(pts), cp.asarray(lo), width, bits, cp)
    assert got.dtype == np.int64 and got.shape == (1 << bits,) * 3
    np.testing.assert_array_equal(cp.asnumpy(got), ref)
    assert int(got.sum()) == pts.shape[0]
    # a point with a NaN coordinate is not counted (nor written outside the grid)
    bad = pts.copy()
    bad[5, 1] = bad[7, 0] = np.nan
    got = count_cells(cp.asarray(bad), cp.asarray(lo), width, bits, cp)
    np.testing.assert_array_equal(cp.asnumpy(got), count_cells(bad, lo, width, bits, np))
    assert int(got.sum()) == pts.shape[0] - 2
    y = pts[::3]
    for tgt, tgt_d in ((y, cp.asarray(y)), (pts, None)):
        src_d = cp.asarray(pts)
        ref = near_pairs_by_depth(pts, tgt, lo, width, bits, 1, np)
        got = near_pairs_by_depth(src_d, src_d if tgt_d is None else tgt_d, cp.asarray(lo),
                                  width, bits, 1, cp)
        for r, g in zip(ref, got):
            np.testing.assert_array_equal(g, r)


@pytest.mark.parametrize("bits", [0, 2])
def test_count_cells_counts_a_nan_cell_nowhere(bits):
    """A point with a NaN in any coordinate, or whose cell is NaN (inf − inf of a cube
    with an infinite corner), is counted nowhere; the others as grid_cells places them;
    no points give an empty grid."""
    from vortexsim.kernels.morton import count_cells

    rng = np.random.default_rng(3)
    pts = rng.random((200, 3))
    ref = count_cells(pts, np.zeros(3), 1.0, bits, np)
    assert ref.shape == (1 << bits,) * 3 and ref.sum() == 200
    for column in range(3):
        bad = np.concatenate([pts, [[0.5, 0.5, 0.5]]])
        bad[-1, column] = np.nan
        np.testing.assert_array_equal(count_cells(bad, np.zeros(3), 1.0, bits, np), ref)
    # a cube from an infinite corner: inf − inf, no cell
    got = count_cells(pts, np.array([np.inf, 0.0, 0.0]), 1.0, bits, np)
    assert got.sum() == 200          # finite points: −inf cells, clamped to the first
    got = count_cells(np.array([[np.inf, 0.5, 0.5], [0.5, 0.5, 0.5]]),
                      np.array([np.inf, 0.0, 0.0]), 1.0, bits, np)
    assert got.sum() == 1
    assert np.array_equal(count_cells(np.zeros((0, 3)), np.zeros(3), 1.0, bits, np),
                          np.zeros((1 << bits,) * 3, np.int64))


def test_with_targets_sorts_a_second_set_into_the_same_leaves():
    from vortexsim.fmm.tree import with_targets
    rng = np.random.default_rng(31)
    x, y1, y2 = rng.random((500, 3)), rng.random((300, 3)), rng.random((200, 3))
    both = build_tree(x, np.concatenate([y1, y2]), 3, np, lo=np.zeros(3), width=1.0)
    t1 = build_tree(x, y1, 3, np, lo=np.zeros(3), width=1.0)
    t2 = with_targets(t1, y2, np, check=True)
    assert t2.src_start is t1.src_start and t2.depth == 3
    np.testing.assert_array_equal(t1.tgt_start + t2.tgt_start, both.tgt_start)
    keys = morton_keys(y2, np.zeros(3), 1.0, 3, np)
    assert np.all(np.diff(keys[t2.tgt_order].astype(np.int64)) >= 0)
    with pytest.raises(ValueError, match="outside the root cube"):
        with_targets(t1, y2 + 2.0, np, check=True)
