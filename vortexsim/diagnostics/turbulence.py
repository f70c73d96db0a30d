r"""Statistics of a velocity field in the periodic box (``physics.md``, "Diagnostics").

The field u is sampled on the n³ lattice of [0, L)³, nodes at (i, j, k) L/n, as an array
``u[i, j, k, c]`` of shape (n, n, n, 3) [L/T].  Everything is computed with FFTs through
the array namespace of ``u`` (``numpy.fft`` or ``cupy.fft``), in float64.  Box averages
are written ⟨·⟩ (the mean over the n³ nodes).

Fourier conventions
-------------------
û(k) = Σ_x u(x) e^{−ik·x} (``rfftn`` over the three space axes, unnormalized), with
k = m k₀, m ∈ ℤ³ integer wavenumbers, k₀ = 2π/L.  Parseval: ⟨|u|²⟩ = Σ_k |û(k)|² / n⁶
(on the half spectrum of ``rfftn`` every plane m_z ≠ 0, n/2 counts twice, for its
conjugate).  Spectral derivatives: ∂u_i/∂x_j ↔ i k_j û_i, with the derivative of the
Nyquist modes (|m_j| = n/2, even n) taken as zero, the usual convention; a dealiased field
has no energy there, and then the derivatives are exact.

The spectrum is the one of ``vortexsim.validation.spectral_ns`` (``SpectralNS.spectrum``): shell
s = 0, 1, ... holds the modes with s − ½ ≤ |m| < s + ½ (rint(|m|) = s), its wavenumber is
k_s = s k₀, E(k_s) = (1/k₀) Σ_{k in shell s} ½ |û(k)|²/n⁶, so that Σ_s E(k_s) k₀ = ½⟨|u|²⟩
exactly (Parseval); dk = k₀.  Shell 0 holds only the mean (k = 0).

Statistics (:func:`flow_statistics`) are those of u as given: a mean flow counts in the
energy and u'; pass a zero-mean, divergence-free field for turbulence statistics.

A lattice vorticity split into x-slabs over ranks (:mod:`vortexsim.geometry.slab`) has
the statistics of :func:`vorticity_statistics` from :func:`slab_vorticity_statistics`
(collective): each rank sums over its part of the modes and of the nodes, and the ranks'
sums are added in rank order.
"""
from __future__ import annotations

import functools
import logging
import math
import numbers

import numpy as np

from ..backend import array_namespace, to_host
from ..geometry.lattice_modes import column_modes, half_spectrum_weight, irfft3, wavenumbers

logger = logging.getLogger(__name__)

__all__ = ["energy_spectrum", "flow_statistics", "slab_vorticity_statistics",
           "vorticity_statistics", "half_spectrum", "check_box", "check_n", "check_positive"]

#: a direction whose ⟨(∂u_i/∂x_i)²⟩ is below this fraction of ⟨∂_j u_k ∂_j u_k⟩/3 has no
#: longitudinal gradient (round-off only); its skewness and flatness are left out
_NO_GRADIENT = 1e-20


# -- checks -----------------------------------------------------------------------------
def check_box(box):
    if isinstance(box, bool) or not isinstance(box, numbers.Real) or not (
            math.isfinite(box) and box > 0):
        raise ValueError(f"box is {box!r}; expected a finite period L > 0 (the box is "
                         "[0, L)³).")
    return float(box)


def check_n(n):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 4:
        raise ValueError(f"n is {n!r}; expected an integer ≥ 4 (lattice nodes per axis).")
    return int(n)


def check_positive(name, value, units):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(value) and value > 0):
        raise ValueError(f"{name} is {value!r}; expected a finite number > 0 [{units}].")
    return float(value)


def _check_viscosity(nu):
    if isinstance(nu, bool) or not isinstance(nu, numbers.Real) or not (
            math.isfinite(nu) and nu >= 0):
        raise ValueError(f"nu is {nu!r}; expected a finite viscosity >= 0 [L²/T].")
    return float(nu)


