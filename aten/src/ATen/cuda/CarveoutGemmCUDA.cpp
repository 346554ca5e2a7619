// Host code only (compiled by the C++ compiler, not nvcc): every error this
// file raises is thrown and unwound in ordinary C++ frames.
//
// Carveout-aware mm / addmm / bmm / baddbmm; see CarveoutGemmCUDA.h.
//
// Every problem is row-major C (B, M, N) = A (B, M, K) @ B (B, K, N). cuBLAS
// is column-major, so it computes C^T = B^T A^T: a row-major matrix is its
// own transpose in column-major order, so row-major operands go in with
// CUBLAS_OP_N and column-major ones (transposed views) with CUBLAS_OP_T.

// The ROCm build hipifies ATen/cuda/*.cpp; this file is cuBLAS-only, and the
// ROCm side of the carveout lives in ATen/hip/ (CU-masked streams).
#if !defined(USE_ROCM)

#include <ATen/cuda/CarveoutGemmCUDA.h>

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/GreenContextStreamCUDA.h>
#include <ATen/cuda/SMCarveoutCUDA.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addmm_native.h>
#include <ATen/ops/baddbmm_native.h>
#include <ATen/ops/bmm_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm_native.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

namespace at::cuda {
namespace {

// cuBLAS takes sizes, leading dimensions and the batch count as int.
constexpr int64_t kMaxBlasInt = std::numeric_limits<int>::max();
// cuBLASLt assumes 256-byte aligned pointers unless told otherwise.
constexpr uint32_t kMaxLtAlignment = 256;
// cuBLASLt's bias epilogue reads the bias with vector loads.
constexpr uintptr_t kLtBiasAlignment = 16;

// ---------------------------------------------------------------------------
// Problem description
// ---------------------------------------------------------------------------

// One operand of a row-major problem as cuBLAS sees it.
struct BlasMatrix {
  Tensor tensor;  // the storage cuBLAS reads (a copy when layout needed one)
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

// C = alpha * A @ B + beta * C, with C already holding the addend when
// beta != 0.
struct GemmProblem {
  int64_t batch = 1;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  BlasMatrix a;
  BlasMatrix b;
  Tensor c;
  int64_t ldc = 1;
  int64_t c_batch_stride = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
};

int64_t batch_stride_of(const Tensor& t) {
  return t.dim() == 3 ? t.stride(0) : 0;
}

// The last two dims of `t` as a cuBLAS operand; copies `t` when neither a
// row-major nor a column-major reading works (expanded or strided views).
BlasMatrix as_blas_matrix(const Tensor& t) {
  const int64_t rows = t.size(-2);
  const int64_t cols = t.size(-1);
  const int64_t row_stride = t.stride(-2);
  const int64_t col_stride = t.stride(-1);
  if (col_stride == 1 &&
      (rows == 1 || row_stride >= std::max<int64_t>(1, cols))) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(1, cols) : row_stride;
    return {t, CUBLAS_OP_N, ld, batch_stride_of(t)};
  }
  if (row_stride == 1 &&
      (cols == 1 || col_stride >= std::max<int64_t>(1, rows))) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(1, rows) : col_stride;
    return {t, CUBLAS_OP_T, ld, batch_stride_of(t)};
  }
  Tensor copy = t.contiguous();
  return {copy, CUBLAS_OP_N, std::max<int64_t>(1, cols),
          batch_stride_of(copy)};
}

// Whether cuBLAS can write `out` in place: row-major rows, and batches that
// do not overlap.
bool is_blas_writable(const Tensor& out) {
  if (out.dim() == 3) {
    return out.is_contiguous();
  }
  return out.stride(1) == 1 &&
      (out.size(0) == 1 || out.stride(0) >= std::max<int64_t>(1, out.size(1)));
}

bool runs_on_cublas_here(ScalarType dtype) {
  return dtype == kBFloat16 || dtype == kHalf || dtype == kFloat;
}

bool fits_blas_int(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > kMaxBlasInt || t.stride(d) > kMaxBlasInt) {
      return false;
    }
  }
  return true;
}

