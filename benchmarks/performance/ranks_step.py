"""One timed step (after one warm-up step) of a named case on the ranks of
``mpiexec -n P`` (P = 1: one process), the summation's work shared and the state
replicated, or split by slabs where the periodic box allows it (``docs/parallel.md``):
one JSON line per rank (step seconds, of them the summation's calls and lattice solves,
the seconds to assemble the whole state as output does, the summation's class and
communicator, whether the state is split and the rank's elements, CuPy's pool, a digest
of the whole strengths), and rank 0 saves a sample of the strengths under $OUT for the
comparison of P ranks with one.

    mpiexec -n P python benchmarks/performance/ranks_step.py CASE DEVICE [key=value ...]
    # issue 37's leapfrog: 2^20 elements, 2^24 tracers, RK4, the FMM
    mpiexec -n 4 python benchmarks/performance/ranks_step.py leapfrog gpu n_phi=74898 layers=2 \\
        tracers_per_ring=8388608 method=fmm integrator=rk4
    # isotropic turbulence by the particle-mesh solve
    mpiexec -n 2 python benchmarks/performance/ranks_step.py isotropic_turbulence gpu n=256
"""
import hashlib
import json
import os
import sys
import time

import numpy as np

import vortexsim
from vortexsim.backend import make_communicator, resolve_device, to_host


def _value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def _time_parts(cls, sync, parts=None):
    """Seconds of the summation's calls (``call_s``) and, for the particle-mesh solve,
    of its solves on the lattice nodes (``lattice_s``), each synchronised: the wrapped
    methods of ``cls`` add to the returned dict (``parts``, or a new one)."""
    parts = {} if parts is None else parts
    for name, key in (("__call__", "call_s"), ("on_lattice", "lattice_s")):
        method = getattr(cls, name, None)
        if method is None:
            continue
        parts[key] = 0.0

        def timed(self, *args, _method=method, _key=key, **kwargs):
            sync()
            t = time.perf_counter()
            out = _method(self, *args, **kwargs)
            sync()
            parts[_key] += time.perf_counter() - t
            return out
        setattr(cls, name, timed)
    return parts


def main(argv):
    case, device = argv[0], argv[1]
    params = {k: _value(v) for k, v in (a.split("=", 1) for a in argv[2:])}
    dev = resolve_device(device)                  # the rank's GPU made current first
    comm = make_communicator(device=dev)          # NCCL on GPU ranks
    xp, out = dev.xp, os.environ.get("OUT", "/tmp")

    def sync():
        if dev.is_gpu:
            xp.cuda.Device().synchronize()
        comm.barrier()

    t = time.perf_counter()
    sim = vortexsim.make_case(case, device=device, communicator=comm, progress=False,
                              **params)
    build = time.perf_counter() - t
    parts = _time_parts(type(sim.model.summation), sync)
    partition = sim.model.partition
    if partition is not None:                     # the stages' sums of a split state
        _time_parts(type(partition.stage_sum), sync, parts)
    sim.step()                                    # warm-up: kernels, plans, NCCL
    sync()
    parts.update({k: 0.0 for k in parts})
    t = time.perf_counter()
    sim.step()
    sync()
    step = time.perf_counter() - t
    own = int(len(sim.model.elements))
    t = time.perf_counter()
    sim.model.assemble()                          # the whole state, as output needs it
    sync()
    assemble = time.perf_counter() - t
    alpha = to_host(sim.model.elements.alpha)
    pool = xp.get_default_memory_pool().total_bytes() if dev.is_gpu else 0
    print(json.dumps({
        "case": case, "params": params, "rank": comm.rank, "ranks": comm.size,
        "elements": int(len(sim.model.elements)),
        "tracers": int(0 if sim.model.tracers is None else len(sim.model.tracers)),
        "comm": type(comm).__name__, "summation": type(sim.model.summation).__name__,
        "split": partition is not None, "own_elements": own,
        "build_s": build, "step_s": step, **parts, "assemble_s": assemble,
        "pool_GB": pool / 1e9,
        "digest": hashlib.sha256(alpha.tobytes()).hexdigest()[:16]}), flush=True)
    if comm.rank == 0:
        np.save(os.path.join(out, f"alpha_{case}_P{comm.size}.npy"), alpha[::97])


if __name__ == "__main__":
    main(sys.argv[1:])
