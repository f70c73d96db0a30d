r"""The diagnostics row of a periodic model whose ranks hold its state split by x-slabs
(:mod:`vortexsim.model.slab_partition`), computed on the slabs: no rank holds the
whole state for it.

The row's parts, each from this rank's slab rows of the lattice (the elements are its
slab's nodes, ω = α/h³ there), summed over the ranks in rank order so that every rank
has the same values:

* the element sums (total vorticity, impulses: :class:`.integrals.RowSums` of the rank's
  elements, each element's row its own; one allgather of 32 numbers);
* the seven field sums of the mesh solve's modes
  (:meth:`vortexsim.summation.slab_mesh.SlabMeshSolve.field_sums`: three slab
  transforms);
* the turbulence statistics and E(k) of the lattice vorticity
  (:func:`.turbulence.slab_vorticity_statistics`: three forward and three inverse slab
  transforms).

They equal the row of the assembled state to round-off (the same sums associated
otherwise; at iteration 0 the one-rank row takes the field sums from the P2M of the
elements, which on the nodes is α itself).
"""
from __future__ import annotations

import numpy as np

from ..backend import to_host
from ..summation.spectral import FIELD_SUMS
from .turbulence import slab_vorticity_statistics

__all__ = ["split_row_parts", "LATTICE_KEYS"]

#: the row keys of the lattice statistics (:meth:`.row.DiagnosticsRow.lattice_statistics`)
LATTICE_KEYS = ("energy", "dissipation", "enstrophy")


def split_row_parts(model, statistics_keys, sums):
    """(``v``, ``lattice``) of ``model``'s row, ``sums`` the
    :class:`.integrals.RowSums` of this rank's elements (no rings): ``v`` the dict of
    :meth:`.integrals.RowSums.finish` of the whole element sums with the seven field sums
    as its ``extra``, ``lattice`` the row's lattice statistics (``lattice_energy``, …,
    the ``statistics_keys`` of :func:`.turbulence.flow_statistics`, ``wavenumber`` and
    ``energy_spectrum``).  Collective; the same host values on every rank."""
    el, solve, comm = model.own_elements, model.partition.solve, model.communicator
    local = np.asarray(to_host(sums(el.x, el.alpha)), dtype=np.float64)
    total = np.sum(np.stack(comm.allgather(local)), axis=0)     # rank order
    omega = solve.node_vorticity(el.alpha)
    field = solve.field_sums(omega)
    v = sums.finish(np.concatenate([total, [field[k] for k in FIELD_SUMS]]))
    stats, k, e = slab_vorticity_statistics(omega, solve.fft, model.domain.box,
                                            model.rhs.nu)
    lattice = {f"lattice_{key}": stats[key] for key in LATTICE_KEYS}
    lattice.update({key: stats[key] for key in statistics_keys})
    lattice.update(wavenumber=to_host(k), energy_spectrum=to_host(e))
    return v, lattice
