"""Extension mode or wheel mode: which torch the tests run against.

The test files of the patch series (``tests`` in patches/files.toml) use
only torch's own API: ``torch._grouped_mm``, ``F.grouped_mm``,
``torch._C._set_sm_carveout_experimental``, the native functions the series
adds. They never name the extension. Against a patched wheel they test the
wheel (wheel mode). With the overlap_ops extension installed on stock
torch, :func:`activate` makes torch answer those calls the way the patched
wheel does (extension mode):

* ``torch._grouped_mm`` (and ``F.grouped_mm``, which calls it) runs the
  extension's kernels, autograd formulas and fake kernel
  (``overlap_ops.route_torch_grouped_mm``), with the wheel's dispatch rule;
* aten ``mm``/``addmm``/``bmm``/``baddbmm`` run its carveout-aware kernels,
  so every GEMM honours ``torch._C._set_sm_carveout_experimental(k)`` as the
  wheel's do (with no carveout set they are PyTorch's own kernels);
* ``torch.ops.aten._grouped_mm_bias_column_sums`` and
  ``torch.ops.aten._grouped_mm_grad_to`` (patch 0005's native functions)
  name the extension's ops of the same schema.

Which runs are which:

* ``pytest test/...`` (``./build.sh test``, CI): extension mode whenever
  overlap_ops is installed; test/conftest.py activates it before every test.
* ``python test/test_x.py``: wheel mode (the file's own ``run_tests()``),
  as upstream runs it on a patched build.
* ``python test/extension_mode.py test/test_x.py [unittest args]``: that
  file in extension mode.

Tests of the extension's own API (test_extension_*.py and the other files
outside the series) import ``HAS_EXTENSION`` and ``overlap_ops`` from here.
An extension that is installed but does not load is an error, never
mistaken for wheel mode.
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import Optional

import torch

try:
    import overlap_ops
    HAS_EXTENSION = True
except ModuleNotFoundError as error:
    if error.name != "overlap_ops":
        raise
    overlap_ops = None
    HAS_EXTENSION = False

# Patch 0005's native functions -> the extension's ops of the same schema.
_ATEN_ALIASES = {
    "_grouped_mm_bias_column_sums": "_group_column_sums",
    "_grouped_mm_grad_to": "_grouped_mm_grad_to",
}


def activate() -> bool:
    """Puts the process in extension mode (see the module docstring) when
    overlap_ops is installed; returns whether it did. Idempotent and cheap,
    so it can run before every test: a tool under test may have turned the
    routing off (the benchmarks do, for their stock column)."""
    if not HAS_EXTENSION:
        return False
    from overlap_ops import carveout

    overlap_ops.route_torch_grouped_mm(True)
    carveout.route_carveout_gemms(True)
    for aten_name, ours in _ATEN_ALIASES.items():
        if not hasattr(torch.ops.aten, aten_name):
            # torch.ops namespaces cache resolved ops as attributes.
            setattr(torch.ops.aten, aten_name,
                    getattr(torch.ops.overlap_ops, ours))
    return True


def cuda_tests_skip_reason() -> Optional[str]:
    """Why CUDA tests cannot run in extension mode, or None: an extension
    built without its CUDA kernels leaves nothing to route CUDA calls to."""
    if (HAS_EXTENSION and torch.cuda.is_available()
            and not overlap_ops.has_cuda_kernels()):
        return "overlap_ops was built without its CUDA kernels"
    return None


def _run_file(argv: list[str]) -> None:
    """python test/extension_mode.py FILE [ARGS]: FILE as __main__, in
    extension mode."""
    if not argv:
        raise SystemExit(
            "usage: python test/extension_mode.py test/test_x.py [args]")
    path = os.path.abspath(argv[0])
    if not activate():
        print("extension_mode: overlap_ops is not installed: wheel mode",
              file=sys.stderr)
    sys.argv = [path, *argv[1:]]
    sys.path.insert(0, os.path.dirname(path))
    runpy.run_path(path, run_name="__main__")


if __name__ == "__main__":
    _run_file(sys.argv[1:])
