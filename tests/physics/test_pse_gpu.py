"""PSE on the GPU (vortexsim.physics.pse_gpu, marker ``gpu``): the CUDA gather against the
NumPy PSE in float64 (free space and the periodic box, both orders, 1e-12 of the largest
rate), bitwise determinism from call to call, conservation, the input checks, the time
loop's term, and Simulations with viscous='pse' on device='gpu' (free space; the
Taylor–Green case) against device='cpu'."""
import math

import numpy as np
import pytest

from vortexsim.backend import gpu_available
from vortexsim.physics.pse import pse_rate

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]


def _elements(n, size, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random((n, 3)) * size, rng.normal(size=(n, 3)),
            rng.uniform(0.5, 1.5, n) * 0.01)


@pytest.mark.parametrize("order", [2, 4])
@pytest.mark.parametrize("box,epsilon,n", [
    (None, 0.15, 3000),     # many cells
    (None, 0.5, 500),       # one cell holds all
    (3.0, 0.16, 3000),      # two cells per axis: a cell at two images in the stencil
    (3.0, 0.09, 3000),      # three cells per axis
    (3.0, 0.03, 20000),     # many cells per axis
])
def test_gpu_matches_numpy(order, box, epsilon, n):
    import cupy as cp
    x, alpha, volume = _elements(n, 3.0)
    want = pse_rate(x, alpha, volume, epsilon, 0.3, box=box, order=order)
    got = pse_rate(cp.asarray(x), cp.asarray(alpha), cp.asarray(volume), epsilon, 0.3,
                   box=box, order=order)
    assert isinstance(got, cp.ndarray) and got.dtype == cp.float64 and got.shape == (n, 3)
    got = cp.asnumpy(got)
    assert np.abs(want).max() > 0
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())
    np.testing.assert_allclose(got.sum(axis=0), 0.0, atol=1e-14 * np.abs(got).sum())


