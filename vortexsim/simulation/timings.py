"""Where a run's wall time goes: the main thread's parts, the output thread's, the steps'
extremes; and the interpreter's thread switch interval during a run."""
from __future__ import annotations

import contextlib
import logging
import math
import sys
import time

logger = logging.getLogger(__name__)

__all__ = ["RunTimings", "GilSlices", "output_jobs"]


class RunTimings:
    """The timings of one run of a :class:`~vortexsim.simulation.Simulation`.

    ``waited()`` returns the seconds the main thread has waited for the output thread so
    far; those waits are not counted in the part that waited.

    Attributes
    ----------
    run_timings : {name: [seconds, count]}, main-thread wall seconds and counts of the
        run's parts: "steps" and each writer and callback by name
    step_extremes : {"first": seconds, "slowest": (seconds, iteration)}: first-use costs
        (kernel loads, tables of a new tree depth) show there
    output_timings : {name: {"write", "waited", "jobs", "files"}}: the output thread's part
        by writer name (seconds written on the thread, seconds the main thread waited for
        them, outputs written, file writes)
    output_waited : seconds the main thread waited for the output thread
    window_seconds : main-thread seconds of the diagnostics rows run inside steps
    setup_seconds : seconds before the first step (the writers' initialize)
    """

    def __init__(self, waited=lambda: 0.0):
        self.waited = waited
        self.run_timings, self.output_timings, self.output_waited = {}, {}, 0.0
        self.step_extremes = {}
        self.window_seconds = 0.0
        self.setup_seconds = 0.0

    def start(self):
        """A new run: every count back to zero (the set-up time is kept)."""
        self.run_timings = {"steps": [0.0, 0]}
        self.step_extremes = {}
        self.output_timings, self.output_waited = {}, 0.0
        self.window_seconds = 0.0

    @contextlib.contextmanager
    def timed(self, name, count=True):
        """Add the main-thread wall time of the block (less its waits for the output
        thread) to ``run_timings[name]`` (and count it, unless ``count`` is False: the
        rest of a call already counted, a row run inside a step)."""
        t0, w0 = time.perf_counter(), self.waited()
        try:
            yield
        finally:
            entry = self.run_timings.setdefault(name, [0.0, 0])
            entry[0] += time.perf_counter() - t0 - (self.waited() - w0)
            entry[1] += int(count)

    def note_step(self, seconds, iteration):
        """Record a completed step's wall time in :attr:`step_extremes`."""
        ext = self.step_extremes
        ext.setdefault("first", seconds)
        if seconds > ext.get("slowest", (-1.0, 0))[0]:
            ext["slowest"] = (seconds, iteration)

    def log(self, wall, device=None, elements=0):
        """Where the run's wall time went: one line for the main thread (steps, each writer
        and callback, the waits for the output thread), one for the output thread; on a
        GPU ``device`` one for the most memory CuPy's pool held (per element of the run's
        ``elements``)."""
        waited = self.output_waited
        ext = self.step_extremes

        def entry(name, sec, n):
            if name == "steps" and "slowest" in ext:
                slow, at = ext["slowest"]
                return (f"steps {sec:.3g} s ({n}; first {ext['first']:.3g} s, slowest "
                        f"{slow:.3g} s at iteration {at})")
            return f"{name} {sec:.3g} s ({n})"
        parts = [entry(name, sec, n) for name, (sec, n) in self.run_timings.items() if n]
        if self.window_seconds:
            parts.append(f"of these, rows run inside steps "
                         f"{self.window_seconds:.3g} s")
        if self.output_timings:
            parts.append(f"waiting for the output thread {waited:.3g} s")
        rest = wall - sum(sec for sec, _ in self.run_timings.values()) - waited
        logger.info("time: %s; other %.3g s; wall %.3g s (set-up before the first step "
                    "%.3g s)", ", ".join(parts), rest, wall, self.setup_seconds)
        if self.output_timings:
            out = self.output_timings.values()
            written = sum(o["write"] for o in out)
            logger.info("output thread: %s; %.3g s of %.3g s overlapped with the run",
                        ", ".join(f"{name} {o['write']:.3g} s ({output_jobs(o)}, waited "
                                  f"{o['waited']:.3g} s)"
                                  for name, o in self.output_timings.items()),
                        max(written - sum(o["waited"] for o in out), 0.0), written)
        if device is not None and device.kind == "gpu":
            held = device.xp.get_default_memory_pool().total_bytes()
            logger.info("GPU memory: %.3g GB held by CuPy's pool at most (%.0f B per "
                        "element)", held / 1e9, held / max(elements, 1))


def output_jobs(timing):
    """``101`` (outputs written), or ``101 in 12 files`` when deferred writes were
    replaced by later ones (:meth:`Simulation.submit_output`)."""
    n, files = timing["jobs"], timing["files"]
    return f"{n}" if n == files else f"{n} in {files} files"


class GilSlices:
    """Sets the interpreter's switch interval to ``interval`` [s] (None: leaves it) until
    :meth:`restore` (``sys.setswitchinterval``; process-wide, so restored by the run that
    set it)."""

    def __init__(self, interval):
        self._saved = None
        if interval is None:
            return
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not (
                math.isfinite(interval) and interval > 0):
            raise ValueError(f"gil_switch_interval must be a number of seconds > 0 or None, "
                             f"got {interval!r}.")
        self._saved = sys.getswitchinterval()
        sys.setswitchinterval(float(interval))

    def restore(self):
        if self._saved is not None:
            sys.setswitchinterval(self._saved)
            self._saved = None
