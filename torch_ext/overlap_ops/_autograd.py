"""Autograd for overlap_ops::grouped_mm, built on the same grouped kernels.

Every gradient is one more grouped_mm in another layout, so backward keeps
the offsets on the device and never synchronises. The kernels accept any
strides, so expanded or zero-stride gradients need no copy here.

mat2's gradient is computed in mat2's own layout: for a column-major mat2
(a transposed weight, as torchtitan passes w.transpose(-2, -1)) it is the
transpose of (grad^T x self), so autograd can hand it to the parameter
without a transposing copy (upstream's _grouped_mm_mat2_backward does the
same).

Layout     grad_self                         grad_mat2
2d x 3d    g (sM,N)  x b^T (G,N,K) 2d x 3d   a^T (K,sM) x g (sM,N) 2d x 2d
3d x 2d    g (M,sN)  x b^T (sN,K)  2d x 2d   a^T (G,K,M) x g (M,sN) 3d x 2d
2d x 2d    g (G,M,N) x b^T (N,sK)  3d x 2d   a^T (sK,M) x g (G,M,N) 2d x 3d
3d x 3d    g x b^T   batched                 a^T x g   batched
"""

from __future__ import annotations

from typing import Any, Optional

import torch

_grouped_mm = torch.ops.overlap_ops.grouped_mm


def _bias_grad(a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor,
               offs: Optional[torch.Tensor]) -> torch.Tensor:
    """Per-group sum of the output rows, (G, N), accumulated in float32."""
    if a.dim() == 2 and b.dim() == 3:
        # Sum over each group's rows = ones (1, sum M) @ grad, grouped along K.
        ones = grad.new_ones((1, grad.shape[0]))
        low_precision = grad.dtype in (torch.bfloat16, torch.float16)
        acc_dtype = torch.float32 if low_precision else None
        return _grouped_mm(ones, grad, offs, None, acc_dtype).squeeze(1)
    return grad.sum(dim=1, dtype=torch.promote_types(grad.dtype, torch.float32))


def _column_major(t: torch.Tensor) -> bool:
    """Whether each matrix of t (the last two dims) is column-major."""
    return t.stride(-2) == 1 and t.stride(-1) != 1


def _mat2_grad(a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor,
               offs: Optional[torch.Tensor]) -> torch.Tensor:
    """d out / d mat2, with mat2's layout (row- or column-major)."""
    transposed = _column_major(b)
    if a.dim() == 2 and b.dim() == 3:
        # (G, K, N) = a^T (K, sM) x grad (sM, N), grouped along sM.
        if transposed:
            return _grouped_mm(grad.t(), a, offs).transpose(-2, -1)
        return _grouped_mm(a.t(), grad, offs)
    if a.dim() == 3 and b.dim() == 2:
        # (K, sN) = a^T (G, K, M) x grad (M, sN).
        if transposed:
            return _grouped_mm(grad.t(), a, offs).t()
        return _grouped_mm(a.transpose(-2, -1), grad, offs)
    if a.dim() == 2 and b.dim() == 2:
        # (sK, N) = a^T (sK, M) x grad (G, M, N).
        if transposed:
            return _grouped_mm(grad.transpose(-2, -1), a, offs).t()
        return _grouped_mm(a.t(), grad, offs)
    # 3d x 3d, batched.
    if transposed:
        return _grouped_mm(grad.transpose(-2, -1), a).transpose(-2, -1)
    return _grouped_mm(a.transpose(-2, -1), grad)


def _setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    a, b, offs, bias, _ = inputs
    ctx.save_for_backward(a, b, offs)
    ctx.bias_dtype = None if bias is None else bias.dtype


def _backward(ctx: Any, grad: torch.Tensor):
    a, b, offs = ctx.saved_tensors
    grad = grad.to(a.dtype)
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    grad_a = grad_b = grad_bias = None
    if need_a:
        # Every layout: grad x mat2^T (offs is None for 3d x 3d).
        grad_a = _grouped_mm(grad, b.transpose(-2, -1), offs)
    if need_b:
        grad_b = _mat2_grad(a, b, grad, offs)
    if ctx.bias_dtype is not None and ctx.needs_input_grad[3]:
        grad_bias = _bias_grad(a, b, grad, offs).to(ctx.bias_dtype)
    return grad_a, grad_b, None, grad_bias, None


torch.library.register_autograd(
    "overlap_ops::grouped_mm", _backward, setup_context=_setup_context)
