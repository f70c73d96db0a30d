// CSR offsets of elements sorted by cell (vortexsim.kernels.nufft, geometry.m4_gpu).
#pragma once

// starts[c] = the first sorted position whose cell key is >= c, c = 0 … n_cell (CSR of
// the elements sorted by cell).  One thread per position i = 0 … n_el writes the
// cells (key[i − 1], key[i]]: every cell exactly once.
__global__ void cell_starts(const long long* __restrict__ key, const long long n_el,
                            const long long n_cell, int* __restrict__ starts) {
    const long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i > n_el) return;
    const long long lo = i == 0 ? -1 : key[i - 1];
    const long long hi = i == n_el ? n_cell : key[i];
    for (long long c = lo + 1; c <= hi; ++c) starts[c] = (int) i;
}
