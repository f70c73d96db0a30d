"""Shared GPU timing for the benchmark scripts (benchmarks.md protocol)."""
import numpy as np


def time_gpu(fn, repeats=5, warmup=1):
    """Median seconds of ``repeats`` calls of ``fn`` after ``warmup`` calls (CUDA events)."""
    import cupy as cp
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
    return float(np.median(times))
