"""vortexsim/diagnostics/turbulence.py: statistics of a periodic velocity field (single Fourier modes
and Taylor–Green against their closed forms, Parseval), and the random solenoidal field
(divergence, energy, spectrum and Gaussian derivative statistics within their sampling
errors).  CPU, n ≤ 32, a few seconds."""
import math

import numpy as np
import pytest

from vortexsim.diagnostics.random_field import random_solenoidal_field
from vortexsim.diagnostics.turbulence import (energy_spectrum, flow_statistics,
                                              vorticity_statistics)


def lattice_angles(n, box, mode):
    """k x at the nodes i L/n for k = mode·2π/L (host, (n,))."""
    return np.arange(n) * (box / n) * (mode * 2 * math.pi / box)


def shear_wave(n, box, amplitude, mode):
    """u = (A sin(k y), 0, 0), k = mode·k₀: E = A²/4, ⟨|ω|²⟩ = k²A²/2."""
    u = np.zeros((n, n, n, 3))
    u[..., 0] = amplitude * np.sin(lattice_angles(n, box, mode))[None, :, None]
    return u


def taylor_green(n, box, amplitude):
    """u = A (sin x cos y cos z, −cos x sin y cos z, 0) in units of k₀: E = A²/8."""
    s = lattice_angles(n, box, 1)
    sx, cx = np.sin(s)[:, None, None], np.cos(s)[:, None, None]
    sy, cy = np.sin(s)[None, :, None], np.cos(s)[None, :, None]
    cz = np.cos(s)[None, None, :]
    u = np.zeros((n, n, n, 3))
    u[..., 0] = amplitude * sx * cy * cz
    u[..., 1] = -amplitude * cx * sy * cz
    return u


