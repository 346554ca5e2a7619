"""overlap_ops: sync-free grouped GEMM and SM carveout for stock PyTorch.

Importing the package registers ``torch.ops.overlap_ops.*`` (the kernels are
built from the repository's ``aten/`` sources, the autograd formulas are in
``csrc/GroupedMMAutograd.cpp``) and their fake kernels. Nothing else changes until you call
:func:`route_torch_grouped_mm`.
"""

import torch  # noqa: F401  (loads libc10/libtorch before _C)

from overlap_ops._version import __version__, check_build as _check_build

_check_build()  # before _C: a _C built for another torch fails obscurely
from overlap_ops import _C  # noqa: F401  (runs the TORCH_LIBRARY registration)
from overlap_ops import _fake  # noqa: F401  (registration only)
from overlap_ops import moe
from overlap_ops.carveout import carveout_of, nccl_options, sm_carveout
from overlap_ops.checked import checked_offsets, set_checked_offsets
from overlap_ops.grouped_mm import gmm, grouped_mm, has_cuda_kernels
from overlap_ops.routing import route_torch_grouped_mm, routed_torch_grouped_mm

__all__ = [
    "carveout_of",
    "checked_offsets",
    "gmm",
    "grouped_mm",
    "has_cuda_kernels",
    "moe",
    "nccl_options",
    "route_torch_grouped_mm",
    "routed_torch_grouped_mm",
    "set_checked_offsets",
    "sm_carveout",
]
