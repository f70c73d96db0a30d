// The element sums of a diagnostics row (vortexsim.diagnostics.RowSums): for each of S
// contiguous segments [seg[2s], seg[2s + 1]) of the N elements (all of them, then each
// ring), the sum of every element's 32 terms (diagnostic_terms), without writing the
// (N, 32) rows.  Block (c, s) sums the elements lo = seg[2s] + c·chunk .. lo + chunk of
// segment s: each thread a fixed stride of them, then the block adds its threads' sums
// by a fixed tree into part[(s·C + c)·32 + column] (C = gridDim.x).  The caller adds the
// C chunk sums of each segment.  No atomics: the same bits on every run.
#pragma once
#include "diagnostic_rows.cuh"

template <int BS>
__global__ void __launch_bounds__(BS)
row_sums(const double* __restrict__ x, const double* __restrict__ a,
         const long long* __restrict__ ref, const double* __restrict__ xr,
         const double* __restrict__ psi, const double* __restrict__ omega,
         const double* __restrict__ u, const int has, const long long* __restrict__ seg,
         const long long chunk, double* __restrict__ part) {
    __shared__ double red[BS];
    const long long lo = seg[2 * blockIdx.y] + blockIdx.x * chunk;
    const long long hi = min(seg[2 * blockIdx.y + 1], lo + chunk);
    double acc[32], t[32];
#pragma unroll
    for (int c = 0; c < 32; ++c) acc[c] = 0.0;
    for (long long i = lo + threadIdx.x; i < hi; i += BS) {
        diagnostic_terms(i, x, a, ref, xr, psi, omega, u, has, t);
#pragma unroll
        for (int c = 0; c < 32; ++c) acc[c] += t[c];
    }
    double* out = part + ((long long)blockIdx.y * gridDim.x + blockIdx.x) * 32;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
        red[threadIdx.x] = acc[c];
        __syncthreads();
        for (int w = BS / 2; w > 0; w >>= 1) {
            if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0) out[c] = red[0];
        __syncthreads();
    }
}
