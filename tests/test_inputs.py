"""Standard inputs (vortexsim.cases.inputs)."""
import numpy as np

from vortexsim.cases import inputs


def test_shapes_ranges_and_reproducibility():
    x, a, t = inputs.uniform(100, np.random.default_rng(0))
    assert x.shape == a.shape == (100, 3) and t is None and (0 <= x).all() and (x < 1).all()
    x, a, t = inputs.rings(1000, 300, np.random.default_rng(0))
    assert x.shape == a.shape == (1000, 3) and t.shape == (300, 3)
    assert (0 <= t).all() and (t <= 1).all()
    # Σα of a full ring vanishes statistically; |α| per element is 2πR/n_ring
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 2 * np.pi * 0.3 / 500)
    x2, _, _ = inputs.rings(1000, 300, np.random.default_rng(0))
    assert (x == x2).all()
    x, a, _ = inputs.clustered(500, np.random.default_rng(1))
    assert x.shape == (500, 3) and (0 <= x).all() and (x <= 1).all()
    assert np.median(np.linalg.norm(x - 0.5, axis=1)) < 0.1          # strongly clustered
