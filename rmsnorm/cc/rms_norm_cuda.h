// CUDA launchers for RMS normalisation, with a plain C interface: compiled by nvcc (rms_norm_cuda.cu),
// called by the XLA FFI handlers (rms_norm_gpu.cc, compiled by the host compiler against the XLA headers).
#ifndef JAXREL_RMSNORM_RMS_NORM_CUDA_H_
#define JAXREL_RMSNORM_RMS_NORM_CUDA_H_

#include <cstdint>

extern "C" {
// Each enqueues one kernel on `stream` (a cudaStream_t) and returns nullptr, or the CUDA error's text.
// Arrays are row-major, `rows` rows of `width` float32 values, on the device.
const char* JaxrelRmsNormForwardLaunch(void* stream, const float* x, float* y, int64_t rows, int64_t width,
                                       float eps);
const char* JaxrelRmsNormBackwardLaunch(void* stream, const float* x, const float* dy, float* dx, int64_t rows,
                                        int64_t width, float eps);
// The CUDA runtime version compiled in (CUDART_VERSION, e.g. 13000) and the one loaded (0 if none).
int JaxrelCudaRuntimeBuilt();
int JaxrelCudaRuntimeLoaded();
}

#endif  // JAXREL_RMSNORM_RMS_NORM_CUDA_H_