def test_gpu_is_deterministic_and_takes_a_scalar_volume():
    import cupy as cp
    x, alpha, _ = _elements(20000, 3.0, seed=1)
    xd, ad = cp.asarray(x), cp.asarray(alpha)
    first = cp.asnumpy(pse_rate(xd, ad, 1e-3, 0.04, 0.2, box=3.0, order=4))
    for _ in range(3):
        again = cp.asnumpy(pse_rate(xd, ad, 1e-3, 0.04, 0.2, box=3.0, order=4))
        assert again.tobytes() == first.tobytes()
    want = pse_rate(x, alpha, 1e-3, 0.04, 0.2, box=3.0, order=4)
    np.testing.assert_allclose(first, want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_gpu_taylor_green_lattice_matches_numpy():
    """The Taylor–Green lattice (α = ω h³, n = 16, ε = h/√2) in [0, 2π)³: the smooth
    field's rate (a difference of like terms) agrees to 1e-12 of its largest value."""
    import cupy as cp
    from vortexsim.cases.taylor_green import taylor_green_lattice
    x, w, h = taylor_green_lattice(16)
    for order in (2, 4):
        want = pse_rate(x, w * h ** 3, h ** 3, h / math.sqrt(2), 0.01, box=2 * math.pi,
                        order=order)
        got = cp.asnumpy(pse_rate(cp.asarray(x), cp.asarray(w * h ** 3),
                                  cp.full(len(x), h ** 3), h / math.sqrt(2), 0.01,
                                  box=2 * math.pi, order=order))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("change,error,match", [
    (dict(nu=-0.1), ValueError, "nu must be >= 0"),
    (dict(epsilon=0.0), ValueError, "epsilon must be > 0"),
    (dict(order=3), ValueError, "pse_order"),
    (dict(box=0.8), ValueError, "too small for the PSE reach"),
    (dict(volume="host"), TypeError, "on the device"),
    (dict(volume="nan"), ValueError, "volumes not known"),
    (dict(alpha="inf"), ValueError, "alpha contains NaN or inf"),
    (dict(alpha="short"), ValueError, r"alpha has shape \(49, 3\)"),
])
def test_gpu_bad_input(change, error, match):
    import cupy as cp
    rng = np.random.default_rng(3)
    kw = dict(x=cp.asarray(rng.random((50, 3))), alpha=cp.asarray(rng.normal(size=(50, 3))),
              volume=cp.full(50, 1e-3), epsilon=0.05, nu=0.1)
    special = {"host": np.full(50, 1e-3), "nan": cp.full(50, cp.nan),
               "inf": cp.full((50, 3), cp.inf), "short": cp.zeros((49, 3))}
    kw.update({k: special.get(v, v) if isinstance(v, str) else v for k, v in change.items()})
    with pytest.raises(error, match=match):
        pse_rate(kw.pop("x"), kw.pop("alpha"), kw.pop("volume"), kw.pop("epsilon"),
                 kw.pop("nu"), **kw)


def test_gpu_term_matches_cpu_term():
    """The time loop's term (rhs.PSE: ε = σ/√2 from the stage's one core) on device
    arrays gives the CPU term's rate."""
    import cupy as cp
    from vortexsim.physics.terms import PSE, Stage
    x, alpha, volume = _elements(4000, 3.0, seed=2)
    sigma = 0.1
    for order in (2, 4):
        term = PSE(0.05, 3.0, order)
        want = term.alpha_rate(Stage(x, alpha, None, 0.0, None, None, volume, (sigma, sigma)))
        got = term.alpha_rate(Stage(cp.asarray(x), cp.asarray(alpha), None, 0.0, None, None,
                                    cp.asarray(volume), (sigma, sigma)))
        assert isinstance(got, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(got), want, rtol=0,
                                   atol=1e-12 * np.abs(want).max())


def test_gpu_simulation_with_pse_matches_cpu():
    """A free-space Simulation with viscous='pse' (order 4) runs on device='gpu': 3 RK2
    steps of a random blob cloud (method='direct') agree with device='cpu'.  The
    volumes are the cloud's, 1/600 each, and ν dt/ε² = 0.06 keeps explicit PSE stable
    (volumes of 0.01 with ν = 0.05 blow up on both devices)."""
    from vortexsim import Simulation
    from vortexsim.backend import to_host
    x, alpha, _ = _elements(600, 1.0, seed=4)
    volume = np.full(600, 1.0 / 600)
    alpha *= 1e-3
    kw = dict(dt=0.01, integrator="rk2", method="direct", nu=0.01, viscous="pse",
              pse_order=4, progress=False)
    cpu = Simulation((x, alpha, 0.06, volume), device="cpu", **kw)
    gpu = Simulation((x, alpha, 0.06, volume), device="gpu", **kw)
    assert gpu.config["pse_order"] == 4 and gpu.config["viscous"] == "pse"
    cpu.run(steps=3)
    gpu.run(steps=3)
    a, b = cpu.elements.alpha, to_host(gpu.elements.alpha)
    assert np.abs(a - b).max() <= 1e-10 * np.abs(a).max()
    assert np.abs(cpu.elements.x - to_host(gpu.elements.x)).max() <= 1e-10


def test_gpu_taylor_green_with_pse_matches_cpu():
    """The taylor_green case (n = 16, PSE of order 4, remeshing every step, the spectral
    sum) for 3 RK2 steps on device='gpu' against device='cpu': the strengths agree to
    the spectral sums' tolerance (1e-6; PSE itself agrees to 1e-12), Σα stays 0."""
    import vortexsim
    from vortexsim.backend import to_host
    kw = dict(n=16, nu=0.01, dt=0.05, progress=False, viscous="pse", kernel="gaussian")
    cpu = vortexsim.make_case("taylor_green", device="cpu", **kw)
    gpu = vortexsim.make_case("taylor_green", device="gpu", **kw)
    assert gpu.config["pse_order"] == 4 and gpu.config["device"] == "gpu"
    cpu.run(steps=3)
    gpu.run(steps=3)
    a, b = cpu.elements.alpha, to_host(gpu.elements.alpha)
    assert np.abs(a - b).max() <= 1e-5 * np.abs(a).max()
    assert np.abs(b.sum(axis=0)).max() <= 1e-14 * np.abs(b).sum()
