// RMS normalisation kernels for NVIDIA GPUs: one thread block per row (grid-stride over rows).
//
// Forward: y = x * r, r = 1 / sqrt(mean(x^2) + eps). Backward: dx = r * dy - r^3 * x * mean(dy * x), with r
// computed again from x, which the backward pass reads anyway: no residual but x is kept, so under jax.grad
// the forward call is dead code and the gradient reads x and dy once and writes dx once.
// Rows of up to kThreads * kCached float4s (8192 floats) whose width is a multiple of 4 and whose arrays are
// 16-byte aligned are read once, into registers (all loads issued before the block reduction), and written
// once. Other rows are read twice (the second read mostly from L2). (Streaming, evict-first loads and stores
// were measured too, on an H100: no faster.)
#include "rmsnorm/cc/rms_norm_cuda.h"

#include <cuda_runtime.h>

#include <initializer_list>

// A named namespace, not an anonymous one: nvcc names anonymous namespaces after a hash that differs from
// build directory to build directory, which would make the wheel's bytes differ too. (-fvisibility=hidden
// keeps these symbols out of the module's interface all the same.)
namespace jaxrel_rmsnorm_cuda {

constexpr int kThreads = 256;  // per block: 8 warps
constexpr int64_t kMaxBlocks = 1 << 20;
constexpr int kCached = 8;  // float4s per thread held in registers: rows up to 256 * 8 * 4 = 8192 floats

// The sums of both components of `value` over the block, returned to every thread.
__device__ float2 BlockSums(float2 value) {
  __shared__ float2 partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    value.x += __shfl_xor_sync(0xffffffffu, value.x, offset);
    value.y += __shfl_xor_sync(0xffffffffu, value.y, offset);
  }
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  value = lane < kThreads / 32 ? partial[lane] : make_float2(0.0f, 0.0f);
  for (int offset = 16; offset > 0; offset /= 2) {
    value.x += __shfl_xor_sync(0xffffffffu, value.x, offset);
    value.y += __shfl_xor_sync(0xffffffffu, value.y, offset);
  }
  __syncthreads();  // `partial` is reused by the next row
  return value;
}

__device__ float InverseRms(float sum_of_squares, int64_t width, float eps) {
  return 1.0f / sqrtf((width > 0 ? sum_of_squares / static_cast<float>(width) : 0.0f) + eps);
}

__device__ bool Aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

// (sum(x * x), sum(dy * x)) over one row, float4 loads when `vectorised`; `dy` may be null (then y is 0).
__device__ float2 RowSums(const float* x, const float* dy, int64_t width, bool vectorised) {
  float2 sum = make_float2(0.0f, 0.0f);
  if (vectorised) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float4* dy4 = reinterpret_cast<const float4*>(dy);
    for (int64_t i = threadIdx.x; i < width / 4; i += kThreads) {
      const float4 u = x4[i];
      sum.x += u.x * u.x + u.y * u.y + u.z * u.z + u.w * u.w;
      if (dy != nullptr) {
        const float4 g = dy4[i];
        sum.y += g.x * u.x + g.y * u.y + g.z * u.z + g.w * u.w;
      }
    }
  } else {
    for (int64_t i = threadIdx.x; i < width; i += kThreads) {
      sum.x += x[i] * x[i];
      if (dy != nullptr) sum.y += dy[i] * x[i];
    }
  }
  return BlockSums(sum);
}

__global__ void Forward(const float* x, float* y, int64_t rows, int64_t width, float eps) {
  const bool vectorised = width % 4 == 0 && Aligned(x) && Aligned(y);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xs = x + row * width;
    float* ys = y + row * width;
    const float r = InverseRms(RowSums(xs, nullptr, width, vectorised).x, width, eps);
    if (vectorised) {
      const float4* x4 = reinterpret_cast<const float4*>(xs);
      float4* y4 = reinterpret_cast<float4*>(ys);
      for (int64_t i = threadIdx.x; i < width / 4; i += kThreads) {
        const float4 v = x4[i];
        y4[i] = make_float4(v.x * r, v.y * r, v.z * r, v.w * r);
      }
    } else {
      for (int64_t i = threadIdx.x; i < width; i += kThreads) ys[i] = xs[i] * r;
    }
  }
}

__global__ void Backward(const float* x, const float* dy, float* dx, int64_t rows, int64_t width, float eps) {
  const bool vectorised = width % 4 == 0 && Aligned(x) && Aligned(dy) && Aligned(dx);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xs = x + row * width;
    const float* dys = dy + row * width;
    float* dxs = dx + row * width;
    const float2 sums = RowSums(xs, dys, width, vectorised);
    const float r = InverseRms(sums.x, width, eps);
    const float k = r * r * r * (width > 0 ? sums.y / static_cast<float>(width) : 0.0f);
    if (vectorised) {
      const float4* x4 = reinterpret_cast<const float4*>(xs);
      const float4* dy4 = reinterpret_cast<const float4*>(dys);
      float4* dx4 = reinterpret_cast<float4*>(dxs);
      for (int64_t i = threadIdx.x; i < width / 4; i += kThreads) {
        const float4 u = x4[i];
        const float4 g = dy4[i];
        dx4[i] = make_float4(r * g.x - k * u.x, r * g.y - k * u.y, r * g.z - k * u.z, r * g.w - k * u.w);
      }
    } else {
      for (int64_t i = threadIdx.x; i < width; i += kThreads) dxs[i] = r * dys[i] - k * xs[i];
    }
  }
}

