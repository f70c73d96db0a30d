// Blocks of one leaf's targets and the sources of its stencil as one stream: the
// indexing shared by the FMM's per-leaf kernels (fmm.cu: p2p_near, l2p_targets_tiled;
// fields.cu: p2p_fields, l2p_values).
//
// A leaf holding many targets gets many blocks of BS targets: chunk_start (n_leaves + 1,
// int64) holds each leaf's first block (vortexsim.fmm.cuda.chunk_starts), and the grid
// is bounded without a host transfer, so spare blocks (b >= chunk_start[n_leaves])
// return at once.
#pragma once

// The leaf of block b: the largest lo with chunk_start[lo] <= b.
__device__ __forceinline__ int block_leaf(const long long* __restrict__ chunk_start,
                                          const int n_leaves, const long long b) {
    int lo = 0, hi = n_leaves;                           // chunk_start[lo] <= b < [hi]
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (chunk_start[mid] <= b) lo = mid; else hi = mid;
    }
    return lo;
}

// The sources of the stencil of `leaf` (nbr: n_leaves × n_nbr leaf indices, −1 outside
// the grid; n_nbr ≤ 125) as one stream, in shared memory: box q's first source s_beg[q],
// its count s_cnt[q], and the stream offsets s_off[0..n_nbr].  Called by every thread of
// the block (it synchronizes); returns the stream's length.
template <int BS>
__device__ __forceinline__ int stencil_stream(const long long* __restrict__ nbr,
                                              const int n_nbr, const int leaf,
                                              const long long* __restrict__ src_start,
                                              long long* s_beg, int* s_cnt, int* s_off) {
    for (int q = threadIdx.x; q < n_nbr; q += BS) {
        const long long box = nbr[(long long)leaf * n_nbr + q];
        const long long b0 = box >= 0 ? src_start[box] : 0;
        s_beg[q] = b0;
        s_cnt[q] = box >= 0 ? (int)(src_start[box + 1] - b0) : 0;
    }
    __syncthreads();
    for (int q = threadIdx.x; q <= n_nbr; q += BS) {
        int off = 0;
        for (int r = 0; r < q; ++r) off += s_cnt[r];
        s_off[q] = off;
    }
    __syncthreads();
    return s_off[n_nbr];
}

// The source index of stream position pos (s_off[lo] ≤ pos < s_off[lo + 1]).
__device__ __forceinline__ long long stencil_source(const int pos, const long long* s_beg,
                                                    const int* s_off, const int n_nbr) {
    int lo = 0, hi = n_nbr;                              // s_off[lo] ≤ pos < s_off[hi]
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (s_off[mid] <= pos) lo = mid; else hi = mid;
    }
    return s_beg[lo] + (pos - s_off[lo]);
}