def wavenumbers(n, box):
    """(kx, ky, kz) of the rfftn half spectrum, broadcastable to (n, n, n//2 + 1)."""
    k0 = 2 * math.pi / box
    m = np.fft.fftfreq(n, 1.0 / n)
    return (m[:, None, None] * k0, m[None, :, None] * k0,
            np.arange(n // 2 + 1)[None, None, :] * k0)


# -- 1. single modes ------------------------------------------------------------------
def test_shear_wave():
    """u = (A sin 2k₀y, 0, 0) in a box L = 3: E = A²/4, ε = 2ν⟨s_ij s_ij⟩ = ν⟨|ω|²⟩ =
    νk²⟨|u|²⟩, all energy in shell 2, L_int = 3π/(4k), λ = √5/k; no longitudinal gradient,
    so skewness and flatness are NaN."""
    n, box, amplitude, nu = 16, 3.0, 1.7, 0.013
    k = 2 * 2 * math.pi / box
    stats = flow_statistics(shear_wave(n, box, amplitude, 2), box, nu)
    energy = amplitude ** 2 / 4
    assert stats["energy"] == pytest.approx(energy, rel=1e-13)
    assert stats["enstrophy"] == pytest.approx(k ** 2 * 2 * energy, rel=1e-13)
    assert stats["dissipation"] == pytest.approx(nu * k ** 2 * 2 * energy, rel=1e-13)
    assert stats["divergence_rms"] < 1e-13
    assert stats["u_rms"] == pytest.approx(math.sqrt(2 * energy / 3), rel=1e-13)
    assert stats["integral_scale"] == pytest.approx(3 * math.pi / (4 * k), rel=1e-13)
    assert stats["taylor_scale"] == pytest.approx(math.sqrt(5) / k, rel=1e-13)
    assert stats["re_lambda"] == pytest.approx(stats["u_rms"] * math.sqrt(5) / k / nu,
                                               rel=1e-13)
    eps = nu * k ** 2 * 2 * energy
    assert stats["kolmogorov_eta"] == pytest.approx((nu ** 3 / eps) ** 0.25, rel=1e-13)
    assert stats["k_max"] == pytest.approx(n / 3 * 2 * math.pi / box, rel=1e-15)
    assert stats["k_max_eta"] == pytest.approx(stats["k_max"] * stats["kolmogorov_eta"])
    assert math.isnan(stats["skewness"]) and math.isnan(stats["flatness"])

    kk, e = energy_spectrum(shear_wave(n, box, amplitude, 2), box)
    k0 = 2 * math.pi / box
    np.testing.assert_allclose(kk, np.arange(len(kk)) * k0, rtol=1e-15)
    assert e[2] * k0 == pytest.approx(energy, rel=1e-13)
    assert np.abs(np.delete(e, 2)).max() * k0 < 1e-13 * energy


def test_taylor_green():
    """E = A²/8, ε = ν⟨|ω|²⟩ = 6νk₀²E (|k|² = 3k₀²), the energy in shell rint(√3) = 2;
    ∂u/∂x = A k₀ cos x cos y cos z: S = 0, F = (⟨cos⁴⟩/⟨cos²⟩²)³ = (3/2)³ = 27/8
    (averaged over x and y; ∂w/∂z = 0 is left out)."""
    n, box, amplitude, nu = 16, 2 * math.pi, 1.3, 0.01
    u = taylor_green(n, box, amplitude)
    stats = flow_statistics(u, box, nu)
    energy = amplitude ** 2 / 8
    assert stats["energy"] == pytest.approx(energy, rel=1e-13)
    assert stats["dissipation"] == pytest.approx(6 * nu * energy, rel=1e-13)
    assert stats["enstrophy"] * nu == pytest.approx(stats["dissipation"], rel=1e-13)
    assert stats["skewness"] == pytest.approx(0.0, abs=1e-13)
    assert stats["flatness"] == pytest.approx(27 / 8, rel=1e-13)
    _, e = energy_spectrum(u, box)
    assert e[2] == pytest.approx(energy, rel=1e-13)
    assert np.abs(np.delete(e, 2)).max() < 1e-13 * energy


def test_statistics_scale_with_units():
    """Doubling u doubles u' and leaves S, F unchanged; a box twice as large halves the
    wavenumbers (ε quarter, λ double)."""
    n, nu = 16, 0.02
    u = random_solenoidal_field(n, 2 * math.pi, k_peak=3.0, seed=3)
    a = flow_statistics(u, 2 * math.pi, nu)
    b = flow_statistics(2 * u, 2 * math.pi, nu)
    c = flow_statistics(u, 4 * math.pi, nu)
    assert b["u_rms"] == pytest.approx(2 * a["u_rms"], rel=1e-13)
    assert b["skewness"] == pytest.approx(a["skewness"], rel=1e-10)
    assert b["flatness"] == pytest.approx(a["flatness"], rel=1e-12)
    assert c["dissipation"] == pytest.approx(a["dissipation"] / 4, rel=1e-13)
    assert c["taylor_scale"] == pytest.approx(2 * a["taylor_scale"], rel=1e-13)
    assert c["integral_scale"] == pytest.approx(2 * a["integral_scale"], rel=1e-13)


# -- 2. the random field --------------------------------------------------------------
def k4exp_shell_integrals(k_peak, n_shells, k0):
    """∫ k⁴ exp(−2(k/k_p)²) dk over each shell [(s − ½)k₀, (s + ½)k₀), s ≥ 1 (a fine
    trapezoid rule, independent of the module's quadrature)."""
    out = np.zeros(n_shells)
    for s in range(1, n_shells):
        k = np.linspace((s - 0.5) * k0, (s + 0.5) * k0, 4001)
        out[s] = np.trapezoid(k ** 4 * np.exp(-2 * (k / k_peak) ** 2), k)
    return out


def shell_counts(n, box):
    """Modes per shell on the full n³ lattice (whole for shells with s + ½ < n/3)."""
    k0 = 2 * math.pi / box
    m = np.fft.fftfreq(n, 1.0 / n)
    m2 = m[:, None, None] ** 2 + m[None, :, None] ** 2 + m[None, None, :] ** 2
    return np.bincount(np.rint(np.sqrt(m2)).astype(int).ravel()), k0


def test_random_field_is_real_solenoidal_with_the_energy():
    n, box = 32, 2 * math.pi
    u = random_solenoidal_field(n, box, k_peak=4.0, energy=0.37, seed=11)
    assert u.shape == (n, n, n, 3) and u.dtype == np.float64 and u.flags.c_contiguous
    assert 0.5 * (u * u).sum(axis=3).mean() == pytest.approx(0.37, rel=1e-12)
    u_hat = np.fft.rfftn(u, axes=(0, 1, 2))
    kx, ky, kz = wavenumbers(n, box)
    k_dot_u = kx * u_hat[..., 0] + ky * u_hat[..., 1] + kz * u_hat[..., 2]
    assert np.abs(k_dot_u).max() <= 1e-12 * np.abs(u_hat).max()
    assert np.abs(u.mean(axis=(0, 1, 2))).max() < 1e-14
    m = np.fft.fftfreq(n, 1.0 / n)
    cut = (np.abs(m)[:, None, None] >= n / 3) | (np.abs(m)[None, :, None] >= n / 3) | (
        np.arange(n // 2 + 1)[None, None, :] >= n / 3)
    assert np.abs(u_hat[cut]).max() <= 1e-13 * np.abs(u_hat).max()
    # seeded: the same seed, the same field; another seed, another field
    np.testing.assert_array_equal(
        u, random_solenoidal_field(n, box, k_peak=4.0, energy=0.37, seed=11))
    assert np.abs(u - random_solenoidal_field(n, box, k_peak=4.0, energy=0.37,
                                              seed=12)).max() > 0.1
    # with its modes: the same u, bit for bit, and its half spectra (u's rfftn)
    same, modes = random_solenoidal_field(n, box, k_peak=4.0, energy=0.37, seed=11,
                                          with_modes=True)
    np.testing.assert_array_equal(same, u)
    assert len(modes) == 3 and modes[0].shape == (n, n, n // 2 + 1)
    for c in range(3):
        assert np.abs(modes[c] - u_hat[..., c]).max() <= 1e-13 * np.abs(u_hat).max()



def curl(u, box):
    """∇ × u (n, n, n, 3) of a lattice field, spectrally (Nyquist derivatives zero)."""
    n = u.shape[0]
    kx, ky, kz = wavenumbers(n, box)
    kx, ky, kz = (np.where(np.abs(a) == n / 2 * 2 * math.pi / box, 0.0, a)
                  for a in (kx, ky, kz))
    uh = np.fft.rfftn(u, axes=(0, 1, 2))
    w = 1j * np.stack([ky * uh[..., 2] - kz * uh[..., 1], kz * uh[..., 0] - kx * uh[..., 2],
                       kx * uh[..., 1] - ky * uh[..., 0]], axis=-1)
    return np.fft.irfftn(w, s=(n,) * 3, axes=(0, 1, 2))


@pytest.mark.parametrize("nu", [0.01, 0.0])
def test_vorticity_statistics_invert_the_curl(nu):
    """The velocity of the curl of a random (band-limited, zero-mean, solenoidal) field is
    the field: the same statistics and spectrum as flow_statistics of the field itself;
    the Taylor-Green vorticity gives the Taylor-Green energy 1/8 and enstrophy 3/4."""
    box = 3.0
    u = random_solenoidal_field(16, box, k_peak=2 * (2 * math.pi / box), energy=0.3, seed=4)
    stats, k, e = vorticity_statistics(curl(u, box), box, nu)
    k_ref, e_ref = energy_spectrum(u, box)
    np.testing.assert_allclose(k, k_ref, rtol=1e-14)
    np.testing.assert_allclose(e, e_ref, rtol=1e-10, atol=1e-14 * e_ref.max())
    if nu > 0:
        ref = flow_statistics(u, box, nu)
        assert stats.keys() == ref.keys()
        for key, value in ref.items():
            assert stats[key] == pytest.approx(value, rel=1e-10, abs=1e-13), key
    else:
        assert stats["dissipation"] == 0.0
        assert math.isinf(stats["re_lambda"]) and math.isinf(stats["kolmogorov_eta"])
        assert stats["energy"] == pytest.approx(0.3, rel=1e-10)
    tg, _, _ = vorticity_statistics(curl(taylor_green(16, 2 * math.pi, 1.0), 2 * math.pi),
                                    2 * math.pi, 0.1)
    assert tg["energy"] == pytest.approx(1 / 8, rel=1e-12)
    assert tg["enstrophy"] == pytest.approx(3 / 4, rel=1e-12)
    with pytest.raises(ValueError, match="omega has shape"):
        vorticity_statistics(np.zeros((8, 8, 8)), box, nu)


def test_random_field_spectrum_one_seed():
    """One realization, n = 32, k_p = 3k₀, box L = 1: on each whole shell (s < n/3 − ½)
    E_s dk / energy scatters about T_s / ΣT (T_s the prescribed spectrum integrated over
    the shell) with relative variance 1/N_s (χ² of 2N_s degrees of freedom) plus that of
    the common rescaling to the exact energy, δ² = Σ T_s²/N_s / (ΣT)².  Each shell within
    5σ (over 100 seeds the largest |z| was 3.8: shell 1 has only N_s = 18 modes)."""
    n, box, k_peak, energy = 32, 1.0, 3.0, 2.0
    counts, k0 = shell_counts(n, box)
    u = random_solenoidal_field(n, box, k_peak=k_peak * k0, energy=energy, seed=5)
    _, e = energy_spectrum(u, box)
    whole = int(math.ceil(n / 3 - 0.5))                # shells 1 .. whole − 1 are whole
    target = k4exp_shell_integrals(k_peak * k0, 40, k0)  # the tail past s = 40 is < 1e-30
    expected = energy * target / target.sum()
    s = np.arange(1, whole)
    delta2 = (target[s] ** 2 / counts[s]).sum() / target.sum() ** 2
    z = (e[s] * k0 / expected[s] - 1) / np.sqrt(1 / counts[s] + delta2)
    assert np.abs(z).max() < 5, z


def test_random_field_spectrum_ensemble_mean():
    """Averaged over 40 seeds (n = 16) the shell spectrum is the prescribed one: the
    relative standard deviation of the mean is 1/√(40 N_s); within 5 of it per shell."""
    n, box, k_peak, energy, seeds = 16, 2 * math.pi, 2.5, 1.0, 40
    counts, k0 = shell_counts(n, box)
    whole = int(math.ceil(n / 3 - 0.5))
    target = k4exp_shell_integrals(k_peak, 30, k0)
    e_kept = target[1:whole].sum()
    ratios = []
    for seed in range(seeds):
        _, e = energy_spectrum(random_solenoidal_field(n, box, k_peak=k_peak,
                                                       energy=energy, seed=seed), box)
        # compare shapes on the whole shells (the cut removes a little of the tail)
        ratios.append(e[1:whole] / e[1:whole].sum() / (target[1:whole] / e_kept))
    mean = np.mean(ratios, axis=0)
    sigma = 1 / np.sqrt(seeds * counts[1:whole])
    assert (np.abs(mean - 1) < 5 * sigma).all(), (mean, sigma)


def test_random_field_from_a_table():
    """A table E = 1 on [2k₀, 6k₀] with linear ramps to 0 at k₀ and 7k₀: no energy in
    shell 0 and from shell 8 on; the energy as asked; shell by shell the table's integral
    within 5σ (σ = 1/√N_s, as in the one-seed test)."""
    n, box = 32, 2 * math.pi
    table = ([1.0, 2.0, 6.0, 7.0], [0.0, 1.0, 1.0, 0.0])
    u = random_solenoidal_field(n, box, table, energy=0.5, seed=2)
    _, e = energy_spectrum(u, box)
    assert e.sum() == pytest.approx(0.5, rel=1e-12)
    assert e[0] < 1e-28 and e[8:].max() < 1e-28
    counts, _ = shell_counts(n, box)
    target = np.array([0, 0.125, 0.875, 1, 1, 1, 0.875, 0.125])   # ∫ over each shell
    s = np.arange(1, 8)
    expected = 0.5 * target[s] / target.sum()
    z = (e[s] / expected - 1) * np.sqrt(counts[s])
    assert np.abs(z).max() < 5, z


# -- 3. Gaussian statistics -----------------------------------------------------------
def test_gaussian_field_skewness_and_flatness():
    """The random field is Gaussian, so are its derivatives d_i = ∂u_i/∂x_i: S = 0, F = 3
    up to the sampling error of n³ correlated nodes.  For jointly Gaussian d_i(x), d_j(y)
    with correlation ρ_ij(r), to leading order (delta method, zero-mean d whose
    correlations sum to zero over r):

        Cov(S_i, S_j) = (6/N) Σ_r ρ_ij(r)³,   Cov(F_i, F_j) = (24/N) Σ_r ρ_ij(r)⁴,

    (6/N and 24/N for independent samples), N = n³; the averages over i have variance
    (1/9) Σ_ij Cov.  ρ_ij is estimated from the field itself (its periodogram).  Over 30
    seeds the measured S/σ_S and (F − 3)/σ_F had standard deviation 0.8 and 0.6: the
    estimate is sound, and 4σ is a robust bound."""
    n, box = 32, 2 * math.pi
    u = random_solenoidal_field(n, box, k_peak=4.0, seed=7)
    stats = flow_statistics(u, box, 0.01)
    u_hat = np.fft.rfftn(u, axes=(0, 1, 2))
    k = wavenumbers(n, box)
    d_hat = [1j * k[i] * u_hat[..., i] for i in range(3)]
    var = [np.fft.irfftn(np.abs(d) ** 2, s=(n, n, n), axes=(0, 1, 2))[0, 0, 0]
           for d in d_hat]
    var_s = var_f = 0.0
    for i in range(3):
        for j in range(3):
            c = np.fft.irfftn(d_hat[i] * d_hat[j].conj(), s=(n, n, n), axes=(0, 1, 2))
            rho = c / math.sqrt(var[i] * var[j])
            var_s += 6 * (rho ** 3).sum() / n ** 3 / 9
            var_f += 24 * (rho ** 4).sum() / n ** 3 / 9
    sigma_s, sigma_f = math.sqrt(var_s), math.sqrt(var_f)
    assert 0.005 < sigma_s < 0.1 and 0.01 < sigma_f < 0.2     # the estimate is sane
    assert abs(stats["skewness"]) < 4 * sigma_s
    assert abs(stats["flatness"] - 3) < 4 * sigma_f


# -- 4. Parseval ----------------------------------------------------------------------
@pytest.mark.parametrize("n", [15, 16])
def test_parseval(rng, n):
    """Σ E(k) dk = ½⟨|u|²⟩ to 1e-12 for any field (not solenoidal, with a mean), odd and
    even n."""
    box = 1.7
    u = rng.standard_normal((n, n, n, 3)) + 0.3
    k, e = energy_spectrum(u, box)
    dk = 2 * math.pi / box
    assert len(k) == int(np.rint(math.sqrt(3) * (n // 2))) + 1
    assert e.sum() * dk == pytest.approx(0.5 * (u * u).sum(axis=3).mean(), rel=1e-12)
    assert e[0] * dk == pytest.approx(0.5 * (u.mean(axis=(0, 1, 2)) ** 2).sum(), rel=1e-12)
    assert flow_statistics(u, box, 0.1)["energy"] == pytest.approx(e.sum() * dk,
                                                                   rel=1e-14)


# -- 5. errors ------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(8, 8, 8), (8, 8, 8, 2), (8, 8, 9, 3), (3, 3, 3, 3),
                                   (3, 8, 8, 8)])
def test_wrong_shapes(shape):
    with pytest.raises(ValueError, match="expected"):
        energy_spectrum(np.zeros(shape), 1.0)
    with pytest.raises(ValueError, match="expected"):
        flow_statistics(np.zeros(shape), 1.0, 0.1)


def test_bad_values():
    u = np.zeros((8, 8, 8, 3))
    for bad in (np.nan, np.inf):
        v = u.copy()
        v[1, 2, 3, 0] = bad
        with pytest.raises(ValueError, match="non-finite"):
            energy_spectrum(v, 1.0)
        with pytest.raises(ValueError, match="non-finite"):
            flow_statistics(v, 1.0, 0.1)
    for box in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="box"):
            energy_spectrum(u, box)
        with pytest.raises(ValueError, match="box"):
            flow_statistics(u, box, 0.1)
        with pytest.raises(ValueError, match="box"):
            random_solenoidal_field(8, box, seed=0)
    for nu in (-0.1, np.nan, np.inf):
        with pytest.raises(ValueError, match="nu"):
            flow_statistics(u, 1.0, nu)
    with pytest.raises(TypeError, match="real"):
        energy_spectrum(u.astype(complex), 1.0)


def test_random_field_errors():
    with pytest.raises(ValueError, match="n is"):
        random_solenoidal_field(3, 1.0, seed=0)
    with pytest.raises(ValueError, match="n is"):
        random_solenoidal_field(8.0, 1.0, seed=0)
    with pytest.raises(TypeError, match="seed"):
        random_solenoidal_field(8, 1.0, seed=None)
    with pytest.raises(ValueError, match="energy"):
        random_solenoidal_field(8, 1.0, energy=0.0, seed=0)
    with pytest.raises(ValueError, match="k_peak"):
        random_solenoidal_field(8, 1.0, k_peak=-1.0, seed=0)
    with pytest.raises(ValueError, match="spectrum"):
        random_solenoidal_field(8, 1.0, spectrum="kolmogorov", seed=0)
    with pytest.raises(ValueError, match="k_peak"):
        random_solenoidal_field(8, 1.0, ([1.0, 2.0], [1.0, 1.0]), k_peak=2.0, seed=0)
    with pytest.raises(ValueError, match="increasing"):
        random_solenoidal_field(8, 1.0, ([2.0, 1.0], [1.0, 1.0]), seed=0)
    with pytest.raises(ValueError, match="E\\(k\\) < 0"):
        random_solenoidal_field(8, 1.0, ([1.0, 2.0], [1.0, -1.0]), seed=0)
    with pytest.raises(ValueError, match="equal length"):
        random_solenoidal_field(8, 1.0, ([1.0, 2.0], [1.0]), seed=0)
    # all the energy beyond the 2/3 cut (n = 8, box 2π: kept shells s < 8/3·√3)
    with pytest.raises(ValueError, match="no energy"):
        random_solenoidal_field(8, 2 * math.pi, ([20.0, 30.0], [1.0, 1.0]), seed=0)


@pytest.mark.gpu
def test_cupy_matches_numpy():
    """The same seed gives the same field on CuPy (noise drawn on the host) and the
    statistics and spectrum of CuPy arrays equal NumPy's to round-off."""
    cp = pytest.importorskip("cupy")
    box, nu = 2 * math.pi, 0.01
    u = random_solenoidal_field(24, box, energy=0.5, seed=7)
    u_d = random_solenoidal_field(24, box, energy=0.5, seed=7, xp=cp)
    np.testing.assert_allclose(cp.asnumpy(u_d), u, rtol=0, atol=1e-12)
    k, e = energy_spectrum(u, box)
    k_d, e_d = energy_spectrum(u_d, box)
    np.testing.assert_allclose(cp.asnumpy(e_d), e, rtol=1e-12, atol=1e-15)
    assert cp.asnumpy(energy_spectrum(u_d, box)[1]).tobytes() == cp.asnumpy(e_d).tobytes()
    a, b = flow_statistics(u, box, nu), flow_statistics(u_d, box, nu)
    for key, value in a.items():
        assert b[key] == pytest.approx(value, rel=1e-10, abs=1e-14), key
