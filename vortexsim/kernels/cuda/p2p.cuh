// Pair interaction of the regularized Biot–Savart law (vortexsim physics.md).
//
// Device functions shared by the direct sum (p2p_direct.cu) and the FMM near
// field.  The NumPy specification is vortexsim/kernels/cutoff.py; every formula
// here matches it (tested to 1e-12 relative in double).
//
//   A(r, σ) = q(ρ)/r³,  B(r, σ) = f(ρ)/r⁵,   ρ = r/σ
//   u_a      += A (α × d)_a                        d = x_target − x_source
//   W_a      += A α_a                              (ε term of ∇u: W × ·)
//   G_ab     += B (α × d)_a d_b                    ∇u = (1/4π)(skew(W) − G)
//
// Per-source parameters p, p2 (prepared by vortexsim.kernels.direct.source_parameters):
//   singular: unused; gaussian: p = 1/σ², p2 = 1/σ³; algebraic, winckelmans: p = σ²;
//   polynomial: p = 1/σ².
//
// The Gaussian series (gauss_q_series, gauss_f_series) and the piecewise
// polynomial table (GAUSS_TABLE, GAUSS_NI, GAUSS_DEG, GAUSS_SMAX) are generated
// from cutoff.py by modules.py and prepended to this source.
#pragma once

#define KERNEL_SINGULAR 0
#define KERNEL_GAUSSIAN 1
#define KERNEL_ALGEBRAIC 2
#define KERNEL_WINCKELMANS 3
#define KERNEL_POLYNOMIAL 4

#define VS_SQRT_2_OVER_PI 0.79788456080286535588
#define VS_INV_SQRT2 0.70710678118654752440

template <typename T> __device__ __forceinline__ T vs_rsqrt(T x);
template <> __device__ __forceinline__ double vs_rsqrt<double>(double x) { return rsqrt(x); }
template <> __device__ __forceinline__ float vs_rsqrt<float>(float x) { return rsqrtf(x); }

// Gaussian pair factors, per-source parameters p = 1/σ², p2 = 1/σ³, s = ρ² = r² p.
//
// Double: for s < GAUSS_SMAX (ρ < 9), A σ³ = q/ρ³ and B σ⁵ = f/ρ⁵ are smooth
// functions of s, evaluated from the piecewise polynomial table GAUSS_TABLE
// (GAUSS_NI intervals of s, degree GAUSS_DEG in the local variable
// t ∈ [−1, 1]) that modules.py fits to the NumPy specification when the source
// is assembled (relative error ≤ 5e-15, tested).  No erf, no exp, no branch on
// the cancellation region.  Beyond ρ = 9, 1 − q < 2e-17: q := 1, f := 3.
// The table sits in shared memory (the A coefficients, then the B coefficients).
//
// Float: Taylor series for ρ < 1, Abramowitz & Stegun 7.1.26 erf sharing
// e^{−ρ²/2} for 1 ≤ ρ ≤ 9 (|error of erf| ≤ 1.5e-7; physics.md allows it).
//
// scut (≤ GAUSS_SMAX = 81): pairs with s ≥ scut take the singular factors.  The direct
// sum uses 81 (exact to 2e-17); the FMM near field passes ρ*(tol)², where 1 − q and
// 1 − f/3 are below tol/10 — the same approximation its far field makes for every
// pair beyond the stencil — so that the table is read only within the reach.
//
// The two columns (fa, fb) of a piecewise polynomial table of s on [0, GAUSS_SMAX) in
// the shared-memory layout of load_table (GAUSS_TABLE here, GAUSS_FIELD_TABLE in
// fields.cu): interval k = ⌊s NI / SMAX⌋, local t ∈ [−1, 1], Horner in t.  The two
// columns sit in separate blocks: a caller that drops fb (the velocity without ∇u)
// reads only the first block, half the shared-memory traffic.
__device__ __forceinline__ void table_pair(double s, const double* __restrict__ tab,
                                           double& fa, double& fb) {
    const int k = min(__double2int_rz(s * (GAUSS_NI / GAUSS_SMAX)), GAUSS_NI - 1);
    const double t = fma(s, 2.0 * GAUSS_NI / GAUSS_SMAX, -(2.0 * k + 1.0));
    const double* ca = tab + k * (GAUSS_DEG + 1);
    const double* cb = ca + GAUSS_NI * (GAUSS_DEG + 1);
    fa = ca[GAUSS_DEG];
    fb = cb[GAUSS_DEG];
    #pragma unroll
    for (int j = GAUSS_DEG - 1; j >= 0; --j) {
        fa = fma(fa, t, ca[j]);
        fb = fma(fb, t, cb[j]);
    }
}

__device__ __forceinline__ void gauss_factors(double r2, double p, double p2,
                                              const double* __restrict__ tab, double scut,
                                              double& a, double& b) {
    const double s = r2 * p;
    if (s < scut) {
        double fa, fb;
        table_pair(s, tab, fa, fb);
        a = fa * p2;
        b = fb * p2 * p;
    } else {
        const double ir = rsqrt(r2);
        const double ir2 = ir * ir;
        a = ir2 * ir;
        b = 3.0 * a * ir2;
    }
}

