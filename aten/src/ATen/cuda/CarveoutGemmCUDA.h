#pragma once

// mm / addmm / bmm / baddbmm for CUDA that honour the SM carveout.
//
// Stock PyTorch sends plain mm, bmm and the non-epilogue addmm/baddbmm to
// cublasGemmEx-style calls that ignore
// torch._C._set_sm_carveout_experimental(k); only its cuBLASLt paths read it.
// These kernels call cuBLAS on the handle PyTorch would use, inside a
// CublasSmCountTargetGuard, and addmm with a bias vector (linear) goes to
// cuBLASLt with a bias epilogue and CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET.
//
// bf16, fp16 and fp32 run here (fp32 uses TF32 only when
// torch.backends.cuda.matmul.allow_tf32 allows); other dtypes and problems
// too large for 32-bit cuBLAS arguments run PyTorch's own CUDA kernel under
// the same guard. Every dtype but bf16/fp16 (whose cuBLAS kernels are
// persistent and size their grid from the target) also runs on the
// green-context stream of GreenContextStreamCUDA.h, the only bound for
// cuBLAS's one-CTA-per-tile kernels. With no carveout set they run
// PyTorch's own kernel and nothing else, so the extension registers them
// once and leaves them registered. Semantics (broadcasting of `self`,
// beta == 0 ignoring `self`, the error messages for bad shapes) follow the
// ATen operators they replace.

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace at::cuda {

Tensor carveout_mm(const Tensor& self, const Tensor& mat2);
Tensor& carveout_mm_out(const Tensor& self, const Tensor& mat2, Tensor& out);

Tensor carveout_bmm(const Tensor& self, const Tensor& mat2);
Tensor& carveout_bmm_out(const Tensor& self, const Tensor& mat2, Tensor& out);

Tensor carveout_addmm(
    const Tensor& self,
    const Tensor& mat1,
    const Tensor& mat2,
    const Scalar& beta,
    const Scalar& alpha);
Tensor& carveout_addmm_out(
    const Tensor& self,
    const Tensor& mat1,
    const Tensor& mat2,
    const Scalar& beta,
    const Scalar& alpha,
    Tensor& out);
Tensor& carveout_addmm_(
    Tensor& self,
    const Tensor& mat1,
    const Tensor& mat2,
    const Scalar& beta,
    const Scalar& alpha);

Tensor carveout_baddbmm(
    const Tensor& self,
    const Tensor& batch1,
    const Tensor& batch2,
    const Scalar& beta,
    const Scalar& alpha);
Tensor& carveout_baddbmm_out(
    const Tensor& self,
    const Tensor& batch1,
    const Tensor& batch2,
    const Scalar& beta,
    const Scalar& alpha,
    Tensor& out);
Tensor& carveout_baddbmm_(
    Tensor& self,
    const Tensor& batch1,
    const Tensor& batch2,
    const Scalar& beta,
    const Scalar& alpha);

}  // namespace at::cuda
