// CUDA kernels of the FMM (vortexsim/fmm/evaluator.py): near field, P2M, L2P.
//
// Sources and targets are sorted by leaf (Morton order); CSR starts (int64)
// give each leaf's range.  Every kernel is deterministic (no atomics): results
// are bitwise reproducible run to run on the same device.
#include "p2p.cuh"
#include "leaf_blocks.cuh"
#include "morton.cuh"

// Near field: one block per chunk of BS targets of one leaf (a leaf holding many
// targets gets many blocks; `chunk_start` maps blocks to leaves), one thread per
// target.  The sources of the stencil's leaves (`nbr`: n_leaves × n_nbr, −1 outside
// the grid; n_nbr ≤ 125) form one concatenated stream that is staged through shared
// memory in tiles of TS records, across leaf boundaries, so small leaves cost few
// synchronizations.  Writes the near-field u (M,3) and ∇u (M,3,3) of the sorted
// targets (with 1/4π).  Gaussian pairs with (r/σ)² ≥ scut take the singular factors
// (p2p.cuh; the FMM passes ρ*(tol)², its reach).  Points within a leaf are in Z-order
// (tree.py), so a warp's targets are close together and that branch is coherent.
// With self_exclude the sorted sources are the sorted targets and each target skips
// its own record (stream position p_self).  UNIFORM: every source has the parameters of
// the first (one σ): records without them (PointRecord), the same arithmetic.
template <int K, bool GRAD, typename T>
__device__ __forceinline__ void add_record(PairAccumulator<T>& acc, const SourceRecord<T>* rec,
                                           T tx, T ty, T tz, T, T, const double* gtab, T scut) {
    const SourceRecord<T> r = load_record(rec);
    acc.template add<K, GRAD>(tx - r.x, ty - r.y, tz - r.z, r.ax, r.ay, r.az, r.p, r.p2,
                              gtab, scut);
}
template <int K, bool GRAD, typename T>
__device__ __forceinline__ void add_record(PairAccumulator<T>& acc, const PointRecord<T>* rec,
                                           T tx, T ty, T tz, T p, T p2, const double* gtab,
                                           T scut) {
    const PointRecord<T> r = load_point(rec);
    acc.template add<K, GRAD>(tx - r.x, ty - r.y, tz - r.z, r.ax, r.ay, r.az, p, p2, gtab, scut);
}

template <typename T, int K, bool GRAD, int BS, int TS, bool UNIFORM = false>
__global__ void __launch_bounds__(BS)
p2p_near(const T* __restrict__ xs, const T* __restrict__ alpha, const T* __restrict__ param,
         const long long* __restrict__ src_start, const T* __restrict__ yt,
         const long long* __restrict__ tgt_start, const long long* __restrict__ nbr,
         const int n_nbr, const int self_exclude, const long long* __restrict__ chunk_start,
         const int n_leaves, const T scut, T* __restrict__ u, T* __restrict__ grad) {
    using Record = typename NearRecord<T, UNIFORM>::type;
    __shared__ Record sh[TS];
    __shared__ double gtab[GaussTableSize<K, T>::value];
    __shared__ long long s_beg[125];
    __shared__ int s_cnt[125], s_off[126];
    // block -> (leaf, chunk of BS targets): chunk_start[leaf] = chunks of the leaves
    // before it, so a leaf with many targets is spread over many blocks (occupancy)
    const long long b = blockIdx.x;
    if (b >= chunk_start[n_leaves]) return;              // spare block of the bound grid
    const int lo_leaf = block_leaf(chunk_start, n_leaves, b);
    load_gauss_table<K, T>(gtab);
    constexpr bool TILE_SUMS = sizeof(T) == 4;
    const T p_u = UNIFORM ? param[0] : T(0), p2_u = UNIFORM ? param[1] : T(0);
    const int leaf = lo_leaf;
    const long long t_leaf = tgt_start[leaf];
    const long long t_begin = t_leaf + (b - chunk_start[leaf]) * BS;
    const long long t_end = min(tgt_start[leaf + 1], t_begin + BS);
    const int total = stencil_stream<BS>(nbr, n_nbr, leaf, src_start, s_beg, s_cnt, s_off);
    // stream position of target t_begin's own record (the centre box is the leaf)
    const int own = self_exclude ? s_off[n_nbr / 2] + (int)(t_begin - t_leaf) : 0;
    for (long long c0 = t_begin; c0 < t_end; c0 += BS) {
        const long long i = c0 + threadIdx.x;
        const bool active = i < t_end;
        const long long ic = active ? i : t_begin;
        const T tx = yt[3 * ic], ty = yt[3 * ic + 1], tz = yt[3 * ic + 2];
        const int p_self = self_exclude ? own + (int)(ic - t_begin) : -1;
        PairAccumulator<T> acc, total_acc;
        acc.zero();
        total_acc.zero();
        for (int base = 0; base < total; base += TS) {
            __syncthreads();
            for (int k = threadIdx.x; k < TS && base + k < total; k += BS) {
                const long long j = stencil_source(base + k, s_beg, s_off, n_nbr);
                if constexpr (UNIFORM) {
                    sh[k] = {xs[3 * j], xs[3 * j + 1], xs[3 * j + 2],
                             alpha[3 * j], alpha[3 * j + 1], alpha[3 * j + 2]};
                } else {
                    sh[k] = {xs[3 * j], xs[3 * j + 1], xs[3 * j + 2], param[2 * j],
                             alpha[3 * j], alpha[3 * j + 1], alpha[3 * j + 2], param[2 * j + 1]};
                }
            }
            __syncthreads();
            const int jn = min(TS, total - base);
            // block-uniform: does this tile hold the leaf's own records (self pairs)?
            const bool check_self = self_exclude && base < own + (int)(t_end - t_begin)
                                    && own < base + jn;
            if (!check_self) {
#pragma unroll 4
                for (int jj = 0; jj < jn; ++jj) add_record<K, GRAD>(acc, sh + jj, tx, ty, tz,
                                                                    p_u, p2_u, gtab, scut);
            } else {
                const int skip = p_self - base;
                for (int jj = 0; jj < jn; ++jj) {
                    if (jj == skip) continue;
                    add_record<K, GRAD>(acc, sh + jj, tx, ty, tz, p_u, p2_u, gtab, scut);
                }
            }
            if (TILE_SUMS) { total_acc.merge(acc); acc.zero(); }
        }
        if (!TILE_SUMS) total_acc = acc;
        if (active) total_acc.template store<GRAD>(u + 3 * i, GRAD ? grad + 9 * i : nullptr, false);
    }
}

