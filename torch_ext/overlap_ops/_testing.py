"""Test-only hooks: typed wrappers of ``torch.ops.overlap_ops_testing``.

The ops live in ``overlap_ops._testing_C``, built from
``torch_ext/csrc/testing/`` and linked against ``overlap_ops._C``, so they
call the very ``aten/`` code that ships. They expose host-side rules (the SM
carveout policy, the ROCm CU mask, the restricted-stream cache driven by a
counting test double) to tests that need no GPU. ``import overlap_ops``
never loads this module; tests import it::

    from overlap_ops import _testing
"""

from __future__ import annotations

from typing import NamedTuple

import torch

import overlap_ops  # noqa: F401  (loads _C, which _testing_C links against)
from overlap_ops import _testing_C  # noqa: F401  (registers the ops)

_ops = torch.ops.overlap_ops_testing

# ---------------------------------------------------------------------------
# SM carveout policy (aten/src/ATen/cuda/SMCarveout.h)
# ---------------------------------------------------------------------------


def sm_count_after_carveout(total_sms: int, k: int) -> int:
    """SMs a GEMM may use when ``k`` of ``total_sms`` SMs stay free.

    Raises:
        RuntimeError: ``not 0 <= k < total_sms``, or ``total_sms <= 0``.
    """
    return int(_ops.sm_count_after_carveout(total_sms, k))


def blas_sm_count_target(total_sms: int) -> int:
    """The cuBLAS/cuBLASLt SM count target under the context's carveout
    (``torch._C._set_sm_carveout_experimental``): 0 without one."""
    return int(_ops.blas_sm_count_target(total_sms))


def green_context_sm_count(total_sms: int, k: int, min_partition: int,
                           alignment: int) -> int:
    """SMs of the green-context partition for carveout ``k``: ``SMs - k``
    rounded down to a multiple of ``alignment``; ``total_sms`` for k = 0.

    Raises:
        RuntimeError: ``k`` out of range, or the partition would be smaller
            than ``min_partition``.
    """
    return int(_ops.green_context_sm_count(total_sms, k, min_partition,
                                           alignment))


def green_context_stream(device: int, k: int) -> tuple[int, int]:
    """The cached green-context stream of ``(device, k)``, created if needed:
    ``(cudaStream_t handle, partition SMs)``. CUDA builds only."""
    handle, sms = _ops.green_context_stream(device, k)
    return int(handle), int(sms)


# ---------------------------------------------------------------------------
# ROCm CU mask (aten/src/ATen/cuda/CUMask.h)
# ---------------------------------------------------------------------------


def rocm_cu_mask(total_cus: int, k: int, num_xcc: int,
                 wgp_pairs: bool) -> list[int]:
    """The CU mask words (uint32 values, bit i of the mask = CU i) that
    leave ``k`` CUs free; ``build_cu_mask``."""
    return [int(w) for w in _ops.rocm_cu_mask(total_cus, k, num_xcc,
                                               wgp_pairs)]


def rocm_sm_carveout_cu_mask(total_cus: int, cus_per_sm: int, k: int,
                             num_xcc: int, wgp_pairs: bool) -> list[int]:
    """The CU mask words for a carveout of ``k`` SMs of ``cus_per_sm`` CUs
    each; ``build_sm_carveout_cu_mask``."""
    return [int(w) for w in _ops.rocm_sm_carveout_cu_mask(
        total_cus, cus_per_sm, k, num_xcc, wgp_pairs)]


def rocm_sm_count_target(total_cus: int, cus_per_sm: int, k: int,
                         wgp_pairs: bool) -> int:
    """The hipBLASLt SM_COUNT_TARGET hint that goes with that mask, in SMs;
    0 (no hint) for k = 0."""
    return int(_ops.rocm_sm_count_target(total_cus, cus_per_sm, k,
                                         wgp_pairs))


def rocm_sm_carveout_enabled_cus(total_cus: int, cus_per_sm: int, k: int,
                                 num_xcc: int, wgp_pairs: bool,
                                 whole_xcc_rounds: bool = False) -> int:
    """CUs the mask for an SM carveout ``k`` enables (the partition the
    stream cache keys on); ``whole_xcc_rounds`` rounds the carveout up to
    whole rounds of ``num_xcc`` CUs."""
    return int(_ops.rocm_sm_carveout_enabled_cus(
        total_cus, cus_per_sm, k, num_xcc, wgp_pairs, whole_xcc_rounds))


def rocm_cu_mask_enabling(total_cus: int, enabled: int) -> list[int]:
    """The mask words that enable exactly the lowest ``enabled`` CUs."""
    return [int(w) for w in _ops.rocm_cu_mask_enabling(total_cus, enabled)]


