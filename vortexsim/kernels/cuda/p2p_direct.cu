// Direct (all-pairs) regularized Biot–Savart sum, tiled through shared memory.
//
// Grid: one thread per TPT targets, BS threads per block; sources stream
// through shared memory in tiles of BS.  Sources x (N,3), alpha (N,3), param (N,2)
// [p, p2 of p2p.cuh]; targets y (M,3); outputs u (M,3), grad (M,3,3).  When
// self_exclude is set, targets are the sources and pair i == j is skipped.
// Callers sort targets along a space-filling curve so that the branches of the
// Gaussian kernel stay coherent within a warp.  In float, each tile is summed
// into its own accumulator before joining the total (error ~ (BS + N/BS) ε
// instead of N ε for long sums of like-signed terms).
#include "p2p.cuh"

template <typename T, int K, bool GRAD, int BS, int TPT>
__global__ void __launch_bounds__(BS)
p2p_direct(const T* __restrict__ xs, const T* __restrict__ alpha,
           const T* __restrict__ param, const int n_src,
           const T* __restrict__ yt, const int n_tgt, const int self_exclude,
           T* __restrict__ u, T* __restrict__ grad) {
    __shared__ SourceRecord<T> sh[BS];
    __shared__ double gtab[GaussTableSize<K, T>::value];
    load_gauss_table<K, T>(gtab);
    const int tid = threadIdx.x;
    const int base = blockIdx.x * BS * TPT + tid;

    constexpr bool TILE_SUMS = sizeof(T) == 4;
    T tx[TPT], ty[TPT], tz[TPT];
    PairAccumulator<T> acc[TPT], total[TPT];
    #pragma unroll
    for (int k = 0; k < TPT; ++k) {
        const int i = base + k * BS;
        const int ic = i < n_tgt ? i : 0;
        tx[k] = yt[3 * ic]; ty[k] = yt[3 * ic + 1]; tz[k] = yt[3 * ic + 2];
        acc[k].zero();
        total[k].zero();
    }

    for (int j0 = 0; j0 < n_src; j0 += BS) {
        const int j = j0 + tid;
        __syncthreads();
        if (j < n_src) {
            sh[tid] = {xs[3 * j], xs[3 * j + 1], xs[3 * j + 2], param[2 * j],
                       alpha[3 * j], alpha[3 * j + 1], alpha[3 * j + 2], param[2 * j + 1]};
        }
        __syncthreads();
        const int jn = min(BS, n_src - j0);
        const int blk0 = blockIdx.x * BS * TPT;   // block-uniform self-pair test
        const bool check_self = self_exclude && j0 < blk0 + BS * TPT && blk0 < j0 + jn;
        if (!check_self) {
            #pragma unroll 4
            for (int jj = 0; jj < jn; ++jj) {
                const SourceRecord<T> r = load_record(sh + jj);
                #pragma unroll
                for (int k = 0; k < TPT; ++k)
                    acc[k].template add<K, GRAD>(tx[k] - r.x, ty[k] - r.y, tz[k] - r.z,
                                                 r.ax, r.ay, r.az, r.p, r.p2, gtab);
            }
        } else {
            for (int jj = 0; jj < jn; ++jj) {
                const SourceRecord<T> r = load_record(sh + jj);
                #pragma unroll
                for (int k = 0; k < TPT; ++k) {
                    if (j0 + jj == base + k * BS) continue;
                    acc[k].template add<K, GRAD>(tx[k] - r.x, ty[k] - r.y, tz[k] - r.z,
                                                 r.ax, r.ay, r.az, r.p, r.p2, gtab);
                }
            }
        }
        if (TILE_SUMS) {
            #pragma unroll
            for (int k = 0; k < TPT; ++k) { total[k].merge(acc[k]); acc[k].zero(); }
        }
    }
    #pragma unroll
    for (int k = 0; k < TPT; ++k) {
        const int i = base + k * BS;
        if (!TILE_SUMS) total[k] = acc[k];
        if (i < n_tgt) total[k].template store<GRAD>(u + 3 * i, GRAD ? grad + 9 * i : nullptr, false);
    }
}