// P2M in normalized coordinates: M̃[leaf, c, d] = Σ_p ((c_leaf − y_p) / w)^k_c α_p,d
// (w = leaf width; M̃_m = M_m / w^|m| of expansions.py).  One block per leaf; the
// leaf's sources are staged through shared memory in chunks of CH as per-axis power
// tables, and each thread accumulates NPT coefficients in registers.  Empty leaves
// write zeros.
template <int ORDER, int BS>
__global__ void __launch_bounds__(BS)
p2m_leaf(const double* __restrict__ xs, const double* __restrict__ alpha,
         const long long* __restrict__ src_start, const double* __restrict__ centres,
         const double inv_w, const int* __restrict__ kidx, double* __restrict__ M) {
    constexpr int NC = (ORDER + 1) * (ORDER + 2) * (ORDER + 3) / 6;
    constexpr int NPT = (NC + BS - 1) / BS;
    constexpr int CH = 32;
    __shared__ double pw[CH][3][ORDER + 1];
    __shared__ double al[CH][3];
    const int leaf = blockIdx.x;
    const long long s0 = src_start[leaf], s1 = src_start[leaf + 1];
    int k[NPT][3];
    double acc[NPT][3];
#pragma unroll
    for (int q = 0; q < NPT; ++q) {
        const int c = min((int)threadIdx.x + q * BS, NC - 1);
        k[q][0] = kidx[3 * c]; k[q][1] = kidx[3 * c + 1]; k[q][2] = kidx[3 * c + 2];
        acc[q][0] = acc[q][1] = acc[q][2] = 0.0;
    }
    const double cen[3] = {centres[3 * leaf], centres[3 * leaf + 1], centres[3 * leaf + 2]};
    for (long long j0 = s0; j0 < s1; j0 += CH) {
        __syncthreads();
        for (int t = threadIdx.x; t < CH * 3; t += BS) {
            const int s = t / 3, a = t % 3;
            const long long j = j0 + s;
            const bool ok = j < s1;
            const double h = ok ? (cen[a] - xs[3 * j + a]) * inv_w : 0.0;
            double p = 1.0;
#pragma unroll
            for (int e = 0; e <= ORDER; ++e) { pw[s][a][e] = p; p *= h; }
            al[s][a] = ok ? alpha[3 * j + a] : 0.0;
        }
        __syncthreads();
        const int jn = (int)min((long long)CH, s1 - j0);
        for (int s = 0; s < jn; ++s) {
            const double a0 = al[s][0], a1 = al[s][1], a2 = al[s][2];
#pragma unroll
            for (int q = 0; q < NPT; ++q) {
                const double m = pw[s][0][k[q][0]] * pw[s][1][k[q][1]] * pw[s][2][k[q][2]];
                acc[q][0] += m * a0; acc[q][1] += m * a1; acc[q][2] += m * a2;
            }
        }
    }
#pragma unroll
    for (int q = 0; q < NPT; ++q) {
        const int c = threadIdx.x + q * BS;
        if (c < NC) {
            double* out = M + ((long long)leaf * NC + c) * 3;
            out[0] = acc[q][0]; out[1] = acc[q][1]; out[2] = acc[q][2];
        }
    }
}

