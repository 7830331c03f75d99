// XLA FFI handlers for the CUDA platform: decode the call frame (the stream comes from it), launch the
// kernels of rms_norm_cuda.cu on that stream. Compiled by the host compiler, so nvcc never sees XLA's headers.
#include "rmsnorm/cc/rms_norm_gpu.h"

#include <cstdint>

#include "rmsnorm/cc/rms_norm_cuda.h"
#include "rmsnorm/cc/rows.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jaxrel_rmsnorm::NoAxis;
using jaxrel_rmsnorm::Rows;
using jaxrel_rmsnorm::RowsOf;

ffi::Error Launched(const char* error) {
  return error == nullptr ? ffi::Error::Success() : ffi::Error(ffi::ErrorCode::kInternal, error);
}

ffi::Error Forward(void* stream, float eps, ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
  if (x.dimensions().size() == 0) return NoAxis();
  const Rows rows = RowsOf(x.dimensions());
  return Launched(JaxrelRmsNormForwardLaunch(stream, x.typed_data(), y->typed_data(), rows.count, rows.width, eps));
}

ffi::Error Backward(void* stream, float eps, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> dy,
                    ffi::ResultBuffer<ffi::F32> dx) {
  if (x.dimensions().size() == 0) return NoAxis();
  const Rows rows = RowsOf(x.dimensions());
  return Launched(JaxrelRmsNormBackwardLaunch(stream, x.typed_data(), dy.typed_data(), dx->typed_data(), rows.count,
                                              rows.width, eps));
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrelRmsNormForwardCuda, Forward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Attr<float>("eps")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrelRmsNormBackwardCuda, Backward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Attr<float>("eps")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
