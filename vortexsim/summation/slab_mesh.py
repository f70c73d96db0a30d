r"""The particle-mesh velocity of the periodic box (:class:`.mesh.MeshSolve`) on a slab
decomposition of the lattice over the ranks of a run (issue 37).

Layout
------
Rank r of P owns the x-planes [i0, i1) of the n³ lattice (:class:`.geometry.slab.Slabs`,
the even split) and the particles and targets whose node below, ⌊x/h⌋ mod n, lies in them
(:meth:`SlabMeshSolve.owner_of` names each point's rank, for a caller that redistributes).
Its fields are slabs (3, n_x, n, n); its spectra the κ_y planes [j0, j1) of the half
spectrum, (n, n_y, n//2 + 1) (:class:`.geometry.slab.SlabFFT`).

One evaluation, on every rank together (collective: same n, σ, order and ``gradient``):

1. P2M of the rank's particles onto its slab and ghost planes, [i0 − 1, i1 + 2)
   (:func:`.geometry.m4_slab.slab_p2m`: M4′ reaches one node below a particle's cell
   and two above); the ghost planes sent to the neighbours that own them and added there
   (:func:`.geometry.slab.add_ghost_planes`, one alltoall, the sums in rank order: the
   same bits whatever the timing);
2. in Fourier space exactly as :class:`.mesh.MeshSolve`, through the same functions
   (:func:`.mesh.green_function`, ψ̂ = G_σ ω̂ and :func:`.mesh.curl_spectra`,
   û = i k × ψ̂; ∂_b u_a ↔ i k_b û_a, the Nyquist modes left out of the derivatives), each
   component through :class:`.geometry.slab.SlabFFT`;
3. u, then each row of ∇u, on the slab; their ghost planes fetched from the neighbours
   (:func:`.geometry.slab.with_ghost_planes`, one alltoall per three fields) and M2P at
   the rank's targets (:func:`.geometry.m4_slab.slab_m2p`).

On one rank this is :class:`.mesh.MeshSolve` to round-off (the ghost planes fold onto
the rank's own planes); on several, the same to round-off (the sums of P2M and of the
transforms are associated differently).  Every rank needs at least 2 x-planes (the ghost
width): n ≥ 2 P.

Cost per rank and evaluation (n_x ≈ n/P planes, N_r particles, M_r targets): fifteen
slab transforms (3 forward, 3 inverse for u, 9 for ∇u), each the y–z real FFTs of n_x
planes, the x FFTs of n_y (n/2 + 1) columns and one alltoall of about 8 n_x n² (P − 1)/P
bytes each way (120 B per owned lattice point per evaluation for P ≫ 1); five ghost
exchanges (P2M, u, three rows of ∇u) of 3 planes × 3 fields, 72 n² bytes each way; one
allgather of two numbers per rank (the ownership and ``gradient`` check); P2M O(64 N_r),
M2P O(4 × 64 M_r).  Memory per owned lattice point (float64): ω on the slab with
its ghost planes 24 (1 + 3/n_x) B, then the owned ω 24 B (freed once transformed); ψ̂ and
û 48 B; three fields at a time 24 B and their copy with ghost planes 24 (1 + 3/n_x) B; one
derivative's spectrum 8 B; the Green's function 4 B; a transform's transpose buffers
(module :mod:`.geometry.slab`) 32 B at its peak.  The points: the sparse weights (NumPy,
12 B × 64 per target, and per particle when they are not the targets) or P2M's sort
(CuPy, 64 B per particle).

Its use in a run: a periodic run split by slabs
(:mod:`vortexsim.model.slab_partition`) calls it with each rank's own elements, those
that moved into a neighbour's slab lent to it for the stage
(:mod:`.slab_lend`), and solves on the slab's nodes alone
(:meth:`SlabMeshSolve.on_nodes`); a run whose state stays whole on every rank goes
through :class:`.slab_shares.SlabShares`, which gives each rank its own particles and
targets by :meth:`SlabMeshSolve.owner_of` and gathers the targets' values.  On GPU
ranks the alltoalls move device buffers where the communicator is
:class:`vortexsim.backend.nccl.NCCLCommunicator` (NCCL send/recv);
:class:`vortexsim.backend.mpi.MPICommunicator` copies them through the host.
"""
from __future__ import annotations

