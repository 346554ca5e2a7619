"""``overlap_ops.sm_carveout(k)``: leave ``k`` SMs free for communication.

Stock PyTorch honours ``torch._C._set_sm_carveout_experimental(k)`` only in
its cuBLASLt paths (``addmm``/``linear`` with a bias, ``_scaled_mm``) and in
bf16 ``_grouped_mm``; plain ``mm``, ``bmm`` and the other ``addmm``/
``baddbmm`` calls go to cuBLAS kernels that take every SM. Inside
``sm_carveout(k)``:

* the context setting is ``k``, so PyTorch's own cuBLASLt paths apply it;
* ``aten::mm``, ``addmm``, ``bmm`` and ``baddbmm`` (functional, ``out=`` and
  in-place forms, CUDA) run the carveout-aware kernels built from
  ``aten/src/ATen/cuda/CarveoutGemmCUDA.cpp``: cuBLAS with
  ``cublasSetSmCountTarget(handle, SMs - k)``, or cuBLASLt with
  ``CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET`` for a bias row (``linear``);
  float32 (TF32 or not), float64 and complex GEMMs, whose cuBLAS kernels are
  not persistent, also run on a stream of a CUDA green context of SMs - k
  SMs rounded down to the driver's partition size (8 SMs on Hopper), so a k
  that leaves fewer SMs than one partition raises for them (see
  :func:`green_context_unavailable_reason` for when that is not possible);
* ``torch._grouped_mm`` runs the overlap_ops kernels, whose persistent grid
  is at most ``SMs - k`` CTAs.

The first block with ``k > 0`` registers the aten GEMM kernels above once;
they stay registered, and with no carveout set they run PyTorch's own
kernel and nothing else. So entering a block never changes the dispatcher
under a thread that is dispatching. On exit the context setting and the
``torch._grouped_mm`` routing go back to what they were, also when the
block raises, so blocks nest. ``k`` of ``None`` or 0 means no carveout and
routes nothing. The context setting is process-wide: a block on one
thread sets k for GEMMs on every thread.

Not covered: the ``out_dtype`` overloads (``mm.dtype`` and friends), which
keep PyTorch's kernels.
"""

from __future__ import annotations

import contextlib
import operator
import threading
from typing import Any, Optional

import torch

from overlap_ops.routing import route_torch_grouped_mm


def device_sm_count(device: Optional[torch.device] = None) -> Optional[int]:
    """SMs of ``device`` (default: the current CUDA device); None without CUDA."""
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(
        torch.cuda.current_device() if device is None else device)
    return int(props.multi_processor_count)


def check_sm_carveout(k: Optional[int],
                      sm_count: Optional[int] = None) -> int:
    """Validates a carveout through the C++ policy; returns it as an int.

    Args:
        k: SMs to leave free; None means 0.
        sm_count: SMs of the device; default: the current CUDA device's. When
            there is no CUDA device only ``k >= 0`` can be checked; the upper
            bound is then checked by the first GEMM that runs.

    Raises:
        TypeError: ``k`` is not an integer (``bool`` included).
        RuntimeError: ``k < 0`` or ``k >= sm_count`` (the policy's message).
    """
    if k is None:
        return 0
    if isinstance(k, bool):
        raise TypeError("sm_carveout: k must be an int or None, got bool")
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(
            f"sm_carveout: k must be an int or None, got {type(k).__name__}"
        ) from None
    sms = device_sm_count() if sm_count is None else sm_count
    torch.ops.overlap_ops._check_sm_carveout(k, sms)
    return k


def green_context_unavailable_reason(
        device: Optional[torch.device | int] = None) -> Optional[str]:
    """Why float32/float64/complex GEMMs cannot be confined to ``SMs - k``
    SMs with a CUDA green context on ``device`` (default: the current CUDA
    device), or None when they can.

    Reasons: a CUDA toolkit older than 12.8 at build time, a driver without
    the green-context entry points, a device the driver cannot partition, or
    no CUDA. When there is a reason, those GEMMs get only the cuBLAS SM count
    target under ``sm_carveout`` (a one-time warning says so) and their
    kernels may still use every SM.
    """
    if not torch.cuda.is_available():
        return "no CUDA device"
    index = None
    if isinstance(device, int):
        index = device
    elif device is not None:
        index = torch.device(device).index
    if index is None:
        index = torch.cuda.current_device()
    reason = str(torch.ops.overlap_ops._green_context_status(index))
    return reason or None


def route_carveout_gemms(enabled: bool = True) -> bool:
    """Routes aten mm/addmm/bmm/baddbmm (CUDA) to the carveout-aware kernels.

    Returns whether the routing was on before. The first ``sm_carveout``
    block with ``k > 0`` turns it on and no block turns it off: with no
    carveout set the routed kernels are PyTorch's own.
    """
    return bool(torch.ops.overlap_ops._route_aten_carveout_gemms(bool(enabled)))


