// Particle strength exchange (vortexsim.physics.pse_gpu): for every element p,
//
//     acc_p = Σ_q (V_p α_q − V_q α_p) w(|x_p − x_q − s_q| / ε)   over |…| < reach,
//
// w(ρ) = e^{−ρ²/4} (ORDER 2) or (7/2 − ρ²/4) e^{−ρ²/4} (ORDER 4), s_q the periodic image
// shift of q's cell (0 in free space); the caller multiplies by ν ε⁻⁵ (4π)^{−3/2}.
//
// The elements are sorted by cell (CSR ``start`` over the K occupied cells).  One block
// per occupied cell; its threads take the cell's elements in chunks of BS.  The sources
// of the 27 neighbour cells (``nbr`` (K, 27), −1 where none; ``shift`` (K, 27, 3) [L])
// stream through shared memory in tiles of BS, shifted to the image next to the cell.
// Each element's sum runs in a fixed order (the stencil's cells in order, their elements
// in sorted order) and is written by its own thread: deterministic, no atomics.  Pairs
// with q = p give V_p α_p − V_p α_p = 0 exactly.  Double precision throughout.
//
// Arrays (row-major, double unless noted): xs (N, 3) sorted positions [L]; av (N, 4)
// sorted α (3) and V; start (K + 1,) int64; nbr (K, 27) int64; shift (K, 27, 3);
// acc (N, 3) sorted output.  reach2 = reach² [L²]; inv4e2 = −1/(4ε²) [1/L²].
#pragma once

template <int ORDER, int BS>
__global__ void __launch_bounds__(BS)
pse_exchange(const double* __restrict__ xs, const double* __restrict__ av,
             const long long* __restrict__ start, const long long* __restrict__ nbr,
             const double* __restrict__ shift, const double reach2, const double inv4e2,
             double* __restrict__ acc) {
    static_assert(ORDER == 2 || ORDER == 4, "PSE kernels of order 2 and 4");
    __shared__ double sx[BS], sy[BS], sz[BS], s0[BS], s1[BS], s2[BS], sv[BS];
    const int tid = threadIdx.x;
    const long long cell = blockIdx.x;
    const long long t0 = start[cell], t1 = start[cell + 1];
    for (long long base = t0; base < t1; base += BS) {
        const long long i = base + tid;
        const bool active = i < t1;
        double xi = 0.0, yi = 0.0, zi = 0.0, a0 = 0.0, a1 = 0.0, a2 = 0.0, vi = 0.0;
        if (active) {
            xi = xs[3 * i]; yi = xs[3 * i + 1]; zi = xs[3 * i + 2];
            a0 = av[4 * i]; a1 = av[4 * i + 1]; a2 = av[4 * i + 2]; vi = av[4 * i + 3];
        }
        double r0 = 0.0, r1 = 0.0, r2 = 0.0;
        for (int j = 0; j < 27; ++j) {
            const long long c = nbr[27 * cell + j];
            if (c < 0) continue;                       // the same for the whole block
            const double* sh = shift + 3 * (27 * cell + j);
            const double hx = sh[0], hy = sh[1], hz = sh[2];
            const long long q0 = start[c], q1 = start[c + 1];
            for (long long qb = q0; qb < q1; qb += BS) {
                const long long q = qb + tid;
                __syncthreads();                        // the last tile is read
                if (q < q1) {
                    sx[tid] = xs[3 * q] + hx;
                    sy[tid] = xs[3 * q + 1] + hy;
                    sz[tid] = xs[3 * q + 2] + hz;
                    s0[tid] = av[4 * q]; s1[tid] = av[4 * q + 1];
                    s2[tid] = av[4 * q + 2]; sv[tid] = av[4 * q + 3];
                }
                __syncthreads();
                const int m = (int)(q1 - qb < BS ? q1 - qb : BS);
                if (!active) continue;
                for (int k = 0; k < m; ++k) {
                    const double dx = xi - sx[k], dy = yi - sy[k], dz = zi - sz[k];
                    const double d2 = dx * dx + dy * dy + dz * dz;
                    if (d2 < reach2) {
                        const double e = d2 * inv4e2;          // −ρ²/4
                        double w = exp(e);
                        if (ORDER == 4) w *= 3.5 + e;
                        r0 += w * (vi * s0[k] - sv[k] * a0);
                        r1 += w * (vi * s1[k] - sv[k] * a1);
                        r2 += w * (vi * s2[k] - sv[k] * a2);
                    }
                }
            }
        }
        if (active) {
            acc[3 * i] = r0; acc[3 * i + 1] = r1; acc[3 * i + 2] = r2;
        }
    }
}
