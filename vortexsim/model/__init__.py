"""The model: the state, the clock, the domain, the summation and the terms, and how
they advance one step (:class:`VortexModel`); the integrators; the step's checks; the
updaters that act between steps (remeshing, the adaptive dt)."""
from .adaptive import AdaptiveTimeStep
from .checks import SimulationError
from .integrators import SCHEMES, Scheme, get_scheme, register_scheme
from .model import LATTICE_SUM_DEVICES, VortexModel
from .parameters import RUN_DEFAULTS
from .remeshing import Remeshing

__all__ = ["VortexModel", "SimulationError", "RUN_DEFAULTS", "AdaptiveTimeStep", "Remeshing",
           "LATTICE_SUM_DEVICES", "Scheme", "SCHEMES", "get_scheme", "register_scheme"]
