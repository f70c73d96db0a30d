"""cProfile of one leapfrog RK4 step at GPU size (host time per function)."""
import cProfile, pstats, sys, time, os
sys.path.insert(0, "benchmarks")
import cupy as cp
import vortexsim
sim = vortexsim.make_case("leapfrog", n_phi=126, layers=7, layer_spacing=0.5, sigma=0.05,
                          tracers_per_ring=1 << 19, dt=0.01, device="gpu", method="fmm",
                          tol=1e-6, progress=False)
sim.run(steps=3)
cp.cuda.Device().synchronize()
# enqueue time of each evaluation vs the step
summ = sim.summation
plain = summ.__call__
enq = []
class Wrap:
    pass
orig = type(summ).__call__
def wrapped(self, *a, **k):
    t0 = time.perf_counter(); out = orig(self, *a, **k); enq.append(time.perf_counter() - t0); return out
type(summ).__call__ = wrapped
for _ in range(3):
    enq.clear()
    cp.cuda.Device().synchronize(); t0 = time.perf_counter(); sim.step(); cp.cuda.Device().synchronize()
    print(f"step {1e3*(time.perf_counter()-t0):.1f} ms; evaluation enqueue ms {[round(1e3*e,1) for e in enq]}")
type(summ).__call__ = orig
pr = cProfile.Profile()
cp.cuda.Device().synchronize()
pr.enable(); sim.step(); cp.cuda.Device().synchronize(); pr.disable()
st = pstats.Stats(pr); st.sort_stats("tottime").print_stats(45)
st.sort_stats("cumulative").print_stats(60)
