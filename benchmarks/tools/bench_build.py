"""The periodic cases' build (``make_case``, device gpu) timed alone, trees alternated:
``python bench_build.py OLD_TREE NEW_TREE CASE N [ROUNDS]`` runs each tree's build in a
fresh process ROUNDS times and prints the seconds (the build of the state and the
simulation; the kernels compiled by a first 32³ build in the same process)."""
import subprocess
import sys

CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import cupy, vortexsim
case, n = sys.argv[2], int(sys.argv[3])
vortexsim.make_case(case, n=32, device="gpu", progress=False)
cupy.cuda.Device().synchronize()
t = time.perf_counter()
sim = vortexsim.make_case(case, n=n, device="gpu", progress=False)
cupy.cuda.Device().synchronize()
print(f"{time.perf_counter() - t:.3f}")
"""

old, new, case, n = sys.argv[1:5]
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 2
for r in range(rounds):
    for label, tree in (("old", old), ("new", new)):
        out = subprocess.run([sys.executable, "-c", CHILD, tree, case, n], capture_output=True,
                             text=True)
        print(f"{case} {n} {label} round {r + 1}: {out.stdout.strip() or out.stderr[-300:]} s",
              flush=True)
