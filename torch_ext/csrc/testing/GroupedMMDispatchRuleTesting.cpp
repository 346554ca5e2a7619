// Test-only: the CUDA dispatch rule (GroupedMMDispatchRule.h) from given
// facts, so the CPU suite covers every GPU family without one.

#include <ATen/native/GroupedMMDispatchRule.h>

#include <torch/library.h>

namespace {

bool grouped_mm_upstream_takes(
    int64_t sm_major,
    int64_t sm_minor,
    c10::ScalarType input_dtype,
    c10::ScalarType out_dtype,
    bool has_bias,
    bool offs_int32,
    int64_t groups,
    bool aligned,
    bool upstream_cublaslt) {
  at::native::grouped_mm::CallFacts facts;
  facts.sm_major = static_cast<int>(sm_major);
  facts.sm_minor = static_cast<int>(sm_minor);
  facts.input_dtype = input_dtype;
  facts.out_dtype = out_dtype;
  facts.has_bias = has_bias;
  facts.offs_int32 = offs_int32;
  facts.groups = groups;
  facts.aligned = aligned;
  facts.upstream_cublaslt = upstream_cublaslt;
  return at::native::grouped_mm::upstream_takes(facts);
}

bool grouped_mm_sm80_by_default(int64_t sm_major, bool tf32,
                                bool hopper_kernels_built) {
  return at::native::grouped_mm::sm80_kernels_by_default(
      static_cast<int>(sm_major), tf32, hopper_kernels_built);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(overlap_ops_testing, m) {
  m.def("_grouped_mm_upstream_takes(int sm_major, int sm_minor, "
        "ScalarType input_dtype, ScalarType out_dtype, bool has_bias, "
        "bool offs_int32, int groups, bool aligned, "
        "bool upstream_cublaslt=False) -> bool",
        &grouped_mm_upstream_takes);
  m.def("_grouped_mm_sm80_by_default(int sm_major, bool tf32, "
        "bool hopper_kernels_built) -> bool",
        &grouped_mm_sm80_by_default);
}
