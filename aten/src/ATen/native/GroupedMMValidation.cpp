#include <ATen/native/GroupedMMValidation.h>

#include <ATen/Functions.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace at::native {

namespace {

constexpr const char* kOp = "grouped_mm";

bool is_supported_input_dtype(ScalarType dtype) {
  return dtype == kBFloat16 || dtype == kHalf || dtype == kFloat;
}

void check_operand(const Tensor& t, const char* name) {
  TORCH_CHECK(
      t.dim() == 2 || t.dim() == 3,
      kOp, ": ", name, " must be a 2d or 3d tensor, got a ", t.dim(),
      "d tensor of shape ", t.sizes());
  // float64 only on the CPU reference, so gradcheck can run in float64.
  const bool cpu_double = t.scalar_type() == kDouble && t.is_cpu();
  TORCH_CHECK(
      is_supported_input_dtype(t.scalar_type()) || cpu_double,
      kOp, ": ", name, " must be bfloat16, float16 or float32 (or float64 "
      "on the CPU), got ", t.scalar_type(), " on ", t.device());
}

GroupedMMLayout layout_of(const Tensor& self, const Tensor& mat2) {
  const bool a2 = self.dim() == 2;
  const bool b2 = mat2.dim() == 2;
  if (a2 && !b2) {
    return GroupedMMLayout::k2dx3d;
  }
  if (!a2 && b2) {
    return GroupedMMLayout::k3dx2d;
  }
  return a2 ? GroupedMMLayout::k2dx2d : GroupedMMLayout::k3dx3d;
}

void check_inner_dims(
    int64_t self_k, int64_t mat2_k, GroupedMMLayout layout,
    const Tensor& self, const Tensor& mat2) {
  TORCH_CHECK(
      self_k == mat2_k,
      kOp, ": contraction sizes differ for the ",
      grouped_mm_layout_name(layout), " layout: self ", self.sizes(),
      " has K = ", self_k, " but mat2 ", mat2.sizes(), " has K = ", mat2_k);
}

void check_offs_metadata(
    const std::optional<Tensor>& offs, const Tensor& self,
    GroupedMMLayout layout, int64_t expected_groups) {
  if (layout == GroupedMMLayout::k3dx3d) {
    TORCH_CHECK(
        !offs.has_value(),
        kOp, ": offs must be None for the batched 3d x 3d layout");
    return;
  }
  TORCH_CHECK(
      offs.has_value(),
      kOp, ": offs is required for the ", grouped_mm_layout_name(layout),
      " layout (1-D int32 cumulative end offsets on ", self.device(), ")");
  const Tensor& o = *offs;
  TORCH_CHECK(
      o.dim() == 1,
      kOp, ": offs must be 1-D, got shape ", o.sizes());
  TORCH_CHECK(
      o.scalar_type() == kInt || o.scalar_type() == kLong,
      kOp, ": offs must be int32 (or int64), got ", o.scalar_type());
  TORCH_CHECK(
      o.device() == self.device(),
      kOp, ": offs must be on the same device as self (", self.device(),
      "), got ", o.device());
  if (expected_groups >= 0) {
    TORCH_CHECK(
        o.size(0) == expected_groups,
        kOp, ": offs must have one entry per group (", expected_groups,
        " for the ", grouped_mm_layout_name(layout), " layout), got ",
        o.size(0));
  }
}

ScalarType resolve_out_dtype(
    ScalarType input, std::optional<ScalarType> out_dtype) {
  if (!out_dtype.has_value() || *out_dtype == input) {
    return input;
  }
  const bool low_precision = input == kBFloat16 || input == kHalf;
  TORCH_CHECK(
      *out_dtype == kFloat && low_precision,
      kOp, ": out_dtype must be None",
      low_precision ? ", " : " or ", input, " (the inputs' dtype)",
      low_precision ? " or Float" : "", ", got ", *out_dtype);
  return kFloat;
}

void check_bias(
    const std::optional<Tensor>& bias, const GroupedMMProblem& p,
    const Tensor& self) {
  if (!bias.has_value()) {
    return;
  }
  const Tensor& b = *bias;
  TORCH_CHECK(
      p.layout != GroupedMMLayout::k3dx2d,
      kOp, ": bias is not supported for the 3d x 2d layout, where each group "
      "owns different output columns; add it to the output instead");
  TORCH_CHECK(
      b.dim() == 2 && b.size(0) == p.num_groups && b.size(1) == p.n,
      kOp, ": bias must have shape (G, N) = (", p.num_groups, ", ", p.n,
      "), got ", b.sizes());
  // Named once when out_dtype is the inputs' dtype.
  TORCH_CHECK(
      b.scalar_type() == p.input_dtype || b.scalar_type() == p.out_dtype,
      kOp, ": bias must have dtype ", p.input_dtype, " (the inputs' dtype)",
      p.out_dtype == p.input_dtype
          ? std::string()
          : " or " + std::string(c10::toString(p.out_dtype)) + " (out_dtype)",
      ", got ", b.scalar_type());
  TORCH_CHECK(
      b.device() == self.device(),
      kOp, ": bias must be on the same device as self (", self.device(),
      "), got ", b.device());
}

std::atomic<int>& checked_offsets_override() {
  // -1: not set, read the environment.
  static std::atomic<int> value{-1};
  return value;
}

}  // namespace

