// TF32 with N-major (row-major) weights read as they are: the swapped
// problem of GroupedMMSm90Tf32MnB.cuh, its own file so it compiles in
// parallel with the other instantiations.
#if !defined(USE_ROCM)  // CUDA only, like GroupedMMSm90.cuh
#include <ATen/native/cuda/GroupedMMSm90Tf32MnB.cuh>

namespace at::native::grouped_mm::sm90 {

const char* run_sm90_tf32_mn_b(const LaunchArgs& args, const LeadingDims& ld,
                               TileChoice choice) {
  // Windowed launches (TileChoice::launch_waves) run the chunked problem
  // shape's kernel, built on this tile only.
  if (choice.launch_waves > 0) {
    return run_grouped_gemm<
        GroupedGemmTf32MnB<TileChunked<Tf32MnBTileConfig>>>(args, ld, choice);
  }
  return run_grouped_gemm<GroupedGemmTf32MnB<Tf32MnBTileConfig>>(args, ld,
                                                                 choice);
}

}  // namespace at::native::grouped_mm::sm90
#endif  // !defined(USE_ROCM)
