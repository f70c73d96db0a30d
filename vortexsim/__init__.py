"""vortexsim: vortex-particle simulation of incompressible flow.

Public API
----------
induced_velocity  velocity and velocity gradient of regularized vortex elements
FMM               reusable fast multipole evaluator (CPU and GPU)
KERNELS           the cutoff kernels (physics.md)
stretching        vortex-stretching right-hand side (classical | transpose)
Device            compute device (cpu | gpu)
VortexModel       vortex elements and tracers, the domain, the summation and the terms;
                  time_step(dt), rates, velocity, state_dict (vortexsim.model)
Simulation        a model run until a stop criterion (vortexsim.simulation): callbacks,
                  output writers, run(pickup=); Simulation(elements, tracers, dt=...)
                  builds the model too
SimulationError   a failed safety check (carries the last good state)
Callback          a function and its schedule, for Simulation.callbacks
TimeInterval, IterationInterval, WallTimeInterval
                  schedules of callbacks and writers (vortexsim.schedules)
make_case         build a named case (single_ring, leapfrog, collision, oblique_collision,
                  ring_ground) as a Simulation; list_cases, from_config
"""
from .cli.startup import guard_startup as _guard_startup

_guard_startup()   # a Ctrl-C while the vortexsim command imports: one line, exit 130

from .backend import Device
from .kernels.cutoff import KERNELS, get_kernel, stretching
from .fmm.evaluator import FMM
from .summation import induced_velocity
from .schedules import IterationInterval, TimeInterval, WallTimeInterval
from .model import VortexModel
from .simulation import Callback, Simulation, SimulationError
from .cases import from_config, list_cases, make_case

__version__ = "0.1.0"

__all__ = ["induced_velocity", "FMM", "KERNELS", "get_kernel", "stretching", "Device", "VortexModel", "Simulation",
           "SimulationError", "Callback", "TimeInterval", "IterationInterval",
           "WallTimeInterval", "make_case", "list_cases", "from_config", "__version__"]
