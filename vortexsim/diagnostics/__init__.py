"""Diagnostics: the integrals of a set of vortex elements (:mod:`.integrals`), the
turbulence statistics of periodic fields (:mod:`.turbulence`) and the diagnostics row of a
model's state (:mod:`.row`).  The integrals' functions are re-exported here."""
from .integrals import (ROW_COLUMNS, RowSums, angular_impulse, element_rows,
                        energy_and_enstrophy, enstrophy, field_sums, helicity, kinetic_energy,
                        linear_impulse, ring_centre, ring_frame, ring_radius, stream_factor,
                        total_vorticity)
from .row import DIRECT_DIAGNOSTICS_PAIRS, LATTICE_STATISTICS, DiagnosticsRow

__all__ = ["total_vorticity", "linear_impulse", "angular_impulse", "ring_centre",
           "ring_radius", "ring_frame", "kinetic_energy", "enstrophy", "energy_and_enstrophy",
           "helicity", "stream_factor", "field_sums", "element_rows", "RowSums",
           "ROW_COLUMNS", "DiagnosticsRow", "DIRECT_DIAGNOSTICS_PAIRS", "LATTICE_STATISTICS"]
