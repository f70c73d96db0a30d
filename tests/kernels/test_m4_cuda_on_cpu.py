"""The CUDA kernels of the periodic M4′ transfers (vortexsim/kernels/cuda/m4prime.cu) run
on the CPU: the source compiled as C++ with the CUDA qualifiers defined away and every
thread of a launch run in turn (no shared memory, barriers or atomics: their exact serial
execution), driven as geometry.m4_gpu drives them, against the NumPy remesh and the
sparse transfers of geometry.m4_cpu.  Checks the cells, the wrap of positions outside the
box, the gather over the 64 cells and the M2P stencil where CI has no GPU.  Skipped
without a C++ compiler."""
import ctypes

import numpy as np
import pytest

from vortexsim.geometry import m4_cpu
from vortexsim.geometry.remesh import remesh

from cuda_on_cpu import compile_harness, ptr  # tests/kernels/cuda_on_cpu.py

HARNESS = r"""
#include <cmath>
using std::floor;
struct Dim3 { unsigned x, y, z; };
static Dim3 blockIdx, threadIdx, blockDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#include "SOURCE"
static void launch(long long count, void (*body)()) {
    blockDim.x = 128;
    for (long long b = 0; b < (count + 127) / 128; ++b)
        for (unsigned t = 0; t < 128; ++t) { blockIdx.x = b; threadIdx.x = t; body(); }
}
static const double *gx, *gtau, *galpha, *gfield; static const int* gstart;
static long long gN, gn, gkey_n; static double gh, gscale; static long long* gkey;
static double *gtau_out, *gout; static int* gstarts_out; static long long gstride;
extern "C" {
void cells(const double* x, long long N, double h, long long n, long long* key, double* tau) {
    gx = x; gN = N; gh = h; gn = n; gkey = key; gtau_out = tau;
    launch(N, [] { m4_cells(gx, gN, gh, gn, gkey, gtau_out); });
}
void starts(const long long* key, long long N, long long cells, int* out) {
    gkey = const_cast<long long*>(key); gN = N; gkey_n = cells; gstarts_out = out;
    launch(N + 1, [] { cell_starts(gkey, gN, gkey_n, gstarts_out); });
}
void p2m(const double* tau, const double* alpha, const int* start, long long n, double scale,
         double* out) {
    gtau = tau; galpha = alpha; gstart = start; gn = n; gscale = scale; gout = out;
    launch(n * n * n, [] { m4_p2m(gtau, galpha, gstart, gn, gscale, 3, 1, gout); });
}
void m2p(const double* x, long long M, double h, long long n, const double* field,
         long long stride, double* out) {
    gx = x; gN = M; gh = h; gn = n; gfield = field; gstride = stride; gout = out;
    launch(M, [] { m4_m2p(gx, gN, gh, gn, gfield, gstride, gout); });
}
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return compile_harness(tmp_path_factory, "m4_cuda", HARNESS, "m4prime.cu", std="c++17")


@pytest.mark.parametrize("n", [8, 7])
def test_cuda_kernels_match_the_numpy_transfers(lib, n):
    rng = np.random.default_rng(n)
    box = 2.0
    h = box / n
    x = rng.random((300, 3)) * box
    x[:30] += box * np.array([1.0, -2.0, 0.0])                # outside: wrapped
    x[30:60] = x[60:61]                                       # many in one cell
    x[60:70] = np.arange(10)[:, None] * h                     # on the nodes
    alpha = rng.standard_normal((300, 3))
    count = len(x)
    key = np.zeros(count, np.int64)
    tau = np.zeros((count, 3))
    lib.cells(ptr(x), ctypes.c_longlong(count), ctypes.c_double(h), ctypes.c_longlong(n),
              ptr(key), ptr(tau))
    s = x / h
    np.testing.assert_array_equal(tau, s - np.floor(s))
    order = np.argsort(key, kind="stable")
    key_sorted = np.ascontiguousarray(key[order])
    starts = np.zeros(n ** 3 + 1, np.int32)
    lib.starts(ptr(key_sorted), ctypes.c_longlong(count), ctypes.c_longlong(n ** 3),
               ptr(starts))
    np.testing.assert_array_equal(starts, np.searchsorted(key_sorted, np.arange(n ** 3 + 1)))
    out = np.zeros((n ** 3, 3))
    lib.p2m(ptr(np.ascontiguousarray(tau[order])), ptr(np.ascontiguousarray(alpha[order])),
            ptr(starts), ctypes.c_longlong(n), ctypes.c_double(1.0), ptr(out))
    ref = remesh(x, alpha, h, box_length=box).alpha
    assert np.abs(out - ref).max() <= 1e-14 * np.abs(alpha).sum()

    targets = rng.random((200, 3)) * 3 * box - box
    fields = rng.standard_normal((3, n, n, n))
    grad = np.zeros((200, 3, 3))                              # a strided row, as ∇u's
    lib.m2p(ptr(targets), ctypes.c_longlong(200), ctypes.c_double(h), ctypes.c_longlong(n),
            ptr(fields), ctypes.c_longlong(9), ptr(grad[:, 1, :]))
    ref = m4_cpu.periodic_m2p(fields, targets, n, h)
    assert np.abs(grad[:, 1, :] - ref).max() <= 1e-14 * np.abs(fields).max()
    assert not grad[:, 0, :].any() and not grad[:, 2, :].any()
