// Gather of the dense M2L's GEMM operand (vortexsim.fmm.cuda.gather_columns), the
// operation of the elementwise kernel "vortexsim_m2l_gather" (kernels/modules.py):
// X[j, c, o, k] = M[g[o, j], k, c] for one t = (j, o, k) per thread, 3 values each.
// M (S1, r, 3) box-major, g (ns, nj) int64, X (nj, 3, ns, r), all C-contiguous.  The
// threads of a warp read one source box's contiguous block and write three runs of
// consecutive k: every access is coalesced (from coefficient-major multipoles a warp
// would read 24-byte vectors scattered over the level, a third of each sector used).
#pragma once

template <typename T>
__device__ __forceinline__ void m2l_gather_vector(const unsigned int t, const T* M,
                                                  const long long* g, const int ns,
                                                  const int nj, const int r, T* X) {
    const unsigned int k = t % (unsigned int) r;
    const unsigned int q = t / (unsigned int) r;
    const unsigned int o = q % (unsigned int) ns;
    const unsigned int j = q / (unsigned int) ns;
    const long long s = g[(long long) o * nj + j];
    const T* src = &M[(s * r + k) * 3];
    const long long row = (long long) ns * r;
    T* dst = &X[(long long) j * 3 * row + (long long) o * r + k];
    dst[0] = src[0];
    dst[row] = src[1];
    dst[2 * row] = src[2];
}
