"""GPU direct sum against the NumPy specification (marker ``gpu``; skipped without a GPU)."""
import numpy as np
import pytest

import vortexsim
from vortexsim.backend import gpu_available
from vortexsim.kernels.cutoff import KERNELS, SPECTRAL_ONLY_KERNELS, get_kernel
from vortexsim.kernels.direct import DirectLaunchConfig, direct_sum_cuda, direct_sum_numpy

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]

#: the kernels the direct sum evaluates (the high-order Gaussians are the periodic
#: spectral sum's only)
ALL_KERNELS = sorted(set(KERNELS) - set(SPECTRAL_ONLY_KERNELS))


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


def _inputs(n, m, seed=0, sigma_scale=0.1):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 3))
    alpha = rng.normal(size=(n, 3))
    sigma = sigma_scale * (1.0 + rng.random(n))          # per-element, varying by 2
    y = rng.random((m, 3)) * 1.2 - 0.1
    k = min(5, m)
    y[:k] = x[:k]                                        # coincident target/source points
    return x, alpha, sigma, y


@pytest.mark.parametrize("kernel", ALL_KERNELS)
@pytest.mark.parametrize("separate_targets", [False, True])
def test_gpu_matches_cpu_float64(kernel, separate_targets):
    x, alpha, sigma, y = _inputs(1531, 1277)
    tg = y if separate_targets else None
    u_c, g_c = vortexsim.induced_velocity(x, alpha, sigma, tg, kernel=kernel, device="cpu")
    u_g, g_g = vortexsim.induced_velocity(x, alpha, sigma, tg, kernel=kernel, device="gpu")
    assert isinstance(u_g, np.ndarray) and u_g.dtype == np.float64
    assert _rel(u_g, u_c) <= 1e-12
    assert _rel(g_g, g_c) <= 1e-12


@pytest.mark.parametrize("kernel", ALL_KERNELS)
@pytest.mark.parametrize("separate_targets", [False, True])
def test_gpu_float32_matches_cpu_float64(kernel, separate_targets):
    x, alpha, sigma, y = _inputs(2048, 1000, seed=1)
    tg = y if separate_targets else None
    u_c, g_c = vortexsim.induced_velocity(x, alpha, sigma, tg, kernel=kernel, device="cpu")
    u_g, g_g = vortexsim.induced_velocity(x, alpha, sigma, tg, kernel=kernel, device="gpu",
                                          precision="float32")
    assert u_g.dtype == np.float32 and g_g.dtype == np.float32
    assert _rel(u_g, u_c) <= 1e-5
    assert _rel(g_g, g_c) <= 1e-5


@pytest.mark.parametrize("block,tpt", [(64, 1), (128, 1), (128, 2), (256, 1), (256, 2), (128, 4)])
@pytest.mark.parametrize("kernel", ["gaussian", "algebraic"])
def test_launch_shapes_agree(block, tpt, kernel):
    import cupy as cp
    x, alpha, sigma, _ = _inputs(1000, 1)
    k = get_kernel(kernel)
    ref_u, ref_g = direct_sum_numpy(k, x, alpha, sigma, x, exclude_self=True)
    u, g = direct_sum_cuda(k, cp.asarray(x), cp.asarray(alpha), cp.asarray(sigma), cp.asarray(x),
                           exclude_self=True, launch=DirectLaunchConfig(block, tpt))
    assert _rel(u.get(), ref_u) <= 1e-12
    assert _rel(g.get(), ref_g) <= 1e-12


def test_cupy_in_cupy_out_and_no_gradient():
    import cupy as cp
    x, alpha, sigma, y = _inputs(500, 300)
    u, g = vortexsim.induced_velocity(cp.asarray(x), cp.asarray(alpha), cp.asarray(sigma),
                                      cp.asarray(y), gradient=False)
    assert isinstance(u, cp.ndarray) and g is None
    u_c, _ = vortexsim.induced_velocity(x, alpha, sigma, y, device="cpu", gradient=False)
    assert _rel(u.get(), u_c) <= 1e-12


def test_mixed_namespaces_raise():
    import cupy as cp
    x, alpha, sigma, _ = _inputs(10, 1)
    with pytest.raises(TypeError, match="mix of NumPy and CuPy"):
        vortexsim.induced_velocity(cp.asarray(x), alpha, sigma)


def test_ring_centre_identity_gpu():
    from vortexsim.cli.demo import ring_elements
    for kernel in ALL_KERNELS:
        for n in (3, 100, 4097):
            x, alpha = ring_elements(n, 1.0, 1.0)
            # float32: n like-signed terms accumulate at most ~n ε/2 (ε = 2^-24) in rounding
            for precision, tol in (("float64", 1e-13), ("float32", max(1e-5, n * 2.0**-25))):
                u, _ = vortexsim.induced_velocity(x, alpha, 0.3, np.zeros((1, 3)), kernel=kernel,
                                                  device="gpu", precision=precision)
                exact = 0.5 * float(get_kernel(kernel).q(np.array(1 / 0.3), np))
                assert abs(u[0, 2] - exact) <= tol * exact
