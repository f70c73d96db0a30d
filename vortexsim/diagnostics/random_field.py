r"""Random, Gaussian, divergence-free initial velocity fields on the periodic n³ lattice
(the initial field of the ``isotropic_turbulence`` case): :func:`random_solenoidal_field`
on one process, :func:`random_solenoidal_slab` this rank's x-slab of the same field on
the ranks of a run that split the lattice by slabs (:mod:`vortexsim.geometry.slab`).

Both draw the white noise of the nodes in the same order from one generator seeded by
``seed`` (node (i, j, k) in row (i n + j) n + k, three normals a node), so that each
rank's slab is the same field as the one-process one to round-off (the transforms are
the same operations in another order).  A rank draws its own rows after skipping the
rows of the slabs before it (NumPy's normals cannot be skipped without drawing them):
the last rank draws almost 3 n³ normals, about 15 ns each on one core (2 s at 512³).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..geometry.lattice_modes import column_modes, irfft3
from .turbulence import check_box, check_n, check_positive, half_spectrum

__all__ = ["random_solenoidal_field", "random_solenoidal_slab", "shell_amplitudes",
           "mode_amplitudes", "noise_rows"]

#: Gauss–Legendre nodes per shell for the integral of an analytic E(k) over a shell
_QUADRATURE_NODES = 32
#: normals drawn at a time where a rank skips the rows before its slab (32 MiB)
SKIP_CHUNK = 1 << 22


def _k4exp(k_peak):
    return lambda k: k ** 4 * np.exp(-2.0 * (k / k_peak) ** 2)


def _shell_integrals_analytic(func, n_shells, k0):
    """∫ E dk over each shell [(s − ½)k₀, (s + ½)k₀) (shell 0 from 0), Gauss–Legendre."""
    x, w = np.polynomial.legendre.leggauss(_QUADRATURE_NODES)
    lo = np.maximum(np.arange(n_shells) - 0.5, 0.0) * k0
    hi = (np.arange(n_shells) + 0.5) * k0
    half = 0.5 * (hi - lo)
    nodes = (lo + hi)[:, None] * 0.5 + half[:, None] * x[None, :]
    return (func(nodes) * w[None, :]).sum(axis=1) * half


def _shell_integrals_table(k_table, e_table, n_shells, k0):
    """∫ E dk over each shell of the piecewise-linear E through the table (0 outside it),
    exact: the antiderivative at the shell edges."""
    def antiderivative(q):
        q = np.clip(q, k_table[0], k_table[-1])
        j = np.clip(np.searchsorted(k_table, q, side="right") - 1, 0, len(k_table) - 2)
        slope = (e_table[j + 1] - e_table[j]) / (k_table[j + 1] - k_table[j])
        dq = q - k_table[j]
        cumulative = np.concatenate(
            [[0.0], np.cumsum(0.5 * (e_table[1:] + e_table[:-1]) * np.diff(k_table))])
        return cumulative[j] + e_table[j] * dq + 0.5 * slope * dq ** 2
    edges = np.maximum(np.arange(n_shells + 1) - 0.5, 0.0) * k0
    return np.diff(antiderivative(edges))


def _check_table(spectrum):
    try:
        k_table, e_table = (np.asarray(a, dtype=np.float64) for a in spectrum)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"spectrum is {spectrum!r}; expected 'k4exp' or a table "
                         "(k, E(k)) of two 1-D arrays of equal length.") from exc
    if (k_table.ndim != 1 or k_table.shape != e_table.shape or k_table.size < 2):
        raise ValueError(f"the spectrum table has shapes {k_table.shape} and {e_table.shape}; "
                         "expected two 1-D arrays (k [1/L], E(k) [L³/T²]) of equal length ≥ 2.")
    if not (np.isfinite(k_table).all() and np.isfinite(e_table).all()):
        raise ValueError("the spectrum table has non-finite values; expected finite k and E.")
    if k_table[0] < 0 or (np.diff(k_table) <= 0).any():
        raise ValueError("the spectrum table's k must be ≥ 0 and strictly increasing.")
    if (e_table < 0).any():
        raise ValueError("the spectrum table has E(k) < 0; an energy spectrum is ≥ 0.")
    return k_table, e_table


def _lattice_shell_counts(n_shells):
    """Number of points m of ℤ³ with rint(|m|) = s, s < n_shells (the whole shell, not
    only its part on the n³ lattice), counted one plane m_x at a time."""
    r = n_shells
    m = np.arange(-r, r + 1, dtype=np.float64)
    m2_plane = m[:, None] ** 2 + m[None, :] ** 2
    counts = np.zeros(n_shells, dtype=np.int64)
    for mx in m:
        shell = np.rint(np.sqrt(m2_plane + mx * mx)).astype(np.int64).ravel()
        counts += np.bincount(shell[shell < n_shells], minlength=n_shells)
    return counts


def shell_amplitudes(n, box, spectrum="k4exp", k_peak=None):
    """The amplitude a_s [L/T] of each shell s = 0 … (host (n_shells,)) of
    :func:`random_solenoidal_field` on the n³ lattice of edge ``box`` (its docstring: the
    spectrum, k_peak, the 2/3 rule); ValueError where no kept shell has energy."""
    k0 = 2 * math.pi / box
    m = np.abs(np.fft.fftfreq(n, 1.0 / n))
    top = m[m < n / 3.0].max()           # the largest |m_i| kept, on every axis
    n_shells = int(np.rint(np.sqrt(3.0 * top ** 2))) + 1
    if isinstance(spectrum, str):
        if spectrum != "k4exp":
            raise ValueError(f"spectrum is {spectrum!r}; expected 'k4exp' or a table "
                             "(k, E(k)).")
        k_peak = 4 * k0 if k_peak is None else check_positive("k_peak", k_peak, "1/L")
        shell_energy = _shell_integrals_analytic(_k4exp(k_peak), n_shells, k0)
    else:
        if k_peak is not None:
            raise ValueError("k_peak applies to spectrum='k4exp' only; a table sets the "
                             "shape itself.  Leave k_peak out.")
        shell_energy = _shell_integrals_table(*_check_table(spectrum), n_shells, k0)
    shell_energy[0] = 0.0                                         # zero mean
    counts = _lattice_shell_counts(n_shells)
    amplitude2 = np.zeros(n_shells)
    amplitude2[1:] = float(n) ** 3 * shell_energy[1:] / counts[1:]
    if not (amplitude2[1:] > 0).any():   # every shell 1 … n_shells − 1 has kept modes
        raise ValueError("the prescribed spectrum has no energy in the shells kept by the "
                         f"2/3 rule (1 ≤ |k|/k₀ < {n / 3.0:.3g}); widen the table or move "
                         "k_peak inside.")
    return np.sqrt(amplitude2)


def mode_amplitudes(m, m2, amplitude, n, xp=np):
    """a (broadcast shape of the integer wavenumbers ``m`` = (mx, my, mz)) of each mode:
    its shell's ``amplitude`` (:func:`shell_amplitudes`, host) where the 2/3 rule keeps
    it (|m_i| < n/3, m ≠ 0), else 0.  ``m2``: |m|²; ``m``, ``m2`` and the result in
    ``xp``."""
    cut = n / 3.0
    keep = (xp.abs(m[0]) < cut) & (xp.abs(m[1]) < cut) & (xp.abs(m[2]) < cut) & (m2 > 0)
    shell = xp.rint(xp.sqrt(m2)).astype(np.int64)
    return xp.where(keep, xp.asarray(amplitude)[xp.where(keep, shell, 0)], 0.0)


def random_solenoidal_field(n, box, spectrum="k4exp", *, k_peak=None, energy=1.0, seed,
                            xp=np, with_modes=False):
    r"""A random, Gaussian, divergence-free velocity field with a prescribed spectrum.

    û(k) = a_s P(k) ŵ(k) for the modes kept by the 2/3 rule (|m_i| < n/3, m ≠ 0), zero
    elsewhere; ŵ is the ``rfftn`` of white noise (independent standard normals at every
    node and component), P_ij = δ_ij − k_i k_j/|k|² the projection onto divergence-free
    fields, and a_s² = n³ T_s/N_s for the modes of shell s (rint(|m|) = s), with
    T_s = ∫ E(k) dk over [(s − ½)k₀, (s + ½)k₀) and N_s the number of points of ℤ³ in the
    shell.  The expected shell spectrum is then the prescribed one integrated over each
    shell, on every shell that the cut leaves whole (s < n/3); the cut removes modes, it
    does not move their energy elsewhere.  Finally u = F⁻¹[û] is scaled so that
    ½⟨|u|²⟩ = ``energy`` to round-off.

    The field is real (û is Hermitian), has zero mean, and is Gaussian (a linear map of
    white noise), up to that one scale factor.  One realization's shell energies scatter
    about the prescribed ones with relative standard deviation 1/√N_s (a χ² of 2N_s
    degrees of freedom: two polarizations, N_s/2 independent complex modes): 24 % on
    shell 1 (N_s = 18), about 3 % at s ≈ 10.  The noise is drawn on the host, so a seed
    gives the same field on NumPy and CuPy (to round-off: the transforms are the
    device's).

    Parameters
    ----------
    n : int ≥ 4, lattice nodes per axis
    box : float, L > 0 [L]
    spectrum : ``"k4exp"`` for E(k) ∝ k⁴ exp(−2 (k/k_p)²) (peak at k_p), or a table
        (k [1/L], E(k) [L³/T²]) of 1-D arrays, k ≥ 0 increasing, E ≥ 0, read as
        piecewise linear and zero outside [k[0], k[-1]] (only its shape matters)
    k_peak : float > 0 [1/L], k_p of ``"k4exp"``; default 4 k₀ (k₀ = 2π/L)
    energy : float > 0 [L²/T²], ½⟨|u|²⟩ of the result
    seed : int or numpy.random.Generator (required: fields are reproducible)
    xp : numpy or cupy, the namespace of the result
    with_modes : also return û, so that a derivative of u needs no forward transform

    Returns
    -------
    u : array (n, n, n, 3) float64 [L/T] of ``xp``, at the nodes (i, j, k) L/n
    u_hat : (``with_modes`` only) [3 arrays (n, n, n//2 + 1) of ``xp``], the half spectra
        of u's components (``rfftn`` of each, to round-off: u is their inverse)

    References: Rogallo, NASA TM 81315 (1981) (random isotropic initial fields);
    Pope, Turbulent Flows (2000), §6.5 (the k⁴ exp(−2 (k/k_p)²) spectrum).
    """
    n = check_n(n)
    box = check_box(box)
    energy = check_positive("energy", energy, "L²/T²")
    if isinstance(seed, np.random.Generator):
        rng = seed
    elif isinstance(seed, numbers.Integral) and not isinstance(seed, bool) and seed >= 0:
        rng = np.random.default_rng(int(seed))
    else:
        raise TypeError(f"seed is {seed!r}; expected an integer ≥ 0 or a "
                        "numpy.random.Generator.")
    amplitude = shell_amplitudes(n, box, spectrum, k_peak)
    # the noise on the host (one seeded stream: the same numbers on every device), the
    # transforms and products in xp (no n³ array of them on the host of a GPU run), one
    # component at a time
    w_hat = column_modes(xp.asarray(rng.standard_normal((n ** 3, 3))), n, xp)
    (mx, my, mz), _, m2 = half_spectrum(n)
    if xp is not np:                 # |m|² made where it is used (the host's is cached)
        mx, my, mz = (xp.asarray(m) for m in (mx, my, mz))
        m2 = mx ** 2 + my ** 2 + mz ** 2
    a = mode_amplitudes((mx, my, mz), m2, amplitude, n, xp)
    k = (mx, my, mz)
    a_over_m2 = a * xp.where(m2 > 0, 1.0 / xp.where(m2 > 0, m2, 1.0), 0.0)
    del m2
    m_dot_w = mx * w_hat[0] + my * w_hat[1] + mz * w_hat[2]
    u = xp.empty((n, n, n, 3))
    for i in range(3):
        w_hat[i] = a * w_hat[i] - k[i] * a_over_m2 * m_dot_w      # û = a P ŵ, in place
        u[..., i] = irfft3(w_hat[i], n, xp)
    del m_dot_w, a, a_over_m2
    scale = math.sqrt(energy / (0.5 * float(xp.vdot(u.ravel(), u.ravel())) / n ** 3))
    u *= scale
    if not with_modes:
        return u
    for i in range(3):
        w_hat[i] *= scale
    return u, w_hat


def noise_rows(seed, r0, r1):
    """Rows r0 … r1 − 1 (r1 − r0, 3) of ``default_rng(seed).standard_normal((N, 3))``, the
    same bits, drawn after skipping the 3 r0 normals before them (in blocks of
    :data:`SKIP_CHUNK`: a generator's draws in several calls are those of one call)."""
    rng = np.random.default_rng(int(seed))
    skip = 3 * int(r0)
    block = np.empty(min(skip, SKIP_CHUNK))
    while skip:
        take = min(skip, block.size)
        rng.standard_normal(out=block[:take])
        skip -= take
    out = np.empty((int(r1) - int(r0), 3))
    rng.standard_normal(out=out.reshape(-1))
    return out


def random_solenoidal_slab(fft, box, *, k_peak=None, energy=1.0, seed):
    """This rank's x-slab of :func:`random_solenoidal_field` (``"k4exp"``, an integer
    ``seed``) on the ranks of ``fft`` (a NumPy :class:`vortexsim.geometry.slab.SlabFFT`
    of the n³ lattice of edge ``box``), and its spectrum: the same field to round-off.

    Returns
    -------
    u : (n_x n², 3) float64 [L/T], the slab's nodes in remesh order (node (i, j, k) of
        the slab's planes in row ((i − i0) n + j) n + k)
    u_hat : [3 arrays (n, n_y, n//2 + 1)], this rank's part of the half spectra of u's
        components (:meth:`SlabFFT.forward` of them, to round-off)

    Collective: three forward and three inverse slab transforms, one ``allreduce_sum``."""
    n = check_n(fft.n)
    box = check_box(box)
    energy = check_positive("energy", energy, "L²/T²")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise TypeError(f"seed is {seed!r}; expected an integer ≥ 0.")
    if fft.xp is not np:
        raise TypeError("random_solenoidal_slab draws its field on the host: pass a NumPy "
                        "SlabFFT (xp=numpy).")
    amplitude = shell_amplitudes(n, box, "k4exp", k_peak)
    k = fft.wavenumbers(2 * math.pi)             # the integers m of this rank's modes
    m2 = k[0] ** 2 + k[1] ** 2 + k[2] ** 2
    a = mode_amplitudes(k, m2, amplitude, n)
    (i0, i1), plane = fft.x_planes, n * n
    noise = noise_rows(seed, i0 * plane, i1 * plane)
    w_hat = [fft.forward(np.ascontiguousarray(noise[:, c]).reshape(fft.real_shape))
             for c in range(3)]
    del noise
    a_over_m2 = a * np.where(m2 > 0, 1.0 / np.where(m2 > 0, m2, 1.0), 0.0)
    m_dot_w = k[0] * w_hat[0] + k[1] * w_hat[1] + k[2] * w_hat[2]
    for c in range(3):                           # û = a P ŵ, in place
        w_hat[c] = a * w_hat[c] - k[c] * a_over_m2 * m_dot_w
    del m_dot_w
    u = np.empty((fft.real_shape[0] * plane, 3))
    for c in range(3):
        u[:, c] = fft.inverse(w_hat[c]).reshape(-1)
    local = np.array([float(np.vdot(u.ravel(), u.ravel()))])
    total = float(np.asarray(fft.communicator.allreduce_sum(local))[0])
    scale = math.sqrt(energy / (0.5 * total / n ** 3))
    u *= scale
    for c in range(3):
        w_hat[c] *= scale
    return u, w_hat
