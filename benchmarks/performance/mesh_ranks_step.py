"""One timed step (after one warm-up step) of isotropic turbulence, method="mesh", on the
ranks of `mpiexec -n P` (P = 1: the one-rank PeriodicMeshSum; P > 1: SlabShares).
usage: mpiexec -n P python benchmarks/performance/mesh_ranks_step.py N DEVICE   (prints one JSON line per rank and
saves a sample of the final alpha under $OUT for the 1-rank comparison)"""
import hashlib, json, os, sys, time
import numpy as np
import vortexsim
from vortexsim.backend import make_communicator, resolve_device, to_host
from vortexsim.summation.periodic_mesh import PeriodicMeshSum
from vortexsim.summation.slab_shares import SlabShares

n, device = int(sys.argv[1]), sys.argv[2]
dev = resolve_device(device)                   # the rank's GPU made current first
comm = make_communicator(device=dev)           # NCCLCommunicator on GPU ranks
xp, out = dev.xp, os.environ.get("OUT", "/tmp")


def sync():
    if dev.is_gpu:
        xp.cuda.Device().synchronize()
    comm.barrier()


timing = {"call_s": 0.0, "lattice_s": 0.0}


def timed(cls, name, key):
    f = getattr(cls, name)

    def g(self, *a, **k):
        sync(); t = time.perf_counter(); r = f(self, *a, **k); sync()
        timing[key] += time.perf_counter() - t
        return r
    setattr(cls, name, g)


for cls in (SlabShares, PeriodicMeshSum):
    timed(cls, "__call__", "call_s")
    timed(cls, "on_lattice", "lattice_s")
sim = vortexsim.make_case("isotropic_turbulence", n=n, device=device, communicator=comm,
                          progress=False)
sim.step()                                     # warm-up: cuFFT plans, kernels, NCCL
timing.update(call_s=0.0, lattice_s=0.0)
sync(); t = time.perf_counter(); sim.step(); sync(); step = time.perf_counter() - t
alpha = to_host(sim.model.elements.alpha)
pool = xp.get_default_memory_pool().total_bytes() if dev.is_gpu else 0
print(json.dumps({"rank": comm.rank, "ranks": comm.size, "n": n, "comm": type(comm).__name__,
                  "summation": type(sim.model.summation).__name__, "step_s": step, **timing,
                  "pool_GB": pool / 1e9,
                  "digest": hashlib.sha256(alpha.tobytes()).hexdigest()[:16]}), flush=True)
if comm.rank == 0:
    np.save(os.path.join(out, f"alpha_n{n}_P{comm.size}.npy"), alpha[::997])
