"""Whether the tests run against the overlap_ops extension or against a
patched PyTorch wheel (no extension installed). An extension that is
installed but does not load is an error, never mistaken for wheel mode."""

from __future__ import annotations

try:
    import overlap_ops
    HAS_EXTENSION = True
except ModuleNotFoundError as error:
    if error.name != "overlap_ops":
        raise
    overlap_ops = None
    HAS_EXTENSION = False