// The float4s of one row held in registers, kThreads apart, loaded in one go; zeros past the row's end.
struct CachedRow {
  float4 v[kCached];

  __device__ void Load(const float4* row, int64_t count) {
#pragma unroll
    for (int j = 0; j < kCached; ++j) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kThreads;
      v[j] = i < count ? row[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
};

__device__ float Dot(const float4& a, const float4& b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

__global__ void ForwardCached(const float4* x, float4* y, int64_t rows, int64_t width, float eps) {
  const int64_t count = width / 4;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    CachedRow xs;
    xs.Load(x + row * count, count);
    float2 sums = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int j = 0; j < kCached; ++j) sums.x += Dot(xs.v[j], xs.v[j]);
    const float r = InverseRms(BlockSums(sums).x, width, eps);
    float4* ys = y + row * count;
#pragma unroll
    for (int j = 0; j < kCached; ++j) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kThreads;
      if (i < count) ys[i] = make_float4(xs.v[j].x * r, xs.v[j].y * r, xs.v[j].z * r, xs.v[j].w * r);
    }
  }
}

__global__ void BackwardCached(const float4* x, const float4* dy, float4* dx, int64_t rows, int64_t width,
                               float eps) {
  const int64_t count = width / 4;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    CachedRow xs, dys;
    xs.Load(x + row * count, count);
    dys.Load(dy + row * count, count);
    float2 sums = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int j = 0; j < kCached; ++j) {
      sums.x += Dot(xs.v[j], xs.v[j]);
      sums.y += Dot(dys.v[j], xs.v[j]);
    }
    sums = BlockSums(sums);
    const float r = InverseRms(sums.x, width, eps);
    const float k = r * r * r * sums.y / static_cast<float>(width);
    float4* dxs = dx + row * count;
#pragma unroll
    for (int j = 0; j < kCached; ++j) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kThreads;
      const float4 u = xs.v[j];
      const float4 g = dys.v[j];
      if (i < count) dxs[i] = make_float4(r * g.x - k * u.x, r * g.y - k * u.y, r * g.z - k * u.z, r * g.w - k * u.w);
    }
  }
}

// Whether rows of `width` floats at these addresses fit the register-cached kernels.
bool Cacheable(int64_t width, std::initializer_list<const void*> arrays) {
  if (width <= 0 || width % 4 != 0 || width > static_cast<int64_t>(kThreads) * kCached * 4) return false;
  for (const void* array : arrays) {
    if (reinterpret_cast<uintptr_t>(array) % 16 != 0) return false;
  }
  return true;
}

unsigned Blocks(int64_t rows) { return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks); }

const char* LastError() {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}

}  // namespace jaxrel_rmsnorm_cuda

using namespace jaxrel_rmsnorm_cuda;  // NOLINT: the launchers below are this file's interface

extern "C" const char* JaxrelRmsNormForwardLaunch(void* stream, const float* x, float* y, int64_t rows,
                                                  int64_t width, float eps) {
  if (rows == 0) return nullptr;
  const cudaStream_t on = static_cast<cudaStream_t>(stream);
  if (Cacheable(width, {x, y})) {
    ForwardCached<<<Blocks(rows), kThreads, 0, on>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y),
                                                     rows, width, eps);
  } else {
    Forward<<<Blocks(rows), kThreads, 0, on>>>(x, y, rows, width, eps);
  }
  return LastError();
}

extern "C" const char* JaxrelRmsNormBackwardLaunch(void* stream, const float* x, const float* dy, float* dx,
                                                   int64_t rows, int64_t width, float eps) {
  if (rows == 0) return nullptr;
  const cudaStream_t on = static_cast<cudaStream_t>(stream);
  if (Cacheable(width, {x, dy, dx})) {
    BackwardCached<<<Blocks(rows), kThreads, 0, on>>>(reinterpret_cast<const float4*>(x),
                                                      reinterpret_cast<const float4*>(dy),
                                                      reinterpret_cast<float4*>(dx), rows, width, eps);
  } else {
    Backward<<<Blocks(rows), kThreads, 0, on>>>(x, dy, dx, rows, width, eps);
  }
  return LastError();
}

extern "C" int JaxrelCudaRuntimeBuilt() { return CUDART_VERSION; }

extern "C" int JaxrelCudaRuntimeLoaded() {
  int version = 0;
  return cudaRuntimeGetVersion(&version) == cudaSuccess ? version : 0;
}
