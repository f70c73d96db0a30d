# shim: removed when the lead merges
"""Old path of :mod:`vortexsim.summation.spectral` (and the periodic box's
:func:`~vortexsim.geometry.periodic.wrap` and net-vorticity check)."""
from .geometry.periodic import NET_VORTICITY_TOL, check_periodic_sources, wrap  # noqa: F401
from .summation.spectral import (FIELD_SUMS, NUFFTS, TYPE2_THREADS,  # noqa: F401
                                 SpectralSum, check_spectral, self_gradient,
                                 spectral_modes, spectral_velocity)
