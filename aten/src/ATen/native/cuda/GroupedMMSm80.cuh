#pragma once

// Grouped GEMM for SM80 to SM89 and SM120 (and, when forced, any GPU from
// SM80 on): CUTLASS 2.x GemmGrouped (cp.async multistage mainloop,
// mma.sync) with the device-only problem visitor, so the per-group sizes are
// read on the device and the host never learns them. fill_group_arguments
// writes each group's size, pointers and leading dims from the offsets.
// Included only by GroupedMMSm80_*.cu.
// CUDA only: in the ROCm build, which hipifies them, they instantiate nothing.
#if defined(USE_ROCM)
#define GROUPED_MM_SM80_INSTANTIATE_MAJORS(In, Out)
#else

#include <ATen/native/cuda/GroupedMMCutlassTypes.cuh>
#include <ATen/native/cuda/GroupedMMFillArguments.cuh>
#include <ATen/native/cuda/GroupedMMKernels.h>
#include <ATen/native/cuda/GroupedMMSm80.h>

#include <ATen/Functions.h>
#include <ATen/cuda/CUDAContext.h>

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/device/gemm_grouped.h>
#include <cutlass/gemm/gemm.h>
#include <cutlass/gemm/kernel/default_gemm_grouped.h>

#include <type_traits>

namespace at::native::grouped_mm::sm80 {

// 8 warps of 64 x 32 per 128 x 128 tile: the grid is one CTA per SM (the
// carveout counts SMs), so the warps, not extra CTAs, hide the latency.
// Four stages take 64 KiB of shared memory, which fits the 99 KiB of
// SM86/SM89 as well as the A100's 163 KiB.
template <typename ElementIn>
struct TileConfig {
  using ThreadblockShape =
      cutlass::gemm::GemmShape<kTileM, kTileN, 32>;
  using WarpShape = cutlass::gemm::GemmShape<64, 32, 32>;
  using InstructionShape = cutlass::gemm::GemmShape<16, 8, 16>;
  static constexpr int kStages = 4;
};

// float operands run as TF32 (mma.sync m16n8k8); the dispatcher only
// comes here when TF32 is allowed.
template <>
struct TileConfig<float> {
  using ThreadblockShape =
      cutlass::gemm::GemmShape<kTileM, kTileN, 16>;
  using WarpShape = cutlass::gemm::GemmShape<64, 32, 16>;
  using InstructionShape = cutlass::gemm::GemmShape<16, 8, 8>;
  static constexpr int kStages = 4;
};

// Largest dynamic shared memory a block may use on SM86 and SM89; the A100
// (163 KiB) and Hopper (227 KiB) allow more.
constexpr size_t kMaxSharedBytesSm86 = 99 * 1024;

template <typename In, typename Out, bool kARowMajor, bool kBRowMajor,
          Access kAccess>
struct GroupedGemm {
  using ElementIn = typename CutlassType<In>::type;
  using ElementOut = typename CutlassType<Out>::type;
  using ElementAcc = float;
  using LayoutA = std::conditional_t<kARowMajor, cutlass::layout::RowMajor,
                                     cutlass::layout::ColumnMajor>;
  using LayoutB = std::conditional_t<kBRowMajor, cutlass::layout::RowMajor,
                                     cutlass::layout::ColumnMajor>;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignIn =
      static_cast<int>(access_bytes(kAccess)) / sizeof(ElementIn);
  static constexpr int kAlignOut =
      static_cast<int>(access_bytes(kAccess)) / sizeof(ElementOut);
  using Config = TileConfig<ElementIn>;

  // D = alpha * acc: C is never read, so no source pointer is needed.
  using EpilogueOp = cutlass::epilogue::thread::LinearCombination<
      ElementOut, kAlignOut, ElementAcc, ElementAcc,
      cutlass::epilogue::thread::ScaleType::OnlyAlphaScaling>;

  using Kernel = typename cutlass::gemm::kernel::DefaultGemmGrouped<
      ElementIn, LayoutA, cutlass::ComplexTransform::kNone, kAlignIn,
      ElementIn, LayoutB, cutlass::ComplexTransform::kNone, kAlignIn,
      ElementOut, LayoutD, ElementAcc, cutlass::arch::OpClassTensorOp,
      cutlass::arch::Sm80, typename Config::ThreadblockShape,
      typename Config::WarpShape, typename Config::InstructionShape,
      EpilogueOp,
      // Unused by the grouped kernels; required by the template.
      cutlass::gemm::threadblock::GemmBatchedIdentityThreadblockSwizzle,
      Config::kStages,
      cutlass::gemm::kernel::GroupScheduleMode::kDeviceOnly>::GemmKernel;
  using Gemm = cutlass::gemm::device::GemmGrouped<Kernel>;
  static_assert(sizeof(typename Kernel::SharedStorage) <= kMaxSharedBytesSm86,
                "the tile config must run on every GPU from SM80 on");
  using LongIndex = int64_t;
  static_assert(
      std::is_same_v<typename LayoutA::Stride::LongIndex, LongIndex>);
};

// Device arrays GemmGrouped reads, one entry per group.
template <typename G>
struct DeviceArguments {
  cutlass::gemm::GemmCoord* problems;
  typename G::ElementIn** a;
  typename G::ElementIn** b;
  typename G::ElementOut** d;
  int64_t* lda;
  int64_t* ldb;
  int64_t* ldd;
};

// Stores one group's problem in GemmGrouped's format; run by
// fill_group_arguments (GroupedMMFillArguments.cuh).
template <typename G>
struct Sm80ArgumentWriter {
  typename G::ElementIn* a;
  typename G::ElementIn* b;
  typename G::ElementOut* d;
  LeadingDims ld;
  DeviceArguments<G> out;

