"""The periodic box's spectral sum (vortexsim.summation.spectral) against exact Fourier series.

Taylor–Green lattice elements α_p = ω(x_p) h³ carry the Taylor–Green modes k₀ = (±1, ±1,
±1) and their lattice aliases k₀ + n a (a ∈ ℤ³): their Gaussian-blob field is exactly
the series Σ_k i k × ω̂(k) e^{−|k|²σ²/2}/|k|² e^{ik·y} over those modes, summed here
directly (aliases |a| ≤ 2) and matched to round-off.  Without the aliases that field is
e^{−3σ²/2} u_TG (physics.md); the aliases are the lattice's, not the evaluator's, and
at σ = h they are ~4e-8 (u) and ~3e-7 (∇u) at n = 8, ~5e-9 and ~5e-8 at n = 16.
"""
import itertools
import math

import numpy as np
import pytest

import vortexsim
from vortexsim.summation import spectral as S
from vortexsim.kernels.direct import direct_sum_numpy
from vortexsim.kernels.cutoff import get_kernel

L = 2.0 * math.pi


def _u_tg(p):
    x, y, z = p.T
    return np.stack([np.sin(x) * np.cos(y) * np.cos(z), -np.cos(x) * np.sin(y) * np.cos(z),
                     0.0 * x], axis=1)


def _w_tg(p):
    x, y, z = p.T
    return np.stack([-np.cos(x) * np.sin(y) * np.sin(z), -np.sin(x) * np.cos(y) * np.sin(z),
                     2.0 * np.sin(x) * np.sin(y) * np.cos(z)], axis=1)


def _grad_tg(p):
    x, y, z = p.T
    g = np.zeros((len(p), 3, 3))
    g[:, 0] = np.stack([np.cos(x) * np.cos(y) * np.cos(z), -np.sin(x) * np.sin(y) * np.cos(z),
                        -np.sin(x) * np.cos(y) * np.sin(z)], axis=1)
    g[:, 1] = np.stack([np.sin(x) * np.sin(y) * np.cos(z), -np.cos(x) * np.cos(y) * np.cos(z),
                        np.cos(x) * np.sin(y) * np.sin(z)], axis=1)
    return g


def _lattice(n):
    h = L / n
    g = np.arange(n) * h
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    return x, _w_tg(x) * h ** 3, h


