#pragma once

// c10 element types as the CUTLASS element types of the same bits, for the
// CUTLASS 2.x (SM80) and 3.x (SM90) grouped GEMMs.

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cutlass/numeric_types.h>

namespace at::native::grouped_mm {

template <typename T>
struct CutlassType {
  using type = T;
};
template <>
struct CutlassType<c10::BFloat16> {
  using type = cutlass::bfloat16_t;
};
template <>
struct CutlassType<c10::Half> {
  using type = cutlass::half_t;
};

}  // namespace at::native::grouped_mm
