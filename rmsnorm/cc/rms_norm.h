// RMS normalisation over the last axis as XLA FFI handlers (CPU, float32).
#ifndef JAXREL_RMSNORM_RMS_NORM_H_
#define JAXREL_RMSNORM_RMS_NORM_H_

#include "xla/ffi/api/c_api.h"

extern "C" {
// (x; eps) -> y: y = x * r, r = 1 / sqrt(mean(x^2, axis=-1) + eps).
XLA_FFI_Error* JaxrelRmsNormForward(XLA_FFI_CallFrame* call_frame);
// (x, dy; eps) -> dx, the vector-Jacobian product of the forward pass (r computed again from x).
XLA_FFI_Error* JaxrelRmsNormBackward(XLA_FFI_CallFrame* call_frame);
}

#endif  // JAXREL_RMSNORM_RMS_NORM_H_
