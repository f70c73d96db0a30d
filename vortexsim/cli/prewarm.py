"""The output libraries warmed up on a thread while a run is set up.

The writers import the netCDF stack (xarray, netCDF4, their backends) and, on a GPU, warm
up matplotlib before the first step (``initialize``; :func:`~vortexsim.output.snapshot
.preload_netcdf`, :func:`~vortexsim.output.plot.preload`): about a second of Python that
a run used to spend between its set-up and its first step.  :class:`Prewarm` does the same
on a thread of its own while the command checks the resources, makes the CUDA context and
builds the case, where the main thread waits for the device, the disk or NumPy most of
the time; the command joins it before the run starts, so it is never beside the steps
(where it would hold the GIL that the kernel launches need).  Both functions are cached:
the writers' own calls then return at once.
"""
from __future__ import annotations

import logging
import threading

__all__ = ["Prewarm"]

logger = logging.getLogger(__name__)


class Prewarm:
    """Start the warm-up now (``plot``: matplotlib's too); :meth:`join` waits for it.

    A failure (a library missing) is left to the writers, whose own calls raise it where
    it is reported."""

    def __init__(self, plot):
        self._plot = bool(plot)
        self._thread = threading.Thread(target=self._run, name="vortexsim-prewarm",
                                        daemon=True)
        self._thread.start()

    def _run(self):
        try:
            from ..output.snapshot import preload_netcdf  # noqa: PLC0415
            preload_netcdf()
            if self._plot:
                from ..output.plot import preload  # noqa: PLC0415
                preload()
        except Exception as exc:  # noqa: BLE001 - the writers raise it where it matters
            logger.debug("warm-up of the output libraries failed: %s", exc)

    def join(self):
        """Wait until the warm-up is done (before the run's first step)."""
        self._thread.join()
