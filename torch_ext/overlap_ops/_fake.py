"""Fake (meta) kernels for overlap_ops::grouped_mm, for every dtype, for
the bias gradient's overlap_ops::_group_column_sums and for the backward's
gradient cast, overlap_ops::_grouped_mm_grad_to.

It only computes the output's shape and dtype, with symbolic sizes allowed,
so torch.compile traces the op. The full validation runs in the real kernel
(aten/src/ATen/native/GroupedMMValidation.cpp).
"""

from __future__ import annotations

from typing import Optional

import torch


def _grouped_mm_out_shape(
    a: torch.Tensor, b: torch.Tensor, offs: Optional[torch.Tensor]
) -> tuple:
    torch._check(a.dim() in (2, 3), lambda: "grouped_mm: self must be 2d or 3d")
    torch._check(b.dim() in (2, 3), lambda: "grouped_mm: mat2 must be 2d or 3d")
    if a.dim() == 2 and b.dim() == 3:
        return (a.shape[0], b.shape[2])
    if a.dim() == 3 and b.dim() == 2:
        return (a.shape[1], b.shape[1])
    if a.dim() == 2 and b.dim() == 2:
        torch._check(offs is not None, lambda: "grouped_mm: offs is required")
        return (offs.shape[0], a.shape[0], b.shape[1])
    return (a.shape[0], a.shape[1], b.shape[2])


@torch.library.register_fake("overlap_ops::grouped_mm")
def _grouped_mm_fake(
    a: torch.Tensor,
    b: torch.Tensor,
    offs: Optional[torch.Tensor] = None,
    bias: Optional[torch.Tensor] = None,
    out_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    shape = _grouped_mm_out_shape(a, b, offs)
    return a.new_empty(shape, dtype=out_dtype or a.dtype)


@torch.library.register_fake("overlap_ops::_group_column_sums")
def _group_column_sums_fake(
    grad: torch.Tensor, offs: Optional[torch.Tensor], dtype: torch.dtype
) -> torch.Tensor:
    groups = offs.shape[0] if offs is not None else grad.shape[0]
    return grad.new_empty((groups, grad.shape[-1]), dtype=dtype)


@torch.library.register_fake("overlap_ops::_grouped_mm_grad_to")
def _grouped_mm_grad_to_fake(grad: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # A new contiguous tensor, as the CUDA kernel returns.
    return grad.new_empty(grad.shape, dtype=dtype)