def _series(y, n, sigma, reach=2, order=2):
    """The exact field of the n³ Taylor–Green lattice: its modes ω̂ (from the FFT of u_TG
    on a 4³ grid, exact for these modes) and their aliases k + n a, |a_i| ≤ reach; blobs
    of the Gaussian kernel of ``order`` (transform e^{−x} Σ_{j<order/2} x^j/j!)."""
    q = 4
    grid = np.stack(np.meshgrid(*(np.arange(q) * L / q,) * 3, indexing="ij"), -1)
    uh = np.fft.fftn(_u_tg(grid.reshape(-1, 3)).reshape(q, q, q, 3), axes=(0, 1, 2)) / q ** 3
    m = np.fft.fftfreq(q, 1.0 / q)
    u, g = np.zeros((len(y), 3), complex), np.zeros((len(y), 3, 3), complex)
    for i, j, k in zip(*np.nonzero(np.abs(uh).max(axis=-1) > 1e-12)):
        k0 = np.array([m[i], m[j], m[k]])
        w_hat = 1j * np.cross(k0, uh[i, j, k])
        for a in itertools.product(range(-reach, reach + 1), repeat=3):
            kv = k0 + n * np.array(a)
            k2 = kv @ kv
            x = 0.5 * k2 * sigma ** 2
            blob = math.exp(-x) * sum(x ** j / math.factorial(j) for j in range(order // 2))
            u_hat = 1j * np.cross(kv, w_hat) / k2 * blob
            e = np.exp(1j * (y @ kv))
            u += e[:, None] * u_hat
            g += e[:, None, None] * (1j * u_hat[:, None] * kv[None, :])
    return u.real, g.real


@pytest.mark.parametrize("n", [8, 16])
def test_taylor_green_lattice_matches_its_fourier_series(n):
    x, alpha, h = _lattice(n)
    y = np.random.default_rng(n).random((300, 3)) * 3 * L - L        # also outside the box
    u, g = S.spectral_velocity(x, alpha, h, L, y, tol=1e-10)
    u_ref, g_ref = _series(y, n, h)
    assert np.abs(u - u_ref).max() <= 1e-9
    assert np.abs(g - g_ref).max() <= 1e-9
    # and the blob-smoothed Taylor–Green field up to the lattice's aliases
    f = math.exp(-1.5 * h ** 2)
    alias_u = np.abs(u_ref - f * _u_tg(y)).max()
    alias_g = np.abs(g_ref - f * _grad_tg(y)).max()
    assert np.abs(u - f * _u_tg(y)).max() <= alias_u + 1e-9
    assert np.abs(g - f * _grad_tg(y)).max() <= alias_g + 1e-9
    if n == 16:
        assert np.abs(u - f * _u_tg(y)).max() <= 1e-8


@pytest.mark.parametrize("kernel, order", [("gaussian4", 4), ("gaussian6", 6)])
def test_high_order_gaussians_are_their_fourier_series(kernel, order):
    """The high-order Gaussian kernels' blobs (Beale & Majda): the same series with the
    transform e^{−x}(1 + x) or e^{−x}(1 + x + x²/2), x = |k|²σ²/2, matched to 1e-9 at
    n = 8, σ = h (tol 1e-10; the aliases included); at n = 16, σ = 1.5 h the field is that
    transform at |k|² = 3 times u_TG (and ∇u_TG) to 1e-8 (aliases 2e-10 there); through
    induced_velocity and the Simulation's summation the same; elsewhere a clear error."""
    x, alpha, h = _lattice(8)
    y = np.random.default_rng(5).random((300, 3)) * 3 * L - L
    u, g = S.spectral_velocity(x, alpha, h, L, y, tol=1e-10, order=order)
    u_ref, g_ref = _series(y, 8, h, order=order)
    assert np.abs(u - u_ref).max() <= 1e-9
    assert np.abs(g - g_ref).max() <= 1e-9
    x, alpha, h = _lattice(16)
    sigma = 1.5 * h
    xs = 1.5 * sigma ** 2
    f = math.exp(-xs) * sum(xs ** j / math.factorial(j) for j in range(order // 2))
    u, g = vortexsim.induced_velocity(x, alpha, sigma, y, kernel=kernel, method="spectral",
                                      box=L, tol=1e-10)
    assert np.abs(u - f * _u_tg(y)).max() <= 1e-8
    assert np.abs(g - f * _grad_tg(y)).max() <= 1e-8
    with pytest.raises(ValueError, match="only by the periodic spectral sum"):
        vortexsim.induced_velocity(x, alpha, sigma, y, kernel=kernel, method="direct")
    with pytest.raises(ValueError, match="only by the periodic spectral sum"):
        vortexsim.induced_velocity(x, alpha, sigma, y, kernel=kernel, method="fmm", box=L)


@pytest.mark.parametrize("order", [2, 4, 6])
def test_self_gradient_is_the_kernels_own_blob(order):
    """What the sum at the elements leaves out is the free-space gradient of each blob at
    its centre: (1/4π) A(0, σ) ε_acb α_c with the kernel's pair factor A at r = 0."""
    name = {2: "gaussian", 4: "gaussian4", 6: "gaussian6"}[order]
    alpha = np.random.default_rng(order).standard_normal((5, 3))
    sigma = 0.3
    a0, _ = get_kernel(name).factors(np.zeros(1), sigma, np)
    eps = np.zeros((3, 3, 3))
    eps[0, 1, 2] = eps[1, 2, 0] = eps[2, 0, 1] = 1.0
    eps[0, 2, 1] = eps[2, 1, 0] = eps[1, 0, 2] = -1.0
    ref = a0[0] / (4 * math.pi) * np.einsum("acb,pc->pab", eps, alpha)
    np.testing.assert_allclose(S.self_gradient(alpha, sigma, order), ref, rtol=1e-14)


def test_tol_sets_the_error():
    x, alpha, h = _lattice(8)
    y = np.random.default_rng(1).random((200, 3)) * L
    u_ref, g_ref = _series(y, 8, h)
    for tol in (1e-3, 1e-6):
        u, g = S.spectral_velocity(x, alpha, h, L, y, tol=tol)
        assert np.abs(u - u_ref).max() <= tol * np.abs(u_ref).max()
        assert np.abs(g - g_ref).max() <= 10 * tol * np.abs(g_ref).max()


def test_positions_are_wrapped_and_the_mean_velocity_is_zero():
    rng = np.random.default_rng(2)
    x = rng.random((300, 3)) * L
    alpha = rng.standard_normal((300, 3))
    alpha -= alpha.mean(axis=0)
    y = rng.random((100, 3)) * L
    shift = L * rng.integers(-3, 4, size=x.shape)
    u, g = S.spectral_velocity(x, alpha, 0.4, L, y, tol=1e-10)
    u2, g2 = S.spectral_velocity(x + shift, alpha, 0.4, L, y - L * 2, tol=1e-10)
    assert np.abs(u2 - u).max() <= 1e-12 * np.abs(u).max()
    assert np.abs(g2 - g).max() <= 1e-12 * np.abs(g).max()
    # the box mean of u is zero: the average over a fine lattice of the box
    k = 24
    grid = np.stack(np.meshgrid(*(np.arange(k) * L / k,) * 3, indexing="ij"), -1)
    um, _ = S.spectral_velocity(x, alpha, 0.4, L, grid.reshape(-1, 3), gradient=False,
                                tol=1e-10)
    assert np.abs(um.mean(axis=0)).max() <= 1e-10 * np.abs(um).max()


def test_at_the_elements_their_own_free_space_part_is_left_out():
    """A compact cluster in a box much larger than it: at the elements the periodic field
    is the free-space direct sum (self pairs excluded) up to the images' O(P/L³) part;
    with the elements as explicit targets their own blob's gradient stays in."""
    rng = np.random.default_rng(3)
    n, sigma, box = 120, 0.5, 14.0
    x = box / 2 + rng.standard_normal((n, 3)) * 0.6
    alpha = rng.standard_normal((n, 3)) * 0.1
    alpha -= alpha.mean(axis=0)
    u, g = S.spectral_velocity(x, alpha, sigma, box, tol=1e-9)
    u_free, g_free = direct_sum_numpy(get_kernel("gaussian"), x, alpha, np.full(n, sigma), x,
                                      gradient=True, exclude_self=True)
    assert np.linalg.norm(u - u_free) <= 0.02 * np.linalg.norm(u_free)
    assert np.linalg.norm(g - g_free) <= 0.02 * np.linalg.norm(g_free)
    _, g_with_self = S.spectral_velocity(x, alpha, sigma, box, x.copy(), tol=1e-9)
    np.testing.assert_allclose(g_with_self - g, S.self_gradient(alpha, sigma), atol=1e-12)
    assert np.linalg.norm(g_with_self - g_free) > 0.1 * np.linalg.norm(g_free)


def test_induced_velocity_with_a_box():
    x, alpha, h = _lattice(8)
    y = np.random.default_rng(4).random((50, 3)) * L
    u, g = vortexsim.induced_velocity(x, alpha, h, y, box=L, method="spectral", tol=1e-10,
                                      device="cpu")
    u_ref, g_ref = _series(y, 8, h)
    assert np.abs(u - u_ref).max() <= 1e-9 and np.abs(g - g_ref).max() <= 1e-9
    u_auto, _ = vortexsim.induced_velocity(x, alpha, h, y, box=L, method="auto", tol=1e-10,
                                           device="cpu")
    np.testing.assert_array_equal(u_auto, u)


@pytest.mark.parametrize("kwargs, match", [
    (dict(method="spectral"), "give its edge, box=L"),
    (dict(box=L, method="direct"), "method='spectral'"),
    (dict(box=L, method="spectral", kernel="algebraic"), "kernel='gaussian'"),
    (dict(box=L, method="spectral", sigma="mixed"), "one core radius"),
    (dict(box=L, method="spectral", net=True), "total vorticity"),
])
def test_clear_errors(kwargs, match):
    x, alpha, h = _lattice(4)
    sigma = np.linspace(h, 1.1 * h, len(x)) if kwargs.pop("sigma", None) else h
    if kwargs.pop("net", False):
        alpha = alpha + 1e-3
    with pytest.raises(ValueError, match=match):
        vortexsim.induced_velocity(x, alpha, sigma, device="cpu", **kwargs)


def test_spectral_sum_checks_its_settings():
    for kwargs in (dict(box=0.0, sigma=0.1), dict(box=1.0, sigma=-1.0),
                   dict(box=1.0, sigma=0.1, tol=2.0)):
        with pytest.raises(ValueError):
            S.SpectralSum(**kwargs)


def test_results_are_bitwise_reproducible():
    """Restarts need the same bits from the same state (the type-1 spread on one thread)."""
    rng = np.random.default_rng(5)
    x = rng.random((3000, 3)) * L
    alpha = rng.standard_normal((3000, 3))
    alpha -= alpha.mean(axis=0)
    s = S.SpectralSum(L, 0.3, 1e-8)
    first = s.evaluate(x, alpha)
    for _ in range(3):
        again = s.evaluate(x, alpha)
        assert all(a.tobytes() == b.tobytes() for a, b in zip(first, again))
    assert s.field_sums(x, alpha) == s.field_sums(x, alpha)


def test_kinetic_energy_is_that_of_the_induced_velocity():
    """Random elements (a divergent particle vorticity): ½∫|u|² and ∫|∇×u|² from the
    modes equal the box averages of the evaluated field on a fine lattice, while
    E = ½∫ψ·ω also counts the divergent part; gradient=k at the elements = the first k
    rows of the whole gradient; float32 inputs pass the Σα check at their round-off."""
    rng = np.random.default_rng(6)
    x = rng.random((400, 3)) * L
    alpha = rng.standard_normal((400, 3)) * 0.01
    alpha -= alpha.mean(axis=0)
    s = S.SpectralSum(L, 0.6, 1e-10)
    sums = s.field_sums(x, alpha)
    k = 40
    grid = np.stack(np.meshgrid(*(np.arange(k) * L / k,) * 3, indexing="ij"), -1).reshape(-1, 3)
    u, g = s.evaluate(x, alpha, grid)
    w = np.stack([g[:, 2, 1] - g[:, 1, 2], g[:, 0, 2] - g[:, 2, 0], g[:, 1, 0] - g[:, 0, 1]], 1)
    assert sums["kinetic_energy"] == pytest.approx(0.5 * (u * u).sum(axis=1).mean() * L ** 3,
                                                   rel=1e-6)
    assert sums["curl_enstrophy"] == pytest.approx((w * w).sum(axis=1).mean() * L ** 3,
                                                   rel=1e-6)
    assert sums["energy"] > 1.1 * sums["kinetic_energy"]
    _, g_all = s.evaluate(x, alpha)
    _, g_10 = s.evaluate(x, alpha, gradient=10)
    np.testing.assert_array_equal(g_10, g_all[:10])
    u32, _ = vortexsim.induced_velocity(x, alpha, 0.6, box=L, method="spectral",
                                        precision="float32", device="cpu", gradient=False)
    assert u32.dtype == np.float32
