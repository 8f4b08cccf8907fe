#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef $ctype T;
typedef $wtype W;
typedef $otype O;
#define VEC $vec  // elements per load: 16 bytes when the row length allows it
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename D> __device__ __forceinline__ D from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

template <typename D> struct alignas(sizeof(D) * VEC) Pack { D v[VEC]; };

// Block-wide sum (or max) of one float per thread; every thread gets the result.
template <bool MAX> __device__ float block_reduce(float v) {
    __shared__ float partial[32];
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffff, v, o);
        v = MAX ? fmaxf(v, other) : v + other;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < warps ? partial[lane] : (MAX ? NEG_INF : 0.f);
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffff, v, o);
        v = MAX ? fmaxf(v, other) : v + other;
    }
    return v;
}