// L2P, step 1: per leaf with targets, the coefficients of the L2P polynomials (see
// l2p_targets) from the normalized local expansion L̃ (n_leaves, n_in) (n_in = n·3):
//   C[leaf, o] = Σ_t (fu[t, o] / w + fg[t, o] / w²) L̃[leaf, idx[t, o]],  t = 0, 1.
// One block per leaf, its threads striding over o; a leaf without targets leaves at once
// (never read), so a deep level that is mostly empty costs one test per leaf (a thread per
// (leaf, o) cost ~1 ms on the H100 at 8^5 leaves even when they returned at once).
__global__ void l2p_coefficients(const double* __restrict__ L, const long long* __restrict__ idx,
                                 const double* __restrict__ fu, const double* __restrict__ fg,
                                 const double inv_w, const int n_in, const int n_out,
                                 const long long n_leaves, const long long* __restrict__ tgt_start,
                                 double* __restrict__ C) {
    const long long leaf = blockIdx.x;
    if (leaf >= n_leaves || tgt_start[leaf] == tgt_start[leaf + 1]) return;
    const double* Ll = L + leaf * n_in;
    double* Cl = C + leaf * n_out;
    const double inv_w2 = inv_w * inv_w;
    for (int o = threadIdx.x; o < n_out; o += blockDim.x)
        Cl[o] = (fu[o] * inv_w + fg[o] * inv_w2) * Ll[idx[o]]
              + (fu[n_out + o] * inv_w + fg[n_out + o] * inv_w2) * Ll[idx[n_out + o]];
}

