#pragma once

// The Hopper tile configs by name, for the test-only ops that take or
// return one (aten/ names none: only the rules pick configs there).

#include <ATen/native/cuda/GroupedMMTileChoice.h>

#include <c10/util/Exception.h>

#include <array>
#include <string>
#include <string_view>
#include <utility>

namespace overlap_ops::testing {

using at::native::grouped_mm::sm90::TileConfig;

inline constexpr std::array<std::pair<std::string_view, TileConfig>, 5>
    kTileConfigNames = {{{"small", TileConfig::kSmall},
                         {"medium", TileConfig::kMedium},
                         {"large", TileConfig::kLarge},
                         {"large_solo", TileConfig::kLargeSolo},
                         {"wide", TileConfig::kWide}}};

inline std::string tile_config_name(TileConfig config) {
  for (const auto& [name, named] : kTileConfigNames) {
    if (named == config) {
      return std::string(name);
    }
  }
  TORCH_INTERNAL_ASSERT(false, "unnamed tile config");
}

// `argument` names the op's argument in the error.
inline TileConfig tile_config_named(const std::string& name,
                                    const char* argument = "config") {
  for (const auto& [known, config] : kTileConfigNames) {
    if (known == name) {
      return config;
    }
  }
  TORCH_CHECK(false, argument, " must be small, medium, large, large_solo "
              "or wide; got '", name, "'");
}

}  // namespace overlap_ops::testing
