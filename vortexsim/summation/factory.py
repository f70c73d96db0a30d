r"""The summation a method name asks for: the registry of the siblings and its factory.

:func:`make_summation` resolves ``"auto"`` (:func:`vortexsim.summation.auto.choose_method`),
checks that the method fits the geometry (free space or the periodic box) and the
kernel, and makes the sibling of :data:`SUMMATIONS`.

With a ``communicator`` of several ranks the method's work is split among them, the
sources replicated: the particle-mesh solve (``"mesh"``) by x-slabs of its lattice
(:class:`vortexsim.summation.slab_shares.SlabShares`: each rank's P2M, slab transforms and
M2P for the sources and targets on its slab, the targets' values gathered), every other
method by shares of its targets
(:class:`vortexsim.summation.distributed.SharedTargets`: each rank summing its share, the
shares gathered).  :data:`PLANNED` holds the names that have a
place in the design but no implementation; asking for one raises NotImplementedError.
"""
from __future__ import annotations

from .._names import choice
from ..backend import Device, check_precision
from ..kernels.cutoff import get_kernel
from .api import CALL_METHODS
from .auto import PERIODIC_FMM_KERNELS, choose_method
from .direct import DirectSum
from .fmm import FMMSum
from .periodic_mesh import PeriodicMeshSum
from .periodic_spectral import PeriodicSpectralSum
from .spectral import check_spectral

__all__ = ["make_summation", "SUMMATIONS", "PLANNED", "RUN_METHODS"]

#: the summation of each method name
SUMMATIONS = {"direct": DirectSum, "fmm": FMMSum, "spectral": PeriodicSpectralSum,
              "mesh": PeriodicMeshSum}
#: the methods a run may name (induced_velocity's, and the particle-mesh solve of a run's
#: remeshing lattice)
RUN_METHODS = (*CALL_METHODS, "mesh")
#: methods with a place in the design but no implementation yet (what they will be)
PLANNED = {
    "distributed": "a method name for the distributed sums (they are every method with "
                   "its targets shared among ranks: make_summation(..., communicator=))",
}


def periodic_method(method, kernel):
    """The method of a periodic box, with its requirements checked: the spectral sum or
    the periodic FMM (``"auto"``: :func:`~vortexsim.summation.auto.choose_method`; the
    FMM's root is the box, its depth kept by the step plan)."""
    if method not in ("spectral", "fmm", "mesh", "auto"):
        raise ValueError(f"boundary='periodic' is summed by method='spectral', 'mesh' or "
                         f"'fmm' (or 'auto'); method={method!r} has no periodic "
                         "version.")
    if method == "mesh":
        return "mesh"
    if method == "auto":
        method = choose_method(periodic=True, kernel=kernel.name)
    if method == "fmm":
        if kernel.name not in PERIODIC_FMM_KERNELS:
            raise ValueError(f"the periodic FMM needs a kernel whose far field is 1/r "
                             f"{PERIODIC_FMM_KERNELS}; got kernel="
                             f"{kernel.name!r}. Use kernel='gaussian'.")
        return "fmm"
    return "spectral"


def make_summation(method="direct", kernel="gaussian", tol=1e-6, precision="float64",
                   device: Device | None = None, n_sources=None, n_targets=None, box=None,
                   *, communicator=None):
    """The summation of ``method`` (a :class:`vortexsim.summation.base.Summation`).

    Parameters
    ----------
    method : {"direct", "fmm", "spectral", "mesh", "auto"}
        ``"auto"`` is resolved here, once (:func:`~vortexsim.summation.auto.choose_method`):
        from the problem size ``n_sources`` × ``n_targets`` in free space; with a
        ``box``, the spectral sum for the Gaussian kernels, else the periodic FMM.
    kernel : str, cutoff kernel (``physics.md``)
    tol : float, relative accuracy of the FMM and the spectral sum (1e-6 ≤ tol < 1 for
        the FMM; ignored by ``direct``)
    precision : {"float64", "float32"}, arithmetic precision of the sums
    device : :class:`vortexsim.Device` (default: the CPU)
    n_sources, n_targets : int, sizes used to resolve ``"auto"`` in free space
    box : float [L] or None, the edge of the periodic box [0, L)³ (``boundary="periodic"``)
    communicator : :class:`vortexsim.backend.Communicator` or None; with more than one
        rank the work is split among them: ``"mesh"`` by slabs of its lattice
        (:class:`vortexsim.summation.slab_shares.SlabShares`; its lattice, bound later by
        ``bind_lattice(n)``, needs n ≥ 2 × ranks), the other methods by shares of their
        targets (:class:`vortexsim.summation.distributed.SharedTargets`)
    """
    kernel = get_kernel(kernel)
    check_precision(precision)
    device = device if device is not None else Device("cpu")
    if isinstance(method, str) and method in PLANNED:
        raise NotImplementedError(f"{PLANNED[method]} is planned but not implemented; use "
                                  f"one of {list(CALL_METHODS)}.")
    method = choice("summation method", method, RUN_METHODS)
    box = None if box is None else float(box)
    if box is not None:
        method = periodic_method(method, kernel)
        if method == "spectral":
            check_spectral(kernel.name, device.is_gpu)
    elif method == "spectral":
        raise ValueError("method='spectral' sums a periodic box: set boundary='periodic' "
                         "and box = L.")
    if method == "auto":
        method = choose_method(n_sources, n_targets, tol=tol, gpu=device.is_gpu)
    summation = SUMMATIONS[method](kernel, tol, precision, device, box=box)
    if communicator is not None and communicator.size > 1:
        if method == "mesh":
            from .slab_shares import SlabShares  # noqa: PLC0415
            return SlabShares(summation, communicator)
        from .distributed import SharedTargets  # noqa: PLC0415
        summation = SharedTargets(summation, communicator)
    return summation