// L2P, step 2: adds the far field at each sorted target.  C (n_leaves, N1, 12) holds,
// per leaf and monomial ĥ^j of degree ≤ ORDER − 1 (ĥ = (y − c)/w), the coefficients of
// u_a (3) and of ∂_d u_a (9, a-major; zero at degree ORDER − 1), with 1/4π and the
// powers of 1/w applied; its rows come in the order of the loops below
// (evaluator._l2p_loop_order).  Each block holds BS targets of one leaf (`chunk_start`
// maps blocks to leaves, as in p2p_near), one thread per target, monomials by running
// products; the leaf's rows are staged through shared memory TILE at a time (a
// contiguous range).  Against one thread per target reading C through the cache: rings
// L2P 3.8 → 2.3 ms on the H100 (2026-11-22).
template <int ORDER, bool GRAD, int BS, int TILE>
__global__ void __launch_bounds__(BS)
l2p_targets_tiled(const double* __restrict__ C, const double* __restrict__ centres,
                  const double inv_w, const long long* __restrict__ tgt_start,
                  const long long* __restrict__ chunk_start, const int n_leaves,
                  const double* __restrict__ yt, double* __restrict__ u,
                  double* __restrict__ grad) {
    constexpr int D1 = ORDER - 1;
    constexpr int N1 = (D1 + 1) * (D1 + 2) * (D1 + 3) / 6;
    constexpr int SR = GRAD ? 6 : 2;                     // double2 staged per row (u only: 2)
    // u only: all rows fit in shared memory (P = 16: 26 KB), staged once, and the
    // loops run without tile checks (1.35 → ? ms for 2^20 tracers on the H100)
    constexpr bool ALL = !GRAD && N1 * SR * 16 <= 40000;
    constexpr int TL = ALL ? N1 : TILE;
    __shared__ double2 sh[TL * SR];
    const long long b = blockIdx.x;
    if (b >= chunk_start[n_leaves]) return;              // spare block of the bound grid
    const int lo_leaf = block_leaf(chunk_start, n_leaves, b);
    const long long leaf = lo_leaf;
    const long long t_begin = tgt_start[leaf] + (b - chunk_start[leaf]) * BS;
    const long long t_end = min(tgt_start[leaf + 1], t_begin + BS);
    const long long i = t_begin + threadIdx.x;
    const bool active = i < t_end;
    const long long ic = active ? i : t_begin;
    const double2* Cl = reinterpret_cast<const double2*>(C + leaf * N1 * 12);
    const double hx = (yt[3 * ic] - centres[3 * leaf]) * inv_w,
                 hy = (yt[3 * ic + 1] - centres[3 * leaf + 1]) * inv_w,
                 hz = (yt[3 * ic + 2] - centres[3 * leaf + 2]) * inv_w;
    double ua[3] = {0.0, 0.0, 0.0};
    double g[9] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    double px = 1.0;
    if (ALL) {
        for (int e = threadIdx.x; e < N1 * SR; e += BS) sh[e] = Cl[6 * (e / SR) + e % SR];
        __syncthreads();
    }
    int j = 0;                                           // row in loop order
#pragma unroll 1
    for (int kx = 0; kx <= D1; ++kx) {
        double pxy = px;
#pragma unroll 1
        for (int ky = 0; ky <= D1 - kx; ++ky) {
            double m = pxy;
            const int d0 = kx + ky;
#pragma unroll (ALL ? 4 : 1)
            for (int kz = 0; kz <= D1 - d0; ++kz, ++j) {
                const int jt = ALL ? j : j % TILE;
                if (!ALL && jt == 0) {                   // block-uniform: next tile
                    __syncthreads();
                    const int rows = min(TILE, N1 - j);
                    for (int e = threadIdx.x; e < rows * SR; e += BS)
                        sh[e] = Cl[6 * (j + e / SR) + e % SR];
                    __syncthreads();
                }
                const double2* c = sh + SR * jt;
                const double2 c0 = c[0], c1 = c[1];
                ua[0] += c0.x * m; ua[1] += c0.y * m; ua[2] += c1.x * m;
                if (GRAD && d0 + kz < D1) {
                    const double2 c2 = c[2], c3 = c[3], c4 = c[4], c5 = c[5];
                    g[0] += c1.y * m; g[1] += c2.x * m; g[2] += c2.y * m;
                    g[3] += c3.x * m; g[4] += c3.y * m; g[5] += c4.x * m;
                    g[6] += c4.y * m; g[7] += c5.x * m; g[8] += c5.y * m;
                }
                m *= hz;
            }
            pxy *= hy;
        }
        px *= hx;
    }
    if (!active) return;
    u[3 * i] += ua[0]; u[3 * i + 1] += ua[1]; u[3 * i + 2] += ua[2];
    if (GRAD) {
#pragma unroll
        for (int e = 0; e < 9; ++e) grad[9 * i + e] += g[e];
    }
}

// The last kernel of the sparse M2L's variants (m2l_gather_sum, m2l_pair_sum) for target
// box t = blockIdx.x (parity p = t & 7, j = t >> 3): for each of its interaction
// offsets q (gather (8, n_boxes/8, nq): the source box s, or n_boxes outside the grid)
// the variant's `entry(p, q, s, pos, st)` says where that block is (pos ≥ 0 with the
// component stride st; −2 − s with the offset's index o = st for a source box beyond
// the GEMMs' capacity; −1: none).  One thread compacts the entries in q order, then
// Lt[k, t, :] = Σ_i Y[pos + k + {0, st, 2 st}], or Σ_m Kt[m, o·r + k] Mt[m, s, :] for an
// overflowing block (Kt (r, 343 r): the cores of all offsets; Mt (r, n_boxes, 3)
// float64).  Fixed summation order, no atomics; a box without targets gets zeros.
template <typename T, typename Entry>
__device__ void m2l_sum_box(const Entry& entry, const long long* __restrict__ gather,
                            const long long* __restrict__ tgt_cnt, const int nq,
                            const T* __restrict__ Y, const int r, const long long n_boxes,
                            const T* __restrict__ Kt, const double* __restrict__ Mt,
                            double* __restrict__ Lt) {
    __shared__ long long s_pos[343], s_st[343];
    __shared__ int s_n;
    const long long t = blockIdx.x;
    const int p = (int)(t & 7);
    const long long j = t >> 3;
    const bool empty = tgt_cnt[t] == 0;                 // block-uniform
    if (!empty) {
        for (int q = threadIdx.x; q < nq; q += blockDim.x)
            entry(p, q, gather[((long long)p * (n_boxes >> 3) + j) * nq + q], s_pos[q],
                  s_st[q]);
        __syncthreads();
        if (threadIdx.x == 0) {                          // ordered compaction
            int n = 0;
            for (int q = 0; q < nq; ++q)
                if (s_pos[q] != -1) { s_pos[n] = s_pos[q]; s_st[n] = s_st[q]; ++n; }
            s_n = n;
        }
        __syncthreads();
    }
    const int n_act = empty ? 0 : s_n;
    const long long kstride = 343LL * r;
    for (int k = threadIdx.x; k < r; k += blockDim.x) {
        double a0 = 0.0, a1 = 0.0, a2 = 0.0;
#pragma unroll 4
        for (int i = 0; i < n_act; ++i) {
            const long long pos = s_pos[i];
            if (pos >= 0) {                              // block-uniform branch
                const T* y = Y + pos + k;
                const long long st = s_st[i];
                a0 += (double)y[0]; a1 += (double)y[st]; a2 += (double)y[2 * st];
            } else {
                const long long s = -2 - pos;
                const T* kc = Kt + s_st[i] * r + k;
                double b0 = 0.0, b1 = 0.0, b2 = 0.0;
                for (int m = 0; m < r; ++m) {
                    const double kv = (double)kc[m * kstride];
                    const double* mv = Mt + ((long long)m * n_boxes + s) * 3;
                    b0 += kv * mv[0]; b1 += kv * mv[1]; b2 += kv * mv[2];
                }
                a0 += b0; a1 += b1; a2 += b2;
            }
        }
        double* out = Lt + ((long long)k * n_boxes + t) * 3;
        out[0] = a0; out[1] = a1; out[2] = a2;
    }
}