import numpy as np

from ..backend import SingleProcess, array_namespace
from ..geometry import m4_slab
from ..geometry.periodic import periodic_nodes
from ..geometry.slab import (
    GHOST_ABOVE,
    GHOST_BELOW,
    SlabFFT,
    add_ghost_planes,
    with_ghost_planes,
)
from ..geometry.lattice_modes import half_spectrum_weight
from ..kernels.cutoff import gaussian_blob_transform
from .mesh import green_function, velocity_at, velocity_on_nodes, velocity_spectra
from .spectral import FIELD_SUMS, mode_sums

__all__ = ["SlabMeshSolve"]


class SlabMeshSolve:
    """u and ∇u of blobs of core σ in the periodic box [0, L)³ through its n³ lattice,
    split into x-slabs over the ranks of ``communicator`` (module docstring).

    Parameters
    ----------
    box : float [L], the edge L
    n : int, lattice nodes per side (h = L/n, n ≥ 4 and n ≥ 2 × ranks)
    sigma : float [L], the blobs' core
    order : 2, 4 or 6, the Gaussian kernel's order (gaussian, gaussian4, gaussian6)
    communicator : :class:`vortexsim.backend.Communicator` (default: one process)
    xp : numpy or cupy, where the lattice lives

    Attributes
    ----------
    fft : :class:`.geometry.slab.SlabFFT`; slabs : its :class:`.geometry.slab.Slabs`
    x_planes : (i0, i1), this rank's x-planes
    """

    def __init__(self, box, n, sigma, order=2, communicator=None, xp=np):
        self.communicator = SingleProcess() if communicator is None else communicator
        self.box, self.n, self.sigma, self.order, self.xp = float(box), int(n), \
            float(sigma), int(order), xp
        if self.order not in (2, 4, 6):
            raise ValueError(f"order must be 2, 4 or 6 (the Gaussian kernels), got {order!r}.")
        self.h = self.box / periodic_nodes(self.box, self.box / self.n)
        size = int(self.communicator.size)
        if self.n // size < GHOST_ABOVE:
            raise ValueError(
                f"a lattice of n = {self.n} on {size} ranks gives slabs of "
                f"{self.n // size} x-plane(s), thinner than the M4′ ghost width "
                f"({GHOST_BELOW} plane below a slab, {GHOST_ABOVE} above, which must come "
                f"from the neighbouring ranks): the smallest n per rank is {GHOST_ABOVE}, "
                f"so use n ≥ {GHOST_ABOVE * size} on {size} ranks, or at most "
                f"{self.n // GHOST_ABOVE} ranks for n = {self.n}.")
        self.fft = SlabFFT(self.n, self.communicator, xp)
        self.slabs, self.rank = self.fft.slabs, self.fft.rank
        self.x_planes = self.fft.x_planes
        # MeshSolve's Green's function on this rank's κ_y planes (κ = 0 on the rank of
        # κ_y = 0), the same bits mode by mode
        self.green = green_function(self.fft.wavenumbers(self.box), self.sigma, self.order, xp)
        self.k = list(self.fft.wavenumbers(self.box, derivative=True))

    def owner_of(self, points):
        """The rank owning each of ``points`` (M, 3) [L] (any position; the box
        periodic): the rank whose x-planes hold ⌊x/h⌋ mod n, (M,) int64 on the points'
        device."""
        xp = array_namespace(points)
        plane = xp.floor(xp.asarray(points[:, 0], dtype=xp.float64) / self.h) \
            .astype(xp.int64) % self.n
        return self.slabs.owner(plane, xp)

    def _weights(self, points, what):
        """The CPU's sparse weights of ``points`` on this rank's block (None on CuPy)."""
        if self.xp is not np:
            return None
        i0, i1 = self.x_planes
        return m4_slab.slab_weights(points, self.n, self.h, i0, i1, what)

    def p2m(self, x, alpha, weights=None):
        """ω on this rank's slab, (3, n_x, n, n) [1/T], from this rank's blobs ``x``
        (N, 3) [L], ``alpha`` (N, 3) [L³/T]: P2M onto the slab and its ghost planes, the
        ghost planes added to their owners.  Collective."""
        i0, i1 = self.x_planes
        block = m4_slab.slab_p2m(x, alpha, self.n, self.h, i0, i1, scale=1.0 / self.h ** 3,
                                 weights=weights)
        return add_ghost_planes(block, self.slabs, self.communicator)

    def spectra(self, omega):
        """This rank's part of û (three arrays (n, n_y, n//2 + 1)) of the lattice
        vorticity whose slab is ``omega`` (3, n_x, n, n) [1/T]: û = i k × ψ̂, ψ̂ = G_σ ω̂.
        Collective."""
        return velocity_spectra(omega, self.green, self.k, self.fft.forward)

    def velocity_field(self, u_hat):
        """u on this rank's slab, (3, n_x, n, n) [L/T], from :meth:`spectra`.
        Collective."""
        return self.xp.stack([self.fft.inverse(u_hat[a]) for a in range(3)])

    def gradient_row(self, u_hat, a):
        """∂u_a/∂x_b, b = 0, 1, 2, on this rank's slab, (3, n_x, n, n) [1/T], from
        :meth:`spectra`.  Collective."""
        return self.xp.stack([self.fft.inverse(1j * self.k[b] * u_hat[a])
                              for b in range(3)])

    def m2p(self, fields, points, out=None, weights=None):
        """Three fields on this rank's slab (3, n_x, n, n) at this rank's ``points``
        (M, 3) [L] by M4′, the ghost planes fetched from the neighbours: into ``out``
        (M, 3) (rows may be strided), returned.  Collective."""
        i0, i1 = self.x_planes
        block = with_ghost_planes(fields, self.slabs, self.communicator)
        return m4_slab.slab_m2p(block, points, self.n, self.h, i0, i1, out=out,
                                weights=weights)

    def _agree(self, x, targets, gradient):
        """One allgather: every rank's count of points it does not own and its
        ``gradient``; the same ValueError on every rank when any rank is wrong (no rank
        is left waiting in a collective)."""
        others = [int(self.xp.count_nonzero(self.owner_of(p) != self.rank)) if p.shape[0]
                  else 0 for p in ((x,) if targets is x else (x, targets))]
        ranks = self.communicator.allgather((sum(others), bool(gradient)))
        wrong = [r for r, (count, _) in enumerate(ranks) if count]
        if wrong:
            i0, i1 = self.x_planes
            mine = (f"{others[0]} of this rank's {x.shape[0]} particles and "
                    f"{others[-1] if targets is not x else 0} of its {targets.shape[0]} "
                    f"targets are not its own (it owns the points whose node below, "
                    f"floor(x/h) mod n, is one of its x-planes [{i0}, {i1})); ") \
                if sum(others) else ""
            raise ValueError(
                f"ranks {wrong} hold points of other ranks: {mine}redistribute the "
                "particles and targets by SlabMeshSolve.owner_of before evaluating.")
        if len({g for _, g in ranks}) > 1:
            raise ValueError(f"the ranks disagree on gradient ({[g for _, g in ranks]}): "
                             "every rank must evaluate with the same gradient.")

    def evaluate(self, x, alpha, targets=None, gradient=True):
        """u (M, 3) [L/T] and ∇u (M, 3, 3) [1/T] (None without ``gradient``) at this
        rank's ``targets`` (M, 3) [L] (default: its elements ``x``) of the blobs of all
        ranks, each rank passing its own ``x`` (N, 3) [L] and ``alpha`` (N, 3) [L³/T]
        (:meth:`owner_of`); float64 on the arrays' device.  Collective: every rank calls
        it with the same ``gradient``; a point given to the wrong rank raises ValueError
        on every rank (one allgather of two numbers checks both)."""
        xp = array_namespace(x, alpha, targets)
        if xp is not self.xp:
            raise TypeError("the elements must live on the mesh solve's device.")
        targets = x if targets is None else targets
        for name, a in (("x", x), ("alpha", alpha), ("targets", targets)):
            if a.ndim != 2 or a.shape[1] != 3:
                raise ValueError(f"{name} has shape {a.shape}; expected (N, 3).")
        if alpha.shape != x.shape:
            raise ValueError(f"alpha has shape {alpha.shape}; expected {x.shape} to match x.")
        self._agree(x, targets, gradient)
        weights = self._weights(targets, "targets")
        omega = self.p2m(x, alpha, weights=weights if targets is x else
                         self._weights(x, "particles"))
        u_hat = self.spectra(omega)
        del omega
        return velocity_at(self, u_hat, targets, gradient, weights)

    def node_vorticity(self, alpha):
        """ω = α/h³ on this rank's slab, (3, n_x, n, n) float64 [1/T], of the strengths
        ``alpha`` (n_x n², 3) [L³/T] of its slab's nodes in remesh order (the rows
        [i0 n², i1 n²) of the whole lattice's)."""
        i0, i1 = self.x_planes
        if alpha.shape != ((i1 - i0) * self.n ** 2, 3):
            raise ValueError(f"alpha has shape {alpha.shape}; expected this rank's "
                             f"{(i1 - i0) * self.n ** 2} slab nodes of the {self.n}^3 "
                             "lattice, in remesh order.")
        alpha = alpha.astype(self.xp.float64, copy=False)
        return self.xp.ascontiguousarray(alpha.T).reshape(3, i1 - i0, self.n, self.n) \
            / self.h ** 3

    def on_nodes(self, omega):
        """u (m, 3) and ∇u (m, 3, 3) at the nodes of this rank's slab themselves, m = n_x n²
        (rows in remesh order: the rows [i0 n², i1 n²) of the whole lattice's), of the
        lattice vorticity whose slab is ``omega`` (3, n_x, n, n) [1/T]: the solve without
        P2M and M2P (:meth:`.mesh.MeshSolve.on_nodes` on the slab), three fields at a
        time.  Collective."""
        return velocity_on_nodes(self, self.spectra(omega))

    def field_sums(self, omega):
        """The seven quadratic field sums of :meth:`.mesh.MeshSolve.field_sums` (a dict of
        host floats, the same on every rank) of the lattice vorticity whose slab is
        ``omega`` (3, n_x, n, n) [1/T]: each rank's modes (three slab transforms) summed
        as the whole lattice's are, the ranks' sums added in rank order (one allgather
        of seven numbers).  Collective."""
        xp = self.xp
        f = xp.stack([self.fft.forward(omega[c]) for c in range(3)]) * self.h ** 3
        k = self.fft.wavenumbers(self.box)
        k2 = k[0] ** 2 + k[1] ** 2 + k[2] ** 2
        inv_k2 = xp.where(k2 > 0, 1.0 / xp.where(k2 > 0, k2, 1.0), 0.0)
        g1 = gaussian_blob_transform(0.5 * self.sigma ** 2 * k2, self.order, xp) \
            / self.box ** 3
        part = mode_sums(f, k, inv_k2, g1, self.box, self.green / self.box ** 3,
                         half_spectrum_weight(self.n, xp), xp)
        parts = self.communicator.allgather(part)
        return {key: float(sum(p[key] for p in parts)) for key in FIELD_SUMS}