def carveout_gemms_routed() -> bool:
    """Whether aten mm/addmm/bmm/baddbmm currently go to our kernels."""
    return bool(torch.ops.overlap_ops._carveout_gemms_routed())


_route_lock = threading.Lock()


def _route_carveout_gemms_once() -> None:
    """Registers the carveout GEMM kernels unless they are registered.

    Checked before the lock so that later blocks cost one op call; the
    kernels pass through to PyTorch's with no carveout, so they stay.
    """
    if carveout_gemms_routed():
        return
    with _route_lock:
        if not carveout_gemms_routed():
            route_carveout_gemms(True)


def nccl_options(k: int, options: Any = None) -> Any:
    """``ProcessGroupNCCL.Options`` whose communicator uses at most ``k``
    CTAs (NCCL runs one CTA per SM), so that collectives and GEMMs inside
    ``sm_carveout(k)`` or ``sm_carveout("auto")`` split the GPU exactly.

    Example::

        dist.init_process_group("nccl", pg_options=overlap_ops.nccl_options(16))
        with overlap_ops.sm_carveout("auto"):   # k = 16, from the group
            ...

    Args:
        k: CTAs NCCL may use, ``k >= 1``.
        options: options to start from (default: fresh ones); changed and
            returned.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"nccl_options: k must be an int >= 1, got {k!r}")
    import torch.distributed as dist

    options = dist.ProcessGroupNCCL.Options() if options is None else options
    config = options.config
    config.max_ctas = k
    config.min_ctas = min(config.min_ctas, k) if config.min_ctas > 0 else 1
    options.config = config
    return options


def carveout_of(process_group: Any = None) -> int:
    """The SM carveout that matches a NCCL process group (default: the
    default group): the CTA cap its communicator was created with by
    :func:`nccl_options`.

    Raises:
        RuntimeError: the group has no NCCL backend or no CTA cap.
    """
    import torch.distributed as dist

    group = process_group
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    backend = group._get_backend(torch.device("cuda"))
    options = getattr(backend, "options", None)
    max_ctas = getattr(getattr(options, "config", None), "max_ctas", None)
    if not isinstance(max_ctas, int) or max_ctas <= 0:
        raise RuntimeError(
            "sm_carveout('auto'): the process group's NCCL communicator has "
            "no CTA cap; create it with pg_options=overlap_ops.nccl_options(k)"
            " or pass k")
    return max_ctas


class _SMCarveoutBlock:
    """The context manager :func:`sm_carveout` returns.

    Entering and leaving change process state (the carveout setting, the
    dispatcher routes), so torch.compile must never trace them: a trace
    would run them at compile time, and a failed or partial one would leave
    the setting behind. Dynamo runs them eagerly instead and breaks the
    graph around the block.
    """

    def __init__(self, k: int) -> None:
        self._k = k
        self._restore: Optional[contextlib.ExitStack] = None

    @torch.compiler.disable
    def __enter__(self) -> int:
        if self._restore is not None:
            raise RuntimeError(
                "sm_carveout: this block is already entered; call "
                "sm_carveout(k) again for a nested block")
        k = self._k
        with contextlib.ExitStack() as restore:  # undoes a partial entry
            restore.callback(torch._C._set_sm_carveout_experimental,
                             torch._C._get_sm_carveout_experimental())
            torch._C._set_sm_carveout_experimental(k if k else None)
            if k:
                _route_carveout_gemms_once()
                restore.callback(route_torch_grouped_mm,
                                 route_torch_grouped_mm(True))
            self._restore = restore.pop_all()
        return k

    @torch.compiler.disable
    def __exit__(self, *exc_info: Any) -> None:
        restore, self._restore = self._restore, None
        if restore is not None:
            restore.close()


@torch.compiler.disable
def sm_carveout(k: Any, process_group: Any = None) -> _SMCarveoutBlock:
    """Makes every GEMM inside the block leave ``k`` SMs free.

    Example::

        with overlap_ops.sm_carveout(16):
            out = x @ w          # at most SMs - 16 SMs
            dist.all_gather_into_tensor(...)  # on the 16 left free

    Under ``torch.compile``, call compiled code inside the block rather than
    putting the block inside compiled code: there the block breaks the graph
    and runs eagerly (``fullgraph=True`` refuses it); see docs/DESIGN.md.

    Args:
        k: SMs to leave free, ``0 <= k < SMs`` of the current device; None or
            0 means no carveout (nothing is routed, no overhead); ``"auto"``
            takes k from ``process_group``'s NCCL CTA cap
            (:func:`carveout_of`).
        process_group: for ``"auto"``: the NCCL group (default: the default
            group).

    Returns:
        A context manager; ``with`` gives ``k`` as an int (0 for None).

    Raises:
        TypeError, RuntimeError: see :func:`check_sm_carveout`; nothing has
        changed when they are raised.
    """
    if k == "auto":
        k = carveout_of(process_group)
    return _SMCarveoutBlock(check_sm_carveout(k))
