r"""The one rule of ``method="auto"``: which summation a problem gets.

Used by :func:`vortexsim.summation.make_summation` (the simulation's summation),
:func:`vortexsim.induced_velocity` and the resource check before a run
(:mod:`vortexsim.cli.resources`), so that all three choose alike.

* **Free space**: the FMM above a crossover number of pairs N·M (:data:`AUTO_FMM_PAIRS_CPU`,
  :data:`AUTO_FMM_PAIRS_GPU`) where it delivers the requested ``tol``
  (:func:`vortexsim.fmm.plan.fmm_delivers`), else the direct sum.
* **Periodic box**: the spectral sum for Gaussian blobs of one core σ (exact to tol,
  O(N log N) on either device), else the periodic FMM (several σ, the polynomial and
  singular kernels), for the kernels whose far field is 1/r (:data:`PERIODIC_FMM_KERNELS`).
"""
from __future__ import annotations

from ..fmm.plan import fmm_delivers
from ..kernels.cutoff import GAUSSIAN_ORDERS

__all__ = ["choose_method", "AUTO_FMM_PAIRS_CPU", "AUTO_FMM_PAIRS_GPU",
           "PERIODIC_FMM_KERNELS"]

#: method="auto" on the CPU uses the FMM above this many pairs N·M.  Measured on 2 cores,
#: uniform, σ = h, Gaussian, tol 1e-6: N = 4000 direct 2.6 s vs FMM 2.5 s; N = 10^4 9.0 s
#: vs 6.1 s.
AUTO_FMM_PAIRS_CPU = 2e7
#: the same on the GPU, estimated from H100 timings (direct 2^17: 137 ms, 2^16: ~34 ms;
#: FMM 2^20: 113 ms, roughly linear plus ~10–20 ms fixed costs); not measured at the
#: crossover itself.
AUTO_FMM_PAIRS_GPU = 4e9
#: kernels with a periodic FMM (their far field is 1/r)
PERIODIC_FMM_KERNELS = ("gaussian", "polynomial", "singular")


def choose_method(n_sources=None, n_targets=None, *, tol=1e-6, gpu=False, periodic=False,
                  kernel="gaussian", uniform_sigma=True):
    """The summation method ``"auto"`` stands for (module docstring).

    Parameters
    ----------
    n_sources, n_targets : int, the problem size N (sources, images included) and M
        (targets); needed in free space, ignored in the periodic box
    tol : float, the requested relative accuracy
    gpu : bool, the summation runs on the GPU
    periodic : bool, the periodic box (its ``box`` given)
    kernel : str, the cutoff kernel's name
    uniform_sigma : bool, every element has the same core σ (the periodic box)

    Returns
    -------
    "direct", "fmm" or "spectral"

    Raises
    ------
    ValueError
        In free space without the sizes; in the periodic box for a kernel without a
        periodic sum.
    """
    if periodic:
        if kernel in GAUSSIAN_ORDERS and uniform_sigma:
            return "spectral"
        if kernel in PERIODIC_FMM_KERNELS:
            return "fmm"
        raise ValueError(f"a periodic box is summed for kernels {PERIODIC_FMM_KERNELS} (their "
                         f"far field is 1/r: method='fmm', or 'spectral' for the Gaussian); "
                         f"got kernel={kernel!r}. Use kernel='gaussian'.")
    if n_sources is None or n_targets is None:
        raise ValueError("method='auto' needs n_sources and n_targets to choose.")
    crossover = AUTO_FMM_PAIRS_GPU if gpu else AUTO_FMM_PAIRS_CPU
    return ("fmm" if float(n_sources) * float(n_targets) > crossover
            and fmm_delivers(float(tol)) else "direct")
