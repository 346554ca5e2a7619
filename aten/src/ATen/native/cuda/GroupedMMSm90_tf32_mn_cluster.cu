// TF32 with N-major weights read as they are, on 2-CTA clusters
// (Tf32MnBClusterTileConfig): its own file so it compiles in parallel with
// the other instantiations.
#if !defined(USE_ROCM)  // CUDA only, like GroupedMMSm90.cuh
#include <ATen/native/cuda/GroupedMMSm90Tf32MnB.cuh>

namespace at::native::grouped_mm::sm90 {

const char* run_sm90_tf32_mn_b_cluster(const LaunchArgs& args,
                                       const LeadingDims& ld,
                                       TileChoice choice) {
  return run_grouped_gemm<GroupedGemmTf32MnB<Tf32MnBClusterTileConfig>>(
      args, ld, choice);
}

}  // namespace at::native::grouped_mm::sm90
#endif  // !defined(USE_ROCM)
