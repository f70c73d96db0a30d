r"""The particle-mesh (vortex-in-cell) velocity of the periodic box (``physics.md``,
"Particle-mesh (vortex-in-cell) velocity in the periodic box").

Each evaluation, on the box's n³ lattice x_j = j h, h = L/n:

1. P2M: ω_j = Σ_p α_p W(x_j − x_p) / h³ with the remeshing kernel W (M4′), the box
   periodic (deterministic, no float atomics);
2. in Fourier space (real FFTs of the three components), ψ̂ = G_σ(k) ω̂ with the blob's
   regularised Green's function G_σ(k) = ζ̂_σ(k)/|k|² (0 at k = 0: the box's mean
   velocity is zero), û = i k × ψ̂ and ∂_b u_a ↔ i k_b û_a: the gradient spectrally, exact
   for the mesh field (a finite difference of the same order would cost as many
   transforms and add its own error); the modes of |k_i| = n/2 (Nyquist) are dropped
   from the derivatives, whose real part they cannot carry;
3. M2P: u and ∇u at the targets by the same W (the adjoint of P2M), 64 nodes each.

On CuPy, P2M and M2P are the fused gathers of :mod:`vortexsim.geometry.m4_gpu` (one thread
per node, one per target; no atomics) and the transforms cuFFT's (CuPy's plan cache keeps
one plan per shape); on NumPy, sparse weight matrices (:mod:`vortexsim.geometry.m4_cpu`)
and scipy.fft on the process's cores.  Both are deterministic: the same input gives the
same bits (the input's order enters the sums).

Elements on the lattice nodes (after a remeshing) go through P2M exactly, and a node's
M2P is the node's value, so there the solve is the lattice's own Fourier sum of the
blobs, truncated to the lattice's modes: for a field of one mode (Taylor–Green) exactly
ζ̂_σ(k) times the exact velocity.  Off the nodes, P2M and M2P each smooth a mode k by
about 1 − O((kh)²) (M4′ reproduces quadratics).

Cost: six real FFTs of n³ for u, fifteen with ∇u (3 forward, 3 + 9 inverse), P2M and
M2P O(64 N).  Memory per lattice point, float64: ω 24 B (freed once transformed), the
half spectra of ψ̂ and û 48 B, three lattice fields at a time 24 B (u, then each row of
∇u, interpolated before the next is made) and one derivative's spectrum 8 B, the Green's
function 4 B (the wave numbers are three 1-D vectors); P2M's sort 64 B per particle.
"""
from __future__ import annotations

import numpy as np

from ..backend import array_namespace
from ..geometry.lattice_modes import half_spectrum_weight, irfft3, rfft3, wavenumbers
from ..geometry.periodic import periodic_nodes
from ..kernels.cutoff import gaussian_blob_transform
from .spectral import mode_sums

__all__ = ["MeshSolve", "green_function", "curl_spectra", "velocity_spectra", "velocity_at",
           "velocity_on_nodes"]


def green_function(k, sigma, order, xp):
    """The blob's regularised Green's function G_σ(k) = ζ̂_σ(k)/|k|² [L²] on the wave
    numbers ``k`` = (kx, ky, kz) [1/L] (arrays that broadcast: the half spectrum of
    :func:`vortexsim.geometry.lattice_modes.wavenumbers`, or a rank's part of it,
    :meth:`vortexsim.geometry.slab.SlabFFT.wavenumbers`), 0 at k = 0 (the box's mean
    velocity is zero); ζ̂_σ the Fourier transform of the Gaussian blob of ``order`` 2, 4 or
    6 (:func:`vortexsim.kernels.cutoff.gaussian_blob_transform`).  A float64 array of the
    broadcast shape on ``xp``; each mode's value depends on its k alone (the same bits
    on the whole spectrum and on any part of it)."""
    kx, ky, kz = k
    k2 = kx ** 2 + ky ** 2 + kz ** 2
    zero = k2 == 0
    k2[zero] = 1.0
    green = gaussian_blob_transform(0.5 * sigma ** 2 * k2, order, xp) / k2
    green[zero] = 0.0
    return green


