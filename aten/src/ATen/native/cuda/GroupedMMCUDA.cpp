// Host code only, so it is compiled by the C++ compiler like upstream's
// GroupedBlas.cpp; the .cu files hold kernels and their launchers.

// CUDA _grouped_mm: host-side validation and dispatch. The decision is made
// from host metadata only (dtypes, shapes, strides, GPU), never from the
// offsets' values, so nothing here synchronises with the device.

// CUDA only: ROCm keeps upstream's _grouped_mm (GroupedBlas.cpp calls the
// device-offset path under !USE_ROCM), so the ROCm build's hipified copy of
// this file is empty.
#if !defined(USE_ROCM)

#include <ATen/native/cuda/GroupedMMCUDA.h>

#include <ATen/Functions.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/SMCarveoutCUDA.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/native/GroupedMMDispatchRule.h>
#include <ATen/native/GroupedMMValidation.h>
#include <ATen/native/cuda/GroupedMMKernels.h>
#include <c10/cuda/CUDAGuard.h>

namespace at::native {
namespace grouped_mm {
namespace {

Geometry make_geometry(
    const GroupedMMProblem& p, const Tensor& a, const Tensor& b,
    const Tensor& out) {
  Geometry geo;
  geo.num_groups = p.num_groups;
  geo.extent = p.grouped_extent;
  geo.a = operand_strides(a);
  geo.b = operand_strides(b);
  geo.d = operand_strides(out);
  switch (p.layout) {
    case GroupedMMLayout::k2dx3d:
      geo.grouped = GroupedDim::kRows;
      geo.m = a.size(0);
      geo.n = b.size(2);
      geo.k = a.size(1);
      break;
    case GroupedMMLayout::k3dx2d:
      geo.grouped = GroupedDim::kCols;
      geo.m = a.size(1);
      geo.n = b.size(1);
      geo.k = a.size(2);
      break;
    case GroupedMMLayout::k2dx2d:
      geo.grouped = GroupedDim::kReduction;
      geo.m = a.size(0);
      geo.n = b.size(1);
      geo.k = a.size(1);
      break;
    case GroupedMMLayout::k3dx3d:
      geo.grouped = GroupedDim::kNone;
      geo.m = a.size(1);
      geo.n = b.size(2);
      geo.k = a.size(2);
      break;
  }
  return geo;
}

// t itself when it already is a contiguous tensor of this dtype, else a
// contiguous copy made within the SM carveout (torch's .to() / .contiguous()
// would size the grid by the element count).
Tensor contiguous_within(const Tensor& t, ScalarType dtype, int64_t sm_limit) {
  if (t.scalar_type() == dtype && t.is_contiguous()) {
    return t;
  }
  Tensor out = at::empty(t.sizes(), t.options().dtype(dtype));
  copy_within_sm_limit(t, out, sm_limit);
  return out;
}

}  // namespace

LaunchArgs launch_args_for(
    const GroupedMMProblem& p, const Tensor& self, const Tensor& mat2,
    const std::optional<Tensor>& offs, const std::optional<Tensor>& bias,
    const Tensor& out) {
  LaunchArgs args;
  args.a = self;
  args.b = mat2;
  args.out = out;
  args.sm_limit = at::cuda::current_device_sm_limit();
  args.offs = offs.has_value()
      ? contiguous_within(*offs, offs->scalar_type(), args.sm_limit)
      : Tensor();
  args.bias = bias.has_value()
      ? contiguous_within(*bias, kFloat, args.sm_limit)
      : Tensor();
  args.geo = make_geometry(p, self, mat2, out);
  return args;
}

}  // namespace grouped_mm

namespace {

// Whether a tensor-core path may take this dtype. Only those need the
// 3d x 2d rewrite; the generic kernel takes grouped columns directly.
bool tensor_core_path_available(ScalarType input_dtype) {
  return grouped_mm::sm90_available_for(input_dtype) ||
      grouped_mm::sm80_available_for(input_dtype);
}

void check_offsets_if_requested(
    const std::optional<Tensor>& offs, const GroupedMMProblem& p) {
  if (offs.has_value() && grouped_mm_checked_offsets()) {
    // Checked mode trades one sync for an error that names the bad group.
    check_grouped_mm_offsets_on_host(offs->cpu(), p.grouped_extent);
  }
}

// 16-byte aligned data pointer and non-unit strides, and a unit stride in
// one of the last two dimensions, as upstream's stride check requires.
bool aligned_16_bytes(const Tensor& t) {
  const int64_t size = t.element_size();
  if (reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 != 0) {
    return false;
  }
  if (t.dim() >= 2 && t.stride(-1) != 1 && t.stride(-2) != 1) {
    return false;
  }
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1 && t.stride(d) != 1 && t.stride(d) * size % 16 != 0) {
      return false;
    }
  }
  return true;
}

