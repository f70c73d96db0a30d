// One element's row of a diagnostics row's sums: vortexsim.diagnostics.element_rows (the
// NumPy specification, with the column order): diagnostic_terms into 32 values,
// diagnostic_row as the body of an elementwise kernel (row_sums.cu sums the terms
// without writing the rows).
//
// x, a (N, 3): positions and strengths; ref (N,): each element's reference element
// (moments about xr[ref], xr the positions of all elements: x may be a block of them);
// psi, omega, u (N, 3): the fields at the elements, read where `has` says (bit 0: ψ and
// u, bit 1: ω); rows (N, 32).
#pragma once

__device__ __forceinline__ void diagnostic_terms(const long long i, const double* x,
                                                 const double* a, const long long* ref,
                                                 const double* xr, const double* psi,
                                                 const double* omega, const double* u,
                                                 const int has, double* o) {
    const double x0 = x[3 * i], x1 = x[3 * i + 1], x2 = x[3 * i + 2];
    const double a0 = a[3 * i], a1 = a[3 * i + 1], a2 = a[3 * i + 2];
    const double c0 = x1 * a2 - x2 * a1, c1 = x2 * a0 - x0 * a2, c2 = x0 * a1 - x1 * a0;
    o[0] = a0; o[1] = a1; o[2] = a2;
    o[3] = c0; o[4] = c1; o[5] = c2;
    o[6] = x1 * c2 - x2 * c1; o[7] = x2 * c0 - x0 * c2; o[8] = x0 * c1 - x1 * c0;
    o[9] = (has & 1) ? a0 * psi[3 * i] + a1 * psi[3 * i + 1] + a2 * psi[3 * i + 2] : 0.0;
    o[10] = (has & 2) ? a0 * omega[3 * i] + a1 * omega[3 * i + 1] + a2 * omega[3 * i + 2] : 0.0;
    o[11] = (has & 1) ? a0 * u[3 * i] + a1 * u[3 * i + 1] + a2 * u[3 * i + 2] : 0.0;
    const long long k = ref[i];
    const double r[3] = {x0 - xr[3 * k], x1 - xr[3 * k + 1], x2 - xr[3 * k + 2]};
    const double w = sqrt(a0 * a0 + a1 * a1 + a2 * a2);
    o[12] = w;
    o[13] = w * r[0]; o[14] = w * r[1]; o[15] = w * r[2];
    int c = 16;
    for (int p = 0; p < 3; ++p)
        for (int q = p; q < 3; ++q) o[c++] = w * r[p] * r[q];
    for (int p = 0; p < 3; ++p)
        for (int q = p; q < 3; ++q)
            for (int s = q; s < 3; ++s) o[c++] = w * r[p] * r[q] * r[s];
}

__device__ __forceinline__ void diagnostic_row(const long long i, const double* x,
                                               const double* a, const long long* ref,
                                               const double* xr,
                                               const double* psi, const double* omega,
                                               const double* u, const int has, double* rows) {
    diagnostic_terms(i, x, a, ref, xr, psi, omega, u, has, rows + 32 * i);
}