def curl_spectra(k, psi):
    """û = i k × ψ̂: the three spectra of the velocity [L/T] (on the modes of ``psi``)
    from those of the vector potential ``psi`` [L²/T], ``k`` = (kx, ky, kz) [1/L]
    broadcasting against them (the Nyquist planes zeroed where the result is
    differentiated again: :func:`vortexsim.geometry.lattice_modes.wavenumbers`'s
    ``derivative``)."""
    kx, ky, kz = k
    return [1j * (ky * psi[2] - kz * psi[1]),
            1j * (kz * psi[0] - kx * psi[2]),
            1j * (kx * psi[1] - ky * psi[0])]


def velocity_spectra(omega, green, k, forward):
    """û of the lattice vorticity ``omega`` (3, …) [1/T]: each component's spectrum
    ``forward(omega[c])`` (the whole lattice's real FFT, or a rank's part of it through
    the slab transpose), ψ̂ = G_σ ω̂ in place (``green``: :func:`green_function` on the
    same modes), û = i k × ψ̂ (:func:`curl_spectra`); three complex arrays."""
    psi = [forward(omega[c]) for c in range(3)]
    for c in range(3):
        psi[c] *= green
    return curl_spectra(k, psi)


def velocity_at(solve, u_hat, targets, gradient, weights=None):
    """u (M, 3) [L/T] and ∇u (M, 3, 3) [1/T] (None without ``gradient``) at ``targets``
    (M, 3) [L] from the spectra ``u_hat`` of ``solve`` (a :class:`MeshSolve` or a
    :class:`vortexsim.summation.slab_mesh.SlabMeshSolve`: its ``velocity_field``,
    ``gradient_row`` and ``m2p``), three lattice fields at a time (u, then one row of
    ∇u after another, each interpolated before the next is made); ``weights``: the
    CPU's sparse weights of ``targets`` for ``solve.m2p``."""
    u = solve.m2p(solve.velocity_field(u_hat), targets, weights=weights)
    if not gradient:
        return u, None
    grad = solve.xp.empty((targets.shape[0], 3, 3), dtype=solve.xp.float64)
    for a in range(3):
        solve.m2p(solve.gradient_row(u_hat, a), targets, out=grad[:, a, :], weights=weights)
    return u, grad


def velocity_on_nodes(solve, u_hat):
    """u (m, 3) [L/T] and ∇u (m, 3, 3) [1/T] at the m lattice nodes of ``solve``'s fields
    (:class:`MeshSolve`: all n³; :class:`vortexsim.summation.slab_mesh.SlabMeshSolve`:
    the rank's slab), rows in remesh order, from its spectra ``u_hat``: no M2P, three
    lattice fields at a time."""
    u = solve.xp.ascontiguousarray(solve.velocity_field(u_hat).reshape(3, -1).T)
    grad = solve.xp.empty((u.shape[0], 3, 3), dtype=solve.xp.float64)
    for a in range(3):
        grad[:, a, :] = solve.gradient_row(u_hat, a).reshape(3, -1).T
    return u, grad


