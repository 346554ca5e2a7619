#pragma once

// When the bias gradient's column-sums kernel (GroupColumnSums.cu) may load
// 16 contiguous bytes of a row per lane instead of single elements. Plain
// arithmetic on host-known strides, so it is testable on the CPU.

#include <cstdint>

namespace at::native {

constexpr int64_t kColumnSumsVectorBytes = 16;

// grad's columns contiguous, and every vector a lane loads 16-byte aligned
// and wholly inside a row: the data pointer aligned, the row and group
// strides (elements) and N multiples of a vector's elements. Stride-0
// (expanded) rows and groups qualify: every lane then rereads one row.
inline bool column_sums_vector_loads(
    int64_t element_size, uint64_t data_address, int64_t n,
    int64_t row_stride, int64_t col_stride, int64_t group_stride) {
  if (element_size <= 0 || kColumnSumsVectorBytes % element_size != 0) {
    return false;
  }
  const int64_t per_vector = kColumnSumsVectorBytes / element_size;
  return n > 0 && col_stride == 1 &&
      data_address % uint64_t(kColumnSumsVectorBytes) == 0 &&
      n % per_vector == 0 && row_stride % per_vector == 0 &&
      group_stride % per_vector == 0;
}

}  // namespace at::native
