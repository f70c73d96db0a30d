// M4′ transfers between particles and the periodic n³ lattice (vortexsim.geometry.m4_gpu):
// the particle-to-mesh spread (a remeshing, the mesh solve's P2M) and the mesh-to-particle
// interpolation (the mesh solve's M2P).  Node (i, j, k) sits at (i, j, k) h, row
// (i·n + j)·n + k.  A point with s = x/h spreads onto the nodes ⌊s⌋ + o, o ∈ {−1, 0, 1, 2}
// per axis (indices modulo n), with the weights of geometry/remesh.py's m4prime_stencil.
//
// P2M is a gather: one thread per node sums, in a fixed order (the 64 stencil offsets
// lexicographically, then the particles of each cell in their sorted order), the
// contributions of the cells node − o.  The particles come sorted by cell (CSR ``start``
// over all n³ cells), so each node reads its 64 cells' particles; no atomics, the same
// bits from run to run.  M2P: one thread per target sums its 64 nodes in the same order.
// Double precision throughout.
#pragma once

#include "cell_starts.cuh"

// M4′ weight of stencil offset a (0..3 ↔ o = −1..2) at fractional position t ∈ [0, 1)
__device__ __forceinline__ double m4_weight(const double t, const int a) {
    const double u = 1.0 - t;
    switch (a) {
        case 0: return -0.5 * t * u * u;
        case 1: return 1.0 - 0.5 * t * t * (5.0 - 3.0 * t);
        case 2: return 1.0 - 0.5 * u * u * (5.0 - 3.0 * u);
        default: return -0.5 * t * t * u;
    }
}

__device__ __forceinline__ long long wrap(long long i, const long long n) {
    i %= n;
    return i < 0 ? i + n : i;
}

// Cells and fractional positions of N points x (N, 3) [L]: s = x/h, key = the row of the
// cell ⌊s⌋ modulo n, tau (N, 3) = s − ⌊s⌋ (exact).
__global__ void m4_cells(const double* __restrict__ x, const long long N,
                         const double h, const long long n,
                         long long* __restrict__ key, double* __restrict__ tau) {
    const long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (p >= N) return;
    long long row = 0;
    for (int a = 0; a < 3; ++a) {
        const double s = x[3 * p + a] / h;
        const double f = floor(s);
        tau[3 * p + a] = s - f;
        row = row * n + wrap((long long)f, n);
    }
    key[p] = row;
}

// ω at the nodes: out[node · node_stride + c · comp_stride] = scale Σ_o Σ_{p ∈ node − o}
// W_o(τ_p) α_p,c for the particles sorted by cell (tau, alpha (N, 3) sorted; start
// (n³ + 1) the CSR offsets of the cells, ``cell_starts``).
__global__ void m4_p2m(const double* __restrict__ tau,
                       const double* __restrict__ alpha,
                       const int* __restrict__ start, const long long n,
                       const double scale, const long long node_stride,
                       const long long comp_stride, double* __restrict__ out) {
    const long long node = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (node >= n * n * n) return;
    const long long i = node / (n * n), j = (node / n) % n, k = node % n;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0;
    for (int a = 0; a < 4; ++a) {
        const long long ci = wrap(i - (a - 1), n);
        for (int b = 0; b < 4; ++b) {
            const long long cj = wrap(j - (b - 1), n);
            for (int c = 0; c < 4; ++c) {
                const long long cell = (ci * n + cj) * n + wrap(k - (c - 1), n);
                const int q1 = start[cell + 1];
                for (int q = start[cell]; q < q1; ++q) {
                    const double w = m4_weight(tau[3 * q], a) * m4_weight(tau[3 * q + 1], b)
                        * m4_weight(tau[3 * q + 2], c);
                    s0 += alpha[3 * q] * w;
                    s1 += alpha[3 * q + 1] * w;
                    s2 += alpha[3 * q + 2] * w;
                }
            }
        }
    }
    out[node * node_stride] = scale * s0;
    out[node * node_stride + comp_stride] = scale * s1;
    out[node * node_stride + 2 * comp_stride] = scale * s2;
}

// Three fields (component planes ``plane`` apart, rows of n nodes) at one point from
// its 4 × 4 × 4 nodes: the weights w[axis][o] and node indices idx[axis][o] of each
// axis, summed in a fixed order (the same bits on every run) into out[0], out[1], out[2].
__device__ __forceinline__ void m4_gather3(const double (&w)[3][4],
                                           const long long (&idx)[3][4], const long long n,
                                           const long long plane,
                                           const double* __restrict__ field,
                                           double* __restrict__ out) {
    double acc0 = 0.0, acc1 = 0.0, acc2 = 0.0;
    #pragma unroll
    for (int a = 0; a < 4; ++a) {
        #pragma unroll
        for (int b = 0; b < 4; ++b) {
            const double wab = w[0][a] * w[1][b];
            const long long row = (idx[0][a] * n + idx[1][b]) * n;
            #pragma unroll
            for (int c = 0; c < 4; ++c) {
                const double wt = wab * w[2][c];
                const long long node = row + idx[2][c];
                acc0 += wt * field[node];
                acc1 += wt * field[plane + node];
                acc2 += wt * field[2 * plane + node];
            }
        }
    }
    out[0] = acc0;
    out[1] = acc1;
    out[2] = acc2;
}

// Three fields (3, n³) (component-major) interpolated at M points x (M, 3) [L]:
// out[p · stride + m], m = 0, 1, 2 (stride 3: an (M, 3) array; 9: a row of (M, 3, 3)).
__global__ void m4_m2p(const double* __restrict__ x, const long long M, const double h,
                       const long long n, const double* __restrict__ field,
                       const long long stride, double* __restrict__ out) {
    const long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (p >= M) return;
    const long long plane = n * n * n;
    double w[3][4];
    long long idx[3][4];
    #pragma unroll
    for (int a = 0; a < 3; ++a) {
        const double s = x[3 * p + a] / h;
        const double f = floor(s);
        const double t = s - f;
        #pragma unroll
        for (int o = 0; o < 4; ++o) {
            w[a][o] = m4_weight(t, o);
            idx[a][o] = wrap((long long)f + o - 1, n);
        }
    }
    m4_gather3(w, idx, n, plane, field, out + p * stride);
}