class MeshSolve:
    """u and ∇u of blobs of core σ in the periodic box [0, L)³ through its n³ lattice.

    Parameters
    ----------
    box : float [L], the edge L
    n : int, lattice nodes per side (h = L/n, n ≥ 4)
    sigma : float [L], the blobs' core
    order : 2, 4 or 6, the Gaussian kernel's order (gaussian, gaussian4, gaussian6)
    xp : numpy or cupy, where the lattice lives
    """

    def __init__(self, box, n, sigma, order=2, xp=np):
        self.box, self.n, self.sigma, self.order, self.xp = float(box), int(n), \
            float(sigma), int(order), xp
        self.h = self.box / periodic_nodes(self.box, self.box / self.n)
        self.green = green_function(wavenumbers(self.n, self.box, xp), self.sigma,
                                    self.order, xp)
        # derivatives: the Nyquist planes (|k_i| = n/2 on an even lattice) carry no real
        # derivative; they are left out of i k
        self.k = list(wavenumbers(self.n, self.box, xp, derivative=True))

    def p2m(self, x, alpha, weights=None):
        """ω on the lattice, (3, n, n, n) [1/T], node (i, j, k) at (i, j, k) h;
        ``weights``: the CPU's :func:`vortexsim.geometry.m4_cpu.periodic_weights` of ``x``."""
        if self.xp is np:
            from ..geometry import m4_cpu  # noqa: PLC0415
            return m4_cpu.periodic_p2m(x, alpha, self.n, self.h, scale=1.0 / self.h ** 3,
                                       component_major=True, weights=weights)
        from ..geometry import m4_gpu  # noqa: PLC0415
        return m4_gpu.periodic_p2m(x, alpha, self.n, self.h, scale=1.0 / self.h ** 3,
                                   component_major=True)

    def spectra(self, omega):
        """û (three half spectra (n, n, n//2 + 1)) of the lattice vorticity ``omega``
        (3, n, n, n) [1/T]: û = i k × ψ̂, ψ̂ = G_σ ω̂."""
        return velocity_spectra(omega, self.green, self.k,
                                lambda field: rfft3(field, self.xp))

    def velocity_field(self, u_hat):
        """u on the lattice, (3, n, n, n) [L/T], from :meth:`spectra`."""
        return self.xp.stack([irfft3(u_hat[a], self.n, self.xp) for a in range(3)])

    def gradient_row(self, u_hat, a):
        """∂u_a/∂x_b, b = 0, 1, 2, on the lattice, (3, n, n, n) [1/T], from :meth:`spectra`."""
        return self.xp.stack([irfft3(1j * self.k[b] * u_hat[a], self.n, self.xp)
                              for b in range(3)])

    def m2p(self, fields, points, out=None, weights=None):
        """Three lattice fields (3, n, n, n) at ``points`` (M, 3) [L] by M4′ (each point's
        64 nodes in a fixed order): into ``out`` (M, 3) (rows may be strided), returned;
        ``weights``: the CPU's :func:`vortexsim.geometry.m4_cpu.periodic_weights` of
        ``points``."""
        if self.xp is np:
            from ..geometry import m4_cpu  # noqa: PLC0415
            return m4_cpu.periodic_m2p(fields, points, self.n, self.h, out=out,
                                       weights=weights)
        from ..geometry import m4_gpu  # noqa: PLC0415
        return m4_gpu.periodic_m2p(fields, points, self.n, self.h, out=out)

    def evaluate(self, x, alpha, targets=None, gradient=True):
        """u (M, 3) [L/T] and ∇u (M, 3, 3) [1/T] (None without ``gradient``) at
        ``targets`` (M, 3) [L] (default: the elements ``x``) of the blobs ``x`` (N, 3) [L]
        with strengths ``alpha`` (N, 3) [L³/T]; float64 on the arrays' device.  The
        lattice holds three fields at a time (u, then one row of ∇u after another)."""
        xp = array_namespace(x, alpha)
        if xp is not self.xp:
            raise TypeError("the elements must live on the mesh solve's device.")
        targets = x if targets is None else targets
        weights = None
        if xp is np:                                    # the CPU's sparse weights, once
            from ..geometry import m4_cpu  # noqa: PLC0415
            weights = m4_cpu.periodic_weights(targets, self.n, self.h)
        omega = self.p2m(x, alpha, weights=weights if targets is x else None)
        u_hat = self.spectra(omega)
        del omega
        return velocity_at(self, u_hat, targets, gradient, weights)

    def field_sums(self, omega):
        """The seven quadratic field sums of
        :meth:`vortexsim.summation.spectral.SpectralSum.field_sums` (a dict of host floats)
        for the blobs whose lattice vorticity is ``omega`` (3, n, n, n) [1/T], over the
        lattice's modes (the series this solve sums): F(k) = h³ × the DFT of ω, the half
        spectrum with each mode of 0 < κ_z < n/2 counted twice."""
        xp, n = self.xp, self.n
        f = xp.stack([rfft3(omega[c], xp) for c in range(3)]) * self.h ** 3
        k = wavenumbers(n, self.box, xp)
        k2 = k[0] ** 2 + k[1] ** 2 + k[2] ** 2
        inv_k2 = xp.where(k2 > 0, 1.0 / xp.where(k2 > 0, k2, 1.0), 0.0)
        g1 = gaussian_blob_transform(0.5 * self.sigma ** 2 * k2, self.order, xp) / self.box ** 3
        # ψ̂/F = g1/|k|²: the solve's Green's function over L³
        return mode_sums(f, k, inv_k2, g1, self.box, self.green / self.box ** 3,
                         half_spectrum_weight(n, xp), xp)

    def on_nodes(self, omega):
        """u (n³, 3) and ∇u (n³, 3, 3) at the lattice nodes themselves (rows in remesh
        order) of the lattice vorticity ``omega`` (3, n, n, n) [1/T]: the solve without
        P2M and M2P, three lattice fields at a time."""
        return velocity_on_nodes(self, self.spectra(omega))
