"""The spectral sum through the own deterministic NUFFT (vortexsim.kernels.nufft): its
NumPy twin against FINUFFT (the transforms themselves, and u, ∇u, the field sums of
:class:`vortexsim.summation.spectral.SpectralSum` against FINUFFT at tol 1e-13), determinism, and on
the GPU (marker ``gpu``) the CUDA kernels against the NumPy twin, bitwise repeatability
and a periodic Taylor–Green Simulation on device="gpu"."""
import importlib.util
import math

import numpy as np
import pytest

import vortexsim
from vortexsim.summation import spectral as S
from vortexsim.backend import to_host
from vortexsim.kernels import nufft as U
from vortexsim.kernels.cutoff import gaussian_blob_transform

L = 2.0 * math.pi


def _elements(n=400, seed=0, box=L):
    """Random elements with Σα = 0, positions in [−L, 2L)³ (wrapped by the sums)."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, 3)) * 3 * box - box
    alpha = rng.standard_normal((n, 3))
    alpha -= alpha.mean(axis=0)
    return x, alpha, rng.random((150, 3)) * 3 * box - box


def _rel(a, b):
    return np.abs(to_host(a) - to_host(b)).max() / np.abs(to_host(b)).max()


def _finufft_modes(theta, c, m_max, eps, isign):
    import finufft
    cols = [np.ascontiguousarray(theta[:, i]) for i in range(3)]
    return finufft.nufft3d1(*cols, c.astype(complex), (2 * m_max + 1,) * 3, eps=eps,
                            isign=isign)


# -- the transforms --------------------------------------------------------------------
@pytest.mark.parametrize("eps", [1e-4, 1e-7, 1e-11])
def test_types_1_and_2_match_finufft(eps):
    """Type 1 on the half cube and type 2 of Hermitian modes, max error ≤ 10 ε of the
    largest value (about 1.5–4 ε measured)."""
    import finufft
    rng = np.random.default_rng(1)
    m_max = 9
    theta = rng.random((300, 3)) * 2 * np.pi
    theta[:5] = 2 * np.pi                                  # the edge maps to 0
    c = rng.standard_normal((2, 300))
    nufft = U.PeriodicNufft(m_max, eps)
    f = nufft.type1(nufft.coordinates(theta), c)
    full = _finufft_modes(theta, c, m_max, 1e-14, -1)
    m0, m1, m2 = nufft.mode_numbers()
    half = full[:, m0[:, None, None] + m_max, m1[None, :, None] + m_max,
                m2[None, None, :] + m_max]
    assert f.shape == (2,) + nufft.shape
    assert _rel(f, half) <= 10 * eps
    y = rng.random((200, 3)) * 2 * np.pi
    v = nufft.type2(nufft.coordinates(y), half)
    ref = finufft.nufft3d2(*[np.ascontiguousarray(y[:, i]) for i in range(3)], full,
                           eps=1e-14, isign=1)
    assert np.abs(ref.imag).max() <= 1e-10 * np.abs(ref.real).max()   # Hermitian modes
    assert _rel(v, ref.real) <= 10 * eps


def test_parameters_follow_the_precision():
    assert [U.kernel_width(e) for e in (1e-2, 1e-4, 1e-7, 1e-11, 1e-16)] == [3, 5, 8, 12, 16]
    assert U.kernel_beta(8) == pytest.approx(2.30 * 8)
    n = U.fine_grid_size(122, 8)                          # 128³, σ = h, tol 1e-6
    assert n == 500 and n >= 2 * 245
    with pytest.raises(ValueError, match="precision"):
        U.kernel_width(0.0)


# -- the spectral sum through the NumPy twin ----------------------------------------------
@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-10])
def test_own_nufft_matches_finufft(tol):
    """u and ∇u at targets (≠ sources) and at the elements (their own free-space part
    left out) within tol of the largest value, against FINUFFT at tol 1e-13."""
    x, alpha, y = _elements()
    sigma = 0.5
    ref = S.SpectralSum(L, sigma, 1e-13)
    own = S.SpectralSum(L, sigma, tol, nufft="own")
    u, g = own.evaluate(x, alpha, y)
    u_ref, g_ref = ref.evaluate(x, alpha, y)
    assert _rel(u, u_ref) <= tol and _rel(g, g_ref) <= tol
    u, g = own.evaluate(x, alpha)
    u_ref, g_ref = ref.evaluate(x, alpha)
    assert _rel(u, u_ref) <= tol and _rel(g, g_ref) <= tol
    u2, g2 = own.evaluate(x, alpha, gradient=7)             # ∇u at the first 7 only
    np.testing.assert_array_equal(u2, u)
    np.testing.assert_array_equal(g2, g[:7])


def test_own_field_sums_match_finufft():
    x, alpha, _ = _elements(seed=2)
    tol = 1e-6
    ref = S.SpectralSum(L, 0.5, 1e-13).field_sums(x, alpha)
    own = S.SpectralSum(L, 0.5, tol, nufft="own").field_sums(x, alpha)
    for key in ("energy", "enstrophy", "kinetic_energy", "curl_enstrophy"):
        assert own[key] == pytest.approx(ref[key], rel=tol)
    u, _ = S.SpectralSum(L, 0.5, 1e-13).evaluate(x, alpha, gradient=False)
    scale = np.abs(alpha * u).sum()                             # |H| ≤ Σ|α_p · u_p|
    assert abs(own["helicity"] - ref["helicity"]) <= tol * scale


def test_self_gradient_at_the_elements():
    """Without targets each element's own blob is left out of ∇u: the elements as
    explicit targets differ by exactly self_gradient (the same transforms)."""
    x, alpha, _ = _elements(n=200, seed=3)
    own = S.SpectralSum(L, 0.6, 1e-8, nufft="own")
    u_el, g_el = own.evaluate(x, alpha)
    u_t, g_t = own.evaluate(x, alpha, x.copy())
    np.testing.assert_array_equal(u_el, u_t)
    np.testing.assert_allclose(g_t - g_el, S.self_gradient(alpha, 0.6), rtol=0,
                               atol=1e-12 * np.abs(g_t).max())


def test_own_nufft_is_deterministic_and_order_independent_to_round_off():
    x, alpha, y = _elements(seed=4)
    own = S.SpectralSum(L, 0.5, 1e-6, nufft="own")
    u1, g1 = own.evaluate(x, alpha, y)
    u2, g2 = S.SpectralSum(L, 0.5, 1e-6, nufft="own").evaluate(x, alpha, y)
    assert u1.tobytes() == u2.tobytes() and g1.tobytes() == g2.tobytes()
    p = np.random.default_rng(5).permutation(len(x))
    u3, g3 = own.evaluate(x[p], alpha[p], y)
    assert _rel(u3, u1) <= 1e-13 and _rel(g3, g1) <= 1e-13


def test_nufft_option_is_checked():
    with pytest.raises(ValueError, match="nufft must be one of"):
        S.SpectralSum(L, 0.5, 1e-6, nufft="cufinufft")


# -- GPU (skipped without CuPy and a GPU: tests/conftest.py) ------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("eps", [1e-3, 1e-7, 1e-11])
@pytest.mark.parametrize("values", [1, 3])
def test_gpu_kernels_match_the_numpy_specification(eps, values):
    """The CUDA spread (gather) and interpolation against the NumPy twin on the same
    grid coordinates: points on the box's edges, many in one cell, a grid that is not
    a multiple of the tile."""
    import cupy as cp
    rng = np.random.default_rng(6)
    nufft = U.PeriodicNufft(20, eps)
    n, w, beta = nufft.n, nufft.w, nufft.beta
    theta = rng.random((5000, 3)) * 2 * np.pi
    theta[:50] = 2 * np.pi * (1 - 1e-17)
    theta[50:100] = 0.0
    theta[100:1100] = theta[1100:1101]                      # a thousand in one cell
    t = nufft.coordinates(theta)
    c = rng.standard_normal((values, len(theta)))
    ref = U.spread_numpy(t, c, n, w, beta)
    grid = U._spread_cuda(cp.asarray(t), cp.asarray(c), n, w, beta)
    assert _rel(grid, ref) <= 1e-14
    ty = nufft.coordinates(rng.random((3000, 3)) * 2 * np.pi)
    g = rng.standard_normal((values, n, n, n))
    out = U._interpolate_cuda(cp.asarray(ty), cp.asarray(g), n, w, beta)
    assert _rel(out, U.interpolate_numpy(ty, g, n, w, beta)) <= 1e-13


def _has_finufft():
    return importlib.util.find_spec("finufft") is not None


@pytest.mark.gpu
@pytest.mark.parametrize("tol, order", [(1e-3, 2), (1e-6, 2), (1e-10, 2), (1e-6, 6)])
def test_gpu_spectral_sum_matches_numpy(tol, order):
    """CuPy against the NumPy twin at the same tol (round-off) and against the NumPy
    twin at tol 1e-13 (within tol; FINUFFT may be missing on a GPU machine); also the
    gaussian6 blobs."""
    import cupy as cp
    x, alpha, y = _elements(n=3000, seed=7)
    own = S.SpectralSum(L, 0.4, tol, order=order)
    ref = S.SpectralSum(L, 0.4, tol, nufft="own", order=order)
    exact = S.SpectralSum(L, 0.4, 1e-13, nufft="own", order=order)
    for targets in (y, None):
        u, g = own.evaluate(cp.asarray(x), cp.asarray(alpha),
                            None if targets is None else cp.asarray(targets))
        assert isinstance(u, cp.ndarray) and isinstance(g, cp.ndarray)
        u_np, g_np = ref.evaluate(x, alpha, targets)
        assert _rel(u, u_np) <= 1e-12 and _rel(g, g_np) <= 1e-12
        u_ex, g_ex = exact.evaluate(x, alpha, targets)
        assert _rel(u, u_ex) <= tol and _rel(g, g_ex) <= tol
    sums = own.field_sums(cp.asarray(x), cp.asarray(alpha))
    sums_np = ref.field_sums(x, alpha)
    for key in ("energy", "enstrophy", "kinetic_energy", "curl_enstrophy"):
        assert sums[key] == pytest.approx(sums_np[key], rel=1e-12)


@pytest.mark.gpu
def test_gpu_spectral_sum_is_bitwise_repeatable():
    import cupy as cp
    x, alpha, y = (cp.asarray(a) for a in _elements(n=20000, seed=8))
    runs = [S.SpectralSum(L, 0.3, 1e-6).evaluate(x, alpha, y) for _ in range(2)]
    runs += [S.SpectralSum(L, 0.3, 1e-6).evaluate(x, alpha) for _ in range(2)]
    for a, b in (runs[:2], runs[2:]):
        assert to_host(a[0]).tobytes() == to_host(b[0]).tobytes()
        assert to_host(a[1]).tobytes() == to_host(b[1]).tobytes()
    p = cp.asarray(np.random.default_rng(9).permutation(x.shape[0]))
    u, g = S.SpectralSum(L, 0.3, 1e-6).evaluate(x[p], alpha[p], y)
    assert _rel(u, runs[0][0]) <= 1e-13 and _rel(g, runs[0][1]) <= 1e-13


@pytest.mark.gpu
def test_gpu_induced_velocity_with_a_box():
    import cupy as cp
    x, alpha, y = _elements(n=1000, seed=10)
    u, g = vortexsim.induced_velocity(cp.asarray(x), cp.asarray(alpha), 0.5, cp.asarray(y),
                                      box=L, method="spectral", tol=1e-8)
    assert isinstance(u, cp.ndarray)
    u_ref, g_ref = S.SpectralSum(L, 0.5, 1e-13, nufft="own").evaluate(x, alpha, y)
    assert _rel(u, u_ref) <= 1e-8 and _rel(g, g_ref) <= 1e-8


@pytest.mark.gpu
def test_gpu_taylor_green_runs_bitwise_and_matches_the_cpu():
    """A tiny periodic Taylor–Green Simulation on device="gpu" (spectral sum, inviscid,
    remeshing every step): two runs of 2 steps give the same bits, and the CPU run
    (FINUFFT, where installed) the same state to the tolerance."""
    kw = dict(n=8, dt=0.05, tol=1e-8, nu=0.0, remesh_every=1, progress=False)
    runs = []
    for device in ("gpu", "gpu") + (("cpu",) if _has_finufft() else ()):
        sim = vortexsim.make_case("taylor_green", device=device, **kw)
        sim.run(steps=2)
        d = sim.diagnostics()
        runs.append((to_host(sim.elements.x), to_host(sim.elements.alpha), d["energy"]))
    (xa, aa, ea), (xb, ab, eb) = runs[:2]
    assert xa.tobytes() == xb.tobytes() and aa.tobytes() == ab.tobytes() and ea == eb
    h = L / 8                  # E(0) of the case's gaussian6 blobs (σ = h), inviscid
    blob = float(gaussian_blob_transform(1.5 * h ** 2, 6))
    assert ea == pytest.approx(L ** 3 / 8 * blob ** 2, rel=1e-2)
    if len(runs) < 3:
        return
    xc, ac, ec = runs[2]
    np.testing.assert_allclose(xa, xc, rtol=0, atol=1e-13)   # remeshed onto the lattice
    assert _rel(aa, ac) <= 1e-7
    assert ea == pytest.approx(ec, rel=1e-7)
