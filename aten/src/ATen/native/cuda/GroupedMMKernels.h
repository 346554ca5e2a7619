#pragma once

// Launchers shared between the grouped-mm translation units. Each takes
// operands already validated by check_grouped_mm_inputs and a Geometry built
// from them, and enqueues work on the current stream without syncing.

#include <ATen/core/Tensor.h>
#include <ATen/native/cuda/GroupedMMArguments.cuh>

#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace at::native {
struct GroupedMMProblem;
}  // namespace at::native

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

// Element strides of a 2d or 3d operand seen as per-group matrices.
inline OperandStrides operand_strides(const Tensor& t) {
  if (t.dim() == 3) {
    return {t.stride(0), t.stride(1), t.stride(2)};
  }
  return {0, t.stride(0), t.stride(1)};
}

// The launchers' view of a call that check_grouped_mm_inputs accepted as
// p, writing into out (p.out_sizes): its geometry, and offs and bias as
// contiguous tensors, bias in float32 (copied within the SM carveout where
// they are not).
LaunchArgs launch_args_for(
    const GroupedMMProblem& p, const Tensor& self, const Tensor& mat2,
    const std::optional<Tensor>& offs, const std::optional<Tensor>& bias,
    const Tensor& out);

// Calls fn with offs' data as `const int32_t*` or `const int64_t*` (a null
// int32 pointer when offs is undefined: the 3d x 3d layout has none), so
// every launcher instantiates its kernel once per offsets dtype.
template <typename Fn>
void dispatch_offs(const Tensor& offs, Fn&& fn) {
  if (offs.defined() && offs.scalar_type() == kLong) {
    fn(offs.const_data_ptr<int64_t>());
  } else {
    fn(offs.defined() ? offs.const_data_ptr<int32_t>() : nullptr);
  }
}

// k = 0 problems: the empty groups of a 2d x 2d call, or K = 0 in any
// layout. Host-known: whether they can occur, not which groups they are.
inline bool may_have_k0_groups(const Geometry& geo) {
  return geo.grouped == GroupedDim::kReduction || geo.k == 0;
}

// The tensor-core paths write k = 0 groups in the argument-filling kernel:
// zeros without a bias, bias rows when the GEMM's epilogue adds the bias
// (bias_fused: the Hopper path). Otherwise (SM80 with a bias)
// launch_finish_groups writes them along with the bias of every other
// group.
inline bool fill_writes_k0_groups(const LaunchArgs& args, bool bias_fused) {
  return may_have_k0_groups(args.geo) &&
      (!args.bias.defined() || bias_fused);
}

// 16-byte stores fit the output of the per-group writers: unit column
// stride, 16-byte aligned rows and group starts (d_offset is a multiple of
// the row or group stride; column groups start anywhere, so they do not).
inline bool output_takes_vector_stores(const LaunchArgs& args) {
  const int64_t units = 16 / static_cast<int64_t>(args.out.element_size());
  const Geometry& geo = args.geo;
  return geo.grouped != GroupedDim::kCols && geo.d.col == 1 &&
      geo.n % units == 0 && geo.d.row % units == 0 &&
      geo.d.group % units == 0 &&
      reinterpret_cast<uintptr_t>(args.out.const_data_ptr()) % 16 == 0;
}

// Reads a switch from the environment at every call: 0 when `name` is
// unset, empty or "auto", else 1 + the index of its value in `choices`.
// Any other value raises an error that lists the accepted ones.
size_t env_choice(const char* name, c10::ArrayRef<std::string_view> choices);

// Which grouped-mm kernel family to use. auto: the Hopper kernels on SM90
// (the SM80 kernels where the binary lacks their sm_90a code), the SM80
// kernels on SM80 to SM89 and SM120, the generic kernel elsewhere (and for
// whatever a tensor-core path does not take).
// TORCH_GROUPED_MM_BACKEND = auto (default) | sm90 | sm80 | generic
// forces one; sm80 runs the SM80 kernels on any GPU from SM80 on (Hopper
// included). An unknown value raises.
enum class Backend { kAuto, kSm90, kSm80, kGeneric };
Backend requested_backend();

// Whether the Hopper kernels' sm_90a code is in this binary for the
// current GPU (GroupedMMSm90_probe.cu); false on any GPU but SM90. Read
// once per device from the loaded image's attributes: no launch, no sync.
bool hopper_kernels_built();

// True when the Hopper kernels (GroupedMMSm90Dispatch.cpp) can take this
// input dtype on the current GPU (fp32 only when TF32 is allowed). Decided
// from host state only.
bool sm90_available_for(ScalarType input_dtype);

// True when the SM80 kernels (GroupedMMSm80Dispatch.cpp) can take this
// input dtype on the current GPU (fp32 only when TF32 is allowed): by
// default where sm80_kernels_by_default says (GroupedMMDispatchRule.h), any
// GPU from SM80 on when forced. Decided from host state only.
bool sm80_available_for(ScalarType input_dtype);

// Whether the SM80 kernels' tile numbering (int32) holds the call's tiles,
// bounded from host-known sizes.
bool sm80_tile_count_fits_int32(const Geometry& geo);

// Any dtype, layout, stride or size; fp32 math (exact for float32 inputs).
// Also writes k = 0 groups (zeros + bias). Does not touch the tail.
void launch_generic_grouped_mm(const LaunchArgs& args);

// Zeros rows (kRows) or columns (kCols) of out past the clamped offs[-1].
void launch_zero_tail(const LaunchArgs& args);

// After the SM80 GEMM with a bias (its epilogue does not add it): writes
// the bias into k = 0 groups and adds it to the other groups. No-op
// without a bias (the fill wrote the k = 0 zeros then,
// fill_writes_k0_groups).
void launch_finish_groups(const LaunchArgs& args);

// dst.copy_(src) for 1-D, 2-D or batched 3-D tensors of the same sizes, any
// strides: bf16/fp16/fp32 to the same dtype or float32, float32 to
// bf16/fp16 (rounded to nearest even, as .to() does), int32/int64 to the
// same. Under an SM carveout (sm_limit below the SM count) one kernel with at
// most sm_limit CTAs does it; without one, that kernel still does a
// transposing copy, torch's copy the others (GroupedMMRelayout.cu).
void copy_within_sm_limit(
    const Tensor& src, const Tensor& dst, int64_t sm_limit);

// For a call grouped along K (2d x 2d): copies src, float32 A (m x K) or B
// (K x n) with K along rows when k_along_rows, into dst, the same with K
// widened to padded_k_extent(K, num_groups, pad), each group's K range
// moved to padded_k_start (GroupedMMArguments.cuh); dst's strides say its
// major. Within the SM carveout like copy_within_sm_limit. The gaps
// between groups are written as zeros where a 16-byte gather kernel copies
// (K strided in src, the other index contiguous), else left unwritten: no
// kernel reads them.
void copy_k_groups_padded(
    const Tensor& src, const Tensor& dst, const Tensor& offs,
    int64_t num_groups, bool k_along_rows, int64_t pad, int64_t sm_limit);

// Hopper TMA + WGMMA kernels, same contract as try_launch_sm80_grouped_mm.
bool try_launch_sm90_grouped_mm(LaunchArgs& args);

// CUTLASS 2.x grouped kernels for SM80 and later. Returns false, having
// launched nothing, when this GPU, dtype or operand layout is not covered;
// the caller falls back. May replace args.a / args.b (and their strides) by
// re-laid-out copies.
bool try_launch_sm80_grouped_mm(LaunchArgs& args);

}  // namespace at::native::grouped_mm
