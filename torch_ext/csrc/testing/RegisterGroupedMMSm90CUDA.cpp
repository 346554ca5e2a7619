// Test-only op (namespace overlap_ops_testing): the Hopper grouped mm with
// parts of the dispatch rule's plan replaced, so tests can run every
// kernel, store tile, tile order and copy layout the rule picks for some
// call on data of their choosing. It calls aten's own seam
// (sm90::plan_for, tile_choice_for, run_plan in GroupedMMSm90.h); nothing
// here is compiled into the shipped dispatch.

#include "TileConfigNames.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#ifdef OVERLAP_OPS_WITH_CUDA
#include <ATen/Functions.h>
#include <ATen/native/GroupedMMValidation.h>
#include <ATen/native/cuda/GroupedMMKernels.h>
#include <ATen/native/cuda/GroupedMMSm90.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include <cstdint>
#include <optional>
#include <string>

#ifdef OVERLAP_OPS_WITH_CUDA
namespace overlap_ops::testing {
namespace {

namespace grouped_mm = at::native::grouped_mm;
namespace sm90 = grouped_mm::sm90;

// token_tile: "auto" (the rule's), "none" (the K-major kernels), or the
// direct read's "narrow", "wide", "cluster" or "split".
std::optional<sm90::MnBTile> token_tile_named(
    const std::string& name, std::optional<sm90::MnBTile> rule) {
  if (name == "auto") {
    return rule;
  }
  if (name == "none") {
    return std::nullopt;
  }
  if (name == "narrow") {
    return sm90::MnBTile::kNarrow;
  }
  if (name == "wide") {
    return sm90::MnBTile::kWide;
  }
  if (name == "cluster") {
    return sm90::MnBTile::kCluster;
  }
  TORCH_CHECK(name == "split", "token_tile must be auto, none, narrow, "
              "wide, cluster or split; got '", name, "'");
  return sm90::MnBTile::kSplit;
}

// The plan the rule gives the call, with what the arguments name in place
// of its choices: config and token_tile first (the other tile choices
// then follow the rules for them), then raster ("m" or "n"; a token split
// walks each kernel in its own order), store_tile_cols (0, 64 or 128),
// tile_chunk (>= 1), launch_waves (>= 0; 0 is one launch) and k_group_pad
// (floats, TF32 grouped along K). "auto" and -1 keep the rule's.
sm90::Plan forced_plan(const grouped_mm::LaunchArgs& args,
                       sm90::Plan plan, const std::string& config,
                       const std::string& token_tile,
                       const std::string& raster, int64_t store_tile_cols,
                       int64_t tile_chunk, int64_t launch_waves,
                       int64_t k_group_pad) {
  const bool tf32 = args.a.scalar_type() == at::kFloat;
  plan.mn_b_tile = token_tile_named(token_tile, plan.mn_b_tile);
  TORCH_CHECK(tf32 || !plan.mn_b_tile,
              "token_tile: the direct read is built for float32 only");
  if (config != "auto" || token_tile != "auto") {
    plan.tiles = sm90::tile_choice_for(
        args,
        config == "auto" ? plan.tiles.config : tile_config_named(config),
        plan.mn_b_tile);
  }
  if (raster != "auto") {
    TORCH_CHECK(raster == "m" || raster == "n",
                "raster must be auto, m or n; got '", raster, "'");
    plan.tiles.raster = raster == "m" ? sm90::RasterOrder::kAlongM
                                      : sm90::RasterOrder::kAlongN;
  }
  if (store_tile_cols != -1) {
    TORCH_CHECK(store_tile_cols == 0 || store_tile_cols == 64 ||
                    store_tile_cols == 128,
                "store_tile_cols must be 0, 64 or 128, got ", store_tile_cols);
    plan.tiles.store_tile_cols = static_cast<int>(store_tile_cols);
  }
  if (tile_chunk != -1) {
    TORCH_CHECK(tile_chunk >= 1, "tile_chunk must be >= 1, got ", tile_chunk);
    plan.tiles.tile_chunk = static_cast<int>(tile_chunk);
  }
  if (launch_waves != -1) {
    TORCH_CHECK(launch_waves >= 0, "launch_waves must be >= 0, got ",
                launch_waves);
    plan.tiles.launch_waves = static_cast<int>(launch_waves);
  }
  if (k_group_pad != -1) {
    TORCH_CHECK(plan.k_group_pad > 0,
                "k_group_pad: only TF32 calls grouped along K pad K");
    TORCH_CHECK(k_group_pad > 0 && k_group_pad % 4 == 0,
                "k_group_pad must be a positive multiple of 4 floats (16 "
                "bytes), got ", k_group_pad);
    plan.k_group_pad = k_group_pad;
  }
  return plan;
}

at::Tensor grouped_mm_sm90(
    const at::Tensor& self, const at::Tensor& mat2,
    const std::optional<at::Tensor>& offs,
    const std::optional<at::Tensor>& bias,
    std::optional<at::ScalarType> out_dtype, const std::string& config,
    const std::string& token_tile, const std::string& raster,
    int64_t store_tile_cols, int64_t tile_chunk, int64_t launch_waves,
    int64_t k_group_pad) {
  const at::native::GroupedMMProblem p =
      at::native::check_grouped_mm_inputs(self, mat2, offs, bias, out_dtype);
  TORCH_CHECK(self.is_cuda(), "grouped_mm_sm90: self must be a CUDA tensor");
  TORCH_CHECK(p.layout != at::native::GroupedMMLayout::k3dx2d,
              "grouped_mm_sm90: 3d x 2d runs as the transposed 2d x 3d; "
              "pass that instead");
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor out =
      at::empty(p.out_sizes, self.options().dtype(p.out_dtype));
  TORCH_CHECK(p.num_groups > 0 && out.numel() > 0,
              "grouped_mm_sm90: needs groups and a non-empty output");
  grouped_mm::LaunchArgs args =
      grouped_mm::launch_args_for(p, self, mat2, offs, bias, out);
  const std::optional<sm90::Plan> plan = sm90::plan_for(args);
  TORCH_CHECK(plan.has_value(),
              "grouped_mm_sm90: the Hopper kernels do not take this call "
              "(GPU, dtype, TF32 setting, backend or TF32 route)");
  TORCH_CHECK(sm90::run_plan(
                  args, forced_plan(args, *plan, config, token_tile, raster,
                                    store_tile_cols, tile_chunk,
                                    launch_waves, k_group_pad)),
              "grouped_mm_sm90: the operands or the output are not aligned "
              "for the Hopper kernels");
  return out;
}

}  // namespace
}  // namespace overlap_ops::testing
#endif  // OVERLAP_OPS_WITH_CUDA

TORCH_LIBRARY_FRAGMENT(overlap_ops_testing, m) {
  m.def("grouped_mm_sm90(Tensor self, Tensor mat2, Tensor? offs=None, "
        "Tensor? bias=None, ScalarType? out_dtype=None, str config=\"auto\", "
        "str token_tile=\"auto\", str raster=\"auto\", "
        "int store_tile_cols=-1, int tile_chunk=-1, int launch_waves=-1, "
        "int k_group_pad=-1) -> Tensor");
}

#ifdef OVERLAP_OPS_WITH_CUDA
TORCH_LIBRARY_IMPL(overlap_ops_testing, CUDA, m) {
  m.impl("grouped_mm_sm90", &overlap_ops::testing::grouped_mm_sm90);
}
#endif
