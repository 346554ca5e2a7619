"""Typed Python entry point for ``torch.ops.overlap_ops.grouped_mm``."""

from __future__ import annotations

from typing import Optional

import torch


def grouped_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    offs: Optional[torch.Tensor] = None,
    bias: Optional[torch.Tensor] = None,
    out_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """Grouped matrix multiply with offsets that stay on the device.

    Same contract as ``torch._grouped_mm``:

    ========  ==========================================  ==================
    layout    shapes                                      grouped along
    ========  ==========================================  ==================
    2d x 3d   a (sum M, K), b (G, K, N) -> (sum M, N)     rows of a
    3d x 2d   a (G, M, K), b (K, sum N) -> (M, sum N)     columns of b
    2d x 2d   a (M, sum K), b (sum K, N) -> (G, M, N)     K
    3d x 3d   a (G, M, K), b (G, K, N) -> (G, M, N)       batch (no offs)
    ========  ==========================================  ==================

    Args:
        a, b: bfloat16, float16 or float32, same dtype and device.
        offs: 1-D int32 (or int64) cumulative end offsets of the groups, on
            the same device as ``a``. Repeated values make empty groups.
            Rows/columns past ``offs[-1]`` are written as zeros.
        bias: optional (G, N) per-group bias (not for 3d x 2d).
        out_dtype: None (same as ``a``) or ``torch.float32`` for
            bfloat16/float16 inputs.

    Returns:
        The output tensor, shaped as in the table above.
    """
    return torch.ops.overlap_ops.grouped_mm(a, b, offs, bias, out_dtype)


def has_cuda_kernels() -> bool:
    """True when the extension was built with its CUDA kernels."""
    return bool(torch.ops.overlap_ops._has_cuda_kernels())


def gmm(a: torch.Tensor, b: torch.Tensor, batch_sizes: torch.Tensor,
        trans_b: bool = False) -> torch.Tensor:
    """``grouped_gemm.ops.gmm`` with the sizes on the device (no host sync).

    Args:
        a: (sum sizes, K) rows grouped by ``batch_sizes``.
        b: (G, K, N), or (G, N, K) with ``trans_b``.
        batch_sizes: (G,) integer rows per group, on ``a``'s device (the
            ``grouped_gemm`` package wants them on the CPU and syncs).
        trans_b: multiply by each ``b[g]`` transposed.

    Returns:
        (sum sizes, N), differentiable in ``a`` and ``b``.
    """
    if batch_sizes.dim() != 1 or batch_sizes.is_floating_point():
        raise ValueError("gmm: batch_sizes must be a 1-D integer tensor, got "
                         f"{batch_sizes.dim()}-D {batch_sizes.dtype}")
    offs = batch_sizes.to(a.device).cumsum(0, dtype=torch.int32)
    return grouped_mm(a, b.transpose(-2, -1) if trans_b else b, offs)
