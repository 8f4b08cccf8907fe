# approach: one block per row, online max/sum in one read, 16-byte fp16 loads, second pass writes
import torch
import torch.nn as nn

from harness.platforms.cuda import compile_cuda

SOURCE = r"""
#include <cuda_fp16.h>
#define NEG_BIG (-3.0e38f)

__device__ __forceinline__ void combine(float& m, float& s, float om, float os) {
    float nm = fmaxf(m, om);
    s = s * __expf(m - nm) + os * __expf(om - nm);
    m = nm;
}

extern "C" __global__ void softmax_rows(const __half* x, __half* y, int cols) {
    const __half* xr = x + (long)blockIdx.x * cols;
    __half* yr = y + (long)blockIdx.x * cols;
    float m = NEG_BIG, s = 0.f;
    for (int c = threadIdx.x * 8; c < cols; c += blockDim.x * 8) {
        uint4 v = *reinterpret_cast<const uint4*>(xr + c);
        const __half* h = reinterpret_cast<const __half*>(&v);
        #pragma unroll
        for (int k = 0; k < 8; ++k) combine(m, s, __half2float(h[k]), 1.f);
    }
    for (int o = 16; o > 0; o >>= 1)
        combine(m, s, __shfl_xor_sync(0xffffffff, m, o), __shfl_xor_sync(0xffffffff, s, o));
    __shared__ float sm[32], ss[32];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        int warps = blockDim.x / 32;
        m = lane < warps ? sm[lane] : NEG_BIG;
        s = lane < warps ? ss[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1)
            combine(m, s, __shfl_xor_sync(0xffffffff, m, o), __shfl_xor_sync(0xffffffff, s, o));
        if (lane == 0) { sm[0] = m; ss[0] = s; }
    }
    __syncthreads();
    m = sm[0];
    float inv = 1.f / ss[0];
    for (int c = threadIdx.x * 8; c < cols; c += blockDim.x * 8) {
        uint4 v = *reinterpret_cast<const uint4*>(xr + c);
        __half* h = reinterpret_cast<__half*>(&v);
        #pragma unroll
        for (int k = 0; k < 8; ++k) h[k] = __float2half(__expf(__half2float(h[k]) - m) * inv);
        *reinterpret_cast<uint4*>(yr + c) = v;
    }
}
"""

kernel = compile_cuda(SOURCE, "softmax_rows")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        kernel(grid=(rows, 1, 1), block=(512, 1, 1), args=[x, y, cols])
        return y
