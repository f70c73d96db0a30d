# shim: removed when the lead merges
"""Old path of the summation: ``Summation(method, kernel, tol, precision, device,
n_sources=..., n_targets=..., box=...)`` is :func:`vortexsim.summation.make_summation`."""
from .._names import choice  # noqa: F401
from ..summation import make_summation as Summation  # noqa: F401