// Sparse M2L, step 2 (evaluator.py `_m2l_sparse`): the compressed locals of every box
// t (one block each; its parity class p = t & 7, j = t >> 3).  Step 1 (GEMMs) gave, per
// source class c, Y_c (3 n_c, |O'_c| r): row 3·col + component of an active (non-empty)
// source box, column block q' = its offset's index in O'_c.  Here each target box sums,
// over its interaction offsets q (gather (8, n_boxes/8, nq): source box, or n_boxes
// outside the grid; qcls, qidx (8, nq): that source's class and row block), the blocks
// of its active sources.  The block first lists those blocks in shared memory, in q
// order (one thread), so that the sums run over independent loads.  Boxes without
// targets get zeros.  Lt (r, n_boxes, 3).  Fixed summation order, no atomics.
//
// Overflow (a time stepper's sync-free call sizes the GEMMs by capacities from the
// step's start): an active source box beyond its class's capacity has colmap −2 and
// its block is computed here, Σ_m Kt[m, o·r + k] Mt[m, s, c] (Kt (r, 343 r): the cores
// of all offsets, o = qraw[p, q]; Mt (r, n_boxes, 3) float64 compressed multipoles),
// in the same q order.  No box overflows in the other calls (Kt, Mt unused).
template <typename T>
__global__ void m2l_gather_sum(const T* __restrict__ Y, const long long* __restrict__ ybase,
                               const long long* __restrict__ ystride,
                               const long long* __restrict__ gather, const int* __restrict__ qcls,
                               const int* __restrict__ qidx, const int nq,
                               const long long* __restrict__ colmap,
                               const long long* __restrict__ tgt_cnt, const int r,
                               const long long n_boxes, const T* __restrict__ Kt,
                               const double* __restrict__ Mt, const int* __restrict__ qraw,
                               double* __restrict__ Lt) {
    struct {
        const long long *ybase, *ystride, *colmap, n_boxes;
        const int *qcls, *qidx, *qraw;
        int nq, r;
        __device__ void operator()(int p, int q, long long s, long long& pos,
                                   long long& st) const {
            const long long c = s < n_boxes ? colmap[s] : -1;
            const int cls = qcls[p * nq + q];
            pos = -1;
            if (c >= 0) {
                st = ystride[cls];
                pos = ybase[cls] + 3 * c * st + (long long)qidx[p * nq + q] * r;
            } else if (c == -2) {                        // overflow: computed in the sums
                st = qraw[p * nq + q];
                pos = -2 - s;
            }
        }
    } entry{ybase, ystride, colmap, n_boxes, qcls, qidx, qraw, nq, r};
    m2l_sum_box(entry, gather, tgt_cnt, nq, Y, r, n_boxes, Kt, Mt, Lt);
}

