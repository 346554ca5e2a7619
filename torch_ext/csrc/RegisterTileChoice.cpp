// Registers a private overlap_ops op that exposes the Hopper tile-config
// heuristic (aten/src/ATen/native/cuda/GroupedMMTileChoice.h) to the CPU
// tests. This file only routes to aten/; the heuristic lives there.

#include <ATen/native/cuda/GroupedMMTileChoice.h>

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace overlap_ops {
namespace {

using at::native::grouped_mm::sm90::TileConfig;

// OVERLAP_OPS_SM90_TILE's names.
constexpr std::array<std::pair<const char*, TileConfig>, 6> kTileNames{{
    {"small", TileConfig::kSmall},
    {"medium", TileConfig::kMedium},
    {"large", TileConfig::kLarge},
    {"split", TileConfig::kSplit},
    {"large_solo", TileConfig::kLargeSolo},
    {"wide", TileConfig::kWide},
}};

std::string tile_name(TileConfig config) {
  for (const auto& [name, value] : kTileNames) {
    if (value == config) {
      return name;
    }
  }
  TORCH_CHECK(false, "unnamed tile config");
}

// The config a call runs: forced = "auto" (the heuristic) or one of
// OVERLAP_OPS_SM90_TILE's values, applied where it applies.
std::string sm90_tile_config(bool row_grouped, int64_t rows_per_group,
                             bool tf32, const std::string& forced) {
  TORCH_CHECK(rows_per_group >= 0, "rows_per_group must be >= 0, got ",
              rows_per_group);
  using at::native::grouped_mm::sm90::tile_config_for;
  const at::native::grouped_mm::sm90::TileQuery query{
      row_grouped, rows_per_group, tf32};
  if (forced == "auto") {
    return tile_name(tile_config_for(query, std::nullopt));
  }
  for (const auto& [name, value] : kTileNames) {
    if (forced == name) {
      return tile_name(tile_config_for(query, value));
    }
  }
  TORCH_CHECK(false, "forced must be auto, small, medium, large, split, "
              "large_solo or wide; got '", forced, "'");
}

}  // namespace
}  // namespace overlap_ops

TORCH_LIBRARY_FRAGMENT(overlap_ops, m) {
  m.def("_sm90_tile_config(bool row_grouped, int rows_per_group, bool tf32, "
        "str forced=\"auto\") -> str",
        &overlap_ops::sm90_tile_config);
}