// Upstream compiles its cuBLASLt grouped GEMM in from CUDA 13.3 on.
constexpr long kCublasLtGroupedCudart = 13030;

void warn_if_untuned_device(const Tensor& self) {
  const auto* props = at::cuda::getDeviceProperties(self.device().index());
  if (!grouped_mm::has_tuned_kernels(props->major, props->minor)) {
    TORCH_WARN_ONCE(
        "grouped_mm: no tensor-core kernels of this build run on sm_",
        props->major, props->minor,
        "; calls upstream cannot take run the portable CUDA kernel, which ",
        "is correct but slower");
  }
}

}  // namespace

bool grouped_mm_upstream_takes(
    const Tensor& self,
    const Tensor& mat2,
    const std::optional<Tensor>& offs,
    const std::optional<Tensor>& bias,
    std::optional<ScalarType> out_dtype) {
  // A forced TORCH_GROUPED_MM_BACKEND names one of this project's kernel
  // families; a bad value raises here, before any launch.
  if (grouped_mm::requested_backend() != grouped_mm::Backend::kAuto) {
    return false;
  }
  const auto* props = at::cuda::getDeviceProperties(self.device().index());
  grouped_mm::CallFacts facts;
  facts.sm_major = props->major;
  facts.sm_minor = props->minor;
  facts.input_dtype = self.scalar_type();
  facts.out_dtype = out_dtype.value_or(self.scalar_type());
  facts.has_bias = bias.has_value();
  facts.offs_int32 = !offs.has_value() || offs->scalar_type() == kInt;
  // Without offs only 3d x 3d is valid; a call that is not fails
  // validation on whichever side takes it.
  facts.groups = offs.has_value() ? offs->numel()
      : (self.dim() == 3 ? self.size(0) : 0);
  facts.aligned = self.scalar_type() == mat2.scalar_type() &&
      aligned_16_bytes(self) && aligned_16_bytes(mat2);
  // The CUDA runtime torch itself was built with.
  facts.upstream_cublaslt =
      at::detail::getCUDAHooks().versionCUDART() >= kCublasLtGroupedCudart;
  return grouped_mm::upstream_takes(facts);
}

Tensor grouped_mm_cuda(
    const Tensor& self,
    const Tensor& mat2,
    const std::optional<Tensor>& offs,
    const std::optional<Tensor>& bias,
    std::optional<ScalarType> out_dtype) {
  const GroupedMMProblem p =
      check_grouped_mm_inputs(self, mat2, offs, bias, out_dtype);
  TORCH_CHECK(
      self.is_cuda(), "grouped_mm: self must be a CUDA tensor, got ",
      self.device());
  // A bad TORCH_GROUPED_MM_BACKEND raises here, before any launch.
  grouped_mm::requested_backend();
  c10::cuda::CUDAGuard guard(self.device());
  check_offsets_if_requested(offs, p);

  if (p.layout == GroupedMMLayout::k3dx2d &&
      tensor_core_path_available(p.input_dtype)) {
    // Columns grouped in a row-major output are not 16-byte aligned for
    // TMA, and their width is device-only for CUTLASS 2.x's predicates.
    // Compute out^T = mat2^T @ self^T as 2d x 3d instead, then copy.
    const Tensor out_t = grouped_mm_cuda(
        mat2.t(), self.transpose(-2, -1), offs, std::nullopt, out_dtype);
    Tensor out = at::empty(p.out_sizes, out_t.options());
    grouped_mm::copy_within_sm_limit(
        out_t.t(), out, at::cuda::current_device_sm_limit());
    return out;
  }

  Tensor out = at::empty(p.out_sizes, self.options().dtype(p.out_dtype));
  if (out.numel() == 0) {
    return out;
  }
  grouped_mm::LaunchArgs args =
      grouped_mm::launch_args_for(p, self, mat2, offs, bias, out);
  if (args.geo.num_groups == 0) {
    // No groups: the tail kernel zeroes every row. CUTLASS's grouped
    // scheduler reads problem 0 unconditionally, so it must not launch.
    grouped_mm::launch_zero_tail(args);
    return out;
  }
  // The tensor-core paths' argument-filling kernel also zeroes the output
  // past the last group.
  if (!grouped_mm::try_launch_sm90_grouped_mm(args) &&
      !grouped_mm::try_launch_sm80_grouped_mm(args)) {
    // The generic kernel also writes k = 0 groups and the bias itself.
    warn_if_untuned_device(self);
    grouped_mm::launch_zero_tail(args);
    grouped_mm::launch_generic_grouped_mm(args);
  }
  return out;
}

}  // namespace at::native

#endif  // !defined(USE_ROCM)