  __device__ void operator()(int64_t g, const Group& p) const {
    out.problems[g] = cutlass::gemm::GemmCoord(
        skipped_by_gemm(p) ? 0 : static_cast<int>(p.m),
        static_cast<int>(p.n), static_cast<int>(p.k));
    out.a[g] = a + p.a_offset;
    out.b[g] = b + p.b_offset;
    out.d[g] = d + p.d_offset;
    out.lda[g] = ld.a;
    out.ldb[g] = ld.b;
    out.ldd[g] = ld.d;
  }
};

// Hands out 128-byte aligned slices of one byte tensor.
class ArgumentArena {
 public:
  explicit ArgumentArena(char* base) : next_(base) {}

  static constexpr int64_t slice_bytes(int64_t bytes) {
    return (bytes + 127) / 128 * 128;
  }

  template <typename T>
  T* take(int64_t count) {
    T* slice = reinterpret_cast<T*>(next_);
    next_ += slice_bytes(count * int64_t(sizeof(T)));
    return slice;
  }

 private:
  char* next_;
};

template <typename G>
DeviceArguments<G> carve_arguments(Tensor& storage, int64_t groups) {
  const int64_t bytes =
      ArgumentArena::slice_bytes(groups * sizeof(cutlass::gemm::GemmCoord)) +
      3 * ArgumentArena::slice_bytes(groups * sizeof(void*)) +
      3 * ArgumentArena::slice_bytes(groups * sizeof(int64_t));
  storage = at::empty({bytes}, TensorOptions().dtype(kByte).device(kCUDA));
  ArgumentArena arena(static_cast<char*>(storage.mutable_data_ptr()));
  DeviceArguments<G> dev;
  dev.problems = arena.take<cutlass::gemm::GemmCoord>(groups);
  dev.a = arena.take<typename G::ElementIn*>(groups);
  dev.b = arena.take<typename G::ElementIn*>(groups);
  dev.d = arena.take<typename G::ElementOut*>(groups);
  dev.lda = arena.take<int64_t>(groups);
  dev.ldb = arena.take<int64_t>(groups);
  dev.ldd = arena.take<int64_t>(groups);
  return dev;
}

template <typename G>
const char* run_grouped_gemm(const LaunchArgs& args, const LeadingDims& ld) {
  using ElementIn = typename G::ElementIn;
  using ElementOut = typename G::ElementOut;
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t groups = args.geo.num_groups;

  Tensor storage;
  const DeviceArguments<G> dev = carve_arguments<G>(storage, groups);
  // CUTLASS 2.x takes non-const operand pointers; it only reads A and B.
  auto* a = reinterpret_cast<ElementIn*>(
      const_cast<void*>(args.a.const_data_ptr()));
  auto* b = reinterpret_cast<ElementIn*>(
      const_cast<void*>(args.b.const_data_ptr()));
  auto* d = reinterpret_cast<ElementOut*>(args.out.mutable_data_ptr());
  const Sm80ArgumentWriter<G> writer{a, b, d, ld, dev};
  if (!launch_fill_group_arguments(args, writer)) {
    return "launching the argument-filling kernel failed";
  }

  typename G::Gemm::Arguments arguments(
      dev.problems, static_cast<int>(groups),
      // The SM carveout: one persistent CTA per allowed SM, never more.
      static_cast<int>(args.sm_limit),
      typename G::EpilogueOp::Params(1.f, 0.f), dev.a, dev.b,
      // C is never read (OnlyAlphaScaling); D's arrays stand in for it.
      dev.d, dev.d, dev.lda, dev.ldb, dev.ldd, dev.ldd);

  // The device-only schedule needs no workspace and no host problem sizes.
  static_assert(!G::Kernel::ProblemVisitor::kRequiresPrecomputation);
  typename G::Gemm gemm;
  if (gemm.initialize(arguments, nullptr, stream) !=
      cutlass::Status::kSuccess) {
    return "CUTLASS initialize failed (shared memory attribute)";
  }
  if (gemm.run(stream) != cutlass::Status::kSuccess) {
    return "CUTLASS kernel launch failed";
  }
  return nullptr;
}

template <typename In, typename Out, bool kARowMajor, bool kBRowMajor>
const char* run_sm80(const LaunchArgs& args, const LeadingDims& ld,
                     Access access) {
  if (access == Access::k16Bytes) {
    return run_grouped_gemm<GroupedGemm<In, Out, kARowMajor, kBRowMajor,
                                        Access::k16Bytes>>(args, ld);
  }
  return run_grouped_gemm<
      GroupedGemm<In, Out, kARowMajor, kBRowMajor, Access::k4Bytes>>(args,
                                                                      ld);
}

#define GROUPED_MM_SM80_INSTANTIATE(In, Out, ARow, BRow)            \
  template const char* run_sm80<In, Out, ARow, BRow>(               \
      const LaunchArgs&, const LeadingDims&, Access);

// The three operand majors the dispatcher uses (both column-major is
// re-laid out to row-major A first).
#define GROUPED_MM_SM80_INSTANTIATE_MAJORS(In, Out)                 \
  GROUPED_MM_SM80_INSTANTIATE(In, Out, true, true)                  \
  GROUPED_MM_SM80_INSTANTIATE(In, Out, true, false)                 \
  GROUPED_MM_SM80_INSTANTIATE(In, Out, false, true)

}  // namespace at::native::grouped_mm::sm80
#endif  // defined(USE_ROCM)
