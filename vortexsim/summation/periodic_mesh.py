r"""The periodic box's particle-mesh summation (``method="mesh"``): Gaussian blobs of one
core through the remeshing lattice (:class:`vortexsim.summation.mesh.MeshSolve`: P2M by
M4′, an FFT solve with the blob's regularised Green's function, M2P).

The lattice is the run's remeshing lattice (n = L / remesh_spacing, bound by the model:
:meth:`bind_lattice`), so it needs ``remesh_every`` > 0.  The self pairs of the elements
are taken out of ∇u as by every summation (:meth:`Summation.__call__`: the exact blob's
A(0)); on the lattice nodes that is exactly what the mesh put in.  The diagnostics' field
sums are those of the mesh's own series (:meth:`field_sums`), so that a row costs one
transform of the lattice and nothing is stored per lattice point beyond the solve's.
"""
from __future__ import annotations

import numpy as np

from ..kernels.cutoff import GAUSSIAN_ORDERS
from ..state import uniform_core_radius
from .base import Summation
from .mesh import MeshSolve
from .spectral import self_gradient

__all__ = ["PeriodicMeshSum"]


class PeriodicMeshSum(Summation):
    """The particle-mesh solve of the periodic box (needs ``box``, the Gaussian kernels,
    one σ and the remeshing lattice's n).  Parameters as
    :class:`vortexsim.summation.base.Summation`; sums in float64, returns ``precision``;
    ``tol`` and ``plan`` are not used (the lattice sets the accuracy)."""

    name = "mesh"
    #: per element: its state (x, α, σ, V, label: 72 B), the time stepper's stage arrays
    #: (x, α of the midpoint and their rates: 96 B) and P2M's sort (16 B); per target
    #: (each element, each tracer) u and ∇u (96 B)
    BYTES_PER_SOURCE = 200
    BYTES_PER_TARGET = 100
    #: per lattice point: the half spectra of the solve (3 × 8 B), three lattice fields
    #: at a time (24 B), the remeshing's sort and output (80 B), the lattice vorticity
    #: (24 B), cuFFT's work areas and the diagnostics row's spectra.  The three together,
    #: 600 B per element of a box filled with one element per point, bound the peak that
    #: CuPy's pool held in whole runs on an H100 (``benchmarks/RESULTS.md``: 529 and
    #: 554 B per element at 128³, isotropic turbulence and Taylor–Green)
    BYTES_PER_GRID_POINT = 300

    def check_method(self):
        if self.box is None:
            raise ValueError("method='mesh' solves on the periodic box's lattice: set "
                             "boundary='periodic', box = L and remesh_every > 0.")
        if self.kernel.name not in GAUSSIAN_ORDERS:
            raise ValueError(f"method='mesh' uses the Fourier transform of the Gaussian blobs "
                             f"{tuple(GAUSSIAN_ORDERS)}; got kernel={self.kernel.name!r}.")
        self.n = None
        self._solve = None

    def bind_lattice(self, n):
        """The remeshing lattice's nodes per edge (None: no remeshing, refused)."""
        if n is None:
            raise ValueError("method='mesh' solves on the remeshing lattice: set "
                             "remesh_every > 0 (and remesh_spacing = box / n).")
        self.n = int(n)

    def mesh_solve(self, sigma, sigma_range=None):
        """The :class:`MeshSolve` for cores ``sigma`` (one σ), made once per σ."""
        if self.n is None:
            raise ValueError("method='mesh' has no lattice yet: build it through a model "
                             "with remesh_every > 0 (VortexModel binds the lattice).")
        lo = uniform_core_radius(*(sigma_range if sigma_range is not None else (
            float(sigma.min()), float(sigma.max()))), "the particle-mesh solve")
        # (on_lattice passes sigma = None with the host sigma_range)
        if self._solve is None or self._solve.sigma != lo:
            self._solve = MeshSolve(self.box, self.n, lo, GAUSSIAN_ORDERS[self.kernel.name],
                                    self.device.xp)
        return self._solve

    def evaluate(self, x, alpha, sigma, targets, *, gradient, sigma_range, plan):
        del plan
        xp = self.device.xp
        dtype = np.dtype(self.precision)
        u, grad_u = self.mesh_solve(sigma, sigma_range).evaluate(
            x.astype(xp.float64, copy=False), alpha.astype(xp.float64, copy=False),
            targets.astype(xp.float64, copy=False), gradient=bool(gradient))
        if grad_u is not None and not isinstance(gradient, bool):
            grad_u = grad_u[:int(gradient)]           # ∇u at the first k targets only
        return u.astype(dtype, copy=False), (
            None if grad_u is None else grad_u.astype(dtype, copy=False))

    def on_lattice(self, alpha, n, sigma_range):
        """u (n³, 3) and ∇u (n³, 3, 3) at the nodes of strengths ``alpha`` (n³, 3) in
        remesh order, each node's own blob out (as at the other stages): the elements on
        the nodes need neither P2M nor M2P (both are the identity there), only the
        lattice's transforms."""
        solve = self.mesh_solve(None, sigma_range)
        if int(n) != solve.n:
            raise ValueError(f"the elements sit on a {n}^3 lattice but the mesh solve's is "
                             f"{solve.n}^3.")
        xp = self.device.xp
        alpha = alpha.astype(xp.float64, copy=False)
        omega = xp.ascontiguousarray(alpha.T).reshape(3, n, n, n) / solve.h ** 3
        u, grad_u = solve.on_nodes(omega)
        del omega
        grad_u -= self_gradient(alpha, solve.sigma, solve.order)
        dtype = np.dtype(self.precision)
        return u.astype(dtype, copy=False), grad_u.astype(dtype, copy=False)

    def field_sums(self, x, alpha, sigma, sigma_range=None, lattice=None):
        """The diagnostics' field sums of the mesh solve's own series (its lattice modes,
        :meth:`MeshSolve.field_sums`): on the lattice the strengths themselves, else their
        P2M (no spectral sum, no folded symbols)."""
        solve = self.mesh_solve(sigma, sigma_range)
        xp = self.device.xp
        alpha = alpha.astype(xp.float64, copy=False)
        if lattice is not None:
            omega = xp.ascontiguousarray(alpha.T).reshape(3, solve.n, solve.n, solve.n)
            return solve.field_sums(omega / solve.h ** 3)
        return solve.field_sums(solve.p2m(x.astype(xp.float64, copy=False), alpha))

    def memory_estimate(self, n_sources, n_targets):
        grid = 0 if self.n is None else self.n ** 3
        return super().memory_estimate(n_sources, n_targets) + self.BYTES_PER_GRID_POINT * grid
