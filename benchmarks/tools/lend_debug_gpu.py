import sys, traceback
sys.path.insert(0, "tests"); sys.path.insert(0, "tests/summation")
import numpy as np, cupy as cp
import test_slab_lend as T
for n in (8, 9, 12):
    for size in (1, 2, 3):
        try:
            x, alpha, plane = T._lattice(n, seed=13)
            held = T._holdings(n, size, plane)
            T._run(size, n, x, alpha, held, xp=cp)
            print("ok", n, size)
        except Exception as e:
            print("FAIL", n, size, type(e).__name__, e); traceback.print_exc(limit=-4)
