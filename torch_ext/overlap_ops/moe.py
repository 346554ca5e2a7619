"""Building blocks of a mixture-of-experts layer that never sync the host.

Routing stays on the device from the router's output to the combined
output, so a layer built from these runs under CUDA graph capture and
``torch.compile(fullgraph=True)``::

    top_p, top_e = route(x, router_weight, top_k)       # (T, k) each
    perm = permute(top_e, num_experts)                  # sorts by expert
    y = experts(gather(x, perm), perm.offs)             # GroupedExperts
    out = combine(y, perm, top_p)                       # (T, D)

:class:`MoE` is those four lines as a module.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F

from overlap_ops.grouped_mm import grouped_mm

__all__ = ["GroupedExperts", "MoE", "Permutation", "combine", "gather",
           "permute", "route"]

GroupedMM = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _ours(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return grouped_mm(a, b, offs)


@dataclasses.dataclass
class Permutation:
    """Where each (token, choice) slot goes in the expert-sorted rows.

    Attributes:
        source: (R,) int64, the token that feeds each row. R = T * k, plus
            E * (align - 1) with padding. Padding rows read token T, a zero
            row that :func:`gather` appends.
        row_of_slot: (T * k,) int64, the row of each slot (token-major).
        offs: (E,) int32, cumulative end rows of the expert groups: the
            ``offs`` of :func:`overlap_ops.grouped_mm`.
        counts: (E,) int64, slots per expert before padding.
    """

    source: torch.Tensor
    row_of_slot: torch.Tensor
    offs: torch.Tensor
    counts: torch.Tensor


def route(x: torch.Tensor, router_weight: torch.Tensor, top_k: int
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-choice top-k routing.

    Args:
        x: (T, D) tokens.
        router_weight: (E, D).
        top_k: experts per token.

    Returns:
        ``(top_p, top_e)``: (T, k) float32 softmax weights and (T, k) int64
        expert indices.
    """
    probs = F.linear(x, router_weight).float().softmax(dim=-1)
    return probs.topk(top_k, dim=-1)


def permute(top_e: torch.Tensor, num_experts: int, align: int = 1
            ) -> Permutation:
    """Sorts the (token, choice) slots by expert, on the device.

    Args:
        top_e: (T, k) int64 expert of each slot.
        num_experts: E.
        align: pad every group to a multiple of this many rows (a static
            capacity of T * k + E * (align - 1) rows). 1 for no padding.

    ``torch.bincount`` would sync on CUDA to size its output; the counts
    come from ``scatter_add_`` instead.
    """
    if align < 1:
        raise ValueError(f"permute: align must be >= 1, got {align}")
    tokens, top_k = top_e.shape
    flat = top_e.reshape(-1)
    slots = flat.numel()
    order = flat.argsort(stable=True)
    counts = torch.zeros(num_experts, dtype=torch.int64, device=flat.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    if align == 1:
        rows_of_sorted = torch.arange(slots, device=flat.device)
        padded, capacity = counts, slots
    else:
        padded = (counts + align - 1) // align * align
        capacity = slots + num_experts * (align - 1)
        first_row = padded.cumsum(0) - padded
        first_slot = counts.cumsum(0) - counts
        rows_of_sorted = torch.arange(slots, device=flat.device) + (
            first_row - first_slot).index_select(0, flat.index_select(0, order))
    source = torch.full((capacity,), tokens, dtype=torch.int64,
                        device=flat.device)
    source.index_copy_(0, rows_of_sorted, order // top_k)
    row_of_slot = torch.empty_like(order).index_copy_(0, order, rows_of_sorted)
    offs = padded.cumsum(0).to(torch.int32)
    return Permutation(source, row_of_slot, offs, counts)


def gather(x: torch.Tensor, perm: Permutation) -> torch.Tensor:
    """(T, D) tokens -> (R, D) rows in expert order; padding rows are zeros."""
    if perm.source.numel() > perm.row_of_slot.numel():
        x = torch.cat([x, x.new_zeros(1, x.shape[1])])
    return x.index_select(0, perm.source)


def combine(y: torch.Tensor, perm: Permutation, top_p: torch.Tensor
            ) -> torch.Tensor:
    """(R, D) expert outputs -> (T, D): each token's choices summed with
    their ``top_p`` (T, k) weights, accumulated in float32."""
    tokens, top_k = top_p.shape
    per_slot = y.index_select(0, perm.row_of_slot).view(tokens, top_k, -1)
    return torch.einsum("tkd,tk->td", per_slot.float(), top_p).to(y.dtype)


class GroupedExperts(torch.nn.Module):
    """SwiGLU experts as torchtitan lays them out.

    Parameters ``w13`` (E, 2H, D) (gate and up projections, stacked) and
    ``w2`` (E, D, H). ``forward(x, offs)``: (R, D) rows grouped by ``offs``
    -> (R, D).
    """

    def __init__(self, num_experts: int, dim: int, hidden: int, *,
                 grouped_mm: GroupedMM = _ours, device: Any = None,
                 dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.hidden = hidden
        self.grouped_mm = grouped_mm
        self.w13 = torch.nn.Parameter(
            torch.empty(num_experts, 2 * hidden, dim, **kw))
        self.w2 = torch.nn.Parameter(
            torch.empty(num_experts, dim, hidden, **kw))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """std 1/sqrt(fan_in), so activations stay O(1)."""
        for w in (self.w13, self.w2):
            torch.nn.init.normal_(w, std=w.shape[-1] ** -0.5)

    def forward(self, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        h = self.grouped_mm(x, self.w13.transpose(-2, -1), offs)
        h = F.silu(h[:, :self.hidden]) * h[:, self.hidden:]
        return self.grouped_mm(h, self.w2.transpose(-2, -1), offs)


class MoE(torch.nn.Module):
    """Router, top-k, permutation and :class:`GroupedExperts`.

    ``forward(x)``: (T, D) -> (T, D), same dtype. ``align`` pads every
    expert's group to a multiple of that many rows (stock
    ``torch._grouped_mm`` needs 8 or 16 in some layouts; ours needs none).
    """

    def __init__(self, dim: int, hidden: int, num_experts: int, top_k: int,
                 *, align: int = 1, grouped_mm: GroupedMM = _ours,
                 device: Any = None,
                 dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        self.num_experts, self.top_k, self.align = num_experts, top_k, align
        self.router = torch.nn.Parameter(
            torch.empty(num_experts, dim, device=device, dtype=dtype))
        torch.nn.init.normal_(self.router, std=dim ** -0.5)
        self.experts = GroupedExperts(num_experts, dim, hidden,
                                      grouped_mm=grouped_mm, device=device,
                                      dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top_p, top_e = route(x, self.router, self.top_k)
        perm = permute(top_e, self.num_experts, self.align)
        y = self.experts(gather(x, perm), perm.offs)
        return combine(y, perm, top_p)
