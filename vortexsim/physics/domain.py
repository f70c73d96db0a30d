# shim: removed when the lead merges
"""Old path of :mod:`vortexsim.geometry.boundaries`."""
from ..geometry.boundaries import (BOUNDARIES, Domain, FreeSpace, GroundPlane,  # noqa: F401
                                   PeriodicBox, make_domain, mirror)
