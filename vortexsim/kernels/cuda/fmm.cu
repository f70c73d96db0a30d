// CUDA kernels of the FMM (vortexsim/fmm/evaluator.py): near field, P2M, L2P.
//
// Sources and targets are sorted by leaf (Morton order); CSR starts (int64)
// give each leaf's range.  Every kernel is deterministic (no atomics): results
// are bitwise reproducible run to run on the same device.
#include "p2p.cuh"

// Near field: one block per target leaf, threads over the leaf's targets (in
// chunks of BS), sources of the leaves in the stencil `nbr` (n_leaves × n_nbr,
// −1 outside the grid) streamed through shared memory.  Writes the near-field
// u (M,3) and ∇u (M,3,3) of the sorted targets (with 1/4π).  With self_exclude
// the sorted sources are the sorted targets and pair i == j is skipped.
template <typename T, int K, bool GRAD, int BS>
__global__ void __launch_bounds__(BS)
p2p_near(const T* __restrict__ xs, const T* __restrict__ alpha, const T* __restrict__ param,
         const long long* __restrict__ src_start, const T* __restrict__ yt,
         const long long* __restrict__ tgt_start, const long long* __restrict__ nbr,
         const int n_nbr, const int self_exclude, T* __restrict__ u, T* __restrict__ grad) {
    __shared__ SourceRecord<T> sh[BS];
    __shared__ double2 gtab[GaussTableSize<K, T>::value];
    load_gauss_table<K, T>(gtab);
    constexpr bool TILE_SUMS = sizeof(T) == 4;
    const int leaf = blockIdx.x;
    const long long t_begin = tgt_start[leaf], t_end = tgt_start[leaf + 1];
    for (long long c0 = t_begin; c0 < t_end; c0 += BS) {
        const long long i = c0 + threadIdx.x;
        const bool active = i < t_end;
        const long long ic = active ? i : t_begin;
        const T tx = yt[3 * ic], ty = yt[3 * ic + 1], tz = yt[3 * ic + 2];
        PairAccumulator<T> acc, total;
        acc.zero();
        total.zero();
        for (int q = 0; q < n_nbr; ++q) {
            const long long box = nbr[(long long)leaf * n_nbr + q];
            if (box < 0) continue;                       // block-uniform
            const long long s_begin = src_start[box], s_end = src_start[box + 1];
            for (long long j0 = s_begin; j0 < s_end; j0 += BS) {
                const long long j = j0 + threadIdx.x;
                __syncthreads();
                if (j < s_end)
                    sh[threadIdx.x] = {xs[3 * j], xs[3 * j + 1], xs[3 * j + 2], param[2 * j],
                                       alpha[3 * j], alpha[3 * j + 1], alpha[3 * j + 2],
                                       param[2 * j + 1]};
                __syncthreads();
                const int jn = (int)min((long long)BS, s_end - j0);
                const bool check_self = self_exclude && j0 < c0 + BS && c0 < j0 + jn;
                for (int jj = 0; jj < jn; ++jj) {
                    if (check_self && j0 + jj == i) continue;
                    const SourceRecord<T> r = load_record(sh + jj);
                    acc.template add<K, GRAD>(tx - r.x, ty - r.y, tz - r.z, r.ax, r.ay, r.az,
                                              r.p, r.p2, gtab);
                }
                if (TILE_SUMS) { total.merge(acc); acc.zero(); }
            }
        }
        if (!TILE_SUMS) total = acc;
        if (active) total.template store<GRAD>(u + 3 * i, GRAD ? grad + 9 * i : nullptr, false);
    }
}

// P2M: multipole coefficients of every leaf, M[leaf, c, d] = Σ_p (c_leaf − y_p)^k_c α_p,d
// (the (−(y − c))^k of expansions.py).  One thread per (leaf, coefficient).
template <typename T>
__global__ void p2m_leaves(const T* __restrict__ xs, const T* __restrict__ alpha,
                           const long long* __restrict__ src_start,
                           const T* __restrict__ centres, const int* __restrict__ kidx,
                           const int n_coef, const long long n_leaves, T* __restrict__ M) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_leaves * n_coef) return;
    const long long leaf = idx / n_coef;
    const int c = (int)(idx % n_coef);
    const int kx = kidx[3 * c], ky = kidx[3 * c + 1], kz = kidx[3 * c + 2];
    const T cx = centres[3 * leaf], cy = centres[3 * leaf + 1], cz = centres[3 * leaf + 2];
    T m0 = T(0), m1 = T(0), m2 = T(0);
    for (long long p = src_start[leaf]; p < src_start[leaf + 1]; ++p) {
        const T hx = cx - xs[3 * p], hy = cy - xs[3 * p + 1], hz = cz - xs[3 * p + 2];
        T w = T(1);
        for (int e = 0; e < kx; ++e) w *= hx;
        for (int e = 0; e < ky; ++e) w *= hy;
        for (int e = 0; e < kz; ++e) w *= hz;
        m0 += w * alpha[3 * p]; m1 += w * alpha[3 * p + 1]; m2 += w * alpha[3 * p + 2];
    }
    T* out = M + (leaf * n_coef + c) * 3;
    out[0] = m0; out[1] = m1; out[2] = m2;
}

