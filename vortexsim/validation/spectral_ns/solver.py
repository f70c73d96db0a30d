r"""The pseudo-spectral Navier–Stokes solver (:class:`SpectralNS`: velocity form, 2/3-rule
dealiasing, Lawson RK4; the package docstring describes the method) and two exact initial
fields (:func:`taylor_green`, :func:`shear_wave`)."""
from __future__ import annotations

import math

import numpy as np

from vortexsim.output.lattice_field import lattice
from vortexsim.validation.records import to_host

__all__ = ["array_namespace", "SpectralNS", "taylor_green", "shear_wave"]


# -- the solver ------------------------------------------------------------------------
def array_namespace(device):
    """NumPy for ``"cpu"``, CuPy for ``"gpu"`` (an error, never a silent CPU run, when CuPy
    or a GPU is missing)."""
    if device == "cpu":
        return np
    if device != "gpu":
        raise ValueError(f"device is {device!r}; expected 'cpu' or 'gpu'.")
    try:
        import cupy as cp
        if cp.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as exc:  # ImportError, CUDARuntimeError: no usable GPU either way
        raise RuntimeError(f"--device gpu needs CuPy and a CUDA GPU ({exc}); "
                           "install cupy-cuda12x/13x or run with --device cpu.") from exc
    return cp


