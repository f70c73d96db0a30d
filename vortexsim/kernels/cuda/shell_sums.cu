// Shell sums of the energy spectrum (vortexsim.diagnostics.turbulence): out[s] = Σ of the
// mode densities v over the modes of shell s, the modes listed shell by shell in ``perm``
// (CSR ``start``).  One block per shell; each thread sums a fixed stride of the shell's
// modes, then the block adds the threads' sums by a fixed tree: no atomics, the same
// bits on every run.
#pragma once

template <int BS>
__global__ void __launch_bounds__(BS)
shell_sums(const double* __restrict__ v, const int* __restrict__ perm,
           const long long* __restrict__ start, double* __restrict__ out) {
    __shared__ double part[BS];
    const long long s = blockIdx.x;
    double acc = 0.0;
    for (long long i = start[s] + threadIdx.x; i < start[s + 1]; i += BS) acc += v[perm[i]];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = BS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[s] = part[0];
}