__device__ __forceinline__ void gauss_factors(float r2, float p, float p2,
                                              const double* __restrict__ /*tab*/, float scut,
                                              float& a, float& b) {
    const float s = r2 * p;
    if (s < 1.0f) {                             // as cutoff.GAUSSIAN_SERIES_S
        a = (float)VS_SQRT_2_OVER_PI * p2 * gauss_q_series(s);
        b = (float)VS_SQRT_2_OVER_PI * p2 * p * gauss_f_series(s);
    } else if (s >= scut) {
        const float ir = rsqrtf(r2);
        const float ir2 = ir * ir;
        a = ir2 * ir;
        b = 3.0f * a * ir2;
    } else {
        const float rs = rsqrtf(s);
        const float rho = s * rs;
        const float e = __expf(-0.5f * s);
        const float x = rho * (float)VS_INV_SQRT2;
        const float t = __fdividef(1.0f, fmaf(0.3275911f, x, 1.0f));
        float poly = 1.061405429f;
        poly = fmaf(poly, t, -1.453152027f);
        poly = fmaf(poly, t, 1.421413741f);
        poly = fmaf(poly, t, -0.284496736f);
        poly = fmaf(poly, t, 0.254829592f);
        poly *= t;                              // erfc(x) ≈ poly e^{−x²},  e^{−x²} = e
        const float q = 1.0f - e * (poly + (float)VS_SQRT_2_OVER_PI * rho);
        const float f = 3.0f * q - (float)VS_SQRT_2_OVER_PI * rho * s * e;
        const float rs2 = rs * rs;
        const float ir3 = p2 * rs2 * rs;        // 1/r³ = ρ^{−3} σ^{−3}
        a = q * ir3;
        b = f * ir3 * p * rs2;
    }
}

// Pair factors A = q/r³ and B = f/r⁵ for r² = r2 and the source parameters p, p2.
template <int K, typename T>
__device__ __forceinline__ void pair_factors(T r2, T p, T p2, const double* __restrict__ tab,
                                             T scut, T& a, T& b) {
    if (K == KERNEL_SINGULAR) {
        const T ir = r2 > T(0) ? vs_rsqrt(r2) : T(0);
        const T ir2 = ir * ir;
        a = ir2 * ir;
        b = T(3) * a * ir2;
    } else if (K == KERNEL_GAUSSIAN) {
        gauss_factors(r2, p, p2, tab, scut, a, b);
    } else if (K == KERNEL_ALGEBRAIC) {
        const T t = vs_rsqrt(r2 + p);        // (r² + σ²)^(−1/2)
        const T t2 = t * t;
        a = t2 * t;
        b = T(3) * a * t2;
    } else if (K == KERNEL_WINCKELMANS) {
        const T t = vs_rsqrt(r2 + p);
        const T t2 = t * t;
        const T t5 = t2 * t2 * t;
        a = (r2 + T(2.5) * p) * t5;
        b = (T(3) * r2 + T(10.5) * p) * t5 * t2;
    } else {  // KERNEL_POLYNOMIAL, p = 1/σ²
        const T ir = r2 > T(0) ? vs_rsqrt(r2) : T(0);
        const T ir2 = ir * ir;
        if (r2 * p <= T(1)) {
            a = p * ir;
            b = p * ir2 * ir;
        } else {
            a = ir2 * ir;
            b = T(3) * a * ir2;
        }
    }
}

// Shared-memory copy of the Gaussian table, in blocks that need it.
template <int K, typename T> struct GaussTableSize { static constexpr int value = 1; };
template <> struct GaussTableSize<KERNEL_GAUSSIAN, double> {
    static constexpr int value = 2 * GAUSS_NI * (GAUSS_DEG + 1);
};

// Layout in shared memory: the first column's coefficients of all intervals, then the
// second's (the generated tables interleave them).
__device__ __forceinline__ void load_table(double* dst, const double* src) {
    constexpr int n = GAUSS_NI * (GAUSS_DEG + 1);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        dst[i] = src[2 * i];
        dst[n + i] = src[2 * i + 1];
    }
}

template <int K, typename T>
__device__ __forceinline__ void load_gauss_table(double* dst) {
    if (K == KERNEL_GAUSSIAN && sizeof(T) == 8) load_table(dst, GAUSS_TABLE);
}

template <typename T>
struct PairAccumulator {
    T u0, u1, u2;                 // Σ A α × d
    T w0, w1, w2;                 // Σ A α
    T g00, g01, g02, g10, g11, g12, g20, g21, g22;   // Σ B (α × d) ⊗ d

    __device__ __forceinline__ void zero() {
        u0 = u1 = u2 = w0 = w1 = w2 = T(0);
        g00 = g01 = g02 = g10 = g11 = g12 = g20 = g21 = g22 = T(0);
    }