// Whether our cuBLAS path takes the problem; otherwise PyTorch's own kernel
// runs under the carveout guard (complex, float64, > 2^31 sizes).
bool runs_here(const Tensor& a, const Tensor& b, const Tensor& out) {
  return runs_on_cublas_here(out.scalar_type()) && fits_blas_int(a) &&
      fits_blas_int(b) && fits_blas_int(out);
}

// ---------------------------------------------------------------------------
// cuBLAS settings PyTorch's own GEMMs follow
// ---------------------------------------------------------------------------

cudaDataType_t blas_data_type(ScalarType dtype) {
  switch (dtype) {
    case kBFloat16:
      return CUDA_R_16BF;
    case kHalf:
      return CUDA_R_16F;
    case kFloat:
      return CUDA_R_32F;
    default:
      TORCH_INTERNAL_ASSERT(false, "carveout GEMM: unexpected dtype ", dtype);
  }
}

// torch.backends.cuda.matmul.allow_tf32 (or set_float32_matmul_precision).
bool tf32_allowed() {
  return at::globalContext().float32Precision(
             at::Float32Backend::CUDA, at::Float32Op::MATMUL) ==
      at::Float32Precision::TF32;
}

cublasComputeType_t compute_type(ScalarType dtype) {
  if (dtype == kFloat && tf32_allowed()) {
    return CUBLAS_COMPUTE_32F_FAST_TF32;
  }
  return CUBLAS_COMPUTE_32F;
}

// torch.backends.cuda.matmul.allow_{fp16,bf16}_reduced_precision_reduction.
bool reduced_precision_reduction_allowed(ScalarType dtype) {
  const at::Context& ctx = at::globalContext();
  if (dtype == kHalf) {
    return ctx.allowFP16ReductionCuBLAS() ==
        at::CuBLASReductionOption::AllowReducedPrecisionWithSplitK;
  }
  if (dtype == kBFloat16) {
    return ctx.allowBF16ReductionCuBLAS() ==
        at::CuBLASReductionOption::AllowReducedPrecisionWithSplitK;
  }
  return true;
}

void check_blas(cublasStatus_t status, const char* what) {
  TORCH_CHECK(
      status == CUBLAS_STATUS_SUCCESS, "carveout GEMM: ", what, " failed: ",
      cublasGetStatusString(status));
}

