// Per-column minimum and maximum of points (M, 3) (vortexsim.kernels.morton.column_range
// on the GPU), in one pass: each block reduces a grid-stride run of rows to six values,
// out[6 b + c] the minimum and out[6 b + 3 + c] the maximum of column c over block b's
// rows, and the caller takes them over the blocks.  A NaN wins, as in NumPy's min and
// max; minima and maxima are exact, so the result does not depend on the order.
#pragma once

// b != b: b is a NaN (no fast-math here)
template <typename T>
__device__ __forceinline__ T vs_lower(T a, T b) { return (b != b || b < a) ? b : a; }

template <typename T>
__device__ __forceinline__ T vs_upper(T a, T b) { return (b != b || b > a) ? b : a; }

template <typename T> __device__ __forceinline__ T vs_infinity();
template <> __device__ __forceinline__ double vs_infinity<double>() {
    return __longlong_as_double(0x7ff0000000000000ll);
}
template <> __device__ __forceinline__ float vs_infinity<float>() {
    return __int_as_float(0x7f800000);
}

template <typename T, int BS>
__global__ void __launch_bounds__(BS)
column_range_blocks(const T* __restrict__ p, const long long m, T* __restrict__ out) {
    __shared__ T red[6][BS];
    T v[6];
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        v[c] = vs_infinity<T>();
        v[3 + c] = -vs_infinity<T>();
    }
    for (long long i = (long long) blockIdx.x * BS + threadIdx.x; i < m;
         i += (long long) gridDim.x * BS) {
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            const T x = p[3 * i + c];
            v[c] = vs_lower(v[c], x);
            v[3 + c] = vs_upper(v[3 + c], x);
        }
    }
#pragma unroll
    for (int k = 0; k < 6; ++k) red[k][threadIdx.x] = v[k];
    __syncthreads();
    for (int w = BS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
#pragma unroll
            for (int c = 0; c < 3; ++c) {
                red[c][threadIdx.x] = vs_lower(red[c][threadIdx.x], red[c][threadIdx.x + w]);
                red[3 + c][threadIdx.x] = vs_upper(red[3 + c][threadIdx.x],
                                                   red[3 + c][threadIdx.x + w]);
            }
        }
        __syncthreads();
    }
    if (threadIdx.x < 6) out[6ll * blockIdx.x + threadIdx.x] = red[threadIdx.x][0];
}
