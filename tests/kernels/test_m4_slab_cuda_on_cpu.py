"""The CUDA kernels of the slab M4′ transfers (vortexsim/kernels/cuda/m4_slab.cu) run on
the CPU (the source compiled as C++, every thread of a launch in turn), driven as
geometry.m4_slab drives them on CuPy (cells and τ from block_cells, a stable sort by block
cell, the CSR offsets by searchsorted), against the NumPy slab transfers: P2M's block to
round-off with points outside the slab left out, M2P into a strided row, NaN at a point
outside the slab.  Skipped without a C++ compiler."""
import ctypes

import numpy as np
import pytest
from cuda_on_cpu import compile_harness, ptr  # tests/kernels/cuda_on_cpu.py

from vortexsim.geometry import m4_slab

HARNESS = r"""
#include <cmath>
#include <cstring>
using std::floor;
struct Dim3 { unsigned x, y, z; };
static Dim3 blockIdx, threadIdx, blockDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
static inline double __longlong_as_double(long long v) {
    double d; std::memcpy(&d, &v, sizeof d); return d;
}
#include "SOURCE"
static void launch(long long count, void (*body)()) {
    blockDim.x = 128;
    for (long long b = 0; b < (count + 127) / 128; ++b)
        for (unsigned t = 0; t < 128; ++t) { blockIdx.x = b; threadIdx.x = t; body(); }
}
static const double *gtau, *galpha, *gfield; static const int* gstart;
static const long long* gcell; static long long gM, gw, gn, gstride; static double gscale;
static double* gout;
extern "C" {
void p2m(const double* tau, const double* alpha, const int* start, long long w, long long n,
         double scale, double* out) {
    gtau = tau; galpha = alpha; gstart = start; gw = w; gn = n; gscale = scale; gout = out;
    launch(w * n * n, [] { m4_slab_p2m(gtau, galpha, gstart, gw, gn, gscale, gout); });
}
void m2p(const double* tau, const long long* cell, long long M, long long w, long long n,
         const double* field, long long stride, double* out) {
    gtau = tau; gcell = cell; gM = M; gw = w; gn = n; gfield = field; gstride = stride;
    gout = out;
    launch(M, [] { m4_slab_m2p(gtau, gcell, gM, gw, gn, gfield, gstride, gout); });
}
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return compile_harness(tmp_path_factory, "m4_slab_cuda", HARNESS, "m4_slab.cu",
                           std="c++17")


@pytest.mark.parametrize("n, i0, i1", [(8, 0, 8), (8, 3, 6), (7, 5, 7)])
def test_cuda_slab_kernels_match_the_numpy_slab_transfers(lib, n, i0, i1):
    rng = np.random.default_rng(n + i0)
    box = 2.0
    h = box / n
    width = i1 - i0 + 3
    x = rng.random((400, 3)) * box
    x[:40] += box * np.array([1.0, -2.0, 0.0])                # outside the box: wrapped
    x[40:80] = x[80:81]                                       # many in one cell
    x[80:90, 0] = (i0 + np.arange(10) % (i1 - i0)) * h        # on the slab's planes
    mine = m4_slab.owned(x, n, h, i0, i1)
    assert 0 < mine.sum() < 400 or i1 - i0 == n
    alpha = rng.standard_normal((400, 3))
    cell, tau = m4_slab.block_cells(x, n, h, i0, np)
    inside = (cell[:, 0] >= 1) & (cell[:, 0] < width - 2)
    np.testing.assert_array_equal(inside, mine)
    nodes = width * n * n
    key = np.where(inside, (cell[:, 0] * n + cell[:, 1]) * n + cell[:, 2], nodes)
    order = np.argsort(key, kind="stable")
    starts = np.searchsorted(key[order], np.arange(nodes + 1)).astype(np.int32)
    out = np.zeros((3, width, n, n))
    lib.p2m(ptr(np.ascontiguousarray(tau[order])), ptr(np.ascontiguousarray(alpha[order])),
            ptr(starts), ctypes.c_longlong(width), ctypes.c_longlong(n), ctypes.c_double(0.5),
            ptr(out))
    ref = m4_slab.slab_p2m(x[mine], alpha[mine], n, h, i0, i1, scale=0.5)
    assert np.abs(out - ref).max() <= 1e-14 * np.abs(alpha).sum()

    fields = rng.standard_normal((3, width, n, n))
    grad = np.zeros((400, 3, 3))                              # a strided row, as ∇u's
    lib.m2p(ptr(np.ascontiguousarray(tau)), ptr(np.ascontiguousarray(cell)),
            ctypes.c_longlong(400), ctypes.c_longlong(width), ctypes.c_longlong(n),
            ptr(fields), ctypes.c_longlong(9), ptr(grad[:, 1, :]))
    ref = m4_slab.slab_m2p(fields, x[mine], n, h, i0, i1)
    assert np.abs(grad[mine, 1, :] - ref).max() <= 1e-14 * np.abs(fields).max()
    assert np.isnan(grad[~mine, 1, :]).all()
    assert not grad[:, 0, :].any() and not grad[:, 2, :].any()
