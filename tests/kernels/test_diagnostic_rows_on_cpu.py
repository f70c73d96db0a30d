"""The elementwise kernel of a diagnostics row (vortexsim/kernels/cuda/diagnostic_rows.cuh)
run on the CPU: the device function compiled as C++ and called for every element of a
block of elements whose reference elements lie outside the block (the blocks of
RowSums), against the NumPy specification (vortexsim.diagnostics.element_rows).  Skipped
without a C++ compiler."""
import ctypes

import numpy as np
import pytest

from vortexsim import diagnostics as D
from vortexsim.diagnostics import integrals

from cuda_on_cpu import compile_harness, ptr  # tests/kernels/cuda_on_cpu.py

HARNESS = r"""
#include <cmath>
using std::sqrt;
#define __device__
#define __forceinline__ inline
#include "SOURCE"
extern "C" void rows(long long n, const double* x, const double* a, const long long* ref,
                     const double* xr, const double* psi, const double* omega,
                     const double* u, int has, double* out) {
    for (long long i = 0; i < n; ++i) diagnostic_row(i, x, a, ref, xr, psi, omega, u, has, out);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return compile_harness(tmp_path_factory, "diagnostic_rows", HARNESS,
                           "diagnostic_rows.cuh")


def test_a_block_of_rows_matches_numpy(lib):
    rng = np.random.default_rng(3)
    n = 300
    x, a = rng.standard_normal((n, 3)) + 5.0, rng.standard_normal((n, 3))
    psi, omega, u = (rng.standard_normal((n, 3)) for _ in range(3))
    ref = np.repeat([0, 100, 250], [100, 150, 50]).astype(np.int64)
    block = slice(120, 270)                          # refs 100 and 250: one outside
    fields = integrals.types.SimpleNamespace(psi=psi[block], omega=omega[block], u=u[block])
    want = D.element_rows(x[block], a[block], fields, ref[block], x_ref=x)
    got = np.zeros((150, D.ROW_COLUMNS))
    args = [np.ascontiguousarray(v) for v in (x[block], a[block], ref[block], x, psi[block],
                                              omega[block], u[block])]
    lib.rows(ctypes.c_longlong(150), *(ptr(v) for v in args), 3, ptr(got))
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-13)


def test_row_sums_in_blocks_equal_one_block(monkeypatch):
    """RowSums a block of 7 elements at a time: the same row (totals, impulses, each ring's
    centre and radius) to round-off as in one block, rings spanning blocks."""
    rng = np.random.default_rng(5)
    n = 60
    x, alpha = rng.standard_normal((n, 3)) + 3.0, rng.standard_normal((n, 3))
    args = ([(0, 25), (25, 60)], [1.0, -2.0], [(0, 0, 1), (1, 0, 0)], n, np)
    whole = D.RowSums(*args)
    one = whole.finish(whole(x, alpha))
    monkeypatch.setattr(integrals, "ROW_BLOCK", 7)
    blocked = D.RowSums(*args)
    many = blocked.finish(blocked(x, alpha))
    for key in ("total_vorticity", "linear_impulse", "angular_impulse", "ring_centre",
                "ring_radius", "ring_axis"):
        np.testing.assert_allclose(np.asarray(many[key]), np.asarray(one[key]), rtol=1e-12,
                                   atol=1e-12)
