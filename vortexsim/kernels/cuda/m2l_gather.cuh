// Gather of the dense M2L's GEMM operand (vortexsim.fmm.cuda.gather_columns), the
// operation of the elementwise kernel "vortexsim_m2l_gather" (kernels/modules.py):
// X[k, o, j, :] = M[k, g[o, j], :] for one t = (k, o, j) per thread, 3 values each.
// M (r, S1, 3), g (ns, nj) int64, X (r, ns, nj, 3), all C-contiguous.
#pragma once

template <typename T>
__device__ __forceinline__ void m2l_gather_vector(const unsigned int t, const T* M,
                                                  const long long* g, const int ns,
                                                  const int nj, const long long S1, T* X) {
    const unsigned int j = t % (unsigned int) nj;
    const unsigned int q = t / (unsigned int) nj;
    const unsigned int o = q % (unsigned int) ns;
    const unsigned int k = q / (unsigned int) ns;
    const long long s = g[(long long) o * nj + j];
    const T* src = &M[((long long) k * S1 + s) * 3];
    T* dst = &X[(long long) t * 3];
    dst[0] = src[0]; dst[1] = src[1]; dst[2] = src[2];
}
