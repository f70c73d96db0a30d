// Near field of the diagnostics' fields (vortexsim/fmm/fields.py), float64.
//
// At each sorted target t (position y_t, core σ_t), over the sources of its leaf's
// stencil (as p2p_near in fmm.cu: `nbr`, blocks of BS targets of one leaf mapped by
// `chunk_start`, the stencil's sources streamed through shared memory in tiles of TS):
//
//   u_t  = (1/4π) Σ_q A(r, σ_q) α_q × d            the velocity (p2p.cuh, scut as there)
//   ψ_t  = (1/4π) Σ_q g(r/σ_tq)/σ_tq α_q           the vector potential seen by blob t
//   ω_t  =        Σ_q ζ(r/σ_tq)/σ_tq³ α_q          the vorticity seen by blob t
//
// with σ_tq² = σ_t² + σ_q² (blob_pair_factors in kernels/cutoff.py, the NumPy
// specification) and d = y_t − x_q.  Every pair of the stencil is summed, self pairs
// included (their u term is 0; g and ζ are finite except for the singular kernel's
// g, which is dropped at r = 0).  With `twice_beyond_own` (the symmetric pass: targets
// = sources, one σ, `nbr` the half stencil whose first column is the leaf itself) the
// sources beyond the own leaf count twice: each pair of leaves is met once, and the sums
// Σ_t α_t·(u_t, ψ_t, ω_t) are those of the whole stencil (NearField.fields).  Kernels without ζ write ω = 0.  Gaussian pairs with
// ρ² = r²/σ_tq² ≥ fcut take the far field's factors 1/r and 0 (most of a stencil's
// pairs: no erf, no exp; fmm/fields.py); the others read g and ζ from a table
// (table_pair).  No atomics: the results are bitwise reproducible.
#include "p2p.cuh"
#include "leaf_blocks.cuh"

#define VS_INV_4PI 0.079577471545947667884
#define VS_GAUSS_ZETA0 0.063493635934240969785          // (2π)^(−3/2)

// One source in shared memory: position, strength, σ², and the u pair parameters.
struct FieldRecord { double x, y, z, ax, ay, az, s2, p, p2; };

// g(ρ)/σ and ζ(ρ)/σ³ for s = ρ² = r²/σ², inv_s = 1/σ (σ = σ_tq); ftab: the Gaussian's
// GAUSS_FIELD_TABLE in shared memory (cutoff.gaussian_field_table: g(ρ) = erf(ρ/√2)/ρ
// and (2π)^(−3/2) e^{−s/2} on GAUSS_TABLE's intervals, relative error ≤ 2e-14; ~20
// FMAs instead of erf and exp; unused by the other kernels).
template <int K>
__device__ __forceinline__ void blob_fields(double r2, double s, double inv_s, double fcut,
                                            const double* __restrict__ ftab,
                                            double& e, double& z) {
    const double inv_s3 = inv_s * inv_s * inv_s;
    if (K == KERNEL_GAUSSIAN) {
        if (s >= fcut) {                                 // the far field's factors
            e = rsqrt(r2);
            z = 0.0;
            return;
        }
        if (s < GAUSS_SMAX) {                            // the table (every fcut in use)
            double g, zeta;                              // g(ρ), (2π)^(−3/2) e^{−s/2}
            table_pair(s, ftab, g, zeta);
            e = g * inv_s;
            z = zeta * inv_s3;
            return;
        }
        // beyond the table (s ≥ GAUSS_SMAX: ρ ≥ 9, reached only by an fcut above it)
        e = erf(sqrt(s) * VS_INV_SQRT2) * rsqrt(r2);
        z = VS_GAUSS_ZETA0 * exp(-0.5 * s) * inv_s3;
    } else if (K == KERNEL_ALGEBRAIC) {
        const double t = rsqrt(s + 1.0);
        const double t2 = t * t;
        e = t * inv_s;
        z = 0.238732414637843 /* 3/(4π) */ * t2 * t2 * t * inv_s3;
    } else if (K == KERNEL_WINCKELMANS) {
        const double t = rsqrt(s + 1.0);
        const double t2 = t * t;
        e = (s + 1.5) * t2 * t * inv_s;
        z = 0.5968310365946076 /* 15/(8π) */ * t2 * t2 * t2 * t * inv_s3;
    } else if (K == KERNEL_POLYNOMIAL) {
        e = s <= 1.0 ? (2.0 - sqrt(s)) * inv_s : rsqrt(r2);
        z = 0.0;
    } else {                                             // singular: 1/r, 0 at r = 0
        e = r2 > 0.0 ? rsqrt(r2) : 0.0;
        z = 0.0;
    }
}

