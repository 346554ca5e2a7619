"""Checked mode: validate device offsets and raise a named error.

Off by default because it synchronises. When on, CUDA calls copy ``offs`` to
the host and raise an error naming the first bad group (decreasing values,
negative values, values past the end). Without it, bad offsets are clamped on
the device and never cause an out-of-bounds access. The environment variable
``TORCH_GROUPED_MM_CHECK_OFFSETS=1`` turns it on for a whole run (read at every
call until :func:`set_checked_offsets` overrides it).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


def set_checked_offsets(enabled: bool | None) -> None:
    """Turns checked mode on or off for the whole process; ``None`` hands it
    back to ``TORCH_GROUPED_MM_CHECK_OFFSETS``."""
    torch.ops.overlap_ops._set_checked_offsets(
        None if enabled is None else bool(enabled))


@contextlib.contextmanager
def checked_offsets(enabled: bool = True) -> Iterator[None]:
    """Context manager form of :func:`set_checked_offsets`. On exit the
    switch is what it was before, the environment variable included."""
    previous = torch.ops.overlap_ops._checked_offsets_override()
    set_checked_offsets(enabled)
    try:
        yield
    finally:
        set_checked_offsets(previous)
