"""Stage timer of an FMM evaluation (``FMM.timings``)."""
from __future__ import annotations

import time

__all__ = ["Clock"]


class Clock:
    """Stage timer [s]; synchronizes the GPU at each lap only when asked (profiling).

    ``xp``: the evaluator's array namespace (its current CUDA stream is synchronized
    when ``sync``).  ``laps`` maps stage name → seconds since the previous lap.
    """

    def __init__(self, xp, sync):
        self.xp, self.sync = xp, sync
        self.t0 = self.last = time.perf_counter()
        self.laps = {}

    def lap(self, name):
        if self.sync:
            self.xp.cuda.get_current_stream().synchronize()
        now = time.perf_counter()
        self.laps[name] = now - self.last
        self.last = now

    def finish(self):
        self.laps["total"] = self.last - self.t0
        return self.laps