def hipblaslt_takes_sm_count_target(runtime_version: int) -> bool:
    """Whether a libhipblaslt reporting ``runtime_version`` (major * 100000
    + minor * 100 + patch; negative: unknown) gets the SM_COUNT_TARGET
    hint."""
    return bool(_ops.hipblaslt_takes_sm_count_target(runtime_version))


# ---------------------------------------------------------------------------
# Restricted-stream cache on a counting test double
# (aten/src/ATen/cuda/CarveoutStreamCache.h,
# aten/src/ATen/test/carveout_stream_fakes.h)
# ---------------------------------------------------------------------------


class CarveoutScenarioCounts(NamedTuple):
    """What a scripted run of the stream cache on the test double saw."""

    streams_created: int
    events_created: int
    records: int
    waits: int
    streams_destroyed: int
    events_destroyed: int
    cache_entries: int  # cache size before it was destroyed
    forks: int
    pass_through: int  # forks that returned the caller's stream
    # forks given a stream of another (device, partition), or one handed
    # to another caller stream before
    wrong_stream: int
    ordering_violations: int  # records and waits out of fork/join order
    peak_live_streams: int  # most restricted streams alive at once


def _counts(values: list[int]) -> CarveoutScenarioCounts:
    fields = tuple(_ops.stream_scenario_fields())
    if fields != CarveoutScenarioCounts._fields:
        raise RuntimeError(f"stream scenario fields changed: {fields}")
    return CarveoutScenarioCounts(*(int(v) for v in values))


def cu_mask_stream_scenario(
    num_threads: int,
    calls_per_thread: int,
    carveouts: list[int],
    num_devices: int = 1,
    capturing: bool = False,
    *,
    total_cus: int,
    num_xcc: int,
    wgp_pairs: bool,
    cus_per_sm: int = 1,
    max_entries: int = 0,
    whole_xcc_rounds: bool = False,
) -> CarveoutScenarioCounts:
    """Drives the cache from ``num_threads`` threads, each with its own
    caller stream, with streams restricted by ROCm's CU mask for the given
    topology.

    Thread t's call c uses device ``(t + c) % num_devices`` and carveout
    ``carveouts[(7 t + c) % len(carveouts)]``; each call forks, checks the
    stream it got, and joins. ``capturing``: every caller stream reports
    graph capture. ``max_entries``: the cache's bound (0: its default).
    ``whole_xcc_rounds``: the XCC-granular mask option.
    """
    return _counts(_ops.cu_mask_stream_scenario(
        num_threads, calls_per_thread, carveouts, num_devices, capturing,
        total_cus, num_xcc, wgp_pairs, cus_per_sm, max_entries,
        whole_xcc_rounds))


def green_context_stream_scenario(
    num_threads: int,
    calls_per_thread: int,
    carveouts: list[int],
    num_devices: int = 1,
    capturing: bool = False,
    *,
    total_sms: int,
    min_partition: int,
    alignment: int,
    max_entries: int = 0,
) -> CarveoutScenarioCounts:
    """:func:`cu_mask_stream_scenario` with streams restricted as the CUDA
    green-context backend does (``green_context_sm_count``)."""
    return _counts(_ops.green_context_stream_scenario(
        num_threads, calls_per_thread, carveouts, num_devices, capturing,
        total_sms, min_partition, alignment, max_entries))


def two_caller_streams_scenario(k_a: int, k_b: int, *, total_sms: int,
                                min_partition: int,
                                alignment: int) -> tuple[int, int]:
    """Two caller streams A and B run carveout GEMMs (A with ``k_a``, B with
    ``k_b``) through one cache on a double that models stream and event
    order, with work queued between each fork and join and long work queued
    on B before its GEMMs; some calls interleave. Streams are restricted as
    the CUDA green-context backend does.

    Returns:
        (B's work items that A's work waited for, A's items that B's work
        waited for): (0, 0) when neither caller stream orders the other.
    """
    a_on_b, b_on_a = _ops.two_caller_streams_scenario(
        k_a, k_b, total_sms, min_partition, alignment)
    return int(a_on_b), int(b_on_a)


# ---------------------------------------------------------------------------
# Checked offsets (aten/src/ATen/native/GroupedMMValidation.h)
# ---------------------------------------------------------------------------


def checked_offsets() -> bool:
    """Whether the kernels run in checked mode now: the override set by
    :func:`overlap_ops.set_checked_offsets`, else
    ``TORCH_GROUPED_MM_CHECK_OFFSETS``.

    Raises:
        RuntimeError: the environment variable has a value it does not know.
    """
    return bool(_ops.checked_offsets())
