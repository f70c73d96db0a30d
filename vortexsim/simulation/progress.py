"""The run's one progress bar."""
from __future__ import annotations

import sys
import time

__all__ = ["ProgressBar"]


class ProgressBar:
    """The run's one progress bar (tqdm, on stderr, only on a terminal): simulated time
    towards the stop time (or steps towards the stop iteration), steps/s and the ETA."""

    def __init__(self, enabled, sim):
        self.bar = None
        self.by_steps = sim.stop_iteration is not None or sim.stop_time is None
        self.it_start, self.wall = sim.iteration, time.perf_counter()
        if not enabled:
            return
        from tqdm.auto import tqdm  # noqa: PLC0415
        if self.by_steps:
            total = None if sim.stop_iteration is None else sim.stop_iteration - sim.iteration
            self.bar = tqdm(total=total, unit="step", file=sys.stderr, desc=f"t = {sim.t:.5g}",
                            disable=None, dynamic_ncols=True,
                            bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                       "steps, ETA {remaining} (elapsed {elapsed})")
        else:
            t0 = sim.config.get("t0", sim.t)
            t0 = sim.t if t0 is None or t0 > sim.t else float(t0)
            self.t0, self.total, self.stop_time = t0, sim.stop_time - t0, sim.stop_time
            self.bar = tqdm(total=self.total, initial=sim.t - t0, file=sys.stderr,
                            desc=f"t = {sim.t:.5g} / {sim.stop_time:.5g}",
                            disable=None, dynamic_ncols=True,
                            bar_format="{desc} {percentage:3.0f}%|{bar}| ETA {remaining} "
                                       "(elapsed {elapsed})")

    def update(self, sim):
        if self.bar is None:
            return
        steps = sim.iteration - self.it_start
        rate = steps / max(time.perf_counter() - self.wall, 1e-9)
        if self.by_steps:
            self.bar.set_description_str(f"t = {sim.t:.5g}, {rate:.3g} steps/s", refresh=False)
            self.bar.update(steps - self.bar.n)
        else:
            self.bar.set_description_str(f"t = {sim.t:.5g} / {self.stop_time:.5g}, "
                                         f"{rate:.3g} steps/s", refresh=False)
            self.bar.update(min(sim.t - self.t0, self.total) - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None
