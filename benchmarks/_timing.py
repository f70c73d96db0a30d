"""Shared GPU timing for the benchmark scripts (benchmarks.md protocol)."""
import numpy as np


def gpu_times(fn, repeats):
    """Seconds of each of ``repeats`` calls of ``fn`` (CUDA events, each synchronized)."""
    import cupy as cp
    times = []
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
    return times


def time_gpu(fn, repeats=5, warmup=1):
    """Median seconds of ``repeats`` calls of ``fn`` after ``warmup`` calls (CUDA events)."""
    for _ in range(warmup):
        fn()
    return float(np.median(gpu_times(fn, repeats)))
