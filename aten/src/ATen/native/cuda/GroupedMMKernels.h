#pragma once

// Launchers shared between the grouped-mm translation units. Each takes
// operands already validated by check_grouped_mm_inputs and a Geometry built
// from them, and enqueues work on the current stream without syncing.

#include <ATen/core/Tensor.h>
#include <ATen/native/cuda/GroupedMMArguments.cuh>

#include <optional>

namespace at::native::grouped_mm {

// Everything a launcher needs. offs is undefined for 3d x 3d; bias is
// undefined or a float32 (G, N) tensor.
struct LaunchArgs {
  Geometry geo;
  Tensor a;
  Tensor b;
  Tensor out;
  Tensor offs;
  Tensor bias;
  int64_t sm_limit;  // grid limit from the SM-carveout policy
};

// Any dtype, layout, stride or size; fp32 math (exact for float32 inputs).
// Also writes k = 0 groups (zeros + bias). Does not touch the tail.
void launch_generic_grouped_mm(const LaunchArgs& args);

// Zeros rows (kRows) or columns (kCols) of out past the clamped offs[-1].
void launch_zero_tail(const LaunchArgs& args);

// Hopper TMA + WGMMA kernels. Returns false, having launched nothing, when
// this GPU, dtype or operand layout is not covered; the caller falls back.
bool try_launch_sm90_grouped_mm(const LaunchArgs& args);

}  // namespace at::native::grouped_mm
