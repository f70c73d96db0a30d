r"""Fourier modes of fields on the periodic n³ lattice, shared by everything that works
on the remeshing lattice in Fourier space (the particle-mesh solve, the solenoidal
projection, the lattice diffusion).

Node (i, j, k) at (i, j, k) h, h = L/n, row (i·n + j)·n + k.  A field is transformed one
component at a time with the real FFT of its three axes (half spectrum, shape
(n, n, n//2 + 1)), so that every user runs the same two transforms of one shape: on CuPy
one cuFFT plan each from CuPy's plan cache, on NumPy scipy.fft on
:func:`vortexsim.backend.threads.cpu_threads` threads.  Wave numbers are three broadcast
vectors, never an (n, n, n) array.
"""
from __future__ import annotations

import numpy as np

from ..backend.threads import cpu_threads

__all__ = ["wavenumbers", "half_spectrum_weight", "rfft3", "irfft3", "column_modes",
           "columns_from_modes"]


def wavenumbers(n, box, xp, derivative=False):
    """(kx (n, 1, 1), ky (1, n, 1), kz (1, 1, n//2 + 1)) [1/L], 2π/L times the integers of
    the half spectrum's axes; with ``derivative`` the Nyquist planes (|κ| = n/2, even n)
    are zero: a real field has no derivative there."""
    k1 = np.fft.fftfreq(n, 1.0 / n)
    kz = np.arange(n // 2 + 1, dtype=np.float64)
    if derivative and n % 2 == 0:
        k1[n // 2] = 0.0
        kz[n // 2] = 0.0
    scale = 2.0 * np.pi / float(box)
    k1, kz = xp.asarray(scale * k1), xp.asarray(scale * kz)
    return k1[:, None, None], k1[None, :, None], kz[None, None, :]


def half_spectrum_weight(n, xp=np):
    """The Parseval weight of each plane κ_z of the half spectrum, (n//2 + 1,): 2 for
    0 < κ_z < n/2 (the plane and its conjugate −κ_z), 1 for κ_z = 0 and, on an even
    lattice, the Nyquist plane (each its own conjugate)."""
    weight = np.full(n // 2 + 1, 2.0)
    weight[0] = 1.0
    if n % 2 == 0:
        weight[-1] = 1.0
    return xp.asarray(weight)


#: the alignment [B] of cuFFT's real-to-complex input: a double-complex element
CUFFT_ALIGNMENT = 16


def fft_input(field, xp):
    """``field`` ready for a real-to-complex transform: on CuPy a copy where its start is
    not aligned to :data:`CUFFT_ALIGNMENT` bytes (cuFFT then fails with
    CUFFT_INVALID_VALUE), e.g. the second of three components (c, m) of an odd count m
    of float64; else ``field`` itself."""
    if xp is not np and field.data.ptr % CUFFT_ALIGNMENT:
        return field.copy()
    return field


#: lattice points below which the host's FFTs take one thread: a forward and inverse
#: pair took 0.19–0.30 ms on one thread and 0.32–0.41 on two at 24³, 0.45 and 0.54 at
#: 32³; at 64³ two threads win (4.0–4.8 ms against 5.7–6.0; 2-core CI machine)
FFT_ONE_THREAD_BELOW = 1 << 16


def fft_workers(n):
    """Threads of SciPy's transforms of an n³ lattice (:data:`FFT_ONE_THREAD_BELOW`)."""
    return 1 if n ** 3 < FFT_ONE_THREAD_BELOW else cpu_threads()


def rfft3(field, xp):
    """The half spectrum (n, n, n//2 + 1) of a real (n, n, n) field."""
    if xp is np:
        import scipy.fft  # noqa: PLC0415
        return scipy.fft.rfftn(field, workers=fft_workers(field.shape[0]))
    return xp.fft.rfftn(fft_input(field, xp))


def irfft3(modes, n, xp):
    """The real (n, n, n) field of a half spectrum (n, n, n//2 + 1)."""
    if xp is np:
        import scipy.fft  # noqa: PLC0415
        return scipy.fft.irfftn(modes, s=(n, n, n), workers=fft_workers(n))
    return xp.fft.irfftn(modes, s=(n, n, n))


def column_modes(values, n, xp):
    """The half spectra of the columns of ``values`` (n³, C) (rows in lattice order): a
    list of C arrays (n, n, n//2 + 1)."""
    return [rfft3(xp.ascontiguousarray(values[:, c]).reshape(n, n, n), xp)
            for c in range(values.shape[1])]


def columns_from_modes(modes, n, dtype, xp):
    """(n³, C) of ``dtype`` from C half spectra (the inverse of :func:`column_modes`)."""
    out = xp.empty((n ** 3, len(modes)), dtype=dtype)
    for c, m in enumerate(modes):
        out[:, c] = irfft3(m, n, xp).reshape(n ** 3)
    return out