// UNIFORM: every source and target has the core of the first (one σ): records without
// per-source parameters (48 bytes instead of 72) and σ_tq kernel-wide.
template <bool UNIFORM> struct FieldRecordOf { using type = FieldRecord; };
template <> struct FieldRecordOf<true> { using type = PointRecord<double>; };

template <int K, int BS, int TS, bool UNIFORM = false>
__global__ void __launch_bounds__(BS)
p2p_fields(const double* __restrict__ xs, const double* __restrict__ alpha,
           const double* __restrict__ sig_s, const double* __restrict__ param,
           const long long* __restrict__ src_start, const double* __restrict__ yt,
           const double* __restrict__ sig_t, const long long* __restrict__ tgt_start,
           const long long* __restrict__ nbr, const int n_nbr,
           const long long* __restrict__ chunk_start, const int n_leaves, const double scut,
           const double fcut, const int twice_beyond_own, double* __restrict__ u,
           double* __restrict__ psi, double* __restrict__ omega) {
    using Record = typename FieldRecordOf<UNIFORM>::type;
    __shared__ Record sh[TS];
    __shared__ double gtab[GaussTableSize<K, double>::value];
    __shared__ double ftab[GaussTableSize<K, double>::value];
    __shared__ long long s_beg[125];
    __shared__ int s_cnt[125], s_off[126];
    const long long b = blockIdx.x;
    if (b >= chunk_start[n_leaves]) return;              // spare block of the bound grid
    const int lo_leaf = block_leaf(chunk_start, n_leaves, b);
    load_gauss_table<K, double>(gtab);
    if (K == KERNEL_GAUSSIAN) load_table(ftab, GAUSS_FIELD_TABLE);
    const int leaf = lo_leaf;
    const long long t_begin = tgt_start[leaf] + (b - chunk_start[leaf]) * BS;
    const long long t_end = min(tgt_start[leaf + 1], t_begin + BS);
    const int total = stencil_stream<BS>(nbr, n_nbr, leaf, src_start, s_beg, s_cnt, s_off);
    const int own = twice_beyond_own ? s_cnt[0] : total;   // stream positions of weight 1
    // kernel-wide parameters of the uniform case: the u pair's p, p2; 1/σ_tq and 1/σ_tq²
    const double p_u = UNIFORM ? param[0] : 0.0, p2_u = UNIFORM ? param[1] : 0.0;
    const double inv_su = UNIFORM ? rsqrt(2.0 * sig_s[0] * sig_s[0]) : 0.0;
    const double inv_su2 = inv_su * inv_su;
    // r² beyond which a uniform Gaussian pair is far for u (s = r²/σ² ≥ scut) and for ψ, ω
    // (r²/σ_tq² ≥ fcut)
    const double far_r2u = UNIFORM && K == KERNEL_GAUSSIAN
                           ? fmax(fcut / inv_su2, scut / p_u) : 0.0;
    for (long long c0 = t_begin; c0 < t_end; c0 += BS) {
        const long long i = c0 + threadIdx.x;
        const bool active = i < t_end;
        const long long ic = active ? i : t_begin;
        const double tx = yt[3 * ic], ty = yt[3 * ic + 1], tz = yt[3 * ic + 2];
        const double st2 = UNIFORM ? 0.0 : sig_t[ic] * sig_t[ic];
        PairAccumulator<double> acc;
        acc.zero();
        double p0 = 0.0, p1 = 0.0, p2s = 0.0, w0 = 0.0, w1 = 0.0, w2 = 0.0;
        for (int base = 0; base < total; base += TS) {
            __syncthreads();
            for (int k = threadIdx.x; k < TS && base + k < total; k += BS) {
                const long long j = stencil_source(base + k, s_beg, s_off, n_nbr);
                const double wj = base + k < own ? 1.0 : 2.0;
                if constexpr (UNIFORM) {
                    sh[k] = {xs[3 * j], xs[3 * j + 1], xs[3 * j + 2],
                             wj * alpha[3 * j], wj * alpha[3 * j + 1], wj * alpha[3 * j + 2]};
                } else {
                    const double sj = sig_s[j];
                    sh[k] = {xs[3 * j], xs[3 * j + 1], xs[3 * j + 2],
                             wj * alpha[3 * j], wj * alpha[3 * j + 1], wj * alpha[3 * j + 2],
                             sj * sj, param[2 * j], param[2 * j + 1]};
                }
            }
            __syncthreads();
            const int jn = min(TS, total - base);
#pragma unroll 2
            for (int jj = 0; jj < jn; ++jj) {
                double dx, dy, dz, ax, ay, az, inv_s, p, p2, s2;
                if constexpr (UNIFORM) {
                    const PointRecord<double> r = load_point(sh + jj);
                    dx = tx - r.x; dy = ty - r.y; dz = tz - r.z;
                    ax = r.ax; ay = r.ay; az = r.az;
                    inv_s = inv_su; p = p_u; p2 = p2_u; s2 = 0.0;
                } else {
                    const FieldRecord r = sh[jj];
                    dx = tx - r.x; dy = ty - r.y; dz = tz - r.z;
                    ax = r.ax; ay = r.ay; az = r.az;
                    inv_s = 0.0; p = r.p; p2 = r.p2; s2 = st2 + r.s2;
                }
                const double r2 = dx * dx + dy * dy + dz * dz;
                // Gaussian pairs beyond both reaches (most of a stencil's): the singular
                // factors of u and the far field's of ψ, ω from one rsqrt — the same
                // values as the branches below take there (pair_factors, blob_fields)
                if (K == KERNEL_GAUSSIAN && (UNIFORM ? r2 >= far_r2u
                                             : (r2 >= fcut * s2 && r2 * p >= scut))) {
                    const double ir = rsqrt(r2);
                    const double a = ir * ir * ir;
                    acc.u0 += a * (ay * dz - az * dy);
                    acc.u1 += a * (az * dx - ax * dz);
                    acc.u2 += a * (ax * dy - ay * dx);
                    p0 += ir * ax; p1 += ir * ay; p2s += ir * az;
                    continue;
                }
                if (!UNIFORM) inv_s = rsqrt(s2);
                acc.template add<K, false>(dx, dy, dz, ax, ay, az, p, p2, gtab, scut);
                double e, z;
                blob_fields<K>(r2, r2 * (UNIFORM ? inv_su2 : inv_s * inv_s), inv_s, fcut, ftab,
                               e, z);
                p0 += e * ax; p1 += e * ay; p2s += e * az;
                w0 += z * ax; w1 += z * ay; w2 += z * az;
            }
        }
        if (active) {
            acc.template store<false>(u + 3 * i, nullptr, false);
            psi[3 * i] = VS_INV_4PI * p0;
            psi[3 * i + 1] = VS_INV_4PI * p1;
            psi[3 * i + 2] = VS_INV_4PI * p2s;
            omega[3 * i] = w0;
            omega[3 * i + 1] = w1;
            omega[3 * i + 2] = w2;
        }
    }
}