// Sparse M2L by offset ("pairs", vortexsim.fmm.cuda.CudaM2L._sparse_pairs): the products
// K_d M_s of the pairs (source box s, target box t = s − d) that both hold points, batched
// by offset d, instead of all of a source box's offsets.  Three kernels and one batched
// GEMM per bucket of offsets.

// Every third bit of v, from bit 0 (inverse of vs_spread, morton.cuh).
__device__ __forceinline__ long long vs_compact(unsigned long long v) {
    v &= 0x1249249249249249ull;
    v = (v | (v >> 2)) & 0x10C30C30C30C30C3ull;
    v = (v | (v >> 4)) & 0x100F00F00F00F00Full;
    v = (v | (v >> 8)) & 0x1F0000FF0000FFull;
    v = (v | (v >> 16)) & 0x1F00000000FFFFull;
    v = (v | (v >> 32)) & 0x1FFFFFull;
    return (long long)v;
}

// Step 1: block b lists the pairs of offset slot b (d = offs[b], an OFFSETS_3 offset):
// over the boxes s of the level in ascending order, those with sources (src_cnt > 0)
// whose box t = s − d lies in the grid, holds targets (tgt_cnt > 0) and takes s (the M2L
// rule of parent radius 1: t's parity + d within [−2, 3] per axis; the caller's offsets
// already lie outside the near stencil) get slots j = 0, 1, … in that order (a block scan:
// deterministic); slot_of[b·n_boxes + s] = j, slot_src[base[b] + j] = s for j < cap[b], and
// counts[b] = the number of pairs.  slot_of == nullptr: counts only (the plan's sizes).
__global__ void __launch_bounds__(256)
m2l_pair_slots(const long long* __restrict__ src_cnt, const long long* __restrict__ tgt_cnt,
               const int level, const int* __restrict__ offs,
               const long long* __restrict__ cap, const long long* __restrict__ base,
               long long* __restrict__ slot_src, int* __restrict__ slot_of,
               long long* __restrict__ counts) {
    __shared__ int s_warp[8];
    __shared__ long long s_total;
    const int b = blockIdx.x;
    const long long dx = offs[3 * b], dy = offs[3 * b + 1], dz = offs[3 * b + 2];
    const long long n = 1LL << level;
    const long long n_boxes = n * n * n;
    const long long cb = slot_of ? cap[b] : 0;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) s_total = 0;
    __syncthreads();
    for (long long s0 = 0; s0 < n_boxes; s0 += 256) {
        const long long s = s0 + threadIdx.x;
        int flag = 0;
        if (s < n_boxes && src_cnt[s] > 0) {
            const long long tx = vs_compact((unsigned long long)s) - dx;
            const long long ty = vs_compact((unsigned long long)s >> 1) - dy;
            const long long tz = vs_compact((unsigned long long)s >> 2) - dz;
            if (tx >= 0 && tx < n && ty >= 0 && ty < n && tz >= 0 && tz < n
                    && (tx & 1) + dx >= -2 && (tx & 1) + dx <= 3
                    && (ty & 1) + dy >= -2 && (ty & 1) + dy <= 3
                    && (tz & 1) + dz >= -2 && (tz & 1) + dz <= 3) {
                const long long t = (long long)(vs_spread(tx) | (vs_spread(ty) << 1)
                                                | (vs_spread(tz) << 2));
                flag = tgt_cnt[t] > 0;
            }
        }
        const unsigned mask = __ballot_sync(0xffffffffu, flag);
        if (lane == 0) s_warp[warp] = __popc(mask);
        __syncthreads();
        if (flag && slot_of) {
            long long j = s_total + __popc(mask & ((1u << lane) - 1u));
            for (int w = 0; w < warp; ++w) j += s_warp[w];
            slot_of[(long long)b * n_boxes + s] = (int)j;
            if (j < cb) slot_src[base[b] + j] = s;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            long long sum = 0;
            for (int w = 0; w < 8; ++w) sum += s_warp[w];
            s_total += sum;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) counts[b] = s_total;
}