// Adds CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION to the handle's math
// mode for one call when PyTorch's setting forbids reduced-precision
// reductions, as PyTorch's own cublasGemmEx calls do.
class ReductionModeGuard {
 public:
  ReductionModeGuard(cublasHandle_t handle, ScalarType dtype)
      : handle_(handle) {
    if (reduced_precision_reduction_allowed(dtype)) {
      return;
    }
    check_blas(cublasGetMathMode(handle_, &previous_), "cublasGetMathMode");
    check_blas(
        cublasSetMathMode(
            handle_,
            static_cast<cublasMath_t>(
                previous_ | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
        "cublasSetMathMode");
    active_ = true;
  }
  ~ReductionModeGuard() {
    if (active_) {
      (void)cublasSetMathMode(handle_, previous_);
    }
  }
  ReductionModeGuard(const ReductionModeGuard&) = delete;
  ReductionModeGuard& operator=(const ReductionModeGuard&) = delete;

 private:
  cublasHandle_t handle_;
  cublasMath_t previous_ = CUBLAS_DEFAULT_MATH;
  bool active_ = false;
};

// ---------------------------------------------------------------------------
// cuBLAS (non-Lt) launch
// ---------------------------------------------------------------------------

void launch_cublas_gemm(const GemmProblem& p, int32_t sm_count_target) {
  const ScalarType dtype = p.c.scalar_type();
  const cudaDataType_t type = blas_data_type(dtype);
  cublasHandle_t handle = getCurrentCUDABlasHandle();
  const CublasSmCountTargetGuard carveout(handle, sm_count_target);
  const ReductionModeGuard reduction(handle, dtype);
  // C^T (n x m) = op(B) (n x k) * op(A) (k x m), column-major.
  if (p.batch == 1) {
    check_blas(
        cublasGemmEx(
            handle, p.b.op, p.a.op, p.n, p.m, p.k, &p.alpha,
            p.b.tensor.const_data_ptr(), type, p.b.ld,
            p.a.tensor.const_data_ptr(), type, p.a.ld, &p.beta,
            p.c.data_ptr(), type, p.ldc, compute_type(dtype),
            CUBLAS_GEMM_DEFAULT_TENSOR_OP),
        "cublasGemmEx");
    return;
  }
  check_blas(
      cublasGemmStridedBatchedEx(
          handle, p.b.op, p.a.op, p.n, p.m, p.k, &p.alpha,
          p.b.tensor.const_data_ptr(), type, p.b.ld, p.b.batch_stride,
          p.a.tensor.const_data_ptr(), type, p.a.ld, p.a.batch_stride,
          &p.beta, p.c.data_ptr(), type, p.ldc, p.c_batch_stride, p.batch,
          compute_type(dtype), CUBLAS_GEMM_DEFAULT_TENSOR_OP),
      "cublasGemmStridedBatchedEx");
}

// ---------------------------------------------------------------------------
// cuBLASLt launch with a bias epilogue (addmm with a bias row: linear)
// ---------------------------------------------------------------------------

template <typename T, cublasStatus_t (*Destroy)(T)>
struct LtDestroy {
  void operator()(T handle) const {
    if (handle != nullptr) {
      (void)Destroy(handle);
    }
  }
};
using LtMatmulDesc = std::unique_ptr<
    std::remove_pointer_t<cublasLtMatmulDesc_t>,
    LtDestroy<cublasLtMatmulDesc_t, &cublasLtMatmulDescDestroy>>;
using LtLayout = std::unique_ptr<
    std::remove_pointer_t<cublasLtMatrixLayout_t>,
    LtDestroy<cublasLtMatrixLayout_t, &cublasLtMatrixLayoutDestroy>>;
using LtPreference = std::unique_ptr<
    std::remove_pointer_t<cublasLtMatmulPreference_t>,
    LtDestroy<cublasLtMatmulPreference_t, &cublasLtMatmulPreferenceDestroy>>;

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc,
              cublasLtMatmulDescAttributes_t attr,
              const T& value) {
  check_blas(
      cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)),
      "cublasLtMatmulDescSetAttribute");
}

template <typename T>
void set_pref(cublasLtMatmulPreference_t pref,
              cublasLtMatmulPreferenceAttributes_t attr,
              const T& value) {
  check_blas(
      cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)),
      "cublasLtMatmulPreferenceSetAttribute");
}

// Layout of the matrix as stored: `op` says whether cuBLAS transposes it.
LtLayout make_layout(cudaDataType_t type, cublasOperation_t op,
                     int64_t rows_after_op, int64_t cols_after_op,
                     int64_t ld) {
  const bool transposed = op != CUBLAS_OP_N;
  cublasLtMatrixLayout_t raw = nullptr;
  check_blas(
      cublasLtMatrixLayoutCreate(
          &raw, type, transposed ? cols_after_op : rows_after_op,
          transposed ? rows_after_op : cols_after_op, ld),
      "cublasLtMatrixLayoutCreate");
  return LtLayout(raw);
}

uint32_t pointer_alignment(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  uint32_t alignment = 1;
  while (alignment < kMaxLtAlignment && address % (alignment * 2) == 0) {
    alignment *= 2;
  }
  return alignment;
}

LtPreference make_preference(const GemmProblem& p, size_t workspace_bytes) {
  cublasLtMatmulPreference_t raw = nullptr;
  check_blas(cublasLtMatmulPreferenceCreate(&raw),
             "cublasLtMatmulPreferenceCreate");
  LtPreference pref(raw);
  set_pref(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
           static_cast<uint64_t>(workspace_bytes));
  // cuBLAS A is our B and cuBLAS B is our A (C^T = B^T A^T).
  set_pref(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
           pointer_alignment(p.b.tensor.const_data_ptr()));
  set_pref(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
           pointer_alignment(p.a.tensor.const_data_ptr()));
  const uint32_t c_alignment = pointer_alignment(p.c.const_data_ptr());
  set_pref(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
           c_alignment);
  set_pref(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
           c_alignment);
  return pref;
}

