# shim: removed when the lead merges
"""Old path of :class:`vortexsim.summation.fmm.FMMPlanner` and its :class:`StepPlan`."""
from ..summation.fmm import DEPTH_REFRESH, FMMPlanner, StepPlan  # noqa: F401
