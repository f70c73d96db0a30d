r"""The solenoidal projection, the exact lattice diffusion and the mean of the lattice
strengths of the periodic box, on the n³ lattice split into x-slabs over the ranks of a
run.

Layout.  Rank r owns the x-planes [i0, i1) = ``fft.x_planes`` of the lattice
(:class:`vortexsim.geometry.slab.SlabFFT`, :class:`vortexsim.geometry.slab.Slabs`), and
its lattice strengths α [L³/T] are the rows [i0 n², i1 n²) of the whole (n³, 3) array in
remesh order (node (i, j, k) in row (i·n + j)·n + k, :mod:`vortexsim.geometry.remesh`): an
array (n_x n², 3) whose columns, each reshaped (n_x, n, n), are the real slabs that
:meth:`SlabFFT.forward` transforms.  Its part of the half spectra is the κ_y planes
[j0, j1) = ``fft.y_planes``, (n, n_y, n//2 + 1).

* :func:`project_solenoidal_slab`: this rank's rows of
  :func:`vortexsim.physics.projection.project_solenoidal` of the whole lattice,

      α̂(k) ← α̂(k) − κ (κ·α̂(k)) / |κ|²   (κ ≠ 0, Nyquist components of κ zero),
      α̂(0) ← 0,

  the κ = 0 mode living on the rank whose κ_y planes start at 0 (rank 0), at [0, 0, 0].
* :func:`diffuse_slab`: this rank's rows of
  :func:`vortexsim.physics.lattice_viscosity.diffuse_lattice`, α̂(k) e^{−ν|k|²τ}.
* :func:`slab_column_mean`: the whole lattice's mean of the three columns, the slab
  counterpart of ``out.mean(axis=0)`` in
  :meth:`vortexsim.physics.terms.LatticeDiffusion._diffuse` (the same bits on every rank).

Each rank's result agrees with the same rows of the one-process function to round-off
(the transforms are the same operations in another order, :mod:`vortexsim.geometry.slab`).
Every function is collective: all ranks call it together, with the same n, box, ν and τ.

Cost per call and rank: the projection and the diffusion transform each of the three
components once forward and once back (:meth:`SlabFFT.forward`, :meth:`SlabFFT.inverse`,
one alltoall each: six alltoalls in all), O(n_x n² log n) of local FFTs; the mean is one
``allreduce_sum`` of three numbers.  NumPy or CuPy by the arrays' module (the one of
``fft``); nothing goes through the host but what the communicator itself sends.
"""
from __future__ import annotations

import math

from ..backend import array_namespace
from ..geometry.slab import Slabs

__all__ = ["diffuse_slab", "project_solenoidal_slab", "slab_column_mean"]


def _check_rows(alpha, n, rank, width):
    """ValueError unless ``alpha`` is the (width n², 3) rows of rank ``rank``'s slab."""
    rows = width * n * n
    if alpha.ndim != 2 or tuple(alpha.shape) != (rows, 3):
        raise ValueError(f"lattice strengths must have shape ({rows}, 3) on rank {rank} "
                         f"(its {width} x-plane(s) of the n = {n} lattice, n_x·n² rows of "
                         f"the periodic remeshing's n³ nodes), got {tuple(alpha.shape)}.")


def _checked(alpha, fft):
    """The array module of ``alpha``, after checking it against ``fft``'s (TypeError) and
    its shape against this rank's slab (ValueError)."""
    xp = array_namespace(alpha)
    if xp is not fft.xp:
        raise TypeError(f"the lattice strengths are {xp.__name__} arrays but the slab FFT "
                        f"works on {fft.xp.__name__} arrays; build SlabFFT with the "
                        "strengths' array module.")
    _check_rows(alpha, fft.n, fft.rank, fft.real_shape[0])
    return xp


def _slab_modes(alpha, fft, xp):
    """This rank's part (n, n_y, n//2 + 1) of the half spectra of the three columns of the
    slab's strengths ``alpha`` (n_x n², 3).  Collective (three forward transforms)."""
    return [fft.forward(xp.ascontiguousarray(alpha[:, c]).reshape(fft.real_shape))
            for c in range(3)]


