// RMS normalisation kernels for NVIDIA GPUs: one thread block per row (grid-stride over rows).
//
// Forward: y = x * r, r = 1 / sqrt(mean(x^2) + eps). Backward: dx = r * dy - r^3 * x * mean(dy * x).
// Each block reads its row once to reduce (float4 loads when the row allows) and once more to write; the
// second read hits L2, so the kernel moves about one read and one write of the array, as XLA's fusion does.
#include "rmsnorm/cc/rms_norm_cuda.h"

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;  // per block: 8 warps
constexpr int64_t kMaxBlocks = 1 << 20;

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

unsigned Blocks(int64_t rows) { return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks); }

const char* LastError() {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}

}  // namespace

extern "C" const char* JaxrelRmsNormForwardLaunch(void* stream, const float* x, float* y, float* inv_rms,
                                                  int64_t rows, int64_t width, float eps) {
  if (rows == 0) return nullptr;
  Forward<<<Blocks(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, y, inv_rms, rows, width, eps);
  return LastError();
}

extern "C" const char* JaxrelRmsNormBackwardLaunch(void* stream, const float* x, const float* inv_rms,
                                                   const float* dy, float* dx, int64_t rows, int64_t width) {
  if (rows == 0) return nullptr;
  Backward<<<Blocks(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, inv_rms, dy, dx, rows, width);
  return LastError();
}

extern "C" int JaxrelCudaRuntimeBuilt() { return CUDART_VERSION; }

extern "C" int JaxrelCudaRuntimeLoaded() {
  int version = 0;
  return cudaRuntimeGetVersion(&version) == cudaSuccess ? version : 0;
}