class SpectralNS:
    r"""Pseudo-spectral incompressible Navier–Stokes in [0, L)³ on the n³ lattice.

    Velocity form with the rotational nonlinear term u × ω, projection onto
    divergence-free fields and 2/3-rule dealiasing in Fourier space, Lawson's
    integrating-factor RK4 (viscous term exact); the module docstring states the scheme.

    Parameters
    ----------
    n : int ≥ 4, lattice points per axis (x_i = i L/n)
    nu : float ≥ 0, kinematic viscosity [L²/T]
    box : float > 0, the period L [L]
    xp : array namespace (numpy or cupy); every array of the solver lives there

    Attributes
    ----------
    u_hat : complex128 (3, n, n, n//2 + 1), ``xp.fft.rfftn`` of u over the axes (1, 2, 3)
        (unnormalized: û = Σ_x u e^{−ik·x}); always divergence-free and dealiased
    t : float, time [T]
    """

    def __init__(self, n, nu, box=2 * math.pi, xp=np):
        if not (isinstance(n, (int, np.integer)) and n >= 4):
            raise ValueError(f"n is {n!r}; expected an integer ≥ 4 (lattice points per axis).")
        if not (math.isfinite(nu) and nu >= 0):
            raise ValueError(f"nu is {nu!r}; expected a finite viscosity ≥ 0 [L²/T].")
        if not (math.isfinite(box) and box > 0):
            raise ValueError(f"box is {box!r}; expected a finite period L > 0.")
        self.n, self.nu, self.box, self.xp = int(n), float(nu), float(box), xp
        self.k0 = 2 * math.pi / self.box
        nh = self.n // 2 + 1
        m = np.fft.fftfreq(self.n, 1.0 / self.n)                  # integer wavenumbers
        mz = np.arange(nh, dtype=np.float64)
        mx3, my3, mz3 = m[:, None, None], m[None, :, None], mz[None, None, :]
        self.k = tuple(xp.asarray(a * self.k0) for a in (mx3, my3, mz3))   # broadcastable
        m2 = mx3 ** 2 + my3 ** 2 + mz3 ** 2                       # (n, n, nh)
        self.k2 = xp.asarray(m2 * self.k0 ** 2)
        self.inv_k2 = xp.asarray(np.where(m2 > 0, 1.0 / np.where(m2 > 0, m2, 1.0), 0.0)
                                 / self.k0 ** 2)
        cut = self.n / 3.0                                        # 2/3 rule: keep |m_i| < n/3
        keep = (np.abs(mx3) < cut) & (np.abs(my3) < cut) & (np.abs(mz3) < cut)
        self.keep = xp.asarray(keep.astype(np.float64))
        rhs_keep = keep.astype(np.float64)
        rhs_keep[0, 0, 0] = 0.0                                   # mean momentum conserved
        self.rhs_keep = xp.asarray(rhs_keep)
        # Parseval weights of the half spectrum: the planes m_z = 0 (and m_z = n/2 for even
        # n) stand for themselves, every other plane also for its conjugate
        weight = np.full(nh, 2.0)
        weight[0] = 1.0
        if self.n % 2 == 0:
            weight[-1] = 1.0
        self.weight = xp.asarray(weight[None, None, :])
        self.norm = 1.0 / float(self.n) ** 6                     # ⟨|u|²⟩ = Σ w|û|² / n⁶
        self.shell = xp.asarray(np.rint(np.sqrt(m2)).astype(np.int64).ravel())
        self.n_shells = int(np.rint(np.sqrt(m2)).max()) + 1
        self.u_hat = xp.zeros((3, self.n, self.n, nh), dtype=xp.complex128)
        self._uw_hat = xp.zeros((6, self.n, self.n, nh), dtype=xp.complex128)
        self._factors = {}
        self.t = 0.0

    # -- fields ---------------------------------------------------------------------
    def set_velocity(self, u, t=0.0):
        """Start from the lattice velocity ``u`` (3, n, n, n) [L/T] at time ``t``.

        The field is projected onto divergence-free fields and truncated to the kept modes
        (the 2/3 rule); both are orthogonal projections, so the energies they remove add up.
        Returns a dict: ``energy`` (E of ``u`` [L²/T²]), ``divergent_energy`` (removed by
        the projection), ``truncated_energy`` (removed by the cut), ``mean_velocity`` (the
        box mean of u, kept: the solver conserves it).
        """
        xp = self.xp
        shape = (3, self.n, self.n, self.n)
        if tuple(u.shape) != shape:
            raise ValueError(f"u has shape {tuple(u.shape)}; expected {shape} "
                             "([component, x, y, z] on the solver's lattice).")
        u = xp.asarray(u, dtype=xp.float64)
        if not bool(xp.isfinite(u).all()):
            raise ValueError("u has non-finite values; give a finite velocity field.")
        u_hat = xp.fft.rfftn(u, axes=(1, 2, 3))
        energy = self.energy(u_hat)
        u_hat = self.project(u_hat)
        energy_div_free = self.energy(u_hat)
        u_hat *= self.keep
        self.u_hat = u_hat
        self.t = float(t)
        mean = to_host(u_hat[:, 0, 0, 0].real) / self.n ** 3
        return dict(energy=energy, divergent_energy=energy - energy_div_free,
                    truncated_energy=energy_div_free - self.energy(u_hat),
                    mean_velocity=[float(c) for c in mean])

    def velocity(self):
        """The velocity on the lattice, (3, n, n, n) [L/T], an array of ``xp``."""
        n = self.n
        return self.xp.fft.irfftn(self.u_hat, s=(n, n, n), axes=(1, 2, 3))

    def project(self, u_hat):
        """P(k)·û: û − k (k·û)/|k|², the divergence-free part (k = 0 unchanged)."""
        kx, ky, kz = self.k
        div = (kx * u_hat[0] + ky * u_hat[1] + kz * u_hat[2]) * self.inv_k2
        return self.xp.stack([u_hat[0] - kx * div, u_hat[1] - ky * div, u_hat[2] - kz * div])

    def rhs(self, u_hat):
        """N(û) = P(k)·F[u × ω], dealiased (2/3 rule), N(0) = 0."""
        xp, n = self.xp, self.n
        kx, ky, kz = self.k
        uw_hat = self._uw_hat
        uw_hat[:3] = u_hat
        uw_hat[3] = 1j * (ky * u_hat[2] - kz * u_hat[1])          # ω̂ = i k × û
        uw_hat[4] = 1j * (kz * u_hat[0] - kx * u_hat[2])
        uw_hat[5] = 1j * (kx * u_hat[1] - ky * u_hat[0])
        uw = xp.fft.irfftn(uw_hat, s=(n, n, n), axes=(1, 2, 3))
        u, w = uw[:3], uw[3:]
        cross = xp.stack([u[1] * w[2] - u[2] * w[1],
                          u[2] * w[0] - u[0] * w[2],
                          u[0] * w[1] - u[1] * w[0]])
        cross_hat = self.project(xp.fft.rfftn(cross, axes=(1, 2, 3)))
        cross_hat *= self.rhs_keep
        return cross_hat

    def _integrating_factors(self, dt):
        """(e^{−ν|k|²dt/2}, e^{−ν|k|²dt}), cached for the two latest step sizes."""
        key = float(dt)
        if key not in self._factors:
            if len(self._factors) >= 2:
                self._factors.pop(next(iter(self._factors)))
            half = self.xp.exp(-0.5 * self.nu * key * self.k2)
            self._factors[key] = (half, half * half)
        return self._factors[key]

    def step(self, dt):
        """One Lawson RK4 step of size ``dt`` [T] (module docstring), t += dt."""
        if not (math.isfinite(dt) and dt > 0):
            raise ValueError(f"dt is {dt!r}; expected a finite step > 0.")
        e_half, e_full = self._integrating_factors(dt)
        u0 = self.u_hat
        a = self.rhs(u0)
        b = self.rhs(e_half * (u0 + (0.5 * dt) * a))
        c = self.rhs(e_half * u0 + (0.5 * dt) * b)
        d = self.rhs(e_full * u0 + dt * (e_half * c))
        self.u_hat = e_full * (u0 + (dt / 6.0) * a) + e_half * ((dt / 3.0) * (b + c)) \
            + (dt / 6.0) * d
        self.t += dt

    # -- diagnostics (host floats) ---------------------------------------------------
    def energy(self, u_hat=None):
        """E = ½⟨|u|²⟩ [L²/T²] (Parseval)."""
        u_hat = self.u_hat if u_hat is None else u_hat
        return 0.5 * self.norm * float((self.weight * _abs2(u_hat).sum(axis=0)).sum())

    def dissipation(self):
        """ε = ν⟨|ω|²⟩ = ν Σ |k|²|û|² (û divergence-free) [L²/T³]."""
        return self.nu * self.norm * float(
            (self.weight * self.k2 * _abs2(self.u_hat).sum(axis=0)).sum())

    def divergence(self):
        """max_k |k·û(k)| / (k₀ max_k |û(k)|): 0 up to round-off (dimensionless)."""
        kx, ky, kz = self.k
        div = self.xp.abs(kx * self.u_hat[0] + ky * self.u_hat[1] + kz * self.u_hat[2])
        return float(div.max()) / (self.k0 * float(self.xp.abs(self.u_hat).max()))

    def spectrum(self):
        """(k [1/L], E(k) [L³/T²]) host arrays: shells |k| ∈ [(s − ½)k₀, (s + ½)k₀),
        s = 0, 1, ...; Σ_s E(k_s) k₀ = E."""
        xp = self.xp
        density = (0.5 * self.norm) * (self.weight * _abs2(self.u_hat).sum(axis=0))
        shells = xp.bincount(self.shell, weights=density.ravel(), minlength=self.n_shells)
        return (np.arange(self.n_shells) * self.k0, to_host(shells) / self.k0)

    def lattice_diagnostics(self):
        """(max|u|, max(|u| + |v| + |w|)) over the lattice [L/T]."""
        xp = self.xp
        u = self.velocity()
        return (float(xp.sqrt((u * u).sum(axis=0)).max()),
                float(xp.abs(u).sum(axis=0).max()))


