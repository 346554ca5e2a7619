"""Float64 reference and input builders shared by the grouped-mm tests.

Written independently of the kernels under test: plain per-group matmuls in
float64 on the CPU.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

POISON = float("nan")


def make_offsets(sizes: Sequence[int], device, dtype=torch.int32) -> torch.Tensor:
    """Cumulative end offsets of groups with the given sizes."""
    ends = torch.tensor(sizes, dtype=torch.int64).cumsum(0)
    return ends.to(dtype=dtype, device=device)


def group_sizes(dist: str, total: int, groups: int, seed: int = 0) -> list[int]:
    """Group sizes as in ../shared/bench/moe_shapes.json (plus 'empty')."""
    if dist == "balanced":
        sizes = [total // groups] * groups
        sizes[0] += total - sum(sizes)
    elif dist == "skewed":
        gen = torch.Generator().manual_seed(seed)
        u = torch.rand(groups, generator=gen, dtype=torch.float64)
        w = u**3 + 1e-3
        sizes = (w / w.sum() * total).floor().to(torch.int64).tolist()
        sizes[0] += total - sum(sizes)
    elif dist == "sparse":
        live = [g for g in range(groups) if g % 4 != 3]
        sizes = [0] * groups
        for g in live:
            sizes[g] = total // len(live)
        sizes[live[0]] += total - sum(sizes)
    elif dist == "empty_ends":
        # Empty first and last groups, and everything in between.
        sizes = [0] + group_sizes("balanced", total, groups - 2) + [0]
    else:
        raise ValueError(f"unknown dist {dist!r}")
    return sizes


def reference_grouped_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    offs: Optional[torch.Tensor] = None,
    bias: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """float64 result of the _grouped_mm contract, computed group by group."""
    a64, b64 = a.detach().cpu().double(), b.detach().cpu().double()
    bias64 = None if bias is None else bias.detach().cpu().double()
    ends = [] if offs is None else offs.cpu().tolist()
    starts = [0] + ends[:-1]
    if a.dim() == 2 and b.dim() == 3:
        out = torch.zeros(a.shape[0], b.shape[2], dtype=torch.float64)
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[s:e] = a64[s:e] @ b64[g]
            if bias64 is not None and e > s:
                out[s:e] += bias64[g]
        return out
    if a.dim() == 3 and b.dim() == 2:
        out = torch.zeros(a.shape[1], b.shape[1], dtype=torch.float64)
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[:, s:e] = a64[g] @ b64[:, s:e]
        return out
    if a.dim() == 2 and b.dim() == 2:
        out = torch.zeros(len(ends), a.shape[0], b.shape[1], dtype=torch.float64)
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[g] = a64[:, s:e] @ b64[s:e]
            if bias64 is not None:
                out[g] += bias64[g]
        return out
    out = a64 @ b64
    if bias64 is not None:
        out += bias64.unsqueeze(1)
    return out


def output_groups(out: torch.Tensor, a_dim: int, b_dim: int,
                  offs: Optional[torch.Tensor]) -> list[tuple[str, slice]]:
    """(name, index) of each group's output region plus the zeroed tail."""
    if offs is None or (a_dim == 2 and b_dim == 2):
        return [(f"group {g}", (g,)) for g in range(out.shape[0])]
    ends = offs.cpu().tolist()
    starts = [0] + ends[:-1]
    rows = a_dim == 2  # 2d x 3d groups rows; 3d x 2d groups columns
    extent = out.shape[0] if rows else out.shape[1]
    regions = []
    for g, (s, e) in enumerate(zip(starts, ends)):
        idx = (slice(s, e),) if rows else (slice(None), slice(s, e))
        regions.append((f"group {g}", idx))
    tail_start = ends[-1] if ends else 0
    tail = (slice(tail_start, extent),) if rows else (
        slice(None), slice(tail_start, extent))
    regions.append(("tail past offs[-1]", tail))
    return regions


def tolerance(dtype: torch.dtype, device_type: str,
              out_dtype: Optional[torch.dtype] = None,
              tf32: Optional[bool] = None) -> float:
    """Relative error bound per group, set by the output's precision.

    A bf16 or fp16 output carries one rounding (unit roundoff 2^-8 and
    2^-11) over float32 accumulation; a float32 output of bf16/fp16 inputs
    is exact products summed in float32 (~1e-6). Float32 inputs on CUDA
    may run as TF32 (inputs rounded to 10 mantissa bits) when `tf32` is
    True, which defaults to torch's setting at the time of the call.
    """
    out = out_dtype or dtype
    if out == torch.float64:
        return 1e-12
    if out == torch.float32:
        if tf32 is None:
            tf32 = torch.backends.cuda.matmul.allow_tf32
        uses_tf32 = dtype == torch.float32 and device_type != "cpu" and tf32
        return 2e-3 if uses_tf32 else 1e-5
    if out == torch.float16:
        return 2e-3
    return 1e-2


def assert_matches_reference(testcase, out: torch.Tensor, ref: torch.Tensor,
                             a_dim: int, b_dim: int,
                             offs: Optional[torch.Tensor], tol: float) -> None:
    """Per-group relative error check; NaN (an unwritten element) fails."""
    out64 = out.detach().cpu().double()
    testcase.assertEqual(out64.shape, ref.shape)
    testcase.assertFalse(out64.isnan().any().item(),
                         "output has NaN: an element was not written")
    for name, idx in output_groups(out64, a_dim, b_dim, offs):
        got, want = out64[idx], ref[idx]
        if want.numel() == 0:
            continue
        if want.abs().max() == 0:
            testcase.assertTrue(bool((got == 0).all()),
                                f"{name}: expected exact zeros")
            continue
        err = ((got - want).norm() / want.norm()).item()
        testcase.assertLessEqual(err, tol, f"{name}: relative error {err:.3e}")
