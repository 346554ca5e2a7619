"""Routes ``torch._grouped_mm`` itself to the overlap_ops kernels.

Code written for a patched PyTorch wheel calls ``torch._grouped_mm``. With
routing on, stock PyTorch sends that call to our kernels (CPU, and CUDA when
the extension has its CUDA kernels); autograd keeps using PyTorch's own
formula, which calls ``_grouped_mm`` again and so reaches our kernels too.
PyTorch prints one warning about overriding a registered kernel the first
time routing is turned on; that warning is expected.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


def route_torch_grouped_mm(enabled: bool = True) -> bool:
    """Turns routing on or off; returns whether it was on before."""
    return bool(torch.ops.overlap_ops._route_aten_grouped_mm(bool(enabled)))


@contextlib.contextmanager
def routed_torch_grouped_mm(enabled: bool = True) -> Iterator[None]:
    """Routes ``torch._grouped_mm`` inside the block; restores on exit."""
    previous = route_torch_grouped_mm(enabled)
    try:
        yield
    finally:
        route_torch_grouped_mm(previous)
