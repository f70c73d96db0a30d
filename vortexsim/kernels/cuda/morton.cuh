// Morton keys of points (vortexsim.kernels.morton.morton_keys), the operation of the
// elementwise kernel "vortexsim_morton_keys" (kernels/modules.py): cells, then interleaved.
#pragma once

// The low 21 bits of v spread to every third bit (NumPy twin: morton.spread_bits).
__device__ unsigned long long vs_spread(unsigned long long v) {
    v &= 0x1FFFFFull;
    v = (v | (v << 32)) & 0x1F00000000FFFFull;
    v = (v | (v << 16)) & 0x1F0000FF0000FFull;
    v = (v | (v << 8)) & 0x100F00F00F00F00Full;
    v = (v | (v << 4)) & 0x10C30C30C30C30C3ull;
    v = (v | (v << 2)) & 0x1249249249249249ull;
    return v;
}

// The cell of one coordinate on the grid of `top` + 1 cells from `lo` (morton.grid_cells:
// floor((p − lo) · scale) clamped to [0, top], the same operations in the same order).
__device__ unsigned long long vs_cell(double p, double lo, double scale, double top) {
    double c = floor((p - lo) * scale);
    c = c < 0.0 ? 0.0 : (c > top ? top : c);
    return (unsigned long long) (long long) c;
}

// The Z-order key of point i of p (M, 3): its cells interleaved, x in the lowest bit.
__device__ unsigned long long vs_morton_key(const long long i, const double* p,
                                            const double* lo, const double scale,
                                            const double top) {
    return vs_spread(vs_cell(p[3 * i], lo[0], scale, top))
        | (vs_spread(vs_cell(p[3 * i + 1], lo[1], scale, top)) << 1)
        | (vs_spread(vs_cell(p[3 * i + 2], lo[2], scale, top)) << 2);
}

// The depth model's histogram (vortexsim.fmm.plan.near_pairs_by_depth): point i of p
// (M, 3) counted in its cell of the side³ grid (cells as vs_cell: floor((p − lo) ·
// scale) clamped to [0, top]; x the slowest axis, as the NumPy grid's flat index).
// Integer atomics: the same counts in any order.  A NaN cell (a NaN coordinate, or
// 0 · inf or inf − inf of a degenerate cube) passes vs_cell's clamp: such a point is
// counted nowhere, rather than written outside the grid.
__device__ void vs_count_cell(const long long i, const double* p, const double* lo,
                              const double scale, const double top,
                              const long long side, unsigned long long* counts) {
    double c[3];
    for (int d = 0; d < 3; ++d) {
        c[d] = floor((p[3 * i + d] - lo[d]) * scale);
        if (c[d] != c[d]) return;
        c[d] = c[d] < 0.0 ? 0.0 : (c[d] > top ? top : c[d]);
    }
    const unsigned long long cell =
        ((unsigned long long) (long long) c[0] * side + (unsigned long long) (long long) c[1])
        * side + (unsigned long long) (long long) c[2];
    atomicAdd(counts + cell, 1ull);
}
