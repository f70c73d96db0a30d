// Level-tagged Morton keys of the adaptive tree (vortexsim.fmm.adaptive): a box of
// level l has the key k | 1 << 3l (k: its Morton key at level l), so that the level is
// (highest set bit) / 3.  Operations of the elementwise kernels
// "vortexsim_adaptive_shift_tagged" and "vortexsim_adaptive_centres" (kernels/modules.py).
#pragma once

// Level of a tagged key and its cell coordinates c (NumPy twin: adaptive.decode_tagged).
__device__ int decode_tagged(long long key, long long c[3]) {
    const int level = (63 - __clzll(key)) / 3;
    const long long k0 = key ^ (1LL << (3 * level));
    c[0] = c[1] = c[2] = 0;
    for (int b = 0; b < level; ++b)
        for (int a = 0; a < 3; ++a) c[a] |= ((k0 >> (3 * b + a)) & 1LL) << b;
    return level;
}

// The tagged key of the box at offset (dx, dy, dz) boxes from the box of tagged key
// `key`, at the same level; -1 outside the grid.
__device__ __forceinline__ long long shift_tagged(long long key, long long dx, long long dy,
                                                  long long dz) {
    long long c[3];
    const int level = decode_tagged(key, c);
    c[0] += dx; c[1] += dy; c[2] += dz;
    const long long n = 1LL << level;
    if (c[0] < 0 || c[0] >= n || c[1] < 0 || c[1] >= n || c[2] < 0 || c[2] >= n) {
        return -1;
    }
    long long k = 1LL << (3 * level);
    for (int b = 0; b < level; ++b)
        for (int a = 0; a < 3; ++a) k |= ((c[a] >> b) & 1LL) << (3 * b + a);
    return k;
}

// Centre c (3,) [L] of the box of tagged key `key` in the cube [lo, lo + width)^3.
__device__ __forceinline__ void tagged_centre(long long key, const double* lo, double width,
                                              double* c) {
    long long q[3];
    const int level = decode_tagged(key, q);
    const double w = width / (double) (1LL << level);
    for (int a = 0; a < 3; ++a) c[a] = lo[a] + ((double) q[a] + 0.5) * w;
}
