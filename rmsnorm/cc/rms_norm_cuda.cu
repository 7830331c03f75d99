// RMS normalisation kernels for NVIDIA GPUs: one thread block per row (grid-stride over rows).
//
// Forward: y = x * r, r = 1 / sqrt(mean(x^2) + eps). Backward: dx = r * dy - r^3 * x * mean(dy * x).
// Rows of up to kThreads * kCached float4s (8192 floats) whose width is a multiple of 4 and whose arrays are
// 16-byte aligned are read once, into registers (all loads issued before the block reduction), and written
// once: one read and one write of the array, as XLA's fusion moves. Other rows are read twice (the second
// read mostly from L2).
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

// The sum of `value` over the block, returned to every thread.
__device__ float BlockSum(float value) {
  __shared__ float partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  value = lane < kThreads / 32 ? partial[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  __syncthreads();  // `partial` is reused by the next row
  return value;
}

// sum(a * b) over one row; float4 loads when both rows are 16-byte aligned and the width a multiple of 4.
__device__ float RowDot(const float* a, const float* b, int64_t width, bool vectorised) {
  float sum = 0.0f;
  if (vectorised) {
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    for (int64_t i = threadIdx.x; i < width / 4; i += kThreads) {
      const float4 u = a4[i];
      const float4 v = b4[i];
      sum += u.x * v.x + u.y * v.y + u.z * v.z + u.w * v.w;
    }
  } else {
    for (int64_t i = threadIdx.x; i < width; i += kThreads) sum += a[i] * b[i];
  }
  return BlockSum(sum);
}

__device__ bool Aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

__global__ void Forward(const float* x, float* y, float* inv_rms, int64_t rows, int64_t width, float eps) {
  const bool vectorised = width % 4 == 0 && Aligned(x) && Aligned(y);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xs = x + row * width;
    float* ys = y + row * width;
    const float sum = RowDot(xs, xs, width, vectorised);
    const float r = 1.0f / sqrtf((width > 0 ? sum / static_cast<float>(width) : 0.0f) + eps);
    if (threadIdx.x == 0) inv_rms[row] = r;
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

__global__ void Backward(const float* x, const float* inv_rms, const float* dy, float* dx, int64_t rows,
                         int64_t width) {
  const bool vectorised = width % 4 == 0 && Aligned(x) && Aligned(dy) && Aligned(dx);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xs = x + row * width;
    const float* dys = dy + row * width;
    float* dxs = dx + row * width;
    const float r = inv_rms[row];
    const float dot = RowDot(dys, xs, width, vectorised);
    const float k = r * r * r * (width > 0 ? dot / static_cast<float>(width) : 0.0f);
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

__device__ float Dot(const CachedRow& a, const CachedRow& b) {
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kCached; ++j) {
    sum += a.v[j].x * b.v[j].x + a.v[j].y * b.v[j].y + a.v[j].z * b.v[j].z + a.v[j].w * b.v[j].w;
  }
  return BlockSum(sum);
}

__global__ void ForwardCached(const float4* x, float4* y, float* inv_rms, int64_t rows, int64_t width, float eps) {
  const int64_t count = width / 4;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    CachedRow xs;
    xs.Load(x + row * count, count);
    const float r = 1.0f / sqrtf(Dot(xs, xs) / static_cast<float>(width) + eps);
    if (threadIdx.x == 0) inv_rms[row] = r;
    float4* ys = y + row * count;
#pragma unroll
    for (int j = 0; j < kCached; ++j) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kThreads;
      if (i < count) ys[i] = make_float4(xs.v[j].x * r, xs.v[j].y * r, xs.v[j].z * r, xs.v[j].w * r);
    }
  }
}

__global__ void BackwardCached(const float4* x, const float* inv_rms, const float4* dy, float4* dx, int64_t rows,
                               int64_t width) {
  const int64_t count = width / 4;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    CachedRow xs, dys;
    xs.Load(x + row * count, count);
    dys.Load(dy + row * count, count);
    const float r = inv_rms[row];
    const float k = r * r * r * Dot(dys, xs) / static_cast<float>(width);
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

extern "C" const char* JaxrelRmsNormForwardLaunch(void* stream, const float* x, float* y, float* inv_rms,
                                                  int64_t rows, int64_t width, float eps) {
  if (rows == 0) return nullptr;
  const cudaStream_t on = static_cast<cudaStream_t>(stream);
  if (Cacheable(width, {x, y})) {
    ForwardCached<<<Blocks(rows), kThreads, 0, on>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y),
                                                     inv_rms, rows, width, eps);
  } else {
    Forward<<<Blocks(rows), kThreads, 0, on>>>(x, y, inv_rms, rows, width, eps);
  }
  return LastError();
}

extern "C" const char* JaxrelRmsNormBackwardLaunch(void* stream, const float* x, const float* inv_rms,
                                                   const float* dy, float* dx, int64_t rows, int64_t width) {
  if (rows == 0) return nullptr;
  const cudaStream_t on = static_cast<cudaStream_t>(stream);
  if (Cacheable(width, {x, dy, dx})) {
    BackwardCached<<<Blocks(rows), kThreads, 0, on>>>(reinterpret_cast<const float4*>(x), inv_rms,
                                                      reinterpret_cast<const float4*>(dy), reinterpret_cast<float4*>(dx),
                                                      rows, width);
  } else {
    Backward<<<Blocks(rows), kThreads, 0, on>>>(x, inv_rms, dy, dx, rows, width);
  }
  return LastError();
}

extern "C" int JaxrelCudaRuntimeBuilt() { return CUDART_VERSION; }

extern "C" int JaxrelCudaRuntimeLoaded() {
  int version = 0;
  return cudaRuntimeGetVersion(&version) == cudaSuccess ? version : 0;
}
