"""Case builders (rings now; the simulation cases of issue 4 build on them)."""
from .rings import vortex_ring

__all__ = ["vortex_ring"]
