// CPU reference for _grouped_mm. It favours clarity over speed: every group
// is one at::mm in float32 (float64 for float64 inputs), then the result is
// cast to the output dtype.

#include <ATen/native/GroupedMM.h>
#include <ATen/native/GroupedMMValidation.h>

#include <ATen/Functions.h>

namespace at::native {

namespace {

// Half-open range [start, end) of group g in the grouped dimension.
struct GroupRange {
  int64_t start;
  int64_t end;
  int64_t size() const {
    return end - start;
  }
};

std::vector<GroupRange> group_ranges_on_host(const Tensor& offs) {
  const Tensor o = offs.to(kLong).contiguous();
  const int64_t* v = o.const_data_ptr<int64_t>();
  std::vector<GroupRange> ranges(o.numel());
  int64_t start = 0;
  for (int64_t g = 0; g < o.numel(); ++g) {
    ranges[g] = {start, v[g]};
    start = v[g];
  }
  return ranges;
}

Tensor bias_row(const std::optional<Tensor>& bias, int64_t g,
               ScalarType acc) {
  return bias.has_value() ? bias->select(0, g).to(acc) : Tensor();
}

void add_bias_if_any(Tensor& acc, const Tensor& row) {
  if (row.defined()) {
    acc.add_(row);
  }
}

}  // namespace

Tensor grouped_mm_cpu(
    const Tensor& self,
    const Tensor& mat2,
    const std::optional<Tensor>& offs,
    const std::optional<Tensor>& bias,
    std::optional<ScalarType> out_dtype) {
  const GroupedMMProblem p =
      check_grouped_mm_inputs(self, mat2, offs, bias, out_dtype);
  // Offsets are already on the host, so checking them costs no sync.
  std::vector<GroupRange> ranges;
  if (offs.has_value()) {
    check_grouped_mm_offsets_on_host(*offs, p.grouped_extent);
    ranges = group_ranges_on_host(*offs);
  }
  const ScalarType acc_dtype = self.scalar_type() == kDouble ? kDouble : kFloat;
  const Tensor a = self.to(acc_dtype);
  const Tensor b = mat2.to(acc_dtype);
  // Zero-initialised, so the tail past offs[-1] and k = 0 groups are zeros.
  Tensor acc = at::zeros(p.out_sizes, self.options().dtype(acc_dtype));

  switch (p.layout) {
    case GroupedMMLayout::k2dx3d:
      for (int64_t g = 0; g < p.num_groups; ++g) {
        const GroupRange r = ranges[g];
        if (r.size() == 0) {
          continue;
        }
        Tensor rows = at::mm(a.narrow(0, r.start, r.size()), b.select(0, g));
        add_bias_if_any(rows, bias_row(bias, g, acc_dtype));
        acc.narrow(0, r.start, r.size()).copy_(rows);
      }
      break;
    case GroupedMMLayout::k3dx2d:
      for (int64_t g = 0; g < p.num_groups; ++g) {
        const GroupRange r = ranges[g];
        if (r.size() == 0) {
          continue;
        }
        acc.narrow(1, r.start, r.size())
            .copy_(at::mm(a.select(0, g), b.narrow(1, r.start, r.size())));
      }
      break;
    case GroupedMMLayout::k2dx2d:
      for (int64_t g = 0; g < p.num_groups; ++g) {
        const GroupRange r = ranges[g];
        Tensor group_out = acc.select(0, g);
        if (r.size() > 0) {
          group_out.copy_(at::mm(
              a.narrow(1, r.start, r.size()), b.narrow(0, r.start, r.size())));
        }
        add_bias_if_any(group_out, bias_row(bias, g, acc_dtype));
      }
      break;
    case GroupedMMLayout::k3dx3d:
      acc.copy_(at::bmm(a, b));
      if (bias.has_value()) {
        acc.add_(bias->to(acc_dtype).unsqueeze(1));
      }
      break;
  }
  return acc.to(p.out_dtype);
}

}  // namespace at::native
