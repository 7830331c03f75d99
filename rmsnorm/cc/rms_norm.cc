// RMS normalisation kernels written against the pinned XLA FFI headers (see rms_norm.h).
#include "rmsnorm/cc/rms_norm.h"

#include <cmath>
#include <cstdint>

#include "rmsnorm/cc/rows.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jaxrel_rmsnorm::NoAxis;
using jaxrel_rmsnorm::Rows;
using jaxrel_rmsnorm::RowsOf;

float InverseRms(float sum_of_squares, int64_t width, float eps) {
  const float mean = width > 0 ? sum_of_squares / static_cast<float>(width) : 0.0f;
  return 1.0f / std::sqrt(mean + eps);
}

ffi::Error Forward(float eps, ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
  if (x.dimensions().size() == 0) return NoAxis();
  const Rows rows = RowsOf(x.dimensions());
  const float* in = x.typed_data();
  float* out = y->typed_data();
  for (int64_t row = 0; row < rows.count; ++row) {
    const float* xs = in + row * rows.width;
    float sum_of_squares = 0.0f;
    for (int64_t i = 0; i < rows.width; ++i) sum_of_squares += xs[i] * xs[i];
    const float r = InverseRms(sum_of_squares, rows.width, eps);
    for (int64_t i = 0; i < rows.width; ++i) out[row * rows.width + i] = xs[i] * r;
  }
  return ffi::Error::Success();
}

// dx_j = r * dy_j - r^3 * x_j * mean(dy * x), per row, with r computed again from x in the same pass as the dot.
ffi::Error Backward(float eps, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> dy, ffi::ResultBuffer<ffi::F32> dx) {
  if (x.dimensions().size() == 0) return NoAxis();
  const Rows rows = RowsOf(x.dimensions());
  const float* xs_all = x.typed_data();
  const float* dys_all = dy.typed_data();
  float* out = dx->typed_data();
  for (int64_t row = 0; row < rows.count; ++row) {
    const float* xs = xs_all + row * rows.width;
    const float* dys = dys_all + row * rows.width;
    float sum_of_squares = 0.0f;
    float dot = 0.0f;
    for (int64_t i = 0; i < rows.width; ++i) {
      sum_of_squares += xs[i] * xs[i];
      dot += dys[i] * xs[i];
    }
    const float r = InverseRms(sum_of_squares, rows.width, eps);
    const float k = r * r * r * (rows.width > 0 ? dot / static_cast<float>(rows.width) : 0.0f);
    for (int64_t i = 0; i < rows.width; ++i) out[row * rows.width + i] = r * dys[i] - k * xs[i];
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrelRmsNormForward, Forward,
                              ffi::Ffi::Bind()
                                  .Attr<float>("eps")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrelRmsNormBackward, Backward,
                              ffi::Ffi::Bind()
                                  .Attr<float>("eps")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