    __device__ __forceinline__ void merge(const PairAccumulator& o) {
        u0 += o.u0; u1 += o.u1; u2 += o.u2; w0 += o.w0; w1 += o.w1; w2 += o.w2;
        g00 += o.g00; g01 += o.g01; g02 += o.g02; g10 += o.g10; g11 += o.g11;
        g12 += o.g12; g20 += o.g20; g21 += o.g21; g22 += o.g22;
    }

    // Add source (position xs, strength as, parameter p) seen from target xt.
    template <int K, bool GRAD>
    __device__ __forceinline__ void add(T dx, T dy, T dz, T ax, T ay, T az, T p, T p2,
                                        const double* __restrict__ tab,
                                        T scut = T(GAUSS_SMAX)) {
        const T r2 = dx * dx + dy * dy + dz * dz;
        T a, b;
        pair_factors<K, T>(r2, p, p2, tab, scut, a, b);
        const T c0 = ay * dz - az * dy;
        const T c1 = az * dx - ax * dz;
        const T c2 = ax * dy - ay * dx;
        u0 += a * c0; u1 += a * c1; u2 += a * c2;
        if (GRAD) {
            w0 += a * ax; w1 += a * ay; w2 += a * az;
            const T b0 = b * c0, b1 = b * c1, b2 = b * c2;
            g00 += b0 * dx; g01 += b0 * dy; g02 += b0 * dz;
            g10 += b1 * dx; g11 += b1 * dy; g12 += b1 * dz;
            g20 += b2 * dx; g21 += b2 * dy; g22 += b2 * dz;
        }
    }

    // Write u (3) and ∇u (3×3, row-major, [a][b] = ∂u_a/∂x_b), times 1/4π.
    template <bool GRAD>
    __device__ __forceinline__ void store(T* u, T* grad, bool accumulate) const {
        const T c = T(0.079577471545947667884);   // 1/(4π)
        if (accumulate) {
            u[0] += c * u0; u[1] += c * u1; u[2] += c * u2;
        } else {
            u[0] = c * u0; u[1] = c * u1; u[2] = c * u2;
        }
        if (GRAD) {
            // skew(W)[a][b] = ε_acb W_c:  W × v
            const T m[9] = {-g00, -w2 - g01, w1 - g02,
                            w2 - g10, -g11, -w0 - g12,
                            -w1 - g20, w0 - g21, -g22};
            #pragma unroll
            for (int k = 0; k < 9; ++k) grad[k] = accumulate ? grad[k] + c * m[k] : c * m[k];
        }
    }
};

// One source as stored in shared memory: x, y, z, p | αx, αy, αz, p2 (16-byte aligned,
// read with 128-bit loads).
template <typename T> struct alignas(16) SourceRecord { T x, y, z, p, ax, ay, az, p2; };

template <typename T>
__device__ __forceinline__ SourceRecord<T> load_record(const SourceRecord<T>* rec);
template <>
__device__ __forceinline__ SourceRecord<float> load_record<float>(const SourceRecord<float>* rec) {
    const float4* v = reinterpret_cast<const float4*>(rec);
    const float4 a = v[0], b = v[1];
    return {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
}
template <>
__device__ __forceinline__ SourceRecord<double> load_record<double>(const SourceRecord<double>* rec) {
    const double2* v = reinterpret_cast<const double2*>(rec);
    const double2 a = v[0], b = v[1], c = v[2], d = v[3];
    return {a.x, a.y, b.x, b.y, c.x, c.y, d.x, d.y};
}

// A source with a core radius shared by all sources (the caller's σ range is one value):
// x, y, z | αx, αy, αz, 48 bytes in double instead of 64 — less shared memory per
// tile and per pair; p and p2 are kernel-wide.
template <typename T> struct alignas(16) PointRecord { T x, y, z, ax, ay, az; };

template <typename T>
__device__ __forceinline__ PointRecord<T> load_point(const PointRecord<T>* rec);
template <>
__device__ __forceinline__ PointRecord<float> load_point<float>(const PointRecord<float>* rec) {
    const float4* v = reinterpret_cast<const float4*>(rec);
    const float4 a = v[0];
    const float2 b = reinterpret_cast<const float2*>(rec)[2];
    return {a.x, a.y, a.z, a.w, b.x, b.y};
}
template <>
__device__ __forceinline__ PointRecord<double> load_point<double>(const PointRecord<double>* rec) {
    const double2* v = reinterpret_cast<const double2*>(rec);
    const double2 a = v[0], b = v[1], c = v[2];
    return {a.x, a.y, b.x, b.y, c.x, c.y};
}

// Shared-memory record of the near field: per-source parameters, or (UNIFORM) none.
template <typename T, bool UNIFORM> struct NearRecord { using type = SourceRecord<T>; };
template <typename T> struct NearRecord<T, true> { using type = PointRecord<T>; };

