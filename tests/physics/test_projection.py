"""The solenoidal projection of periodic lattice strengths (vortexsim.physics.projection):
divergence-free and zero-sum to round-off, a solenoidal field unchanged, the velocity of
the spectral sum unchanged up to the lattice's aliases, and the same on the GPU."""
import math

import numpy as np
import pytest

from vortexsim.physics.projection import divergent_fraction, project_solenoidal
from vortexsim.summation.spectral import SpectralSum

L = 2.0 * math.pi


def _nodes(n):
    g = np.arange(n) * (L / n)
    return np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)


def _divergence(alpha, n):
    """Spectral divergence of the lattice field (Nyquist derivative zero), max modulus."""
    a = np.fft.fftn(alpha.reshape(n, n, n, 3), axes=(0, 1, 2))
    k = np.fft.fftfreq(n, d=1.0 / n)
    if n % 2 == 0:
        k[n // 2] = 0
    K = np.stack(np.meshgrid(k, k, k, indexing="ij"), axis=-1)
    return np.abs((K * a).sum(axis=-1)).max()


@pytest.mark.parametrize("n", [8, 9])
def test_random_field_becomes_solenoidal_with_zero_sum(n):
    alpha = np.random.default_rng(n).standard_normal((n ** 3, 3)) + 0.3
    p = project_solenoidal(alpha, n)
    scale = np.abs(alpha).sum()
    assert divergent_fraction(alpha, n) > 0.2
    assert _divergence(p, n) <= 1e-13 * scale
    assert divergent_fraction(p, n) <= 1e-28
    assert np.abs(p.sum(axis=0)).max() <= 1e-13 * scale
    np.testing.assert_allclose(project_solenoidal(p, n), p, atol=1e-14 * np.abs(p).max())
    assert p.dtype == alpha.dtype and p.shape == alpha.shape


def test_a_solenoidal_field_is_unchanged():
    """Taylor–Green's vorticity on the lattice (divergence-free, zero sum) stays as it is."""
    n = 12
    X, Y, Z = _nodes(n).T
    w = np.stack([-np.cos(X) * np.sin(Y) * np.sin(Z), -np.sin(X) * np.cos(Y) * np.sin(Z),
                  2.0 * np.sin(X) * np.sin(Y) * np.cos(Z)], axis=1)
    np.testing.assert_allclose(project_solenoidal(w, n), w, atol=1e-14)


def test_the_velocity_changes_only_through_the_aliases():
    """The spectral sum sees û ∝ k × ω̂: removing the divergent part of the principal modes
    leaves u and ∇u at off-lattice targets unchanged but for the aliases' share,
    ~e^{−π²σ²/(2h²)} = 7e-3 at σ = h (here 2e-3 of u, 8e-3 of ∇u), while the divergent
    part itself is O(1) of the field."""
    n = 10
    h = L / n
    rng = np.random.default_rng(1)
    alpha = rng.standard_normal((n ** 3, 3)) * h ** 3
    alpha -= alpha.mean(axis=0)
    p = project_solenoidal(alpha, n)
    targets = rng.random((50, 3)) * L
    ev = SpectralSum(L, h, tol=1e-10)
    u0, g0 = ev.evaluate(_nodes(n), alpha, targets=targets)
    u1, g1 = ev.evaluate(_nodes(n), p, targets=targets)
    removed = np.abs(alpha - p).max()
    assert removed > 0.3 * np.abs(alpha).max()
    assert np.abs(u1 - u0).max() <= 5e-3 * np.abs(u0).max()      # 2.1e-3
    assert np.abs(g1 - g0).max() <= 1.5e-2 * np.abs(g0).max()    # 8.5e-3


def test_shape_error():
    with pytest.raises(ValueError, match=r"shape \(512, 3\)"):
        project_solenoidal(np.zeros((500, 3)), 8)


@pytest.mark.gpu
def test_cupy_matches_numpy_and_repeats_bitwise():
    import cupy as cp
    n = 16
    alpha = np.random.default_rng(2).standard_normal((n ** 3, 3))
    ref = project_solenoidal(alpha, n)
    a = project_solenoidal(cp.asarray(alpha), n)
    b = project_solenoidal(cp.asarray(alpha), n)
    assert isinstance(a, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(a), ref, atol=1e-13 * np.abs(ref).max())
    assert cp.asnumpy(a).tobytes() == cp.asnumpy(b).tobytes()
    assert divergent_fraction(a, n) <= 1e-28
