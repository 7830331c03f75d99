// RMS normalisation over the last axis as XLA FFI handlers for the CUDA platform (float32).
#ifndef JAXREL_RMSNORM_RMS_NORM_GPU_H_
#define JAXREL_RMSNORM_RMS_NORM_GPU_H_

#include "xla/ffi/api/c_api.h"

extern "C" {
// The same operations and signatures as rms_norm.h, on the call's CUDA stream.
XLA_FFI_Error* JaxrelRmsNormForwardCuda(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* JaxrelRmsNormBackwardCuda(XLA_FFI_CallFrame* call_frame);
}

#endif  // JAXREL_RMSNORM_RMS_NORM_GPU_H_
