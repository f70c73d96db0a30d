"""The run: :class:`Simulation` (a model, stop criteria, callbacks, output writers,
``run(pickup=...)``) and its components: the output queue and thread, the rows run inside
steps, the timings and the progress bar."""
from ..model import RUN_DEFAULTS, SimulationError
from .components import Callback, Components
from .simulation import MODEL_ATTRIBUTES, Simulation

__all__ = ["Simulation", "SimulationError", "Callback", "Components", "RUN_DEFAULTS",
           "MODEL_ATTRIBUTES"]