// Step 2: the GEMMs' left-hand sides, A[abase[b] + (3 j + c) r + m] = Mt[m, s_j, c] for the
// listed pairs j < min(counts[b], cap[b]) of offset slot b = blockIdx.y, zero in the rows
// beyond (Mt (r, n_boxes, 3) float64 compressed multipoles).  Then per bucket of slots of
// one capacity C one batched GEMM Y_b = A_b (n_b, 3C, r) · Kt_b (n_b, r, r) (cuBLAS).
template <typename T>
__global__ void m2l_pair_gather(const double* __restrict__ Mt, const long long n_boxes,
                                const int r, const long long* __restrict__ cap,
                                const long long* __restrict__ base,
                                const long long* __restrict__ counts,
                                const long long* __restrict__ abase,
                                const long long* __restrict__ slot_src, T* __restrict__ A) {
    const int b = blockIdx.y;
    const long long c_b = cap[b];
    const long long used = counts[b] < c_b ? counts[b] : c_b;
    const long long n_el = 3 * c_b * r;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n_el;
         e += (long long)gridDim.x * blockDim.x) {
        const long long row = e / r;
        const long long m = e - row * r;
        const long long j = row / 3;
        T v = (T)0;
        if (j < used)
            v = (T)Mt[(m * n_boxes + slot_src[base[b] + j]) * 3 + (row - 3 * j)];
        A[abase[b] + e] = v;
    }
}

// Step 3: the compressed locals of every box t (one block each; parity p = t & 7,
// j = t >> 3), as m2l_gather_sum: over its interaction offsets q in order (gather: the
// source box, or n_boxes outside the grid; qraw (8, nq): the offset's index o in
// OFFSETS_3, slot_index[o] its slot), the blocks Y[abase[b] + (3 j' + c) r + k] of its
// pairs (j' = slot_of[b·n_boxes + s]); a pair beyond its slot's capacity (a time
// stepper's sizes from the step's start) is computed here from Kt (r, 343 r) and Mt.
// Boxes without targets get zeros.  Fixed summation order, no atomics.
template <typename T>
__global__ void m2l_pair_sum(const T* __restrict__ Y, const long long* __restrict__ abase,
                             const long long* __restrict__ cap,
                             const int* __restrict__ slot_of,
                             const int* __restrict__ slot_index,
                             const long long* __restrict__ gather,
                             const int* __restrict__ qraw, const int nq,
                             const long long* __restrict__ src_cnt,
                             const long long* __restrict__ tgt_cnt, const int r,
                             const long long n_boxes, const T* __restrict__ Kt,
                             const double* __restrict__ Mt, double* __restrict__ Lt) {
    struct {
        const long long *abase, *cap, *src_cnt, n_boxes;
        const int *slot_of, *slot_index, *qraw;
        int nq, r;
        __device__ void operator()(int p, int q, long long s, long long& pos,
                                   long long& st) const {
            const int o = qraw[p * nq + q];
            pos = -1;
            st = r;
            if (s < n_boxes && src_cnt[s] > 0) {
                const int b = slot_index[o];
                const long long jj = slot_of[(long long)b * n_boxes + s];
                if (jj < cap[b]) {
                    pos = abase[b] + 3 * jj * r;
                } else {                                 // overflow: computed in the sums
                    pos = -2 - s;
                    st = o;
                }
            }
        }
    } entry{abase, cap, src_cnt, n_boxes, slot_of, slot_index, qraw, nq, r};
    m2l_sum_box(entry, gather, tgt_cnt, nq, Y, r, n_boxes, Kt, Mt, Lt);
}

// Near-field pair count of one level-uniform depth (the FMM's depth model): over the
// n³ cells (row-major) of source and target counts cs, ct, adds Σ_c ct[c] × Σ_{|o|∞ ≤ r}
// cs[c + o] to out[0] and the number of cells with ct > 0 to out[1].  Integer
// arithmetic: one block sum and one atomicAdd per block, exact in any order.
__global__ void __launch_bounds__(256)
stencil_pair_count(const long long* __restrict__ cs, const long long* __restrict__ ct,
                   const int n, const int radius, unsigned long long* __restrict__ out) {
    __shared__ unsigned long long s_pairs[256], s_occ[256];
    const long long cell = (long long)blockIdx.x * 256 + threadIdx.x;
    const long long n3 = (long long)n * n * n;
    unsigned long long pairs = 0, occ = 0;
    if (cell < n3 && ct[cell] > 0) {
        const int ix = (int)(cell / ((long long)n * n)), iy = (int)((cell / n) % n),
                  iz = (int)(cell % n);
        long long sum = 0;
        for (int a = max(ix - radius, 0); a <= min(ix + radius, n - 1); ++a)
            for (int b = max(iy - radius, 0); b <= min(iy + radius, n - 1); ++b)
                for (int c = max(iz - radius, 0); c <= min(iz + radius, n - 1); ++c)
                    sum += cs[((long long)a * n + b) * n + c];
        pairs = (unsigned long long)ct[cell] * (unsigned long long)sum;
        occ = 1;
    }
    s_pairs[threadIdx.x] = pairs;
    s_occ[threadIdx.x] = occ;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            s_pairs[threadIdx.x] += s_pairs[threadIdx.x + s];
            s_occ[threadIdx.x] += s_occ[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(out, s_pairs[0]);
        atomicAdd(out + 1, s_occ[0]);
    }
}

