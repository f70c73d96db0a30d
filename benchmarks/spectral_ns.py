r"""A pseudo-spectral reference solver of incompressible Navier–Stokes in the periodic box
(issue 16): the same flows as vortexsim's periodic runs, solved by another method, for
side-by-side comparisons of accuracy and time to solution.  A benchmark tool, not part of
the package (nothing in ``vortexsim/`` imports it).

What it solves
--------------
∂u/∂t = u × ω − ∇(p + ½|u|²) + ν ∇²u,   ∇·u = 0,   ω = ∇ × u,

in [0, L)³ (default L = 2π), periodic in x, y, z, on the n³ lattice x_i = i L/n
(i = 0..n−1, the same in y and z; arrays (3, n, n, n) indexed [component, x, y, z]).
Units are the flow's: L (length) and T (time); ν in L²/T.

Method
------
* **Velocity form, rotational nonlinear term.**  The state is û(k), the real FFT
  (``rfftn`` over the three space axes) of u on the lattice, k ∈ (2π/L) ℤ³.  The right-hand
  side is N(û) = P(k) · F[u × ω] with u and ω = F⁻¹[i k × û] on the lattice (one batched
  inverse transform of the 6 components, one forward transform of the 3 of u × ω), and
  P_ij = δ_ij − k_i k_j/|k|² the projection onto divergence-free fields, which also
  removes the pressure and ½|u|² gradients.  N(k = 0) = 0: the mean velocity is
  conserved (the box mean of u × ω vanishes for a divergence-free u).
* **2/3-rule dealiasing.**  Only modes with |m_x|, |m_y|, |m_z| < n/3 (m = k L/2π, integer
  wavenumbers) are kept: the nonlinear term is truncated there, and so is the initial field
  (``set_velocity``; the energy it removes is reported).  Products of kept modes then alias
  only onto removed ones, the spatial discretization is an exact Galerkin truncation, and
  it conserves energy: dE/dt = −ε exactly in the semi-discrete system.
* **Classic RK4 with an integrating factor** (Lawson's RK4): the viscous term is integrated
  exactly, with E_h = e^{−ν|k|²h},

      a = N(û_n),  b = N(E_{h/2}(û_n + h/2 a)),  c = N(E_{h/2} û_n + h/2 b),
      d = N(E_h û_n + h E_{h/2} c),
      û_{n+1} = E_h û_n + h/6 (E_h a + 2 E_{h/2} (b + c) + d).

  Chosen over an explicit viscous term because it has no viscous step limit and is exact
  for the linear (Stokes) part: a single Fourier mode whose nonlinear term vanishes (the
  shear wave u = (sin y, 0, 0)) decays as e^{−ν|k|²t} to round-off.  Fourth order in time
  for the nonlinear part.
* **Time step:** ``--dt`` fixed, or ``--cfl C``: dt = C h / max(|u| + |v| + |w|) (h = L/n),
  recomputed at each diagnostic row (every ``--every`` steps) from the velocity there, so
  that the step loop never copies to the host; with both, the smaller of the two.  The last
  step is shortened to land on ``--t-end``, and a step on each ``--spectrum-times`` entry.
  Neither given: ``--cfl 0.5`` (RK4's advective limit is about dt·max|u||k|_max ≤ 2.8, with
  |k|_max = (2π/L)·n/3 per axis: C ≲ 1.3 per axis).
* **Device:** NumPy FFT on the CPU, CuPy (cuFFT) on the GPU (``--device cpu|gpu``): the
  array namespace ``xp`` is chosen once; float64 and complex128 throughout.

Initial conditions (``--init``)
-------------------------------
``taylor-green``  u = (sin k₀x cos k₀y cos k₀z, −cos k₀x sin k₀y cos k₀z, 0), k₀ = 2π/L:
                  E₀ = 1/8, ε₀ = 6νk₀²E₀, Re = 1/(νk₀) (physics.md, "Analytic checks").
``shear-wave``    u = (sin k₀y, 0, 0): a steady-shape Navier–Stokes solution (its nonlinear
                  term is a gradient), E = ¼ e^{−2νk₀²t}.
PATH              a velocity field on the n³ lattice in the netCDF format below (n from the
                  file; ``--n`` may be left out, or must agree).

The velocity-field file (netCDF, read and written with xarray, engine netcdf4)
------------------------------------------------------------------------------
The format of :mod:`vortexsim.output.lattice_field` (its docstring is the reference;
``write_velocity_field`` and ``read_velocity_field`` are imported from there, so that a
``vortexsim run isotropic_turbulence`` writes its initial field, ``RUN/initial_field.nc``,
in it and ``--init RUN/initial_field.nc`` starts from exactly that field):

* dimensions ``x``, ``y``, ``z`` of size n each; coordinates x = i L/n (i = 0..n−1, the
  same in y and z), units ``L``, optional (when present they must be this lattice);
* velocity: either the three variables ``u``, ``v``, ``w`` with dims (x, y, z), or one
  variable ``velocity`` with dims (component, x, y, z) and component of size 3; float64,
  units ``L/T``; data in any dimension order (transposed by name);
* global attributes: ``box`` (L, the period; if absent, n times the x coordinate spacing,
  else ``--box``), optional ``time`` (T) and free text (``title``, ...);
* written by :func:`write_velocity_field` as ``u``, ``v``, ``w`` with coordinates,
  ``box``, ``time``, ``format = "periodic-velocity-field"``, ``format_version = 1``,
  ``Conventions = "CF-1.10"`` (files written before, without it, read the same).
The field should be divergence-free with zero mean (physics.md's periodic box); the solver
projects it onto divergence-free fields and truncates it to the kept modes, and reports
the energy each removes (warning above 1e-10 of E).  ``--save-field PATH`` writes the
final field in the same format (so that fields travel between the two codes both ways).

What it measures
----------------
Rows every ``--every`` steps (and at t = 0, t_end and each spectrum time): t, the kinetic
energy E = ½⟨|u|²⟩, the dissipation ε = ν⟨|ω|²⟩ (= 2ν⟨s_ij s_ij⟩ = −dE/dt of the viscous
term in a periodic box), both from the modes by Parseval, max|u| over the lattice, dt and
the CFL number; −dE/dt from the rows (``numpy.gradient``, as good as their spacing); and at
``--spectrum-times`` the shell-summed spectrum E(k), shells of width k₀ = 2π/L around
|k| = s k₀, normalized so that Σ_s E(k_s) k₀ = E (∫E(k)dk = E).  Wall time: the steps
alone (timed in blocks between rows; on the GPU synchronized at the rows only), per step
(total/steps and the median over blocks), the diagnostics, the whole run.  The peak of ε
and its time (parabola through the largest row and its neighbours).  With
``--statistics`` (ν > 0) every row also holds the turbulence statistics of
:func:`vortexsim.turbulence.flow_statistics`, the same definitions as vortexsim's
diagnostics: ``u_rms``, ``integral_scale``, ``taylor_scale``, ``re_lambda``,
``kolmogorov_eta``, ``k_max_eta``, ``skewness``, ``flatness`` (5 more FFTs of the velocity
per row, in the diagnostics' wall time); without it the output is as before.

Output: a netCDF file of the rows and spectra (``--nc``, default the JSON path with
``.nc``; variables with ``units`` and ``long_name``), a JSON summary (``--out``, default
``benchmarks/results/spectral_ns_DATE[_LABEL].json``, through ``_timing.write_json``), and a
table printed last.

Usage::

    python benchmarks/spectral_ns.py --n 64 --nu 1/1600 --t-end 10 --cfl 0.5 --every 5 \\
        --spectrum-times 0,9,10 --device cpu --out tg1600_n64.json     # Taylor–Green Re 1600
    python benchmarks/spectral_ns.py --init field.nc --nu 0.01 --t-end 2 --dt 0.01 \\
        --device gpu --save-field final.nc                             # from a file
    python benchmarks/spectral_ns.py --n 32 --nu 0.1 --t-end 0.1 --dt 0.01   # smoke test
    vortexsim run isotropic_turbulence --preset gpu --out runs/hit128       # issue 17:
    python benchmarks/spectral_ns.py --init runs/hit128/initial_field.nc --nu 0.0056 \
        --t-end 2 --dt 0.01 --every 5 --spectrum-times 0,1,2 --statistics --device gpu \
        --nc hit128_spectral.nc   # the same field; rows on vortexsim's (compare_isotropic.py)

Numbers: ``--nu``, ``--t-end``, ``--dt``, ``--box`` take fractions (``1/1600``) and
multiples of π (``2pi``).  Reference for Taylor–Green at Re = 1600: peak ε ≈ 0.0127 near
t ≈ 9 at converged (512³) resolution (Brachet et al. 1983; van Rees et al., J. Comput.
Phys. 230 (2011)); coarse grids miss it widely.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import time
from fractions import Fraction

import numpy as np

import _timing as T

if importlib.util.find_spec("vortexsim") is None:      # a checkout without pip install:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the velocity-field file (the format of the module docstring) lives in the package, so
# that vortexsim writes its initial fields in it (``initial_field.nc``)
from vortexsim.output.lattice_field import (FIELD_FORMAT, FIELD_FORMAT_VERSION,  # noqa: F401
                                            lattice, read_velocity_field, write_velocity_field)

#: the turbulence statistics of ``--statistics`` (keys of
#: :func:`vortexsim.turbulence.flow_statistics`): (units, long_name)
STATISTICS = {
    "u_rms": ("L/T", "rms velocity u' = sqrt(2E/3)"),
    "integral_scale": ("L", "integral scale pi/(2 u'^2) sum E(k)/k dk"),
    "taylor_scale": ("L", "Taylor micro-scale sqrt(15 nu u'^2/eps)"),
    "re_lambda": ("1", "Taylor-scale Reynolds number u' lambda/nu"),
    "kolmogorov_eta": ("L", "Kolmogorov scale (nu^3/eps)^(1/4)"),
    "k_max_eta": ("1", "k_max eta, k_max = (n/3) 2 pi/L (the 2/3 rule)"),
    "skewness": ("1", "longitudinal velocity-derivative skewness, mean over x, y, z"),
    "flatness": ("1", "longitudinal velocity-derivative flatness, mean over x, y, z"),
}
#: the removed part of an initial field (divergent or beyond the 2/3 cut) above which
#: the tool warns, relative to the field's energy
REMOVED_WARN = 1e-10


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
        mean = T.to_host(u_hat[:, 0, 0, 0].real) / self.n ** 3
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
        return (np.arange(self.n_shells) * self.k0, T.to_host(shells) / self.k0)

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


# -- the run ---------------------------------------------------------------------------
def parse_number(text):
    """A float from ``text``: decimals, fractions (``1/1600``) and multiples of π
    (``2pi``, ``2*pi``, ``pi/2``)."""
    s = str(text).strip().lower().replace(" ", "")
    factor = 1.0
    if "pi" in s:
        head, _, tail = s.partition("pi")
        head = head.rstrip("*") or "1"
        s = head + (tail if tail.startswith("/") else "")
        if tail and not tail.startswith("/"):
            raise argparse.ArgumentTypeError(f"cannot read {text!r} as a number")
        factor = math.pi
    try:
        return float(Fraction(s)) * factor
    except (ValueError, ZeroDivisionError) as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as a number "
                                         "(e.g. 0.01, 1/1600, 2pi)") from exc


def parse_times(text):
    """Comma-separated times: ``0,5,9.5`` → [0.0, 5.0, 9.5]."""
    return sorted(parse_number(s) for s in text.split(",") if s.strip())


def peak(t, y):
    """(t, y) of the largest value of the series, refined by the parabola through it and
    its neighbours when it is interior (else the row itself)."""
    t, y = np.asarray(t, float), np.asarray(y, float)
    i = int(np.argmax(y))
    if 0 < i < len(y) - 1:
        a, b, c = np.polyfit(t[i - 1:i + 2], y[i - 1:i + 2], 2)
        if a < 0:
            tv = -b / (2 * a)
            if t[i - 1] <= tv <= t[i + 1]:
                return float(tv), float(np.polyval((a, b, c), tv))
    return float(t[i]), float(y[i])


def run(solver, t_end, dt=None, cfl=None, every=10, spectrum_times=(), device="cpu",
        progress=True, statistics=False):
    """Advance ``solver`` (velocity already set) to ``t_end`` and record the diagnostics.

    Fixed ``dt``, or ``cfl`` (dt = C h/max(|u|+|v|+|w|) recomputed at each row, at most
    ``dt`` when both are given).  Rows every ``every`` steps, at t_end and at each of
    ``spectrum_times`` (steps shortened to land there; the spectrum is taken there).
    Returns a dict of lists (``t``, ``energy``, ``dissipation``, ``max_velocity``, ``dt``,
    ``cfl``, ``iteration``), ``spectra`` [(t, E(k))], ``k``, the wall times and ``error``
    (None, or what stopped the run: a non-finite row).  With ``statistics`` the rows also
    hold the turbulence statistics :data:`STATISTICS` of
    :func:`vortexsim.turbulence.flow_statistics` (FFTs of the lattice velocity at each row,
    counted in the diagnostics' wall time; needs ν > 0).
    """
    if dt is None and cfl is None:
        raise ValueError("give dt (fixed step) or cfl (step from the CFL number), or both.")
    if not (isinstance(every, int) and every >= 1):
        raise ValueError(f"every is {every!r}; expected an integer ≥ 1 (steps between rows).")
    if not (math.isfinite(t_end) and t_end >= solver.t):
        raise ValueError(f"t_end is {t_end!r}; expected a finite time ≥ t = {solver.t}.")
    h_lattice = solver.box / solver.n
    pending = sorted(s for s in spectrum_times if solver.t - 1e-12 <= s <= t_end + 1e-12)
    rows = {key: [] for key in ("t", "energy", "dissipation", "max_velocity", "dt", "cfl",
                                "iteration")}
    if statistics:
        if not solver.nu > 0:
            raise ValueError("statistics need a viscosity nu > 0 (Re_lambda, eta and the "
                             "Taylor scale divide by it).")
        from vortexsim.turbulence import flow_statistics  # noqa: PLC0415
        rows.update({key: [] for key in STATISTICS})
    spectra, k = [], None
    iteration, dt_now, error = 0, dt, None
    blocks, step_s, diag_s = [], 0.0, 0.0

    def record():
        nonlocal dt_now, k
        u_max, u_sum_max = solver.lattice_diagnostics()
        energy, eps = solver.energy(), solver.dissipation()
        if cfl is not None:
            dt_cfl = cfl * h_lattice / u_sum_max if u_sum_max > 0 else math.inf
            dt_now = min(dt_cfl, math.inf if dt is None else dt)
            if not math.isfinite(dt_now):            # a field at rest under --cfl alone
                dt_now = max(t_end - solver.t, 0.0)
        rows["t"].append(solver.t)
        rows["energy"].append(energy)
        rows["dissipation"].append(eps)
        rows["max_velocity"].append(u_max)
        rows["dt"].append(dt_now)
        rows["cfl"].append(dt_now * u_sum_max / h_lattice)
        rows["iteration"].append(iteration)
        if statistics:
            stats = flow_statistics(solver.xp.moveaxis(solver.velocity(), 0, -1), solver.box,
                                    solver.nu)
            for key in STATISTICS:
                rows[key].append(stats[key])
        while pending and abs(pending[0] - solver.t) <= 1e-9 * max(1.0, abs(solver.t)):
            k, ek = solver.spectrum()
            spectra.append((solver.t, ek))
            pending.pop(0)
        if progress:
            print(f"it {iteration:6d}  t {solver.t:9.4f}  dt {dt_now:.3e}  E {energy:.6e}  "
                  f"eps {eps:.6e}  max|u| {u_max:.4f}", flush=True)
        if not all(math.isfinite(v) for v in (energy, eps, u_max)):
            return f"non-finite row at t = {solver.t:g}, iteration {iteration} " \
                   f"(E = {energy}, eps = {eps}, max|u| = {u_max}, dt = {dt_now}): " \
                   "the run blew up; take a smaller --dt or --cfl."
        return None

    wall0 = time.perf_counter()
    error = record()
    T.synchronize(device)
    block0, block_steps = time.perf_counter(), 0
    while error is None and solver.t < t_end - 1e-12 * max(1.0, t_end):
        stop = min([t_end] + [s for s in pending if s > solver.t])
        h = dt_now
        land = solver.t + h >= stop - 1e-9 * h
        if land:
            h = stop - solver.t
        solver.step(h)
        if land:
            solver.t = stop                          # exactly, no rounding drift
        iteration += 1
        block_steps += 1
        if land or iteration % every == 0:
            T.synchronize(device)
            now = time.perf_counter()
            blocks.append((now - block0, block_steps))
            step_s += now - block0
            error = record()
            T.synchronize(device)
            block0, block_steps = time.perf_counter(), 0
            diag_s += block0 - now
    wall = time.perf_counter() - wall0
    t_rows = np.asarray(rows["t"])
    rows["minus_dEdt"] = (-np.gradient(np.asarray(rows["energy"]), t_rows)).tolist() \
        if len(t_rows) > 2 and np.all(np.diff(t_rows) > 0) else [math.nan] * len(t_rows)
    per_step = [s / m for s, m in blocks if m > 0]
    return dict(rows=rows, spectra=spectra, k=k, steps=iteration, error=error,
                wall_s=wall, step_s=step_s, diagnostics_s=diag_s,
                ms_per_step=1e3 * step_s / iteration if iteration else None,
                ms_per_step_median_block=1e3 * float(np.median(per_step)) if per_step else None,
                block_ms_per_step=[1e3 * v for v in per_step])


def write_netcdf(path, result, attrs):
    """The rows and spectra of ``result`` (from :func:`run`) as netCDF, with units."""
    import xarray as xr

    rows = result["rows"]
    variables = {
        "energy": ("L^2/T^2", "kinetic energy, box mean 1/2 <|u|^2>"),
        "dissipation": ("L^2/T^3", "dissipation nu <|omega|^2> = 2 nu <s_ij s_ij>"),
        "minus_dEdt": ("L^2/T^3", "-dE/dt from the rows (numpy.gradient)"),
        "max_velocity": ("L/T", "max |u| over the lattice"),
        "dt": ("T", "time step after this row"),
        "cfl": ("1", "dt max(|u|+|v|+|w|) / h after this row"),
        "iteration": ("1", "steps taken"),
        **{key: STATISTICS[key] for key in STATISTICS if key in rows},
    }
    data = {name: ("time", np.asarray(rows[name]), {"units": units, "long_name": long})
            for name, (units, long) in variables.items()}
    coords = {"time": ("time", np.asarray(rows["t"]), {"units": "T", "long_name": "time"})}
    if result["spectra"]:
        coords["spectrum_time"] = ("spectrum_time", np.array([s[0] for s in result["spectra"]]),
                                   {"units": "T", "long_name": "time of the spectrum"})
        coords["wavenumber"] = ("wavenumber", np.asarray(result["k"]),
                                {"units": "1/L", "long_name": "shell centre |k| = s 2 pi/L"})
        data["energy_spectrum"] = (("spectrum_time", "wavenumber"),
                                   np.stack([s[1] for s in result["spectra"]]),
                                   {"units": "L^3/T^2", "long_name":
                                    "shell-summed energy spectrum E(k), sum E(k) dk = E"})
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update({k: ("none" if v is None else v) for k, v in attrs.items()})
    encoding = {v: {"_FillValue": None} for v in list(ds.data_vars) + list(ds.coords)}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ds.to_netcdf(path, engine="netcdf4", format="NETCDF4", encoding=encoding)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=None,
                   help="lattice points per axis (default 64, or the file's)")
    p.add_argument("--nu", type=parse_number, required=True, help="viscosity [L²/T], e.g. 1/1600")
    p.add_argument("--t-end", type=parse_number, required=True, help="final time [T]")
    p.add_argument("--dt", type=parse_number, default=None, help="fixed step [T] (or the cap of --cfl)")
    p.add_argument("--cfl", type=float, default=None,
                   help="dt = CFL h/max(|u|+|v|+|w|), updated at each row (default 0.5 "
                        "without --dt)")
    p.add_argument("--box", type=parse_number, default=None, help="period L (default 2pi, or the file's)")
    p.add_argument("--init", default="taylor-green",
                   help="taylor-green, shear-wave, or a velocity-field file (.nc)")
    p.add_argument("--every", type=int, default=10, help="steps between diagnostic rows")
    p.add_argument("--spectrum-times", type=parse_times, default=[],
                   help="comma-separated times of E(k), e.g. 0,9,10")
    p.add_argument("--nc", default=None, help="netCDF of the rows (default: --out with .nc)")
    p.add_argument("--save-field", default=None, metavar="PATH",
                   help="write the final velocity in the velocity-field format")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --save-field")
    p.add_argument("--statistics", action="store_true",
                   help="add u_rms, integral/Taylor/Kolmogorov scales, Re_lambda, k_max eta, "
                        "skewness and flatness to every row (FFTs of the velocity; nu > 0)")
    p.add_argument("--quiet", action="store_true", help="no progress rows")
    T.add_common_options(p, "spectral_ns", device_default="cpu")
    args = p.parse_args(argv)
    if args.dt is None and args.cfl is None:
        args.cfl = 0.5
    if args.statistics and not args.nu > 0:
        p.error("--statistics needs --nu > 0 (Re_lambda, eta and the Taylor scale divide by it).")
    if args.save_field and os.path.exists(args.save_field) and not args.overwrite:
        p.error(f"{args.save_field} exists; add --overwrite to replace it.")

    t0 = 0.0
    if args.init in ("taylor-green", "shear-wave"):
        n = 64 if args.n is None else args.n
        box = 2 * math.pi if args.box is None else args.box
        build = taylor_green if args.init == "taylor-green" else shear_wave
        u0 = build(n, box)
    else:
        try:
            u0, box, t0, _ = read_velocity_field(args.init, box=args.box)
        except (FileNotFoundError, ValueError) as exc:
            p.error(str(exc))
        n = u0.shape[1]
        if args.n is not None and args.n != n:
            p.error(f"--n {args.n} but {args.init} holds a {n}^3 lattice; leave --n out.")
    xp = array_namespace(args.device)
    solver = SpectralNS(n, args.nu, box, xp)
    removed = solver.set_velocity(u0, t=t0)
    del u0
    for what in ("divergent_energy", "truncated_energy"):
        if removed[what] > REMOVED_WARN * max(removed["energy"], 1e-300):
            print(f"warning: the initial field lost {removed[what] / removed['energy']:.3e} of "
                  f"its energy as {what.replace('_', ' ')}", flush=True)
    if args.t_end < t0:
        p.error(f"--t-end {args.t_end:g} is before the field's time {t0:g}.")

    result = run(solver, args.t_end, dt=args.dt, cfl=args.cfl, every=args.every,
                 spectrum_times=args.spectrum_times, device=args.device,
                 progress=not args.quiet, statistics=args.statistics)
    rows = result["rows"]
    t_peak, eps_peak = peak(rows["t"], rows["dissipation"])
    json_path = T.out_path(args, "spectral_ns")
    nc_path = args.nc or os.path.splitext(json_path)[0] + ".nc"
    method = ("pseudo-spectral, velocity form, rotational u x omega, projection, 2/3-rule "
              "dealiasing, Lawson (integrating-factor) RK4, float64")
    params = dict(n=n, nu=args.nu, box=box, init=args.init, t_start=t0, t_end=args.t_end,
                  dt=args.dt, cfl=args.cfl, every=args.every, method=method,
                  **({"statistics": 1} if args.statistics else {}))
    write_netcdf(nc_path, result, dict(params, device=T.device_name(args.device),
                                       xp=xp.__name__))
    if args.save_field:
        write_velocity_field(args.save_field, solver.velocity(), box, solver.t,
                             overwrite=args.overwrite,
                             title=f"spectral_ns.py at t = {solver.t:g} from {args.init}")
    ms_step = result["ms_per_step"]
    what = f"spectral NS {n}^3 {args.init} nu {args.nu:g} to t = {solver.t:g}, RK4 step"
    payload = dict(params, netcdf=nc_path, initial_field=removed, steps=result["steps"],
                   error=result["error"], t_final=solver.t, wall_s=result["wall_s"],
                   step_s=result["step_s"], diagnostics_s=result["diagnostics_s"],
                   ms_per_step=ms_step, ms_per_step_median_block=result["ms_per_step_median_block"],
                   energy_final=rows["energy"][-1], dissipation_peak=eps_peak,
                   t_dissipation_peak=t_peak, divergence_final=solver.divergence(),
                   rows=rows, spectrum_times=[s[0] for s in result["spectra"]])
    summary = [dict(what=what, ms=ms_step, err_u=None, err_grad=None, target=None, met=None)]
    T.write_json(args, "spectral_ns", args.device, payload, summary)
    print(f"wrote {nc_path}")
    if result["error"]:
        print(f"error: {result['error']}")
    print(f"\n## spectral_ns on {T.device_name(args.device)}"
          + (f" ({args.label})" if args.label else "") + "\n")
    print("| n | nu | init | steps | t_end | ms/step (mean / median) | steps s | diagnostics s "
          "| total s | E(t_end) | peak eps | t(peak eps) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {n} | {args.nu:.6g} | {args.init} | {result['steps']} | {solver.t:g} | "
          f"{T.fmt(ms_step, '.2f')} / {T.fmt(result['ms_per_step_median_block'], '.2f')} | "
          f"{result['step_s']:.2f} | {result['diagnostics_s']:.2f} | {result['wall_s']:.2f} | "
          f"{rows['energy'][-1]:.6e} | {eps_peak:.6e} | {t_peak:.3f} |")
    return 1 if result["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