// The value of the local expansion at the sorted targets, added into out (M, 3):
//   out_t += (1/4π) Σ_k L̃[leaf, k] ĥ^k,   ĥ = (y_t − c_leaf)/w,  |k| ≤ ORDER,
// the far field of ψ or ω (fmm/fields.py).  L (n_leaves, N, 3): the leaves' normalized
// locals; perm (N,): their rows in the order of the loops below
// (downward.l2p_loop_order); blocks of BS targets of one leaf (`chunk_start`), one
// thread per target, monomials by running products, the rows read through the cache (a
// block reads the same rows).
template <int ORDER, int BS>
__global__ void __launch_bounds__(BS)
l2p_values(const double* __restrict__ Lg, const int* __restrict__ perm,
           const double* __restrict__ centres,
           const double inv_w, const long long* __restrict__ tgt_start,
           const long long* __restrict__ chunk_start, const int n_leaves,
           const double* __restrict__ yt, double* __restrict__ out) {
    constexpr int N = (ORDER + 1) * (ORDER + 2) * (ORDER + 3) / 6;
    const long long b = blockIdx.x;
    if (b >= chunk_start[n_leaves]) return;
    const int lo_leaf = block_leaf(chunk_start, n_leaves, b);
    const long long leaf = lo_leaf;
    const long long i = tgt_start[leaf] + (b - chunk_start[leaf]) * BS + threadIdx.x;
    if (i >= tgt_start[leaf + 1]) return;
    const double* L = Lg + leaf * N * 3;
    const double hx = (yt[3 * i] - centres[3 * leaf]) * inv_w,
                 hy = (yt[3 * i + 1] - centres[3 * leaf + 1]) * inv_w,
                 hz = (yt[3 * i + 2] - centres[3 * leaf + 2]) * inv_w;
    double v0 = 0.0, v1 = 0.0, v2 = 0.0, px = 1.0;
    int j = 0;
#pragma unroll 1
    for (int kx = 0; kx <= ORDER; ++kx) {
        double pxy = px;
#pragma unroll 1
        for (int ky = 0; ky <= ORDER - kx; ++ky) {
            double m = pxy;
            for (int kz = 0; kz <= ORDER - kx - ky; ++kz, ++j) {
                const double* row = L + 3 * perm[j];
                v0 += row[0] * m; v1 += row[1] * m; v2 += row[2] * m;
                m *= hz;
            }
            pxy *= hy;
        }
        px *= hx;
    }
    out[3 * i] += VS_INV_4PI * v0;
    out[3 * i + 1] += VS_INV_4PI * v1;
    out[3 * i + 2] += VS_INV_4PI * v2;
}