// s[0..2] += Σ_j a[j] x_j for the 3-vectors x_j at x + j·x_row (the spill kernels' rows).
__device__ __forceinline__ void row_times_vectors(const double* __restrict__ a, int n,
                                                  const double* __restrict__ x,
                                                  long long x_row, double s[3])
{
    for (int j = 0; j < n; ++j) {
        const double* v = x + j * x_row;
        s[0] += a[j] * v[0];
        s[1] += a[j] * v[1];
        s[2] += a[j] * v[2];
    }
}

// o[0..2] = s (or += s with `add`).
__device__ __forceinline__ void put3(double* __restrict__ o, const double s[3], bool add)
{
    for (int k = 0; k < 3; ++k) o[k] = add ? o[k] + s[k] : s[k];
}

// Leaf transforms of the boxes a sync-free step's list left out (Operators.compress
// and decompress with a capacity): out[b] = A X[b] for each box b with spill[b], one
// block per box, one thread per row of A (rows × cols, row-major).  Box b, row j,
// component c of X sit at b·x_box + j·x_row + c, those of out at b·o_box + j·o_row + c.
__global__ void transform_spilled(const double* __restrict__ A, int rows, int cols,
                                  const double* __restrict__ X, long long x_box,
                                  long long x_row, double* __restrict__ out, long long o_box,
                                  long long o_row, const bool* __restrict__ spill,
                                  long long n_boxes)
{
    const long long b = blockIdx.x;
    if (b >= n_boxes || !spill[b]) return;
    for (int i = threadIdx.x; i < rows; i += blockDim.x) {
        double s[3] = {0.0, 0.0, 0.0};
        row_times_vectors(A + (long long)i * cols, cols, X + b * x_box, x_row, s);
        put3(out + b * o_box + i * o_row, s, false);
    }
}

// Sparse M2M out of the leaf level, the parents the listed boxes missed: for each parent
// box p with a spilled child (spill (8·n_parents,) over the children), out[:, p, :] =
// Σ_c T_c M[:, 8p + c, :] with T (r, 8r) = [T_0 … T_7] and M (r, 8·n_parents, 3), out
// (r, n_parents, 3), coefficient-major.  One block per parent, one thread per row.
__global__ void m2m_spilled(const double* __restrict__ T, int r, const double* __restrict__ M,
                            double* __restrict__ out, const bool* __restrict__ spill,
                            long long n_parents)
{
    const long long p = blockIdx.x;
    if (p >= n_parents) return;
    bool any = false;
    for (int c = 0; c < 8; ++c) any = any || spill[8 * p + c];
    if (!any) return;
    const long long nb = 8 * n_parents;
    for (int i = threadIdx.x; i < r; i += blockDim.x) {
        double s[3] = {0.0, 0.0, 0.0};
        for (int c = 0; c < 8; ++c)
            row_times_vectors(T + (long long)i * 8 * r + (long long)c * r, r,
                              M + (8 * p + c) * 3, nb * 3, s);
        put3(out + ((long long)i * n_parents + p) * 3, s, false);
    }
}

// Sparse L2L into the leaf level, the boxes beyond a list: for each leaf b with spill[b],
// L[:, b, :] += R_c Lp[:, b/8, :] with c = b mod 8, R (8r, r) = [R_0; …; R_7], L (r,
// n_boxes, 3) and Lp (r, n_boxes/8, 3) coefficient-major.  One block per leaf, one
// thread per row.
__global__ void l2l_spilled(const double* __restrict__ R, int r, const double* __restrict__ Lp,
                            double* __restrict__ L, const bool* __restrict__ spill,
                            long long n_boxes)
{
    const long long b = blockIdx.x;
    if (b >= n_boxes || !spill[b]) return;
    const long long p = b >> 3, np_ = n_boxes >> 3;
    const int c = (int)(b & 7);
    for (int i = threadIdx.x; i < r; i += blockDim.x) {
        double s[3] = {0.0, 0.0, 0.0};
        row_times_vectors(R + ((long long)c * r + i) * r, r, Lp + p * 3, np_ * 3, s);
        put3(L + ((long long)i * n_boxes + b) * 3, s, true);
    }
}
