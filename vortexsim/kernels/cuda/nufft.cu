// The deterministic periodic NUFFT's grid kernels (vortexsim.kernels.nufft): spreading
// (type 1) by gathering and interpolation (type 2), in float64, no atomics.
//
// Grid: n³ points, C order, index (i0 n + i1) n + i2; a point's coordinate t (grid
// units) lies in [0, n).  The "exponential of semicircle" kernel of width w (grid
// points) and shape beta, phi(x) = exp(beta (sqrt(1 − (2x/w)²) − 1)) for |x| < w/2:
// a point at t reaches the w grid points l0 + j, j = 0 … w − 1, l0 = ceil(t − w/2),
// with weight phi(l0 + j − t), periodically (mod n) on every axis.  NumPy specification:
// vortexsim.kernels.nufft (spread_numpy, interpolate_numpy).

__device__ __forceinline__ double es_kernel(const double x, const double w_half,
                                            const double beta) {
    const double z = x / w_half;
    const double s = 1.0 - z * z;
    return s > 0.0 ? exp(beta * (sqrt(s) - 1.0)) : 0.0;
}

__device__ __forceinline__ int wrap_index(int i, const int n) {
    i %= n;
    return i < 0 ? i + n : i;
}

#include "cell_starts.cuh"

// Type-1 spreading by gathering: grid[k][p] = Σ_e c[k][e] Π_d phi(l0_d(e) + j_d − t_d(e))
// over the elements e whose w³ stencil holds p.  One block per TILE³ tile of the grid,
// one thread per point.  A point's elements lie in the cells of its tile widened by
// ceil(w/2) below and floor(w/2) above (TILE + w cells per axis, needs TILE + w <= n so
// that no cell is visited twice); every thread runs through them in one fixed order
// (cell rows by i0 then i1, the i2 range as one or two segments of the sorted elements,
// the elements of a cell in sorted order), so the sum's order is fixed: no atomics,
// the same bits every run.
//   t (3, n_el): the sorted elements' coordinates; c (K, n_el): their values;
//   starts (n³ + 1): CSR of the sorted cells; grid (K, n³): the output.
template <int K, int TILE>
__global__ void __launch_bounds__(TILE * TILE * TILE)
nufft_spread(const double* __restrict__ t, const double* __restrict__ c,
             const long long n_el, const int* __restrict__ starts, const int n,
             const int w, const double beta, double* __restrict__ grid) {
    const int tiles = (n + TILE - 1) / TILE;
    const int b = blockIdx.x;
    const int o0 = (b / (tiles * tiles)) * TILE;
    const int o1 = ((b / tiles) % tiles) * TILE;
    const int o2 = (b % tiles) * TILE;
    const int p0 = o0 + (int) threadIdx.x / (TILE * TILE);
    const int p1 = o1 + ((int) threadIdx.x / TILE) % TILE;
    const int p2 = o2 + (int) threadIdx.x % TILE;
    const bool inside = p0 < n && p1 < n && p2 < n;
    const double w_half = 0.5 * w;
    const int below = (w + 1) / 2;                // ceil(w/2)
    const int span = TILE + w;                    // cells per axis
    double acc[K];
    #pragma unroll
    for (int k = 0; k < K; ++k) acc[k] = 0.0;
    if (inside) {
        for (int a = 0; a < span; ++a) {
            const long long c0 = wrap_index(o0 - below + a, n);
            for (int bb = 0; bb < span; ++bb) {
                const long long row = (c0 * n + wrap_index(o1 - below + bb, n)) * n;
                // the i2 cells o2 − below … o2 − below + span − 1, wrapped: one or two runs
                const int s = wrap_index(o2 - below, n);
                const int first = min(span, n - s);
                for (int seg = 0; seg < 2; ++seg) {
                    const int lo = seg == 0 ? s : 0;
                    const int len = seg == 0 ? first : span - first;
                    if (len <= 0) continue;
                    const int e_end = starts[row + lo + len];
                    for (int e = starts[row + lo]; e < e_end; ++e) {
                        const double t0 = t[e], t1 = t[n_el + e], t2 = t[2 * n_el + e];
                        const int l0 = (int) ceil(t0 - w_half);
                        const int l1 = (int) ceil(t1 - w_half);
                        const int l2 = (int) ceil(t2 - w_half);
                        const int j0 = wrap_index(p0 - l0, n);
                        const int j1 = wrap_index(p1 - l1, n);
                        const int j2 = wrap_index(p2 - l2, n);
                        if (j0 >= w || j1 >= w || j2 >= w) continue;
                        const double phi = es_kernel((double) (l0 + j0) - t0, w_half, beta)
                                         * es_kernel((double) (l1 + j1) - t1, w_half, beta)
                                         * es_kernel((double) (l2 + j2) - t2, w_half, beta);
                        #pragma unroll
                        for (int k = 0; k < K; ++k) acc[k] += phi * c[k * n_el + e];
                    }
                }
            }
        }
        const long long p = ((long long) p0 * n + p1) * n + p2;
        const long long n3 = (long long) n * n * n;
        #pragma unroll
        for (int k = 0; k < K; ++k) grid[k * n3 + p] = acc[k];
    }
}

// Type-2 interpolation: out[k][q] = Σ_{j0, j1, j2} grid[k][l0 + j] Π_d phi(l0_d + j_d − t_d)
// at the targets q, one thread per target, the stencil in a fixed order (j0, then j1,
// then j2).  t (3, m); grid (K, n³); out (K, m).
template <int K>
__global__ void __launch_bounds__(128)
nufft_interpolate(const double* __restrict__ t, const long long m,
                  const double* __restrict__ grid, const int n, const int w,
                  const double beta, double* __restrict__ out) {
    const long long q = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= m) return;
    constexpr int WMAX = 16;
    const double w_half = 0.5 * w;
    double f0[WMAX], f1[WMAX], f2[WMAX];
    int i0[WMAX], i1[WMAX], i2[WMAX];
    const double t0 = t[q], t1 = t[m + q], t2 = t[2 * m + q];
    const int l0 = (int) ceil(t0 - w_half);
    const int l1 = (int) ceil(t1 - w_half);
    const int l2 = (int) ceil(t2 - w_half);
    for (int j = 0; j < w; ++j) {
        f0[j] = es_kernel((double) (l0 + j) - t0, w_half, beta);
        f1[j] = es_kernel((double) (l1 + j) - t1, w_half, beta);
        f2[j] = es_kernel((double) (l2 + j) - t2, w_half, beta);
        i0[j] = wrap_index(l0 + j, n);
        i1[j] = wrap_index(l1 + j, n);
        i2[j] = wrap_index(l2 + j, n);
    }
    const long long n3 = (long long) n * n * n;
    double acc[K];
    #pragma unroll
    for (int k = 0; k < K; ++k) acc[k] = 0.0;
    for (int a = 0; a < w; ++a) {
        for (int b = 0; b < w; ++b) {
            const double fab = f0[a] * f1[b];
            const long long row = ((long long) i0[a] * n + i1[b]) * n;
            for (int cc = 0; cc < w; ++cc) {
                const double f = fab * f2[cc];
                const long long p = row + i2[cc];
                #pragma unroll
                for (int k = 0; k < K; ++k) acc[k] += f * grid[k * n3 + p];
            }
        }
    }
    #pragma unroll
    for (int k = 0; k < K; ++k) out[k * m + q] = acc[k];
}
