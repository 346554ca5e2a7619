#pragma once

// Host-side validation and shape logic for _grouped_mm, shared by every
// backend (CPU reference, CUDA Hopper, CUDA SM80). Everything here runs on
// the host and never reads device memory, so it can never force a sync.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace at::native {

// Which dimension the offsets split, named after the operand ranks.
enum class GroupedMMLayout : uint8_t {
  k2dx3d,  // a (sum M, K) @ b (G, K, N) -> (sum M, N), groups along rows
  k3dx2d,  // a (G, M, K) @ b (K, sum N) -> (M, sum N), groups along columns
  k2dx2d,  // a (M, sum K) @ b (sum K, N) -> (G, M, N), groups along K
  k3dx3d,  // a (G, M, K) @ b (G, K, N) -> (G, M, N), batched, no offsets
};

const char* grouped_mm_layout_name(GroupedMMLayout layout);

// Everything a backend needs to know about a validated call, computed from
// host metadata only.
struct GroupedMMProblem {
  GroupedMMLayout layout;
  int64_t num_groups;
  // Extent of the grouped dimension (sum M, sum N or sum K); 0 for 3d x 3d.
  int64_t grouped_extent;
  int64_t m;  // rows per group (2d x 3d: total rows)
  int64_t n;  // columns per group (3d x 2d: total columns)
  int64_t k;  // reduction size (2d x 2d: total K)
  ScalarType input_dtype;
  ScalarType out_dtype;
  std::vector<int64_t> out_sizes;
};

// Validates shapes, dtypes, devices and offsets metadata; raises a
// c10::Error naming the argument and the expected value before any launch.
GroupedMMProblem check_grouped_mm_inputs(
    const Tensor& self,
    const Tensor& mat2,
    const std::optional<Tensor>& offs,
    const std::optional<Tensor>& bias,
    std::optional<ScalarType> out_dtype);

// Checks offsets values that are already on the host. Names the first bad
// group: decreasing offsets, negative offsets, or offsets past the end.
void check_grouped_mm_offsets_on_host(
    const Tensor& offs_cpu,
    int64_t grouped_extent);

// Reads the checked-mode switch: set_grouped_mm_checked_offsets when it
// holds a value, else TORCH_GROUPED_MM_CHECK_OFFSETS in the environment (1, on,
// true or yes: checked; unset, empty, 0, off, false or no: not; any other
// value raises, naming the accepted ones).
bool grouped_mm_checked_offsets();
// nullopt hands the switch back to the environment.
void set_grouped_mm_checked_offsets(std::optional<bool> enabled);
std::optional<bool> grouped_mm_checked_offsets_override();

}  // namespace at::native
