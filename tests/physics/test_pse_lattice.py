"""PSE on the periodic lattice by FFT convolutions (vortexsim.physics.pse_lattice): the
pair sum of pse_rate to round-off (both orders, odd and even n, unequal volumes), Σ of
the rates zero, the pair sum's errors; in a run, the first stage on the lattice."""
import math

import numpy as np
import pytest

from vortexsim.physics.pse import pse_rate
from vortexsim.physics.pse_lattice import pse_rate_lattice

L = 2.0 * math.pi


def _lattice(n, seed=0):
    h = L / n
    g = np.arange(n) * h
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    rng = np.random.default_rng(seed)
    alpha = rng.standard_normal((n ** 3, 3)) * h ** 3
    volume = h ** 3 * (1.0 + 0.1 * rng.random(n ** 3))
    return x, alpha, volume, h


@pytest.mark.parametrize("n, order", [(16, 4), (17, 2), (18, 2)])
def test_equals_the_pair_sum(n, order):
    """Measured 2e-15..4e-15 of the largest rate apart."""
    x, alpha, volume, h = _lattice(n)
    eps = h / math.sqrt(2.0)
    ref = pse_rate(x, alpha, volume, eps, 0.01, box=L, order=order)
    got = pse_rate_lattice(alpha, volume, n, L, eps, 0.01, order=order)
    assert np.abs(got - ref).max() <= 1e-13 * np.abs(ref).max()
    assert np.abs(got.sum(axis=0)).max() <= 1e-15 * np.abs(got).sum()
    np.testing.assert_array_equal(pse_rate_lattice(alpha, volume, n, L, eps, 0.0), 0.0)


@pytest.mark.parametrize("kw, match", [
    (dict(epsilon=0.0), "epsilon"),
    (dict(nu=-1.0), "nu"),
    (dict(epsilon=0.5), "too small for the PSE reach"),
    (dict(n=12), r"shape \(1728, 3\)"),
])
def test_errors(kw, match):
    _, alpha, volume, h = _lattice(16)
    args = dict(n=16, epsilon=h / math.sqrt(2.0), nu=0.01)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        pse_rate_lattice(alpha, volume, args["n"], L, args["epsilon"], args["nu"])


def test_a_viscous_run_takes_it_at_the_lattice_stage():
    """taylor_green at n = 16 with PSE: the run whose first stages sum on the lattice
    (velocity and PSE) follows the run without the lattice path to the non-uniform FFTs'
    precision."""
    import vortexsim

    def run(disable):
        sim = vortexsim.make_case("taylor_green", n=16, dt=0.1, tol=1e-10, device="cpu",
                                  progress=False)
        if disable:
            sim.model.on_lattice = lambda: None
        for _ in range(3):
            sim.step()
        return sim.elements.alpha

    fast, slow = run(False), run(True)
    assert np.abs(fast - slow).max() <= 1e-11 * np.abs(slow).max()     # 1.1e-13


@pytest.mark.gpu
def test_cupy_matches_numpy():
    import cupy as cp
    _, alpha, volume, h = _lattice(16)
    eps = h / math.sqrt(2.0)
    ref = pse_rate_lattice(alpha, volume, 16, L, eps, 0.01, order=4)
    got = pse_rate_lattice(cp.asarray(alpha), cp.asarray(volume), 16, L, eps, 0.01, order=4)
    assert isinstance(got, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(got), ref, atol=1e-13 * np.abs(ref).max())
