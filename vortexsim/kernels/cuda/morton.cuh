// Morton interleave of cell coordinates (vortexsim.kernels.morton.morton_keys), the
// operation of the elementwise kernel "vortexsim_morton_interleave" (kernels/modules.py).
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
