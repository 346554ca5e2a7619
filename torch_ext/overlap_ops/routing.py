"""Routes ``torch._grouped_mm`` itself to the overlap_ops kernels.

Code written for a patched PyTorch wheel calls ``torch._grouped_mm`` (and
``torch.nn.functional.grouped_mm``, which calls it). With routing on, stock
PyTorch sends that call to our kernels (CPU, and CUDA when the extension has
its CUDA kernels) and to our autograd formulas, so bias gradients, expanded
gradients and ``out_dtype=torch.float32`` backwards work as they do through
:func:`overlap_ops.grouped_mm`. PyTorch prints one warning about overriding
a registered kernel the first time routing is turned on; that warning is
expected.

Routing also swaps the Python meta kernel of ``aten::_grouped_mm`` for ours,
so ``torch.compile`` traces ``torch._grouped_mm`` in every dtype and layout
(stock's meta accepts bf16 only, with 16-byte aligned strides, in 2.13/2.14).
That swap uses ``OpOverload.py_kernels``, a private PyTorch table: it is the
one place where stock registers that meta (``torch/_meta_registrations.py``).
"""

from __future__ import annotations

from typing import Any

import torch

from overlap_ops._fake import _grouped_mm_fake

_META = torch._C.DispatchKey.Meta
# The stock Python meta kernel while routing is on (None: there was none).
_saved_meta: list = []


def _swap_meta_kernel(enabled: bool) -> None:
    op = torch.ops.aten._grouped_mm.default
    if enabled and not _saved_meta:
        _saved_meta.append(op.py_kernels.get(_META))
        op.py_kernels[_META] = _grouped_mm_fake
    elif not enabled and _saved_meta:
        stock = _saved_meta.pop()
        if stock is None:
            op.py_kernels.pop(_META, None)
        else:
            op.py_kernels[_META] = stock
    op._dispatch_cache.clear()


@torch.compiler.disable
def route_torch_grouped_mm(enabled: bool = True) -> bool:
    """Turns routing on or off; returns whether it was on before. Process
    state, so torch.compile never traces it (it breaks the graph instead)."""
    previous = bool(torch.ops.overlap_ops._route_aten_grouped_mm(bool(enabled)))
    _swap_meta_kernel(bool(enabled))
    return previous


class _RoutedBlock:
    """What :func:`routed_torch_grouped_mm` returns. torch.compile never
    traces entering or leaving (it breaks the graph instead)."""

    def __init__(self, enabled: bool = True) -> None:
        self._enabled = enabled
        self._previous: list[bool] = []

    @torch.compiler.disable
    def __enter__(self) -> None:
        self._previous.append(route_torch_grouped_mm(self._enabled))

    @torch.compiler.disable
    def __exit__(self, *exc_info: Any) -> None:
        route_torch_grouped_mm(self._previous.pop())


def routed_torch_grouped_mm(enabled: bool = True) -> _RoutedBlock:
    """Routes ``torch._grouped_mm`` inside the block; restores on exit."""
    return _RoutedBlock(enabled)
