// The stretching rate of one element (vortexsim.kernels.cutoff.stretching, the NumPy
// specification), as the body of an elementwise kernel: g (N, 3, 3) with
// g[p, a, b] = ∂u_a/∂x_b, a (N, 3), rate r (N, 3);
//   classical (transpose = 0): r_a = Σ_b g[a, b] α_b;  transpose: r_a = Σ_b g[b, a] α_b.
#pragma once

template <typename T>
__device__ __forceinline__ void stretching_rate(const long long i, const T* g, const T* a,
                                                const int transpose, T* r) {
    const T* m = g + 9 * i;
    const T a0 = a[3 * i], a1 = a[3 * i + 1], a2 = a[3 * i + 2];
    if (transpose) {
        r[3 * i] = m[0] * a0 + m[3] * a1 + m[6] * a2;
        r[3 * i + 1] = m[1] * a0 + m[4] * a1 + m[7] * a2;
        r[3 * i + 2] = m[2] * a0 + m[5] * a1 + m[8] * a2;
    } else {
        r[3 * i] = m[0] * a0 + m[1] * a1 + m[2] * a2;
        r[3 * i + 1] = m[3] * a0 + m[4] * a1 + m[5] * a2;
        r[3 * i + 2] = m[6] * a0 + m[7] * a1 + m[8] * a2;
    }
}