// C = alpha * A @ B + bias (broadcast over rows) in one cuBLASLt call, with
// CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET. Returns false, having launched
// nothing, when cuBLASLt has no algorithm for the problem.
bool try_launch_cublaslt_bias_gemm(const GemmProblem& p, const Tensor& bias,
                                   int32_t sm_count_target) {
  const ScalarType dtype = p.c.scalar_type();
  const cudaDataType_t type = blas_data_type(dtype);
  cublasLtMatmulDesc_t raw_desc = nullptr;
  check_blas(
      cublasLtMatmulDescCreate(&raw_desc, compute_type(dtype), CUDA_R_32F),
      "cublasLtMatmulDescCreate");
  const LtMatmulDesc desc(raw_desc);
  set_desc(desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, p.b.op);
  set_desc(desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, p.a.op);
  set_desc(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
  set_desc(desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER,
           bias.const_data_ptr());
  set_cublaslt_sm_count_target(desc.get(), sm_count_target);

  const LtLayout a_layout = make_layout(type, p.b.op, p.n, p.k, p.b.ld);
  const LtLayout b_layout = make_layout(type, p.a.op, p.k, p.m, p.a.ld);
  const LtLayout c_layout = make_layout(type, CUBLAS_OP_N, p.n, p.m, p.ldc);
  const size_t workspace_bytes = getCUDABlasLtWorkspaceSize();
  const LtPreference pref = make_preference(p, workspace_bytes);

  cublasLtHandle_t lt = getCurrentCUDABlasLtHandle();
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      lt, desc.get(), a_layout.get(), b_layout.get(), c_layout.get(),
      c_layout.get(), pref.get(), 1, &heuristic, &found);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    return false;
  }
  const float beta = 0.0f;  // the epilogue adds the bias
  check_blas(
      cublasLtMatmul(
          lt, desc.get(), &p.alpha, p.b.tensor.const_data_ptr(),
          a_layout.get(), p.a.tensor.const_data_ptr(), b_layout.get(), &beta,
          p.c.const_data_ptr(), c_layout.get(), p.c.data_ptr(),
          c_layout.get(), &heuristic.algo, getCUDABlasLtWorkspace(),
          workspace_bytes, getCurrentCUDAStream()),
      "cublasLtMatmul");
  return true;
}

// The addend as a contiguous bias row when cuBLASLt's bias epilogue can add
// it (addmm with beta == 1 and `self` of shape (N,) or (1, N)).
std::optional<Tensor> as_bias_row(const Tensor& addend,
                                  const Tensor& out,
                                  const Scalar& beta) {
  const int64_t n = out.size(-1);
  const bool is_row = (addend.dim() == 1 && addend.size(0) == n) ||
      (addend.dim() == 2 && addend.size(0) == 1 && addend.size(1) == n);
  // The epilogue reads the bias while it writes C: they must not alias.
  if (out.dim() != 2 || !is_row || beta.toComplexDouble() != 1.0 ||
      addend.is_alias_of(out) || addend.scalar_type() != out.scalar_type() ||
      !reduced_precision_reduction_allowed(out.scalar_type())) {
    return std::nullopt;
  }
  Tensor bias = addend.reshape({n}).contiguous();
  if (reinterpret_cast<uintptr_t>(bias.const_data_ptr()) % kLtBiasAlignment) {
    return std::nullopt;
  }
  return bias;
}

// ---------------------------------------------------------------------------
// The shared driver: out = alpha * a @ b + beta * addend
// ---------------------------------------------------------------------------

GemmProblem make_problem(const Tensor& a, const Tensor& b, const Tensor& c,
                         const Scalar& alpha) {
  GemmProblem p;
  p.batch = a.dim() == 3 ? a.size(0) : 1;
  p.m = a.size(-2);
  p.k = a.size(-1);
  p.n = b.size(-1);
  p.a = as_blas_matrix(a);
  p.b = as_blas_matrix(b);
  p.c = c;
  p.ldc = c.size(-2) == 1 ? std::max<int64_t>(1, p.n) : c.stride(-2);
  p.c_batch_stride = batch_stride_of(c);
  p.alpha = alpha.to<float>();
  return p;
}