def _check_velocity(u, name="u"):
    """The field ``u`` (called ``name`` in errors) as a float64 array of its namespace, shape (n, n, n, 3), n ≥ 4, finite."""
    xp = array_namespace(u)
    u = xp.asarray(u)
    if u.dtype.kind == "c":
        raise TypeError(f"{name} has dtype {u.dtype}; expected a real field (float64), "
                        "not its Fourier transform.")
    if u.dtype.kind not in "fiu":
        raise TypeError(f"{name} has dtype {u.dtype}; expected a real float64 field.")
    if u.ndim != 4 or u.shape[3] != 3 or not (u.shape[0] == u.shape[1] == u.shape[2]):
        raise ValueError(f"{name} has shape {tuple(u.shape)}; expected (n, n, n, 3): the "
                         "field at the nodes (i, j, k) L/n of the n³ lattice, component last.")
    if u.shape[0] < 4:
        raise ValueError(f"{name} has n = {u.shape[0]} nodes per axis; expected n ≥ 4.")
    u = u.astype(xp.float64, copy=False)
    if not bool(xp.isfinite(u).all()):
        raise ValueError(f"{name} has non-finite values (NaN or inf); expected a finite "
                         "field.")
    return xp, u


# -- the lattice of wavenumbers ----------------------------------------------------------
@functools.lru_cache(maxsize=4)
def half_spectrum(n):
    """Host arrays of the ``rfftn`` half spectrum: integer wavenumbers (mx, my, mz)
    broadcastable to (n, n, n//2 + 1), the Parseval weights and |m|² (made once per n,
    read-only)."""
    m = np.fft.fftfreq(n, 1.0 / n)
    mz = np.arange(n // 2 + 1, dtype=np.float64)
    mx, my, mz = m[:, None, None], m[None, :, None], mz[None, None, :]
    weight = half_spectrum_weight(n)
    out = (mx, my, mz), weight[None, None, :], mx ** 2 + my ** 2 + mz ** 2
    for a in (mx, my, mz, out[1], out[2]):
        a.flags.writeable = False
    return out


@functools.lru_cache(maxsize=4)
def _shells(n):
    """The shell rint(|m|) of each half-spectrum mode (host int64, flat) and the number
    of shells (made once per n)."""
    shell = np.rint(np.sqrt(half_spectrum(n)[2])).astype(np.int64).ravel()
    shell.flags.writeable = False
    return shell, int(shell.max()) + 1


@functools.lru_cache(maxsize=16)
def _part_shells(n, j0, j1):
    """:func:`_shells` of the modes of the κ_y planes [j0, j1) only, flat in the order of
    an array (n, j1 − j0, n//2 + 1) (a rank's part, ``SlabFFT``), and the number of
    shells of the whole lattice."""
    shell, n_shells = _shells(n)
    if (j0, j1) == (0, n):
        return shell, n_shells
    part = np.ascontiguousarray(shell.reshape(n, n, n // 2 + 1)[:, j0:j1, :]).ravel()
    part.flags.writeable = False
    return part, n_shells


def _abs2(z):
    return z.real * z.real + z.imag * z.imag


# -- the spectrum ------------------------------------------------------------------------
def energy_spectrum(u, box):
    r"""Shell-summed kinetic-energy spectrum of a periodic velocity field.

    E(k_s) = (1/k₀) Σ_{rint(|m|) = s} ½ |û(k)|² / n⁶,  k_s = s k₀,  k₀ = 2π/L,

    the definition of ``vortexsim.validation.spectral_ns`` (``SpectralNS.spectrum``): shells of
    width dk = k₀ centred on s k₀, so that Σ_s E(k_s) dk = ½⟨|u|²⟩ exactly (Parseval).

    Parameters
    ----------
    u : array (n, n, n, 3) [L/T], NumPy or CuPy, real, finite, n ≥ 4
        the velocity at the nodes (i, j, k) L/n of [0, L)³
    box : float, L > 0 [L]

    Returns
    -------
    k : array (n_shells,) [1/L], s k₀ for s = 0 .. rint(max|m|), in the namespace of u
    E : array (n_shells,) [L³/T²], in the namespace of u; E[0] is the mean flow's energy/k₀
    """
    box = check_box(box)
    xp, u = _check_velocity(u)
    n = u.shape[0]
    u2 = sum(_abs2(m) for m in _component_modes(u, xp))
    return _spectrum_of_density(xp, (0.5 / float(n) ** 6) * u2, n, box)


def _spectrum_of_density(xp, density, n, box):
    """(k, E) from ½|û|²/n⁶ of each half-spectrum mode (n, n, n//2 + 1), the shell sums
    in a fixed order (:func:`_shell_sums`)."""
    k0 = 2 * math.pi / box
    e = _shell_sums(xp, density, n)
    return xp.arange(e.shape[0], dtype=xp.float64) * k0, e / k0


def _shell_sums(xp, density, n, y_planes=None):
    """Σ of ``density`` × the Parseval weight over each of the n_shells shells of the whole
    lattice, for the modes (n, j1 − j0, n//2 + 1) of the κ_y planes ``y_planes`` = (j0, j1)
    (default all).  A fixed order: on the host ``numpy.bincount``; on the GPU one block per
    shell over the shell's modes (``cuda/shell_sums.cu``; a GPU ``bincount`` adds with
    floating-point atomics, bits that vary from run to run)."""
    j0, j1 = (0, n) if y_planes is None else (int(y_planes[0]), int(y_planes[1]))
    _, weight, _ = half_spectrum(n)
    shell, n_shells = _part_shells(n, j0, j1)
    density = density * xp.asarray(weight)
    if xp is np:
        return xp.asarray(np.bincount(shell, weights=density.ravel(), minlength=n_shells))
    return _shell_sums_cuda(xp.ascontiguousarray(density).ravel(), n, (j0, j1), n_shells)


@functools.lru_cache(maxsize=16)
def _shell_order(n, j0, j1, device_id):
    """The modes of :func:`_part_shells` listed shell by shell (device int32) and each
    shell's first entry (device int64, n_shells + 1; a shell with none is empty)."""
    import cupy as cp  # noqa: PLC0415
    shell, n_shells = _part_shells(n, j0, j1)
    # a stable sort has one result; of 16-bit keys NumPy's is a radix sort, about four
    # times the int64 keys' merge sort
    keys = shell.astype(np.int16) if n_shells <= np.iinfo(np.int16).max else shell
    perm = np.argsort(keys, kind="stable").astype(np.int32)
    start = np.searchsorted(shell[perm], np.arange(n_shells + 1)).astype(np.int64)
    return cp.asarray(perm), cp.asarray(start)


def _shell_sums_cuda(density, n, y_planes, n_shells):
    """out[s] = Σ of the flat ``density`` (device float64, the modes of the κ_y planes
    ``y_planes``) over shell s: one block of ``shell_sums.cu`` per shell, no atomics."""
    import cupy as cp  # noqa: PLC0415

    from ..kernels.modules import get_function  # noqa: PLC0415
    perm, start = _shell_order(n, *y_planes, cp.cuda.Device().id)
    out = cp.empty(n_shells, dtype=cp.float64)
    get_function("shell_sums.cu", "shell_sums<256>")((n_shells,), (256,),
                                                     (density, perm, start, out))
    return out


# -- the statistics ----------------------------------------------------------------------
def flow_statistics(u, box, nu):
    r"""Single-time statistics of a velocity field in the periodic box.

    From û (Parseval, spectral derivatives; module docstring):

    ==================  =========================================================  ========
    key                 definition                                                 units
    ==================  =========================================================  ========
    energy              E = ½⟨|u|²⟩                                                L²/T²
    dissipation         ε = 2ν⟨s_ij s_ij⟩, s_ij = ½(∂_j u_i + ∂_i u_j)             L²/T³
    enstrophy           ⟨|ω|²⟩, ω = ∇ × u  (ε = ν⟨|ω|²⟩ when ∇·u = 0)              1/T²
    divergence_rms      √⟨(∇·u)²⟩ (a check: 0 for a solenoidal field)             1/T
    u_rms               u' = √(2E/3)                                               L/T
    integral_scale      L_int = π/(2u'²) Σ_{s≥1} E(k_s)/k_s dk                     L
    taylor_scale        λ = √(15ν u'²/ε)                                           L
    re_lambda           Re_λ = u'λ/ν                                               1
    kolmogorov_eta      η = (ν³/ε)^{1/4}                                           L
    k_max               k_max = (n/3) k₀, k₀ = 2π/L                                1/L
    k_max_eta           k_max η                                                    1
    skewness            S = mean over i of ⟨d_i³⟩/⟨d_i²⟩^{3/2}, d_i = ∂u_i/∂x_i    1
    flatness            F = mean over i of ⟨d_i⁴⟩/⟨d_i²⟩²                          1
    ==================  =========================================================  ========

    k_max is the largest wavenumber kept per axis by the 2/3 rule of a dealiased field
    (|m_i| < n/3, as in ``vortexsim.validation.spectral_ns``); k_max η ≳ 1 is the usual
    resolution criterion.  ⟨s_ij s_ij⟩ = Σ ½(|k|²|û|² + |k·û|²)/n⁶ and
    ⟨|ω|²⟩ = Σ (|k|²|û|² − |k·û|²)/n⁶ over the modes.  The integral over shells leaves
    out shell 0 (the mean flow has no length scale).  Skewness and flatness are averaged
    over the directions that have a longitudinal gradient (⟨d_i²⟩ above round-off); with
    none (e.g. a shear wave u = (sin y, 0, 0)) both are NaN.  With ε = 0, λ, Re_λ and η are
    inf; with E = 0, L_int is NaN.

    Parameters
    ----------
    u : array (n, n, n, 3) [L/T], NumPy or CuPy, real, finite, n ≥ 4
    box : float, L > 0 [L]
    nu : float, kinematic viscosity ν ≥ 0 [L²/T] (ν = 0: ε = 0, λ, Re_λ and η inf)

    Returns
    -------
    dict of Python floats, the keys above (a host transfer: call it as a diagnostic).
    """
    box = check_box(box)
    nu = _check_viscosity(nu)
    xp, u = _check_velocity(u)
    stats, _, _ = _statistics(xp, _component_modes(u, xp), u.shape[0], box, nu)
    return stats


def vorticity_statistics(omega, box, nu):
    r"""The statistics of :func:`flow_statistics` and the spectrum of
    :func:`energy_spectrum` of the velocity whose curl is the lattice vorticity ``omega``.

    u is the periodic Biot–Savart velocity of ω sampled on the lattice (the field that a
    grid code holds, with no smoothing): û(k) = i k × ω̂(k)/|k|², the mean (k = 0) zero,
    the derivative wavenumbers of the module docstring (Nyquist components zero).  For a
    solenoidal ω with no Nyquist content ∇ × u = ω exactly.  Used for the diagnostics of
    periodic runs, ω the remeshed strengths over h³ (:meth:`vortexsim.Simulation.diagnostics`).

    Parameters
    ----------
    omega : array (n, n, n, 3) [1/T], NumPy or CuPy, real, finite, n ≥ 4
    box : float, L > 0 [L]
    nu : float, kinematic viscosity ν ≥ 0 [L²/T] (ν = 0: ε = 0, λ, Re_λ and η inf)

    Returns
    -------
    (stats, k, E): the dict of :func:`flow_statistics` (host floats) and the spectrum
    k (n_shells,) [1/L], E (n_shells,) [L³/T²] in the namespace of ``omega``.
    """
    box = check_box(box)
    nu = _check_viscosity(nu)
    xp, omega = _check_velocity(omega, "omega")
    n = omega.shape[0]
    w_hat = _component_modes(omega, xp)
    u_hat = _biot_savart_modes(xp, w_hat, wavenumbers(n, box, xp, derivative=True))
    del w_hat
    return _statistics(xp, u_hat, n, box, nu)


def slab_vorticity_statistics(omega, fft, box, nu):
    r""":func:`vorticity_statistics` of the lattice vorticity split into x-slabs over the
    ranks of ``fft.communicator``, the same on every rank.  Collective: all ranks call it.

    Each rank: the slab transforms of its three components (its κ_y planes
    ``fft.y_planes`` of the half spectrum); û = i k × ω̂/|k|² with its derivative
    wavenumbers (``fft.wavenumbers(box, derivative=True)``); the Parseval-weighted mode
    sums over its modes (the weight depends on κ_z only); its part of the shell sums of
    ½|û|²/n⁶ (the shells of the whole lattice, a fixed order: ``numpy.bincount``, on the
    GPU ``cuda/shell_sums.cu`` with this rank's shell table); d_i = ∂u_i/∂x_i on its slab
    (inverse slab transform of i k_i û_i) and the sums of d_i², d_i³, d_i⁴ over its nodes.
    These 11 sums, a flag of non-finite input and the shell sums come to the host in
    one transfer, are allgathered and summed in rank order (the same bits on every rank);
    the moments are divided by n³ and the rest follows as on one process: equal to
    ``vorticity_statistics(whole_omega.transpose(1, 2, 3, 0), box, nu)`` to round-off.

    Cost per rank: 3 forward + 3 inverse slab transforms (one alltoall each), the sums
    over its n n_y (n/2 + 1) modes and n_x n² nodes, one small allgather (12 + n_shells
    float64, n_shells = rint(max|m|) + 1 ≈ √3 n/2).

    Parameters
    ----------
    omega : array (3, n_x, n, n) [1/T] of ``fft.xp``, real: this rank's slab of the
        vorticity, component first (``omega[c, a, j, k]`` is ω_c at node (i0 + a, j, k),
        (i0, i1) = ``fft.x_planes``)
    fft : :class:`vortexsim.geometry.slab.SlabFFT` of the n³ lattice, n ≥ 4
    box : float, L > 0 [L]
    nu : float, kinematic viscosity ν ≥ 0 [L²/T] (ν = 0: ε = 0, λ, Re_λ and η inf)

    Returns
    -------
    (stats, k, E): the dict of :func:`flow_statistics` (host floats), k (n_shells,)
    [1/L] and E (n_shells,) [L³/T²] of the whole field in the namespace of ``omega``.
    A non-finite value on any rank raises ValueError on every rank (after the exchange);
    a wrong shape, dtype or namespace raises on its rank before any exchange.
    """
    box = check_box(box)
    nu = _check_viscosity(nu)
    xp, omega, n = fft.xp, _check_slab(omega, fft), fft.n
    finite = xp.isfinite(omega).all()             # on the device: checked after the sums
    w_hat = [fft.forward(omega[c]) for c in range(3)]
    kd = fft.wavenumbers(box, derivative=True)
    u_hat = _biot_savart_modes(xp, w_hat, kd)
    del w_hat
    sums, u2 = _gradient_sums(xp, u_hat, kd, n)
    shells = _shell_sums(xp, (0.5 / float(n) ** 6) * u2, n, fft.y_planes)
    del u2
    sums += _derivative_power_sums(u_hat, kd, fft.inverse, lambda a: a.sum())
    del u_hat
    sums.append(xp.where(finite, 0.0, 1.0))
    local = to_host(xp.concatenate([xp.stack([xp.asarray(v, dtype=xp.float64)
                                              for v in sums]), shells]))
    parts = fft.communicator.allgather(np.ascontiguousarray(local, dtype=np.float64))
    total = parts[0].copy()
    for p in parts[1:]:                           # rank order: the same bits everywhere
        total += p
    if bad := [r for r, p in enumerate(parts) if p[11] != 0.0]:
        raise ValueError(f"omega has non-finite values (NaN or inf) on rank(s) {bad}; "
                         "expected a finite field.")
    k0 = 2 * math.pi / box
    e = total[12:] / k0
    k = np.arange(e.shape[0], dtype=np.float64) * k0
    sums = [*total[:2], e.sum() * k0, (e[1:] / k[1:]).sum() * k0, *(total[2:11] / n ** 3)]
    stats = _statistics_from_sums([float(v) for v in sums], n, box, nu)
    return stats, xp.asarray(k), xp.asarray(e)


def _check_slab(omega, fft):
    """``omega`` as float64, checked: of ``fft.xp``, real, shape (3,) + ``fft.real_shape``
    (finiteness needs all ranks: :func:`slab_vorticity_statistics`)."""
    if array_namespace(omega) is not fft.xp:
        raise TypeError(f"omega is a {type(omega).__module__}.{type(omega).__name__}; "
                        f"expected an array of {fft.xp.__name__}, the SlabFFT's namespace.")
    if omega.dtype.kind not in "fiu":
        raise TypeError(f"omega has dtype {omega.dtype}; expected a real float64 field "
                        "(not its Fourier transform).")
    expected = (3,) + tuple(fft.real_shape)
    if fft.n < 4 or tuple(omega.shape) != expected:
        raise ValueError(f"omega has shape {tuple(omega.shape)}; expected {expected} (n ≥ 4):"
                         f" this rank's slab (x-planes {fft.x_planes}), component first.")
    return omega.astype(fft.xp.float64, copy=False)


def _component_modes(u, xp):
    """The half spectra (n, n, n//2 + 1) of the three components of u (n, n, n, 3)."""
    n = u.shape[0]
    return column_modes(u.reshape(n ** 3, 3), n, xp)


def _biot_savart_modes(xp, w_hat, kd):
    """û = i k × ω̂/|k|² (the k = 0 mode zero) of the three half spectra (or parts of
    them) ``w_hat`` with the derivative wavenumbers ``kd`` of the same modes."""
    k2 = kd[0] ** 2 + kd[1] ** 2 + kd[2] ** 2
    inv_k2 = xp.where(k2 > 0, 1.0 / xp.where(k2 > 0, k2, 1.0), 0.0)
    del k2
    u_hat = []
    for i in range(3):
        j, m = (i + 1) % 3, (i + 2) % 3
        u_hat.append((1j * inv_k2) * (kd[j] * w_hat[m] - kd[m] * w_hat[j]))
    return u_hat


def _gradient_sums(xp, u_hat, kd, n):
    """([⟨∂_j u_i ∂_j u_i⟩, ⟨(∇·u)²⟩] over the modes ``u_hat`` (three (n, n_y, n//2 + 1),
    derivative wavenumbers ``kd``), Parseval-weighted, 0-d device arrays; |û|² per mode)."""
    weight = half_spectrum_weight(n, xp) / float(n) ** 6
    k2 = kd[0] ** 2 + kd[1] ** 2 + kd[2] ** 2
    k_dot_u = kd[0] * u_hat[0] + kd[1] * u_hat[1] + kd[2] * u_hat[2]
    u2 = _abs2(u_hat[0]) + _abs2(u_hat[1]) + _abs2(u_hat[2])
    k2_u2 = k2 * u2
    div2 = _abs2(k_dot_u)
    del k_dot_u, k2

    def mean(a):                                  # Σ over the modes, Parseval-weighted
        return (a.sum(axis=(0, 1)) * weight).sum()
    return [mean(k2_u2), mean(div2)], u2


def _derivative_power_sums(u_hat, kd, inverse, reduce):
    """[reduce(d_i²), reduce(d_i³), reduce(d_i⁴) for i = 0, 1, 2], d_i = ∂u_i/∂x_i =
    ``inverse``(i k_i û_i) the real field (or slab) of the modes ``u_hat``."""
    out = []
    for i in range(3):
        d = inverse(1j * kd[i] * u_hat[i])
        d2 = d * d
        out += [reduce(d2), reduce(d2 * d), reduce(d2 * d2)]
        del d, d2
    return out


def _sums_and_spectrum(xp, u_hat, n, box):
    """(sums, k, E) of the whole half spectra ``u_hat`` (three arrays (n, n, n//2 + 1)),
    on their device: sums (13,) float64 = [⟨∂_j u_i ∂_j u_i⟩, ⟨(∇·u)²⟩, E = ½⟨|u|²⟩,
    Σ_{s≥1} E(k_s)/k_s dk, then ⟨d_i²⟩, ⟨d_i³⟩, ⟨d_i⁴⟩ for i = 0, 1, 2]; the spectrum of
    :func:`energy_spectrum`."""
    k0 = 2 * math.pi / box
    kd = wavenumbers(n, box, xp, derivative=True)
    sums, u2 = _gradient_sums(xp, u_hat, kd, n)   # ⟨∂_j u_i ∂_j u_i⟩, ⟨(∇·u)²⟩
    k, e = _spectrum_of_density(xp, (0.5 / float(n) ** 6) * u2, n, box)
    del u2
    sums += [e.sum() * k0, (e[1:] / k[1:]).sum() * k0]   # E, Σ_{s≥1} E(k_s)/k_s dk
    # ⟨d_i^p⟩, d_i = ∂u_i/∂x_i, p = 2, 3, 4
    sums += _derivative_power_sums(u_hat, kd, lambda a: irfft3(a, n, xp), lambda a: a.mean())
    return xp.stack([xp.asarray(v, dtype=xp.float64) for v in sums]), k, e


def _statistics(xp, u_hat, n, box, nu):
    """(stats, k, E) of :func:`flow_statistics` from the half spectra ``u_hat`` (three
    arrays (n, n, n//2 + 1), one per component of u): the sums stay on the device until
    one transfer."""
    sums, k, e = _sums_and_spectrum(xp, u_hat, n, box)
    return _statistics_from_sums([float(v) for v in to_host(sums)], n, box, nu), k, e


def _statistics_from_sums(sums, n, box, nu):
    """The dict of :func:`flow_statistics` from the 13 host floats ``sums`` laid out as
    in :func:`_sums_and_spectrum` (the box averages).  Pure host arithmetic."""
    gradient2, divergence2, energy, integral_sum, *moments = sums
    k0 = 2 * math.pi / box
    strain2 = 0.5 * (gradient2 + divergence2)                     # ⟨s_ij s_ij⟩
    enstrophy = gradient2 - divergence2                           # ⟨|ω|²⟩
    skewness, flatness = [], []
    for m2, m3, m4 in zip(moments[0::3], moments[1::3], moments[2::3]):
        if m2 <= _NO_GRADIENT * gradient2 / 3 or m2 == 0.0:
            continue
        skewness.append(m3 / m2 ** 1.5)
        flatness.append(m4 / m2 ** 2)

    dissipation = 2 * nu * strain2
    u_rms = math.sqrt(2 * energy / 3)
    inf = math.inf
    taylor = math.sqrt(15 * nu * u_rms ** 2 / dissipation) if dissipation > 0 else inf
    eta = (nu ** 3 / dissipation) ** 0.25 if dissipation > 0 else inf
    k_max = n / 3 * k0
    stats = {
        "energy": energy,
        "dissipation": dissipation,
        "enstrophy": enstrophy,
        "divergence_rms": math.sqrt(divergence2),
        "u_rms": u_rms,
        "integral_scale": (math.pi / (2 * u_rms ** 2) * integral_sum if energy > 0
                           else math.nan),
        "taylor_scale": taylor,
        "re_lambda": u_rms * taylor / nu if math.isfinite(taylor) else inf,
        "kolmogorov_eta": eta,
        "k_max": k_max,
        "k_max_eta": k_max * eta,
        "skewness": float(np.mean(skewness)) if skewness else math.nan,
        "flatness": float(np.mean(flatness)) if flatness else math.nan,
    }
    return stats
