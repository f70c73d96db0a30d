"""vortexsim.kernels.direct helpers beyond the public API (tested there)."""
import numpy as np
import pytest

from vortexsim.kernels.cutoff import KERNELS
from vortexsim.kernels.direct import direct_sum_at_elements, direct_sum_numpy


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_direct_sum_at_elements_equals_rows_of_the_full_sum(name):
    rng = np.random.default_rng(11)
    x, alpha = rng.random((300, 3)), rng.normal(size=(300, 3))
    sigma = 0.05 * (1 + rng.random(300))
    idx = np.array([0, 7, 150, 299])
    u, g = direct_sum_at_elements(KERNELS[name], x, alpha, sigma, idx)
    uf, gf = direct_sum_numpy(KERNELS[name], x, alpha, sigma, x, exclude_self=True)
    np.testing.assert_allclose(u, uf[idx], rtol=1e-13, atol=1e-13 * np.abs(uf).max())
    np.testing.assert_allclose(g, gf[idx], rtol=1e-13, atol=1e-13 * np.abs(gf).max())