// Writes alpha * a @ b + beta * addend into `out` (already sized). `addend`
// broadcasts to `out`; beta == 0 ignores it, NaN included, as ATen does.
void carveout_gemm(const Tensor& a, const Tensor& b,
                   const std::optional<Tensor>& addend, const Scalar& beta,
                   const Scalar& alpha, const Tensor& out,
                   int32_t sm_count_target) {
  if (out.numel() == 0) {
    return;
  }
  const bool adds = addend.has_value() && beta.toComplexDouble() != 0.0;
  Tensor c = is_blas_writable(out)
      ? out
      : at::empty(out.sizes(), out.options().memory_format(
                                   MemoryFormat::Contiguous));
  if (a.size(-1) == 0) {
    // Empty reduction: nothing for cuBLAS to do.
    if (adds) {
      c.copy_(addend->expand(out.sizes())).mul_(beta);
    } else {
      c.zero_();
    }
  } else {
    GemmProblem p = make_problem(a.resolve_neg(), b.resolve_neg(), c, alpha);
    const std::optional<Tensor> bias =
        adds ? as_bias_row(*addend, out, beta) : std::nullopt;
    if (!bias.has_value() ||
        !try_launch_cublaslt_bias_gemm(p, *bias, sm_count_target)) {
      if (adds) {
        if (!addend->is_same(c)) {
          c.copy_(addend->expand(out.sizes()));
        }
        p.beta = beta.to<float>();
      }
      launch_cublas_gemm(p, sm_count_target);
    }
  }
  if (!c.is_same(out)) {
    out.copy_(c);
  }
}

// Whether GEMMs of `dtype` run on a green-context stream under the
// carveout. cuBLAS's bf16/fp16 kernels on Hopper are persistent: they size
// their grid from the SM count target, so they stay on the caller's stream.
// Its float32 (TF32 or not), float64 and complex kernels launch one CTA per
// tile and spread over every SM whatever the target says, so only a green
// context bounds them.
bool needs_green_context(ScalarType dtype) {
  return dtype != kBFloat16 && dtype != kHalf;
}

// ---------------------------------------------------------------------------
// PyTorch's own kernels, for what our cuBLAS path does not take
// ---------------------------------------------------------------------------

// Runs a structured ATen CUDA kernel's impl() on a preallocated output. The
// kernel reaches cuBLAS through the same per-thread handle, so the caller's
// CublasSmCountTargetGuard applies to it too, and on the current stream, so
// the caller's GreenContextGemmScope does.
template <typename StructuredKernel>
class StockKernel final : public StructuredKernel {
 public:
  explicit StockKernel(const Tensor& out) : out_(out) {}
  const Tensor& maybe_get_output(int64_t /*output_idx*/) override {
    return out_;
  }

 private:
  const Tensor& out_;
};

// ---------------------------------------------------------------------------
// Argument checks (ATen's messages)
// ---------------------------------------------------------------------------

void check_same_device(const Tensor& a, const Tensor& b, const char* name) {
  TORCH_CHECK(
      a.device() == b.device(),
      "Expected all tensors to be on the same device, but found ",
      a.device(), " and ", b.device(), " (", name, ")");
}

void check_mm_args(const Tensor& mat1, const Tensor& mat2) {
  TORCH_CHECK(mat1.dim() == 2, "mat1 must be a matrix, got ", mat1.dim(),
              "-D tensor");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix, got ", mat2.dim(),
              "-D tensor");
  TORCH_CHECK(
      mat1.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
      mat1.size(0), "x", mat1.size(1), " and ", mat2.size(0), "x",
      mat2.size(1), ")");
  TORCH_CHECK(
      mat1.scalar_type() == mat2.scalar_type(),
      "expected mat1 and mat2 to have the same dtype, but got: ",
      mat1.scalar_type(), " != ", mat2.scalar_type());
  check_same_device(mat1, mat2, "mat2");
}