const char* grouped_mm_layout_name(GroupedMMLayout layout) {
  switch (layout) {
    case GroupedMMLayout::k2dx3d:
      return "2d x 3d";
    case GroupedMMLayout::k3dx2d:
      return "3d x 2d";
    case GroupedMMLayout::k2dx2d:
      return "2d x 2d";
    case GroupedMMLayout::k3dx3d:
      return "3d x 3d";
  }
  return "unknown";
}

GroupedMMProblem check_grouped_mm_inputs(
    const Tensor& self,
    const Tensor& mat2,
    const std::optional<Tensor>& offs,
    const std::optional<Tensor>& bias,
    std::optional<ScalarType> out_dtype) {
  check_operand(self, "self");
  check_operand(mat2, "mat2");
  TORCH_CHECK(
      mat2.scalar_type() == self.scalar_type(),
      kOp, ": mat2 must have the same dtype as self (", self.scalar_type(),
      "), got ", mat2.scalar_type());
  TORCH_CHECK(
      mat2.device() == self.device(),
      kOp, ": mat2 must be on the same device as self (", self.device(),
      "), got ", mat2.device());

  GroupedMMProblem p;
  p.layout = layout_of(self, mat2);
  p.input_dtype = self.scalar_type();
  p.out_dtype = resolve_out_dtype(p.input_dtype, out_dtype);
  switch (p.layout) {
    case GroupedMMLayout::k2dx3d:
      check_inner_dims(self.size(1), mat2.size(1), p.layout, self, mat2);
      p.num_groups = mat2.size(0);
      p.grouped_extent = self.size(0);
      p.m = self.size(0);
      p.n = mat2.size(2);
      p.k = self.size(1);
      p.out_sizes = {p.m, p.n};
      check_offs_metadata(offs, self, p.layout, p.num_groups);
      break;
    case GroupedMMLayout::k3dx2d:
      check_inner_dims(self.size(2), mat2.size(0), p.layout, self, mat2);
      p.num_groups = self.size(0);
      p.grouped_extent = mat2.size(1);
      p.m = self.size(1);
      p.n = mat2.size(1);
      p.k = self.size(2);
      p.out_sizes = {p.m, p.n};
      check_offs_metadata(offs, self, p.layout, p.num_groups);
      break;
    case GroupedMMLayout::k2dx2d:
      check_inner_dims(self.size(1), mat2.size(0), p.layout, self, mat2);
      check_offs_metadata(offs, self, p.layout, /*expected_groups=*/-1);
      p.num_groups = offs->size(0);
      p.grouped_extent = self.size(1);
      p.m = self.size(0);
      p.n = mat2.size(1);
      p.k = self.size(1);
      p.out_sizes = {p.num_groups, p.m, p.n};
      break;
    case GroupedMMLayout::k3dx3d:
      TORCH_CHECK(
          self.size(0) == mat2.size(0),
          kOp, ": batch sizes differ for the 3d x 3d layout: self ",
          self.sizes(), " vs mat2 ", mat2.sizes());
      check_inner_dims(self.size(2), mat2.size(1), p.layout, self, mat2);
      check_offs_metadata(offs, self, p.layout, -1);
      p.num_groups = self.size(0);
      p.grouped_extent = 0;
      p.m = self.size(1);
      p.n = mat2.size(2);
      p.k = self.size(2);
      p.out_sizes = {p.num_groups, p.m, p.n};
      break;
  }
  check_bias(bias, p, self);
  return p;
}

void check_grouped_mm_offsets_on_host(
    const Tensor& offs_cpu, int64_t grouped_extent) {
  const Tensor o = offs_cpu.to(kLong).contiguous();
  const int64_t* v = o.const_data_ptr<int64_t>();
  int64_t prev = 0;
  for (int64_t g = 0; g < o.numel(); ++g) {
    TORCH_CHECK(
        v[g] >= 0,
        kOp, ": offs[", g, "] = ", v[g], " is negative (group ", g, ")");
    TORCH_CHECK(
        v[g] >= prev,
        kOp, ": offs[", g, "] = ", v[g], " is less than offs[", g - 1,
        "] = ", prev, "; offsets must be non-decreasing (group ", g, ")");
    TORCH_CHECK(
        v[g] <= grouped_extent,
        kOp, ": offs[", g, "] = ", v[g],
        " is past the end of the grouped dimension (size ", grouped_extent,
        ") (group ", g, ")");
    prev = v[g];
  }
}

bool grouped_mm_checked_offsets() {
  const int overridden = checked_offsets_override().load();
  if (overridden >= 0) {
    return overridden == 1;
  }
  const char* env = std::getenv("TORCH_GROUPED_MM_CHECK_OFFSETS");
  const std::string_view value = env == nullptr ? "" : env;
  for (const char* off : {"", "0", "off", "false", "no"}) {
    if (value == off) {
      return false;
    }
  }
  for (const char* on : {"1", "on", "true", "yes"}) {
    if (value == on) {
      return true;
    }
  }
  TORCH_CHECK(false, kOp, ": TORCH_GROUPED_MM_CHECK_OFFSETS must be 1, on, true "
              "or yes (checked), or empty, 0, off, false or no; got '", value,
              "'");
}

void set_grouped_mm_checked_offsets(std::optional<bool> enabled) {
  checked_offsets_override().store(enabled.has_value() ? (*enabled ? 1 : 0)
                                                       : -1);
}

std::optional<bool> grouped_mm_checked_offsets_override() {
  const int overridden = checked_offsets_override().load();
  return overridden < 0 ? std::nullopt : std::optional<bool>(overridden == 1);
}

}  // namespace at::native
