// TF32 with N-major weights read as they are, on the narrow token tile
// (Tf32MnBNarrowTileConfig, also the small groups' half of a token split):
// its own file so it compiles in parallel with the other instantiations.
#if !defined(USE_ROCM)  // CUDA only, like GroupedMMSm90.cuh
#include <ATen/native/cuda/GroupedMMSm90Tf32MnB.cuh>
#include <ATen/native/cuda/GroupedMMTf32Route.h>

namespace at::native::grouped_mm::sm90 {

// A token split sends a group here when it fits one token tile.
static_assert(cute::size<1>(Tf32MnBNarrowTileConfig::TileShape{}) ==
              kMnBNarrowTokens);

const char* run_sm90_tf32_mn_b_narrow(const LaunchArgs& args,
                                      const LeadingDims& ld,
                                      TileChoice choice) {
  return run_grouped_gemm<GroupedGemmTf32MnB<Tf32MnBNarrowTileConfig>>(
      args, ld, choice);
}

}  // namespace at::native::grouped_mm::sm90
#endif  // !defined(USE_ROCM)
