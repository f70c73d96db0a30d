"""The FMM's cost of each target, leaf by leaf (vortexsim.fmm.costs): the sources in each
leaf's near stencil against a brute-force count, the costs of sorted targets against the
near-field pair count of the depth model, and whole leaves priced once."""
import numpy as np
import pytest

from vortexsim.fmm.costs import LeafCosts, leaf_costs, leaf_keys, stencil_sums, target_costs
from vortexsim.fmm.plan import near_pairs_by_depth
from vortexsim.fmm.tree import morton_decode
from vortexsim.kernels.morton import bounding_cube, grid_cells, morton_keys


@pytest.mark.parametrize("radius", [1, 2])
def test_stencil_sums_are_the_box_sums_around_each_cell(radius):
    grid = np.random.default_rng(0).integers(0, 9, size=(6, 6, 6))
    padded = np.pad(grid, radius)
    w = 2 * radius + 1
    want = np.empty_like(grid)
    for i, j, k in np.ndindex(grid.shape):
        want[i, j, k] = padded[i:i + w, j:j + w, k:k + w].sum()
    np.testing.assert_array_equal(stencil_sums(grid, radius, np), want)


def test_leaf_costs_count_the_sources_in_each_leafs_stencil_in_morton_order():
    rng = np.random.default_rng(1)
    x = 0.6 * rng.random((3000, 3))                      # a corner of the cube
    lo, width, depth = np.zeros(3), 1.0, 3
    costs = leaf_costs(x, lo, width, depth, 1, np)
    assert costs.depth == depth and costs.stencil.shape == (8 ** depth,)
    cells = grid_cells(x, lo, width, depth, np)
    ix, iy, iz = morton_decode(np.arange(8 ** depth), depth, np)
    for key in (0, 1, 9, 100, 300, 511):
        near = (np.abs(cells - [ix[key], iy[key], iz[key]]) <= 1).all(axis=1)
        assert costs.stencil[key] == near.sum(), key


def test_target_costs_sum_to_the_pairs_and_price_each_leaf_once():
    """Σ over sorted targets = the depth model's near-field pairs + per_target · M +
    per_leaf · (leaves holding targets); each leaf's first target alone carries
    per_leaf."""
    rng = np.random.default_rng(2)
    x = rng.random((4000, 3))
    y = np.concatenate([x[:2500], 0.5 * rng.random((700, 3))])
    lo, width = bounding_cube(np.concatenate([x, y]), np)
    depth = 3
    pairs, occupied = near_pairs_by_depth(x, y, lo, width, depth, 1, np)
    keys = np.sort(morton_keys(y, lo, width, 10, np).astype(np.uint32))
    costs = LeafCosts(depth, leaf_costs(x, lo, width, depth, 1, np).stencil, 1000, 7)
    w = target_costs(keys, 10, costs, np)
    assert w.dtype == np.int64
    assert w.sum() == int(pairs[depth]) + 7 * y.shape[0] + 1000 * int(occupied[depth])
    leaf = leaf_keys(keys, 10, depth, np)
    first = np.r_[True, leaf[1:] != leaf[:-1]]
    np.testing.assert_array_equal(w - costs.stencil[leaf.astype(np.int64)] - 7,
                                  1000 * first)


def test_leaves_finer_than_the_keys_are_refused():
    with pytest.raises(ValueError, match="finer"):
        leaf_keys(np.zeros(3, np.uint32), 4, 5, np)