def _abs2(z):
    """|z|² of a complex array, without the square root."""
    return z.real * z.real + z.imag * z.imag


# -- initial fields ---------------------------------------------------------------------
def taylor_green(n, box=2 * math.pi, amplitude=1.0):
    """u = A (sin k₀x cos k₀y cos k₀z, −cos k₀x sin k₀y cos k₀z, 0), k₀ = 2π/L, on the n³
    lattice: (3, n, n, n) host float64 [L/T]; E = A²/8."""
    s = lattice(n, box) * (2 * math.pi / box)
    sx, cx = np.sin(s)[:, None, None], np.cos(s)[:, None, None]
    sy, cy = np.sin(s)[None, :, None], np.cos(s)[None, :, None]
    cz = np.cos(s)[None, None, :]
    u = np.zeros((3, n, n, n))
    u[0] = amplitude * sx * cy * cz
    u[1] = -amplitude * cx * sy * cz
    return u


def shear_wave(n, box=2 * math.pi, amplitude=1.0):
    """u = (A sin k₀y, 0, 0) on the n³ lattice: (3, n, n, n) host float64 [L/T]; an exact
    Navier–Stokes solution decaying as e^{−νk₀²t} (E = A²/4 e^{−2νk₀²t})."""
    s = lattice(n, box) * (2 * math.pi / box)
    u = np.zeros((3, n, n, n))
    u[0] = amplitude * np.sin(s)[None, :, None]
    return u
