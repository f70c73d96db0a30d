"""Case builders: the vortex-ring discretization and the named simulation cases.

``make_case(name, **overrides)`` returns a :class:`vortexsim.Simulation`;
``list_cases()`` names the cases; ``from_config(sim.config)`` rebuilds one.
"""
from .rings import core_summary, vortex_ring
from .registry import CASES, CaseSetup, case_defaults, from_config, get_case, list_cases, \
    make_case, register_case
from . import ring_cases  # noqa: F401  (registers the ring cases)
from . import taylor_green  # noqa: F401  (registers the Taylor–Green vortex)
from . import isotropic_turbulence  # noqa: F401  (registers decaying isotropic turbulence)
from .ring_cases import ring_tracers

__all__ = ["vortex_ring", "core_summary", "ring_tracers", "CASES", "CaseSetup", "case_defaults", "from_config",
           "get_case", "list_cases", "make_case", "register_case"]
