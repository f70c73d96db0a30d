"""The host memory and time of a case's set-up on each rank: ``make_case`` alone (the
initial state built, the model made and its first evaluation), no step; with
``--snapshot PATH`` a restart's instead (the snapshot read as ``vortexsim restart``
reads it on these ranks, the simulation built from its state and the state loaded).

    mpiexec -n 2 python benchmarks/tools/setup_memory.py --case isotropic_turbulence --n 128
    mpiexec -n 2 python benchmarks/tools/setup_memory.py --snapshot RUN/snapshot_00000000.nc

Each rank reports its peak resident memory (``ru_maxrss``: the process's largest, the
interpreter and libraries included) and the set-up's wall time; rank 0 prints one JSON
line with every rank's values, the rank count, case and n.  Run it with the CPU device
(``--device cpu``, the default) for the host; on GPU ranks the pool's peak is in the
run log instead.
"""
from __future__ import annotations

import argparse
import json
import resource
import time


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="isotropic_turbulence")
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--device", default="cpu")
    p.add_argument("--label", default="")
    p.add_argument("--snapshot", help="a restart's set-up from this snapshot")
    args = p.parse_args(argv)
    from vortexsim.backend import make_communicator
    from vortexsim.cases import make_case
    comm = make_communicator()
    comm.barrier()
    start = time.perf_counter()
    if args.snapshot:
        sim = _restart(args.snapshot, args.device, comm)
        args.case, args.n = sim.config["case"], sim.config.get("n")
    else:
        sim = make_case(args.case, n=args.n, device=args.device, communicator=comm,
                        progress=False)
    comm.barrier()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024    # Linux: KiB
    rows = comm.allgather((peak, seconds, len(sim.model.own_elements)))
    if comm.rank == 0:
        print(json.dumps({"label": args.label, "case": args.case, "n": args.n,
                          "ranks": int(comm.size),
                          "peak_rss_GB": [round(r[0] / 1e9, 3) for r in rows],
                          "setup_s": round(max(r[1] for r in rows), 2),
                          "rows": [r[2] for r in rows]}), flush=True)


def _restart(path, device, comm):
    """The simulation of a restart from ``path`` on the ranks of ``comm``, its state
    loaded (each rank reading the whole snapshot where the code has no
    ``snapshot_on_ranks``: the code before it)."""
    from vortexsim.cases import from_config
    from vortexsim.cli.ranks import Ranks
    ranks = Ranks(comm)
    try:
        from vortexsim.cli.restart import snapshot_on_ranks
        snap = snapshot_on_ranks(ranks, path)
    except ImportError:
        from vortexsim.output import read_snapshot
        snap = read_snapshot(path)
    sim = from_config({**snap.config, "device": device, "progress": False},
                      communicator=comm, state=snap.state)
    sim.model.load_state_dict(snap.state)
    return sim


if __name__ == "__main__":
    main()
