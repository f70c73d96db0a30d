// M4′ transfers between particles and one x-slab of the periodic n³ lattice with its ghost
// planes (vortexsim.geometry.m4_slab): the block of the slab [i0, i1) is the planes
// [i0 − 1, i1 + 2) of x, not periodic, by all n planes of y and z, periodic: w = i1 − i0 + 3
// planes, node (a, j, k) of the block at row (a·n + j)·n + k.  A point's cell is given in
// block coordinates (x: ⌊x/h⌋ mod n − i0 + 1, in [1, w − 3] for the slab's points; y, z:
// ⌊x/h⌋ mod n) with its fractional position τ; it spreads onto / reads from the nodes
// cell + o, o ∈ {−1, 0, 1, 2} per axis (y and z modulo n) with m4prime.cu's weights.
//
// P2M is a gather, as m4prime.cu's m4_p2m: one thread per block node sums, in a fixed order
// (the 64 stencil offsets lexicographically, then the points of each cell in their sorted
// order), the contributions of the cells node − o.  No atomics, the same bits every run.
// M2P: one thread per point over its 64 nodes, in m4_m2p's order; a point outside the slab
// gets NaN.  Double precision throughout.
#pragma once

#include "m4prime.cu"

// The block's nodes: out[c · w n² + node] = scale Σ_o Σ_{p ∈ node − o} W_o(τ_p) α_p,c for
// the points sorted by block cell (tau, alpha (N, 3) sorted; start (w n² + 1) the CSR
// offsets of the block's cells).
__global__ void m4_slab_p2m(const double* __restrict__ tau,
                            const double* __restrict__ alpha,
                            const int* __restrict__ start, const long long w,
                            const long long n, const double scale,
                            double* __restrict__ out) {
    const long long node = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long plane = w * n * n;
    if (node >= plane) return;
    const long long i = node / (n * n), j = (node / n) % n, k = node % n;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0;
    for (int a = 0; a < 4; ++a) {
        const long long ci = i - (a - 1);
        if (ci < 0 || ci >= w) continue;                 // x is not periodic in a block
        for (int b = 0; b < 4; ++b) {
            const long long cj = wrap(j - (b - 1), n);
            for (int c = 0; c < 4; ++c) {
                const long long cell = (ci * n + cj) * n + wrap(k - (c - 1), n);
                const int q1 = start[cell + 1];
                for (int q = start[cell]; q < q1; ++q) {
                    const double wt = m4_weight(tau[3 * q], a) * m4_weight(tau[3 * q + 1], b)
                        * m4_weight(tau[3 * q + 2], c);
                    s0 += alpha[3 * q] * wt;
                    s1 += alpha[3 * q + 1] * wt;
                    s2 += alpha[3 * q + 2] * wt;
                }
            }
        }
    }
    out[node] = scale * s0;
    out[plane + node] = scale * s1;
    out[2 * plane + node] = scale * s2;
}

// Three block fields (3, w, n, n) at M points of block cells ``cell`` (M, 3) and
// fractional positions ``tau`` (M, 3): out[p · stride + m], m = 0, 1, 2.
__global__ void m4_slab_m2p(const double* __restrict__ tau,
                            const long long* __restrict__ cell, const long long M,
                            const long long w, const long long n,
                            const double* __restrict__ field, const long long stride,
                            double* __restrict__ out) {
    const long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (p >= M) return;
    const long long plane = w * n * n;
    const long long cx = cell[3 * p];
    if (cx < 1 || cx > w - 3) {                          // not a point of this slab
        const double nan = __longlong_as_double(0x7ff8000000000000LL);
        out[p * stride] = nan;
        out[p * stride + 1] = nan;
        out[p * stride + 2] = nan;
        return;
    }
    double wt[3][4];
    long long idx[3][4];
    #pragma unroll
    for (int a = 0; a < 3; ++a) {
        const double t = tau[3 * p + a];
        #pragma unroll
        for (int o = 0; o < 4; ++o) {
            wt[a][o] = m4_weight(t, o);
            idx[a][o] = a == 0 ? cx + o - 1 : wrap(cell[3 * p + a] + o - 1, n);
        }
    }
    m4_gather3(wt, idx, n, plane, field, out + p * stride);
}