// L2P: adds the far field of the local expansion L (n_leaves, n_coef, 3) of each
// target's leaf: u_a += (1/4π) ε_abc ∂_b ψ_c, ∇u[a][d] += (1/4π) ε_abc ∂_d ∂_b ψ_c.
// One thread per target; monomials from per-axis power tables (order ≤ 32).
template <typename T, bool GRAD>
__global__ void l2p_targets(const T* __restrict__ L, const T* __restrict__ centres,
                            const long long* __restrict__ tgt_leaf, const T* __restrict__ yt,
                            const int* __restrict__ kidx, const int n_coef, const int order,
                            const long long n_tgt, T* __restrict__ u, T* __restrict__ grad) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tgt) return;
    const long long leaf = tgt_leaf[i];
    T pw[3][33];
    const T h[3] = {yt[3 * i] - centres[3 * leaf], yt[3 * i + 1] - centres[3 * leaf + 1],
                    yt[3 * i + 2] - centres[3 * leaf + 2]};
    for (int a = 0; a < 3; ++a) {
        pw[a][0] = T(1);
        for (int e = 1; e <= order; ++e) pw[a][e] = pw[a][e - 1] * h[a];
    }
    T d1[3][3] = {};          // d1[b][c] = ∂_b ψ_c
    T d2[3][3][3] = {};       // d2[d][b][c] = ∂_d ∂_b ψ_c
    const T* Ll = L + leaf * (long long)n_coef * 3;
    for (int c = 1; c < n_coef; ++c) {
        const int k[3] = {kidx[3 * c], kidx[3 * c + 1], kidx[3 * c + 2]};
        const T l0 = Ll[3 * c], l1 = Ll[3 * c + 1], l2 = Ll[3 * c + 2];
        for (int b = 0; b < 3; ++b) {
            if (k[b] == 0) continue;
            int kb[3] = {k[0], k[1], k[2]};
            kb[b] -= 1;
            const T w = T(k[b]) * pw[0][kb[0]] * pw[1][kb[1]] * pw[2][kb[2]];
            d1[b][0] += w * l0; d1[b][1] += w * l1; d1[b][2] += w * l2;
            if (GRAD) {
                for (int d = 0; d < 3; ++d) {
                    if (kb[d] == 0) continue;
                    int kd[3] = {kb[0], kb[1], kb[2]};
                    kd[d] -= 1;
                    const T w2 = T(k[b]) * T(kb[d]) * pw[0][kd[0]] * pw[1][kd[1]] * pw[2][kd[2]];
                    d2[d][b][0] += w2 * l0; d2[d][b][1] += w2 * l1; d2[d][b][2] += w2 * l2;
                }
            }
        }
    }
    const T s = T(0.079577471545947667884);   // 1/(4π)
    // u = ∇ × ψ: (∂_y ψ_z − ∂_z ψ_y, ∂_z ψ_x − ∂_x ψ_z, ∂_x ψ_y − ∂_y ψ_x)
    u[3 * i] += s * (d1[1][2] - d1[2][1]);
    u[3 * i + 1] += s * (d1[2][0] - d1[0][2]);
    u[3 * i + 2] += s * (d1[0][1] - d1[1][0]);
    if (GRAD) {
        for (int d = 0; d < 3; ++d) {
            grad[9 * i + 0 * 3 + d] += s * (d2[d][1][2] - d2[d][2][1]);
            grad[9 * i + 1 * 3 + d] += s * (d2[d][2][0] - d2[d][0][2]);
            grad[9 * i + 2 * 3 + d] += s * (d2[d][0][1] - d2[d][1][0]);
        }
    }
}
