"""Checked mode: validate device offsets and raise a named error.

Off by default because it synchronises. When on, CUDA calls copy ``offs`` to
the host and raise an error naming the first bad group (decreasing values,
negative values, values past the end). Without it, bad offsets are clamped on
the device and never cause an out-of-bounds access. The environment variable
``TORCH_GROUPED_MM_CHECK_OFFSETS=1`` turns it on for a whole run (read at every
call until :func:`set_checked_offsets` overrides it).
"""

from __future__ import annotations

from typing import Any

import torch


@torch.compiler.disable
def set_checked_offsets(enabled: bool | None) -> None:
    """Turns checked mode on or off for the whole process; ``None`` hands it
    back to ``TORCH_GROUPED_MM_CHECK_OFFSETS``. Process state, so
    torch.compile never traces it (it breaks the graph instead)."""
    torch.ops.overlap_ops._set_checked_offsets(
        None if enabled is None else bool(enabled))


class _CheckedOffsetsBlock:
    """What :func:`checked_offsets` returns. torch.compile never traces
    entering or leaving (it breaks the graph instead)."""

    def __init__(self, enabled: bool = True) -> None:
        self._enabled = enabled
        self._previous: list = []

    @torch.compiler.disable
    def __enter__(self) -> None:
        self._previous.append(torch.ops.overlap_ops._checked_offsets_override())
        set_checked_offsets(self._enabled)

    @torch.compiler.disable
    def __exit__(self, *exc_info: Any) -> None:
        set_checked_offsets(self._previous.pop())


def checked_offsets(enabled: bool = True) -> _CheckedOffsetsBlock:
    """Context manager form of :func:`set_checked_offsets`. On exit the
    switch is what it was before, the environment variable included."""
    return _CheckedOffsetsBlock(enabled)
