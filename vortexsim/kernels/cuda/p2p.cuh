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
// Per-source parameter p (prepared by vortexsim.kernels.direct.source_parameter):
//   singular: unused; gaussian: 1/σ; algebraic, winckelmans: σ²; polynomial: 1/σ².
//
// The Gaussian series coefficients gauss_q_series / gauss_f_series are
// generated from cutoff.py by modules.py and prepended to this source.
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

// ρ² below which the Gaussian uses its Taylor series.  Double: 0.25 as in
// cutoff.py.  Float: 1.0, so that the fast erf below is only used for ρ ≥ 1,
// where its 1.5e-7 absolute error is small relative to q.
template <typename T> struct GaussSeriesLimit;
template <> struct GaussSeriesLimit<double> { static constexpr double value = 0.25; };
template <> struct GaussSeriesLimit<float> { static constexpr float value = 1.0f; };

// Gaussian closed form for ρ² ≥ series limit: returns q and f.
// Double: libdevice erf/exp (accurate to a few ulp) — the specification.
// Float: exp once, erf by Abramowitz & Stegun 7.1.26 sharing the same
//        exponential e^{−ρ²/2} (|error of erf| ≤ 1.5e-7; physics.md allows it).
__device__ __forceinline__ void gauss_closed(double rho, double s, double& q, double& f) {
    const double e = exp(-0.5 * s);
    q = erf(rho * VS_INV_SQRT2) - VS_SQRT_2_OVER_PI * rho * e;
    f = 3.0 * q - VS_SQRT_2_OVER_PI * rho * s * e;
}
__device__ __forceinline__ void gauss_closed(float rho, float s, float& q, float& f) {
    const float e = __expf(-0.5f * s);
    const float x = rho * (float)VS_INV_SQRT2;
    const float t = __frcp_rn(fmaf(0.3275911f, x, 1.0f));
    float p = 1.061405429f;
    p = fmaf(p, t, -1.453152027f);
    p = fmaf(p, t, 1.421413741f);
    p = fmaf(p, t, -0.284496736f);
    p = fmaf(p, t, 0.254829592f);
    p *= t;                                  // erfc(x) ≈ p e^{−x²},  e^{−x²} = e
    q = 1.0f - e * (p + (float)VS_SQRT_2_OVER_PI * rho);
    f = 3.0f * q - (float)VS_SQRT_2_OVER_PI * rho * s * e;
}

// Pair factors A = q/r³ and B = f/r⁵ for r² = r2 and the source parameter p.
template <int K, typename T>
__device__ __forceinline__ void pair_factors(T r2, T p, T& a, T& b) {
    if (K == KERNEL_SINGULAR) {
        const T ir = r2 > T(0) ? vs_rsqrt(r2) : T(0);
        const T ir2 = ir * ir;
        a = ir2 * ir;
        b = T(3) * a * ir2;
    } else if (K == KERNEL_GAUSSIAN) {
        const T s = r2 * p * p;              // ρ²
        if (s < GaussSeriesLimit<T>::value) {
            const T p3 = p * p * p * T(VS_SQRT_2_OVER_PI);
            a = p3 * gauss_q_series(s);
            b = p3 * p * p * gauss_f_series(s);
        } else {
            const T ir = vs_rsqrt(r2);
            const T ir2 = ir * ir;
            const T ir3 = ir2 * ir;
            if (s > T(81)) {                 // ρ > 9: 1 − q < 2e-17, q := 1, f := 3
                a = ir3;
                b = T(3) * ir3 * ir2;
            } else {
                T q, f;
                gauss_closed(r2 * ir * p, s, q, f);
                a = q * ir3;
                b = f * ir3 * ir2;
            }
        }
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

template <typename T>
struct PairAccumulator {
    T u0, u1, u2;                 // Σ A α × d
    T w0, w1, w2;                 // Σ A α
    T g00, g01, g02, g10, g11, g12, g20, g21, g22;   // Σ B (α × d) ⊗ d

    __device__ __forceinline__ void zero() {
        u0 = u1 = u2 = w0 = w1 = w2 = T(0);
        g00 = g01 = g02 = g10 = g11 = g12 = g20 = g21 = g22 = T(0);
    }

    // Add source (position xs, strength as, parameter p) seen from target xt.
    template <int K, bool GRAD>
    __device__ __forceinline__ void add(T dx, T dy, T dz, T ax, T ay, T az, T p) {
        const T r2 = dx * dx + dy * dy + dz * dz;
        T a, b;
        pair_factors<K, T>(r2, p, a, b);
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
