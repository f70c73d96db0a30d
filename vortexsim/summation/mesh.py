r"""The particle-mesh (vortex-in-cell) velocity of the periodic box (``physics.md``,
"Particle-mesh (vortex-in-cell) velocity in the periodic box").

Each evaluation, on the box's n³ lattice x_j = j h, h = L/n:

1. P2M: ω_j = Σ_p α_p W(x_j − x_p) / h³ with the remeshing kernel W (M4′), the box
   periodic (:func:`vortexsim.geometry.remesh.remesh`: deterministic, no float atomics);
2. in Fourier space (real FFTs of the three components), ψ̂ = G_σ(k) ω̂ with the blob's
   regularised Green's function G_σ(k) = ζ̂_σ(k)/|k|² (0 at k = 0: the box's mean
   velocity is zero), û = i k × ψ̂ and ∂_b u_a ↔ i k_b û_a: the gradient spectrally, exact
   for the mesh field (a finite difference of the same order would cost as many
   transforms and add its own error); the modes of |k_i| = n/2 (Nyquist) are dropped
   from the derivatives, whose real part they cannot carry;
3. M2P: u and ∇u at the targets by the same W (the adjoint of P2M), 64 nodes each.

Elements on the lattice nodes (after a remeshing) go through P2M exactly, and a node's
M2P is the node's value, so there the solve is the lattice's own Fourier sum of the
blobs, truncated to the lattice's modes: for a field of one mode (Taylor–Green) exactly
ζ̂_σ(k) times the exact velocity.  Off the nodes, P2M and M2P each smooth a mode k by
about 1 − O((kh)²) (M4′ reproduces quadratics).

Cost: four real FFTs of n³ for u, twelve with ∇u (3 forward, 3 + 9 inverse), P2M and
M2P O(64 N).  Memory: the spectra and fields of 12 components, O(n³).
"""
from __future__ import annotations

import itertools

import numpy as np

from ..backend import array_namespace
from ..geometry.periodic import periodic_nodes
from ..geometry.remesh import STENCIL, m4prime_stencil, remesh
from ..kernels.cutoff import gaussian_blob_transform

__all__ = ["MeshSolve"]


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
        k1 = 2 * np.pi / self.box * np.fft.fftfreq(self.n, 1.0 / self.n)
        kz = 2 * np.pi / self.box * np.arange(self.n // 2 + 1)
        kx, ky, kz = np.meshgrid(k1, k1, kz, indexing="ij")
        k2 = kx ** 2 + ky ** 2 + kz ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            green = np.where(k2 > 0, gaussian_blob_transform(0.5 * self.sigma ** 2 * k2,
                                                             self.order, np) / k2, 0.0)
        # derivatives: the Nyquist planes (|k_i| = n/2 on an even lattice) carry no real
        # derivative; they are left out of i k
        nyquist = np.pi * self.n / self.box
        derivative = [np.where(np.isclose(np.abs(k), nyquist), 0.0, k) for k in (kx, ky, kz)]
        self.k = [xp.asarray(k) for k in derivative]
        self.green = xp.asarray(green)

    def p2m(self, x, alpha):
        """ω on the lattice, (n, n, n, 3) [1/T], node (i, j, k) at (i, j, k) h."""
        out = remesh(x, alpha, self.h, box_length=self.box)
        return out.alpha.reshape(self.n, self.n, self.n, 3) / self.h ** 3

    def solve(self, omega, gradient=True):
        """The lattice fields of ω (n, n, n, 3): u (n, n, n, 3) [L/T] and, with
        ``gradient``, ∇u (n, n, n, 3, 3) [1/T] (``[..., a, b] = ∂u_a/∂x_b``)."""
        xp, n = self.xp, self.n
        rfft, irfft = _transforms(xp)
        w = [rfft(omega[..., c]) for c in range(3)]
        psi = [self.green * wc for wc in w]
        kx, ky, kz = self.k
        u_hat = [1j * (ky * psi[2] - kz * psi[1]),
                 1j * (kz * psi[0] - kx * psi[2]),
                 1j * (kx * psi[1] - ky * psi[0])]
        u = xp.stack([irfft(uh, n) for uh in u_hat], axis=-1)
        if not gradient:
            return u, None
        grad = xp.stack([xp.stack([irfft(1j * kb * uh, n) for kb in self.k], axis=-1)
                         for uh in u_hat], axis=-2)
        return u, grad

    def m2p(self, field, points):
        """``field`` (n, n, n, ...) interpolated at ``points`` (M, 3) [L] by M4′:
        (M, ...), each point's 64 nodes summed in a fixed order (deterministic)."""
        xp, n, h = self.xp, self.n, self.h
        flat = field.reshape(n ** 3, -1)
        s = xp.asarray(points, dtype=xp.float64) / h
        cell = xp.floor(s)
        tau = s - cell
        cell = cell.astype(xp.int64)
        weights = [m4prime_stencil(tau[:, a]) for a in range(3)]       # (M, 4) each
        index = [[(cell[:, a] + o) % n for o in STENCIL] for a in range(3)]
        out = xp.zeros((s.shape[0], flat.shape[1]), dtype=xp.float64)
        for (i, a), (j, b), (k, c) in itertools.product(enumerate(STENCIL), repeat=3):
            w = weights[0][:, i] * weights[1][:, j] * weights[2][:, k]
            node = (index[0][i] * n + index[1][j]) * n + index[2][k]
            out += w[:, None] * flat[node]
        return out.reshape((s.shape[0],) + field.shape[3:])

    def evaluate(self, x, alpha, targets=None, gradient=True):
        """u (M, 3) [L/T] and ∇u (M, 3, 3) [1/T] (None without ``gradient``) at
        ``targets`` (M, 3) [L] (default: the elements ``x``) of the blobs ``x`` (N, 3) [L]
        with strengths ``alpha`` (N, 3) [L³/T]; float64 on the arrays' device."""
        xp = array_namespace(x, alpha)
        if xp is not self.xp:
            raise TypeError("the elements must live on the mesh solve's device.")
        u, grad = self.solve(self.p2m(x, alpha), gradient=gradient)
        targets = x if targets is None else targets
        u_t = self.m2p(u, targets)
        return u_t, (None if grad is None else self.m2p(grad, targets))


def _transforms(xp):
    """(rfft, irfft) of the three spatial axes on ``xp`` (scipy.fft on the CPU)."""
    if xp is np:
        import scipy.fft as fft  # noqa: PLC0415
    else:
        fft = xp.fft
    return (lambda a: fft.rfftn(a, axes=(0, 1, 2)),
            lambda a, n: fft.irfftn(a, s=(n, n, n), axes=(0, 1, 2)))
