// The shape both platforms' handlers share: an array as rows (the product of its leading dimensions) of
// its last dimension's width, and the error for an array without an axis.
#ifndef JAXREL_RMSNORM_ROWS_H_
#define JAXREL_RMSNORM_ROWS_H_

#include <cstddef>
#include <cstdint>

#include "xla/ffi/api/ffi.h"

namespace jaxrel_rmsnorm {

struct Rows {
  int64_t count = 1;
  int64_t width = 0;
};

inline Rows RowsOf(xla::ffi::Span<const int64_t> dims) {
  Rows rows;
  for (size_t i = 0; i + 1 < dims.size(); ++i) rows.count *= dims[i];
  rows.width = dims[dims.size() - 1];
  return rows;
}

inline xla::ffi::Error NoAxis() {
  return xla::ffi::Error(xla::ffi::ErrorCode::kInvalidArgument, "rms_norm needs an array with at least one axis");
}

}  // namespace jaxrel_rmsnorm

#endif  // JAXREL_RMSNORM_ROWS_H_
