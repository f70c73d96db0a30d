"""Rows put back in the caller's order (vortexsim.kernels.permute): out[order[j]] =
rows[j] for u-like (M, 3) and ∇u-like (M, 3, 3) rows, the inverse permutation, and on
the GPU the gather kernel giving the same values as NumPy's scatter."""
import numpy as np
import pytest

from vortexsim.kernels.permute import inverse_permutation, unpermute_rows


@pytest.mark.parametrize("shape", [(0, 3), (1, 3), (37, 3), (37, 3, 3)])
def test_rows_go_back_to_their_places(shape):
    rng = np.random.default_rng(0)
    rows = rng.standard_normal(shape)
    order = rng.permutation(shape[0])
    out = unpermute_rows(rows, order, np)
    for j, i in enumerate(order):
        np.testing.assert_array_equal(out[i], rows[j])
    inv = inverse_permutation(order, np)
    np.testing.assert_array_equal(order[inv], np.arange(shape[0]))
    np.testing.assert_array_equal(out, rows[inv])


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(0, 3), (5, 3), (100003, 3), (100003, 3, 3)])
def test_gpu_gather_equals_numpys_scatter(shape):
    import cupy as cp
    rng = np.random.default_rng(1)
    rows = rng.standard_normal(shape)
    order = rng.permutation(shape[0])
    want = unpermute_rows(rows, order, np)
    got = unpermute_rows(cp.asarray(rows), cp.asarray(order), cp)
    np.testing.assert_array_equal(cp.asnumpy(got), want)
    inv = inverse_permutation(cp.asarray(order), cp)
    got = unpermute_rows(cp.asarray(rows).astype(cp.float32), cp.asarray(order), cp, inv)
    np.testing.assert_array_equal(cp.asnumpy(got), want.astype(np.float32))