def _slab_columns(modes, fft, dtype, xp):
    """The slab's strengths (n_x n², 3) of ``dtype`` from this rank's parts of the three
    half spectra (the inverse of :func:`_slab_modes`).  Collective."""
    rows = fft.real_shape[0] * fft.n * fft.n
    out = xp.empty((rows, len(modes)), dtype=dtype)
    for c in range(len(modes)):
        out[:, c] = fft.inverse(modes[c]).reshape(rows)
        modes[c] = None                                     # free each spectrum once used
    return out


def project_solenoidal_slab(alpha, fft):
    """This rank's rows (n_x n², 3) [L³/T] of the lattice strengths (remesh order)
    projected onto divergence-free fields with zero sum: the same rows of
    :func:`vortexsim.physics.projection.project_solenoidal` of the whole lattice, to
    round-off.  ``fft``: the :class:`vortexsim.geometry.slab.SlabFFT` of the run's
    lattice and communicator.  A new array of ``alpha``'s shape, dtype and device.
    Collective: one forward and one inverse slab transform per component."""
    xp = _checked(alpha, fft)
    modes = _slab_modes(alpha, fft, xp)
    kk = fft.wavenumbers(2 * math.pi, derivative=True)      # the integers κ, Nyquist zero
    k2 = kk[0] ** 2 + kk[1] ** 2 + kk[2] ** 2
    k2 = xp.where(k2 == 0, 1.0, k2)          # κ = 0 and the modes whose κ is all Nyquist
    div = (kk[0] * modes[0] + kk[1] * modes[1] + kk[2] * modes[2]) / k2
    owns_mean = fft.y_planes[0] == 0          # κ_y = 0 here: κ = 0 at [0, 0, 0]
    for c in range(3):
        modes[c] -= kk[c] * div
        if owns_mean:
            modes[c][0, 0, 0] = 0.0
    del div, k2
    return _slab_columns(modes, fft, alpha.dtype, xp)


def diffuse_slab(alpha, fft, box, nu, tau):
    """This rank's rows (n_x n², 3) [L³/T] of the lattice strengths (remesh order) after
    diffusing for a time ``tau`` [T] with viscosity ``nu`` [L²/T] in the periodic box of
    edge ``box`` [L]: α̂(k) e^{−ν|k|²τ} for every lattice mode, the same rows of
    :func:`vortexsim.physics.lattice_viscosity.diffuse_lattice` of the whole lattice to
    round-off.  ``fft``: the :class:`vortexsim.geometry.slab.SlabFFT` of the run's
    lattice and communicator.  A new array of ``alpha``'s shape, dtype and device
    (``alpha`` itself when ν τ = 0, with no communication: every rank passes the same ν
    and τ).  Collective: one forward and one inverse slab transform per component."""
    xp = _checked(alpha, fft)
    if not (math.isfinite(nu) and nu >= 0 and math.isfinite(tau) and tau >= 0):
        raise ValueError(f"nu = {nu!r} and tau = {tau!r} must be finite and >= 0.")
    if not (math.isfinite(box) and box > 0):
        raise ValueError(f"box = {box!r} must be a finite edge length > 0.")
    if nu * tau == 0.0:
        return alpha
    modes = _slab_modes(alpha, fft, xp)
    kx, ky, kz = fft.wavenumbers(box)
    damping = xp.exp(-(nu * tau) * (kx ** 2 + ky ** 2 + kz ** 2))
    for m in modes:
        m *= damping
    del damping
    return _slab_columns(modes, fft, alpha.dtype, xp)


def slab_column_mean(alpha, n, communicator):
    """The mean over all n³ rows of the whole lattice of the three columns of the lattice
    strengths [L³/T], (3,) of ``alpha``'s dtype and device, from this rank's rows
    ``alpha`` (n_x n², 3) of the x-slab split of the n-node lattice over
    ``communicator``'s ranks: the local column sums added over the ranks by one
    ``allreduce_sum`` (three numbers, in rank order), divided by n³: the same bits on
    every rank.  The slab counterpart of ``alpha.mean(axis=0)`` on the whole lattice
    (equal to round-off; ``out -= slab_column_mean(out, n, comm)`` takes Σα out as
    :class:`vortexsim.physics.terms.LatticeDiffusion` does).  Collective: one small
    allreduce."""
    n = int(n)
    slabs = Slabs(n, int(communicator.size))
    rank = int(communicator.rank)
    _check_rows(alpha, n, rank, slabs.width(rank))
    total = communicator.allreduce_sum(alpha.sum(axis=0))
    return total / n ** 3