void check_bmm_args(const Tensor& batch1, const Tensor& batch2) {
  TORCH_CHECK(batch1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(batch2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(
      batch2.size(0) == batch1.size(0) && batch2.size(1) == batch1.size(2),
      "Expected size for first two dimensions of batch2 tensor to be: [",
      batch1.size(0), ", ", batch1.size(2), "] but got: [", batch2.size(0),
      ", ", batch2.size(1), "].");
  TORCH_CHECK(
      batch1.scalar_type() == batch2.scalar_type(),
      "expected batch1 and batch2 to have the same dtype, but got: ",
      batch1.scalar_type(), " != ", batch2.scalar_type());
  check_same_device(batch1, batch2, "batch2");
}

void check_addend(const Tensor& addend, const Tensor& a) {
  TORCH_CHECK(
      addend.scalar_type() == a.scalar_type(),
      "expected self and mat1 to have the same dtype, but got: ",
      addend.scalar_type(), " != ", a.scalar_type());
  check_same_device(addend, a, "self");
}

void check_out(const Tensor& out, const Tensor& a) {
  TORCH_CHECK(
      out.scalar_type() == a.scalar_type(), "Expected out tensor to have dtype ",
      a.scalar_type(), ", but got ", out.scalar_type(), " instead");
  check_same_device(out, a, "out");
}

std::vector<int64_t> result_sizes(const Tensor& a, const Tensor& b) {
  if (a.dim() == 3) {
    return {a.size(0), a.size(1), b.size(2)};
  }
  return {a.size(0), b.size(1)};
}

// ---------------------------------------------------------------------------
// Entry helpers shared by the functional, out= and in-place forms
// ---------------------------------------------------------------------------

// PyTorch's own kernels for out = a @ b and out = beta * addend + alpha *
// a @ b: what runs with no carveout set.
void stock_product_into(const Tensor& a, const Tensor& b, Tensor& out) {
  if (a.dim() == 3) {
    StockKernel<at::native::structured_bmm_out_cuda>(out).impl(a, b, out);
  } else {
    StockKernel<at::native::structured_mm_out_cuda>(out).impl(a, b, out);
  }
}

void stock_sum_into(const Tensor& addend, const Tensor& a, const Tensor& b,
                    const Scalar& beta, const Scalar& alpha, Tensor& out) {
  if (a.dim() == 3) {
    // baddbmm's meta function copies self into the output; impl() alone
    // reads the output as the addend.
    if (beta.toComplexDouble() != 0.0 && !out.is_same(addend)) {
      out.copy_(addend.expand(out.sizes()));
    }
    StockKernel<at::native::structured_baddbmm_out_cuda>(out).impl(
        addend, a, b, beta, alpha, out);
  } else {
    StockKernel<at::native::structured_addmm_out_cuda>(out).impl(
        addend, a, b, beta, alpha, out);
  }
}

// out = a @ b (mm / bmm).
//
// k is read once per call. With no carveout, PyTorch's own kernel runs
// with nothing around it, so these kernels can stay registered between
// carveout blocks. `out` is sized before the GreenContextGemmScope, so its
// memory belongs to the caller's stream; temporaries made inside the scope
// belong to the green stream, which is the only stream that uses them.
Tensor& product_into(const Tensor& a, const Tensor& b, Tensor& out) {
  c10::cuda::CUDAGuard device_guard(a.device());
  check_out(out, a);
  at::native::resize_output(out, result_sizes(a, b));
  const int64_t carveout = requested_sm_carveout();
  if (carveout == 0) {
    stock_product_into(a, b, out);
    return out;
  }
  GreenContextGemmScope confine(
      needs_green_context(out.scalar_type()), carveout);
  if (runs_here(a, b, out)) {
    carveout_gemm(a, b, std::nullopt, 0, 1, out, confine.sm_count_target());
  } else {
    const CublasSmCountTargetGuard guard(
        getCurrentCUDABlasHandle(), confine.sm_count_target());
    stock_product_into(a, b, out);
  }
  confine.join();
  return out;
}

// out = beta * addend + alpha * a @ b (addmm / baddbmm).
Tensor& sum_into(const Tensor& addend, const Tensor& a, const Tensor& b,
                 const Scalar& beta, const Scalar& alpha, Tensor& out) {
  c10::cuda::CUDAGuard device_guard(a.device());
  check_addend(addend, a);
  check_out(out, a);
  const std::vector<int64_t> sizes = result_sizes(a, b);
  // Raises ATen's broadcasting error when addend does not fit.
  (void)addend.expand(sizes);
  if (!out.is_same(addend)) {
    at::native::resize_output(out, sizes);
  }
  const int64_t carveout = requested_sm_carveout();
  if (carveout == 0) {
    stock_sum_into(addend, a, b, beta, alpha, out);
    return out;
  }
  GreenContextGemmScope confine(
      needs_green_context(out.scalar_type()), carveout);
  if (runs_here(a, b, out)) {
    carveout_gemm(a, b, addend, beta, alpha, out, confine.sm_count_target());
  } else {
    const CublasSmCountTargetGuard guard(
        getCurrentCUDABlasHandle(), confine.sm_count_target());
    stock_sum_into(addend, a, b, beta, alpha, out);
  }
  confine.join();
  return out;
}

void check_inplace_sizes(const Tensor& self, const Tensor& a,
                         const Tensor& b) {
  const std::vector<int64_t> sizes = result_sizes(a, b);
  TORCH_CHECK(
      self.sizes() == IntArrayRef(sizes), "The size of self ", self.sizes(),
      " must match the size of the product ", IntArrayRef(sizes),
      " for an in-place operation");
}

}  // namespace

Tensor carveout_mm(const Tensor& self, const Tensor& mat2) {
  check_mm_args(self, mat2);
  Tensor out = at::empty({0}, self.options());
  return product_into(self, mat2, out);
}

Tensor& carveout_mm_out(const Tensor& self, const Tensor& mat2, Tensor& out) {
  check_mm_args(self, mat2);
  return product_into(self, mat2, out);
}

Tensor carveout_bmm(const Tensor& self, const Tensor& mat2) {
  check_bmm_args(self, mat2);
  Tensor out = at::empty({0}, self.options());
  return product_into(self, mat2, out);
}

Tensor& carveout_bmm_out(const Tensor& self, const Tensor& mat2, Tensor& out) {
  check_bmm_args(self, mat2);
  return product_into(self, mat2, out);
}

Tensor carveout_addmm(
    const Tensor& self,
    const Tensor& mat1,
    const Tensor& mat2,
    const Scalar& beta,
    const Scalar& alpha) {
  check_mm_args(mat1, mat2);
  Tensor out = at::empty({0}, mat1.options());
  return sum_into(self, mat1, mat2, beta, alpha, out);
}

Tensor& carveout_addmm_out(
    const Tensor& self,
    const Tensor& mat1,
    const Tensor& mat2,
    const Scalar& beta,
    const Scalar& alpha,
    Tensor& out) {
  check_mm_args(mat1, mat2);
  return sum_into(self, mat1, mat2, beta, alpha, out);
}

Tensor& carveout_addmm_(
    Tensor& self,
    const Tensor& mat1,
    const Tensor& mat2,
    const Scalar& beta,
    const Scalar& alpha) {
  check_mm_args(mat1, mat2);
  check_inplace_sizes(self, mat1, mat2);
  return sum_into(self, mat1, mat2, beta, alpha, self);
}

Tensor carveout_baddbmm(
    const Tensor& self,
    const Tensor& batch1,
    const Tensor& batch2,
    const Scalar& beta,
    const Scalar& alpha) {
  check_bmm_args(batch1, batch2);
  Tensor out = at::empty({0}, batch1.options());
  return sum_into(self, batch1, batch2, beta, alpha, out);
}

Tensor& carveout_baddbmm_out(
    const Tensor& self,
    const Tensor& batch1,
    const Tensor& batch2,
    const Scalar& beta,
    const Scalar& alpha,
    Tensor& out) {
  check_bmm_args(batch1, batch2);
  return sum_into(self, batch1, batch2, beta, alpha, out);
}

Tensor& carveout_baddbmm_(
    Tensor& self,
    const Tensor& batch1,
    const Tensor& batch2,
    const Scalar& beta,
    const Scalar& alpha) {
  check_bmm_args(batch1, batch2);
  check_inplace_sizes(self, batch1, batch2);
  return sum_into(self, batch1, batch2, beta, alpha, self);
}

}  // namespace at::cuda

#endif  // !defined(USE_ROCM)
