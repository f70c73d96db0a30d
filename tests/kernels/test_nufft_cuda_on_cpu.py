"""The CUDA kernels of the own NUFFT (vortexsim/kernels/cuda/nufft.cu) run on the CPU:
the source compiled as C++ with the CUDA qualifiers defined away and every block and
thread of a launch run in turn (the kernels use no shared memory, barriers or atomics,
so this is their exact serial execution), against the NumPy specification
(vortexsim.kernels.nufft).  Checks the gather spread's cell ranges, periodic wrap and
CSR, and the interpolation's stencil, where CI has no GPU.  Skipped without a C++
compiler."""
import ctypes

import numpy as np
import pytest

from vortexsim.kernels import nufft as U

from cuda_on_cpu import compile_harness, ptr  # tests/kernels/cuda_on_cpu.py

HARNESS = r"""
#include <cmath>
#include <algorithm>
using std::min; using std::max;
struct Dim3 { unsigned x, y, z; };
static Dim3 blockIdx, threadIdx, blockDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(x)
#include "SOURCE"
extern "C" {
void csr_starts(const long long* key, long long n_el, long long n_cell, int* starts) {
    blockDim.x = 256;
    for (long long b = 0; b < (n_el + 256) / 256; ++b)
        for (unsigned t = 0; t < 256; ++t) {
            blockIdx.x = b; threadIdx.x = t;
            cell_starts(key, n_el, n_cell, starts);
        }
}
void spread(int k, const double* t, const double* c, long long n_el, const int* starts,
            int n, int w, double beta, double* grid) {
    const int tiles = (n + TILE - 1) / TILE;
    blockDim.x = TILE * TILE * TILE;
    for (int b = 0; b < tiles * tiles * tiles; ++b)
        for (unsigned th = 0; th < blockDim.x; ++th) {
            blockIdx.x = b; threadIdx.x = th;
            if (k == 3) nufft_spread<3, TILE>(t, c, n_el, starts, n, w, beta, grid);
            else nufft_spread<1, TILE>(t, c, n_el, starts, n, w, beta, grid);
        }
}
void interpolate(int k, const double* t, long long m, const double* grid, int n, int w,
                 double beta, double* out) {
    blockDim.x = 128;
    for (long long b = 0; b < (m + 127) / 128; ++b)
        for (unsigned th = 0; th < 128; ++th) {
            blockIdx.x = b; threadIdx.x = th;
            if (k == 3) nufft_interpolate<3>(t, m, grid, n, w, beta, out);
            else nufft_interpolate<1>(t, m, grid, n, w, beta, out);
        }
}
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return compile_harness(tmp_path_factory, "nufft_cuda",
                           HARNESS.replace("TILE", str(U.TILE)), U.CUDA_FILE)


@pytest.mark.parametrize("m_max, eps", [(3, 1e-3), (5, 1e-7), (4, 1e-11), (20, 1e-6)])
def test_cuda_kernels_match_the_numpy_specification(lib, m_max, eps):
    rng = np.random.default_rng(m_max)
    nufft = U.PeriodicNufft(m_max, eps)
    n, w, beta = nufft.n, nufft.w, nufft.beta
    theta = rng.random((400, 3)) * 2 * np.pi
    theta[:20] = 2 * np.pi * (1 - 1e-17)                  # the top edge
    theta[20:40] = 0.0
    theta[40:120] = theta[120:121]                        # many in one cell
    t = nufft.coordinates(theta)
    c = rng.standard_normal((3, len(theta)))
    ref = U.spread_numpy(t, c, n, w, beta)
    keys = U._cell_keys(t, n, np)
    order = np.argsort(keys, kind="stable")
    keys_sorted = np.ascontiguousarray(keys[order])
    t_sorted = np.ascontiguousarray(t[:, order])
    starts = np.zeros(n ** 3 + 1, np.int32)
    lib.csr_starts(ptr(keys_sorted), ctypes.c_longlong(len(theta)),
                    ctypes.c_longlong(n ** 3), ptr(starts))
    np.testing.assert_array_equal(starts, np.searchsorted(keys_sorted, np.arange(n ** 3 + 1)))
    for k in (3, 1):
        grid = np.zeros((k, n, n, n))
        c_sorted = np.ascontiguousarray(c[:k, order])
        lib.spread(k, ptr(t_sorted), ptr(c_sorted), ctypes.c_longlong(len(theta)),
                   ptr(starts), n, w, ctypes.c_double(beta), ptr(grid))
        assert np.abs(grid - ref[:k]).max() <= 1e-14 * np.abs(ref).max()
    ty = np.ascontiguousarray(nufft.coordinates(rng.random((300, 3)) * 2 * np.pi))
    g = rng.standard_normal((3, n, n, n))
    out = np.zeros((3, ty.shape[1]))
    lib.interpolate(3, ptr(ty), ctypes.c_longlong(ty.shape[1]), ptr(g), n, w,
                    ctypes.c_double(beta), ptr(out))
    ref = U.interpolate_numpy(ty, g, n, w, beta)
    assert np.abs(out - ref).max() <= 1e-13 * np.abs(ref).max()
