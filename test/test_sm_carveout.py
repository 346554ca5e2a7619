# Owner(s): ["module: cuda"]
"""SM carveout: the policy, overlap_ops.sm_carveout(k), and every CUDA GEMM.

CPU tests cover the policy (aten/src/ATen/cuda/SMCarveout.h, through the
extension's test-only module overlap_ops._testing) and the context
manager's bookkeeping: the context setting and the dispatcher routes it
changes, restored on exit and after an exception.

Mode by feature detection: with overlap_ops installed the CUDA tests run
inside overlap_ops.sm_carveout(k); without it (a wheel built by
`./build.sh wheel`) they set torch._C._set_sm_carveout_experimental(k)
directly, which the patched wheel honours in every GEMM, and the tests of
the extension's own API (policy probes, the context manager) skip.

CUDA tests check, for mm, addmm, linear, bmm, baddbmm, _scaled_mm (fp8) and
_grouped_mm in bf16/fp16, that the launched grid (args.grid in the
profiler's chrome trace) leaves k SMs free for k in {8, 16, 32, 66}, and
that results equal the no-carveout results. float32 GEMMs (TF32 or not) are
checked differently, see below.

What "uses at most SMs - k SMs" means. A CTA runs on one SM, so a kernel
whose grid has at most SMs - k CTAs can occupy at most SMs - k SMs: that is
the property checked, for every GEMM kernel launched inside the block. It is
exactly how persistent kernels (ours, cuBLAS's Hopper kernels, CUTLASS)
honour the carveout: they size their grid from the SM budget and loop over
tiles. A kernel that launches one CTA per output tile (no persistent loop)
has no such bound: the hardware scheduler spreads its waves over every SM,
whatever the target says, and neither cuBLAS nor this project can restrict
it short of green contexts. The tests accept such a kernel only when it was
already non-persistent without carveout (grid > SMs, same routes) and the
launch shows that the target reached the library (a different kernel or
grid); they report it by name otherwise. Torch's elementwise kernels (the
copy of `self` into the output before a GEMM with beta != 0) are not GEMMs
and are left out of the check.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import threading
import unittest
import unittest.mock
from typing import Callable, Iterator, Optional

import torch
import torch.nn.functional as F
from torch.testing._internal.common_cuda import PLATFORM_SUPPORTS_FP8
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    onlyCPU,
    onlyCUDA,
)
from torch.testing._internal.common_utils import parametrize, run_tests, TestCase

try:
    import overlap_ops
except ModuleNotFoundError as error:  # a patched PyTorch wheel: the carveout is built in
    if error.name != "overlap_ops":
        raise  # installed but broken: never mistake it for wheel mode
    overlap_ops = None
    carveout_mod = None
    _testing = None
else:  # with the extension, its test-only ops must load
    from overlap_ops import _testing
    from overlap_ops import carveout as carveout_mod

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launched_kernels import (  # noqa: E402
    launched_kernels,
    launched_kernels_on_streams,
)

HAS_EXTENSION = overlap_ops is not None
HAS_CUDA_KERNELS = not HAS_EXTENSION or overlap_ops.has_cuda_kernels()
needs_extension = unittest.skipIf(
    not HAS_EXTENSION, "tests overlap_ops' own API (extension mode only)")
CARVEOUTS = (8, 16, 32, 66)
GEMM_OPS = ("mm", "addmm", "linear", "bmm", "baddbmm")
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# Elementwise helpers (copies of `self`) are not GEMMs; see the module doc.
NON_GEMM_KERNELS = ("elementwise_kernel",)


def _tolerance(dtype: torch.dtype, tf32: bool = False) -> dict[str, float]:
    """atol/rtol for outputs of unit scale (inputs are scaled by 1/sqrt(K))."""
    if dtype == torch.bfloat16:
        return {"atol": 2e-2, "rtol": 2e-2}
    if dtype == torch.float16:
        return {"atol": 5e-3, "rtol": 5e-3}
    if tf32:
        return {"atol": 5e-3, "rtol": 5e-3}
    return {"atol": 1e-4, "rtol": 1e-4}


def _grouped_routed() -> bool:
    previous = overlap_ops.route_torch_grouped_mm(False)
    overlap_ops.route_torch_grouped_mm(previous)
    return previous


def _route_gemms(enabled: bool) -> tuple[bool, bool]:
    """Turns the extension's GEMM and grouped-mm routes on or off; returns
    the previous states. A patched wheel has nothing to route."""
    if not HAS_EXTENSION:
        return False, False
    return (carveout_mod.route_carveout_gemms(enabled),
            overlap_ops.route_torch_grouped_mm(enabled))


def _restore_routes(previous: tuple[bool, bool]) -> None:
    if HAS_EXTENSION:
        overlap_ops.route_torch_grouped_mm(previous[1])
        carveout_mod.route_carveout_gemms(previous[0])


@contextlib.contextmanager
def sm_carveout(k: int) -> Iterator[int]:
    """overlap_ops.sm_carveout(k) with the extension; on a patched wheel the
    context setting alone, restored on exit."""
    if HAS_EXTENSION:
        with overlap_ops.sm_carveout(k) as got:
            yield got
        return
    previous = torch._C._get_sm_carveout_experimental()
    torch._C._set_sm_carveout_experimental(k or None)
    try:
        yield k or 0
    finally:
        torch._C._set_sm_carveout_experimental(previous)


def _gemm_kernels(kernels: list[tuple[str, int]]) -> list[tuple[str, int]]:
    return [(name, ctas) for name, ctas in kernels
            if not any(tag in name for tag in NON_GEMM_KERNELS)]


def _randn(*shape: int, device: str, dtype: torch.dtype,
           transposed: bool = False, scale: float = 1.0) -> torch.Tensor:
    """Random data (never zeros); optionally a column-major (transposed) view."""
    if transposed:
        shape = (*shape[:-2], shape[-1], shape[-2])
    t = torch.randn(*shape, device=device, dtype=torch.float32) * scale
    t = t.to(dtype)
    return t.transpose(-2, -1) if transposed else t


def _make_gemm(op: str, device: str, dtype: torch.dtype, size: int = 2048,
               k: int = 1024, batch: int = 8, a_t: bool = False,
               b_t: bool = False) -> Callable[[], torch.Tensor]:
    """A closure that runs `op` on fresh random inputs of unit-scale output.

    mm/addmm/linear: (size, k) @ (k, size); bmm/baddbmm: batch of
    (size // 2, k) @ (k, size // 2). Enough output tiles (>= 512) that a
    persistent kernel would fill every SM without carveout.
    """
    s = 1.0 / math.sqrt(k)
    if op in ("bmm", "baddbmm"):
        m = size // 2
        a = _randn(batch, m, k, device=device, dtype=dtype, transposed=a_t,
                   scale=s)
        b = _randn(batch, k, m, device=device, dtype=dtype, transposed=b_t)
        c = _randn(batch, m, m, device=device, dtype=dtype)
        if op == "bmm":
            return lambda: torch.bmm(a, b)
        return lambda: torch.baddbmm(c, a, b, beta=0.5, alpha=2.0)
    a = _randn(size, k, device=device, dtype=dtype, transposed=a_t, scale=s)
    b = _randn(k, size, device=device, dtype=dtype, transposed=b_t)
    if op == "mm":
        return lambda: torch.mm(a, b)
    if op == "addmm":
        c = _randn(size, size, device=device, dtype=dtype)
        return lambda: torch.addmm(c, a, b, beta=0.5, alpha=2.0)
    if op == "linear":
        bias = _randn(size, device=device, dtype=dtype)
        weight = b.t()  # (out_features, in_features)
        return lambda: F.linear(a, weight, bias)
    raise AssertionError(op)


# Records the SM of every block. Blocks of 1024 threads (at most two per SM)
# that spin for a while, so the scheduler has to spread them over every SM
# it may use.
_SMID_PROBE = r"""
extern "C" __global__ void NAME(int* smids, int spin_cycles) {
  if (threadIdx.x == 0) {
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    smids[blockIdx.x] = static_cast<int>(smid);
    const long long start = clock64();
    while (clock64() - start < spin_cycles) {
    }
  }
}
"""
_PROBE_THREADS = 1024
_PROBE_SPIN_CYCLES = 200_000  # ~0.1 ms at 2 GHz
_PROBE_KERNELS: dict[str, object] = {}


def _smid_probe(name: str):
    """The %smid probe compiled with NVRTC (torch.cuda._compile_kernel)."""
    if name not in _PROBE_KERNELS:
        _PROBE_KERNELS[name] = torch.cuda._compile_kernel(
            _SMID_PROBE.replace("NAME", name), name)
    return _PROBE_KERNELS[name]


def _sms_seen(stream: torch.cuda.Stream, device: str,
              name: str = "record_smid") -> set[int]:
    """Distinct SMs that 4 * SMs probe blocks launched on `stream` ran on."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    blocks = 4 * sms
    smids = torch.full((blocks,), -1, device=device, dtype=torch.int32)
    stream.wait_stream(torch.cuda.current_stream(device))
    _smid_probe(name)(grid=(blocks, 1, 1), block=(_PROBE_THREADS, 1, 1),
                      args=[smids, _PROBE_SPIN_CYCLES], stream=stream)
    torch.cuda.synchronize(device)
    seen = set(smids.tolist())
    assert -1 not in seen, "a probe block did not run"
    return seen


# torch.cuda._sleep cycles for the two-caller-streams test: about 0.6 s at
# 1.75 GHz, far longer than one 512^3 float32 GEMM and the host work
# around it.
_TWO_CALLER_SPIN_CYCLES = 1 << 30


def _green_stream(device: str, k: int) -> tuple[torch.cuda.Stream, int]:
    """The cached green-context stream of (device, k) and its SM count."""
    index = torch.device(device).index or 0
    handle, part_sms = _testing.green_context_stream(index, k)
    return torch.cuda.ExternalStream(handle, device=device), part_sms


def _green_scenario(num_threads: int, calls_per_thread: int,
                    carveouts: list[int], num_devices: int = 1,
                    capturing: bool = False, total_sms: int = 132,
                    min_partition: int = 8, alignment: int = 8,
                    max_entries: int = 10_000
                    ) -> _testing.CarveoutScenarioCounts:
    """Drives CarveoutStreamCache with the counting double from threads
    (one caller stream each), restricting streams as the CUDA green-context
    backend does; see test_cu_mask.py. The default ``max_entries`` is more
    than any scenario here touches, so nothing is evicted."""
    return _testing.green_context_stream_scenario(
        num_threads, calls_per_thread, carveouts, num_devices, capturing,
        total_sms=total_sms, min_partition=min_partition,
        alignment=alignment, max_entries=max_entries)


class TestSMCarveout(TestCase):
    def setUp(self):
        super().setUp()
        self.addCleanup(torch._C._set_sm_carveout_experimental,
                        torch._C._get_sm_carveout_experimental())
        if HAS_EXTENSION:
            self.addCleanup(carveout_mod.route_carveout_gemms,
                            carveout_mod.carveout_gemms_routed())
            self.addCleanup(overlap_ops.route_torch_grouped_mm,
                            _grouped_routed())

    # ------------------------------------------------------------------
    # The policy (CPU)
    # ------------------------------------------------------------------

    @needs_extension
    @onlyCPU
    @parametrize("total_sms,k,expected", [
        (132, 0, 132), (132, 8, 124), (132, 66, 66), (132, 131, 1),
        (78, 32, 46), (1, 0, 1)])
    def test_sm_count_after_carveout(self, device, total_sms, k, expected):
        self.assertEqual(_testing.sm_count_after_carveout(total_sms, k),
                         expected)

    @needs_extension
    @onlyCPU
    def test_sm_count_after_carveout_errors(self, device):
        policy = _testing.sm_count_after_carveout
        with self.assertRaises(RuntimeError) as ctx:
            policy(132, 132)
        self.assertExpectedInline(str(ctx.exception).splitlines()[0], """\
sm_carveout: the carveout must satisfy 0 <= k < 132 (the device's SM count), got k = 132""")
        with self.assertRaises(RuntimeError) as ctx:
            policy(132, -1)
        self.assertExpectedInline(str(ctx.exception).splitlines()[0], """\
sm_carveout: the carveout must satisfy 0 <= k < 132 (the device's SM count), got k = -1""")
        with self.assertRaises(RuntimeError) as ctx:
            policy(0, 0)
        self.assertExpectedInline(str(ctx.exception).splitlines()[0], """\
sm_carveout: the device reports 0 SMs""")
        with self.assertRaises(RuntimeError) as ctx:
            torch.ops.overlap_ops._check_sm_carveout(-3)
        self.assertExpectedInline(str(ctx.exception).splitlines()[0], """\
sm_carveout: the carveout must satisfy k >= 0, got k = -3""")

    @needs_extension
    @onlyCPU
    def test_blas_sm_count_target_follows_context(self, device):
        target = _testing.blas_sm_count_target
        torch._C._set_sm_carveout_experimental(None)
        self.assertEqual(target(132), 0)  # 0: the libraries' "every SM"
        torch._C._set_sm_carveout_experimental(16)
        self.assertEqual(target(132), 116)
        torch._C._set_sm_carveout_experimental(132)
        with self.assertRaisesRegex(RuntimeError, r"0 <= k < 132"):
            target(132)

    @needs_extension
    @onlyCPU
    def test_check_sm_carveout(self, device):
        check = carveout_mod.check_sm_carveout
        self.assertEqual(check(None), 0)
        self.assertEqual(check(0, sm_count=132), 0)
        self.assertEqual(check(131, sm_count=132), 131)
        self.assertEqual(check(torch.tensor(8), sm_count=132), 8)
        with self.assertRaisesRegex(RuntimeError, r"0 <= k < 132.*k = 132"):
            check(132, sm_count=132)
        with self.assertRaisesRegex(RuntimeError, r"k = -1"):
            check(-1, sm_count=132)
        for bad in (True, 1.5, "8"):
            with self.assertRaisesRegex(TypeError, "k must be an int or None"):
                check(bad, sm_count=132)

    @needs_extension
    @onlyCPU
    @parametrize("total_sms,min_partition,alignment", [
        (132, 8, 8), (114, 8, 8), (144, 8, 8), (108, 4, 2), (80, 2, 2),
        (132, 8, 2), (132, 16, 8)])
    def test_green_context_sm_count_exhaustive(self, device, total_sms,
                                               min_partition, alignment):
        partition = _testing.green_context_sm_count
        self.assertEqual(partition(total_sms, 0, min_partition, alignment),
                         total_sms)
        for k in range(1, total_sms):
            budget = total_sms - k
            expected = budget // alignment * alignment
            if expected < min_partition:
                with self.assertRaisesRegex(
                        RuntimeError, rf"k = {k} leaves {budget} of "
                        rf"{total_sms} SMs"):
                    partition(total_sms, k, min_partition, alignment)
                continue
            got = partition(total_sms, k, min_partition, alignment)
            self.assertEqual(got, expected, f"k = {k}")
            # The bound, the granularity, and nothing wasted beyond it.
            self.assertLessEqual(got, budget)
            self.assertGreaterEqual(got, min_partition)
            self.assertEqual(got % alignment, 0)
            self.assertLess(budget - got, alignment)

    @needs_extension
    @onlyCPU
    def test_green_context_sm_count_errors(self, device):
        partition = _testing.green_context_sm_count
        with self.assertRaises(RuntimeError) as ctx:
            partition(132, 125, 8, 8)
        self.assertExpectedInline(str(ctx.exception).splitlines()[0], """\
sm_carveout: k = 125 leaves 7 of 132 SMs, fewer than the smallest green-context partition on this device (8 SMs, in multiples of 8), which confines GEMMs whose kernels are not persistent (float32, float64, complex); use k <= 124""")  # noqa: B950
        self.assertEqual(partition(132, 124, 8, 8), 8)
        with self.assertRaisesRegex(RuntimeError, r"0 <= k < 132.*k = 132"):
            partition(132, 132, 8, 8)
        with self.assertRaisesRegex(RuntimeError, r"k = -1"):
            partition(132, -1, 8, 8)
        with self.assertRaisesRegex(RuntimeError, "granularity must be "
                                    "positive"):
            partition(132, 8, 8, 0)
        # min_partition 5 with alignment 4: the smallest partition is 8.
        with self.assertRaisesRegex(RuntimeError, r"\(8 SMs, in multiples "
                                    r"of 4\).*use k <= 24"):
            partition(32, 25, 5, 4)

    @needs_extension
    @onlyCPU
    @parametrize("num_threads", [1, 4, 16])
    def test_green_stream_cache_creates_once(self, device, num_threads):
        # k = 1 and 2 plan the same 128-SM partition as k = 4.
        calls, carveouts, devices = 200, [0, 1, 2, 4, 16, 32, 66], 2
        counts = _green_scenario(num_threads, calls, carveouts, devices)
        keys = set()
        for t in range(num_threads):
            for c in range(calls):
                k = carveouts[(7 * t + c) % len(carveouts)]
                if k > 0:
                    part = _testing.green_context_sm_count(132, k, 8, 8)
                    keys.add(((t + c) % devices, part, t))
        forked = counts.forks - counts.pass_through
        self.assertEqual(counts.forks, num_threads * calls)
        self.assertEqual(counts.cache_entries, len(keys))
        self.assertEqual(counts.streams_created, len(keys))
        # A fork event and a join event (in the green context) per key:
        # (device, partition, caller stream).
        self.assertEqual(counts.events_created, 2 * len(keys))
        self.assertEqual((counts.records, counts.waits),
                         (2 * forked, 2 * forked))
        self.assertEqual(counts.wrong_stream, 0)
        self.assertEqual(counts.ordering_violations, 0)
        self.assertEqual(counts.streams_destroyed,
                         counts.streams_created)
        self.assertEqual(counts.events_destroyed, counts.events_created)

    @needs_extension
    @onlyCPU
    @parametrize("k_a, k_b", [(16, 16), (1, 2)])
    def test_two_caller_streams_do_not_wait_on_each_other(self, device, k_a,
                                                          k_b):
        # On a 132-SM part with 8-SM partitions, k = 1 and k = 2 leave the
        # same 128-SM partition: the cache may share it, never the stream.
        waits = _testing.two_caller_streams_scenario(
            k_a, k_b, total_sms=132, min_partition=8, alignment=8)
        self.assertEqual(waits, (0, 0),
                         msg="(B items A waited on, A items B waited on)")

    @needs_extension
    @onlyCPU
    def test_green_stream_cache_capture_passes_through(self, device):
        # Documented choice (CarveoutStreamCache.h): under capture the GEMM
        # stays on the capturing stream; a bad k still raises.
        counts = _green_scenario(4, 50, [8, 16], num_devices=2,
                                 capturing=True)
        self.assertEqual(counts.pass_through, counts.forks)
        self.assertEqual(
            (counts.streams_created, counts.events_created,
             counts.records, counts.waits), (0, 0, 0, 0))
        with self.assertRaisesRegex(RuntimeError, r"k = 125 leaves 7 of 132"):
            _green_scenario(1, 1, [125], capturing=True)

    @needs_extension
    @onlyCPU
    def test_green_stream_cache_too_few_sms_raises(self, device):
        with self.assertRaisesRegex(RuntimeError, r"k = 128 leaves 4 of 132"):
            _green_scenario(2, 3, [128])
        with self.assertRaisesRegex(RuntimeError, r"0 <= k < 132"):
            _green_scenario(1, 1, [132])

    @needs_extension
    @onlyCPU
    def test_probes_not_shipped(self, device):
        # `import overlap_ops` loads only what the package needs at run time;
        # the test-only ops are registered by overlap_ops._testing alone.
        script = (
            "import json, sys, torch, overlap_ops\n"
            "print(json.dumps([torch._C._dispatch_get_all_op_names(),\n"
            "                  [m for m in sys.modules if 'testing_C' in m]]))")
        out = subprocess.run([sys.executable, "-c", script], check=True,
                             capture_output=True, text=True).stdout
        names, testing_modules = json.loads(out)
        self.assertEqual(testing_modules, [])
        self.assertEqual(
            [n for n in names if n.startswith("overlap_ops_testing::")], [])
        shipped = {n.split("::")[1].lstrip("_") for n in names
                   if n.startswith("overlap_ops::")}
        self.assertIn("check_sm_carveout", shipped)
        # Loaded here through overlap_ops._testing.
        probes = {n.split("::")[1]
                  for n in torch._C._dispatch_get_all_op_names()
                  if n.startswith("overlap_ops_testing::")}
        self.assertIn("sm_count_after_carveout", probes)
        self.assertIn("green_context_stream_scenario", probes)
        self.assertEqual(shipped & probes, set())

    # ------------------------------------------------------------------
    # The context manager's bookkeeping (CPU: no GPU work is launched)
    # ------------------------------------------------------------------

    def _state(self) -> tuple[Optional[int], bool, bool]:
        return (torch._C._get_sm_carveout_experimental(),
                carveout_mod.carveout_gemms_routed(), _grouped_routed())

    @needs_extension
    @onlyCPU
    def test_context_sets_and_restores(self, device):
        # The aten GEMM routing is set by the first block and stays (its
        # kernels are PyTorch's with no carveout); the rest is restored.
        torch._C._set_sm_carveout_experimental(None)
        carveout_mod.route_carveout_gemms(False)
        self.assertEqual(self._state(), (None, False, False))
        with overlap_ops.sm_carveout(8) as k:
            self.assertEqual(k, 8)
            self.assertEqual(self._state(), (8, True, True))
        self.assertEqual(self._state(), (None, True, False))

    @needs_extension
    @onlyCPU
    def test_context_restores_after_exception(self, device):
        torch._C._set_sm_carveout_experimental(None)
        carveout_mod.route_carveout_gemms(False)
        with self.assertRaisesRegex(ValueError, "boom"):
            with overlap_ops.sm_carveout(16):
                self.assertEqual(self._state(), (16, True, True))
                raise ValueError("boom")
        self.assertEqual(self._state(), (None, True, False))

    @needs_extension
    @onlyCPU
    def test_context_nests(self, device):
        torch._C._set_sm_carveout_experimental(None)
        with overlap_ops.sm_carveout(8):
            with overlap_ops.sm_carveout(32):
                self.assertEqual(self._state(), (32, True, True))
                with overlap_ops.sm_carveout(0):
                    # No carveout inside; the outer routes stay.
                    self.assertEqual(self._state(), (None, True, True))
                self.assertEqual(self._state(), (32, True, True))
            self.assertEqual(self._state(), (8, True, True))
        self.assertEqual(self._state(), (None, True, False))

    @needs_extension
    @onlyCPU
    @parametrize("k", [None, 0])
    def test_no_carveout_routes_nothing(self, device, k):
        torch._C._set_sm_carveout_experimental(4)
        carveout_mod.route_carveout_gemms(False)
        with overlap_ops.sm_carveout(k) as got:
            self.assertEqual(got, 0)
            self.assertEqual(self._state(), (None, False, False))
        self.assertEqual(self._state(), (4, False, False))

    @needs_extension
    @onlyCPU
    def test_blocks_register_gemms_once(self, device):
        # Registering kernels while another thread dispatches is unsafe, so
        # only the first block registers; later ones, from any thread, only
        # read the state.
        carveout_mod.route_carveout_gemms(False)
        calls = []
        register = carveout_mod.route_carveout_gemms

        def counting(enabled: bool = True) -> bool:
            calls.append(enabled)
            return register(enabled)

        with unittest.mock.patch.object(carveout_mod, "route_carveout_gemms",
                                        counting):
            def enter_blocks():
                for k in (8, 16, 8, 4):
                    with overlap_ops.sm_carveout(k):
                        pass

            threads = [threading.Thread(target=enter_blocks)
                       for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        self.assertEqual(calls, [True])
        self.assertTrue(carveout_mod.carveout_gemms_routed())

    @needs_extension
    @onlyCPU
    def test_context_keeps_previous_routes(self, device):
        # Routing the user turned on before the block stays on after it.
        overlap_ops.route_torch_grouped_mm(True)
        carveout_mod.route_carveout_gemms(True)
        torch._C._set_sm_carveout_experimental(2)
        with overlap_ops.sm_carveout(8):
            pass
        self.assertEqual(self._state(), (2, True, True))

    @needs_extension
    @onlyCPU
    def test_invalid_k_changes_nothing(self, device):
        torch._C._set_sm_carveout_experimental(None)
        before = self._state()
        with self.assertRaisesRegex(RuntimeError, "k >= 0|0 <= k"):
            with overlap_ops.sm_carveout(-1):
                self.fail("the block must not run")
        with self.assertRaisesRegex(TypeError, "k must be an int or None"):
            with overlap_ops.sm_carveout(2.0):
                self.fail("the block must not run")
        self.assertEqual(self._state(), before)

    @needs_extension
    @onlyCPU
    @dtypes(torch.float32, torch.float64)
    def test_cpu_gemms_unchanged_inside(self, device, dtype):
        a = torch.randn(33, 17, dtype=dtype)
        b = torch.randn(17, 9, dtype=dtype)
        expected = a @ b
        with overlap_ops.sm_carveout(8):
            self.assertEqual(a @ b, expected)
            self.assertEqual(torch.addmm(expected, a, b), 2 * expected)

    # ------------------------------------------------------------------
    # CUDA: the launched grid and the results
    # ------------------------------------------------------------------

    def _skip_without_cuda_kernels(self):
        if not HAS_CUDA_KERNELS:
            self.skipTest("overlap_ops was built without its CUDA kernels")

    def _assert_grid_within_carveout(self, fn: Callable[[], object], k: int,
                                     device: str,
                                     only_gemms: bool = True) -> None:
        """Every GEMM kernel fn launches inside sm_carveout(k) leaves k SMs
        free; see the module docstring for non-persistent kernels."""
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        select = _gemm_kernels if only_gemms else (lambda ks: ks)
        # Baseline: the same kernels (routes on), no carveout.
        previous = _route_gemms(True)
        try:
            baseline = select(launched_kernels(fn))
        finally:
            _restore_routes(previous)
        with sm_carveout(k):
            launched = select(launched_kernels(fn))
        self.assertTrue(launched, "no GEMM kernel was traced")
        over = [(name, ctas) for name, ctas in launched if ctas > sms - k]
        if not over:
            return
        baseline_persistent = all(ctas <= sms for _, ctas in baseline)
        self.assertFalse(
            baseline_persistent,
            f"persistent kernel(s) ignored the carveout: {over} launched with "
            f"more than SMs - k = {sms - k} CTAs (no-carveout launch: "
            f"{baseline})")
        self.assertNotEqual(
            launched, baseline,
            f"non-persistent kernel(s) {over} and the SM count target did not "
            f"change cuBLAS's launch at all (no-carveout launch: {baseline})")

    def _skip_without_green_context(self, device: str) -> None:
        if not HAS_EXTENSION:
            self.skipTest("the green-context stream is reached through "
                          "overlap_ops._testing (extension mode only)")
        if not hasattr(torch.cuda, "_compile_kernel"):
            self.skipTest("the %smid probe needs torch.cuda._compile_kernel")
        reason = carveout_mod.green_context_unavailable_reason(device)
        if reason is not None:
            self.skipTest(f"CUDA green contexts unavailable: {reason}")

    def _assert_confined_to_green_context(self, fn: Callable[[], object],
                                          k: int, device: str) -> None:
        """float32 GEMMs inside sm_carveout(k) run on the green-context
        stream of (device, k), whose kernels see at most SMs - k SMs, and
        give the no-carveout results; see the module docstring."""
        self._skip_without_green_context(device)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        green, part_sms = _green_stream(device, k)
        self.assertGreater(part_sms, 0)
        self.assertLessEqual(part_sms, sms - k)

        def traced():
            fn()
            _sms_seen(green, device, "mark_green")
            _sms_seen(torch.cuda.current_stream(device), device,
                      "mark_current")

        with sm_carveout(k):
            kernels = launched_kernels_on_streams(traced)
        streams = {name: stream for name, _, stream in kernels
                   if name in ("mark_green", "mark_current")}
        self.assertEqual(set(streams), {"mark_green", "mark_current"},
                         f"markers missing from the trace: {kernels}")
        self.assertNotEqual(streams["mark_green"], streams["mark_current"])
        gemms = [(name, stream) for name, _, stream in kernels
                 if not name.startswith("mark_")
                 and not any(tag in name for tag in NON_GEMM_KERNELS)]
        self.assertTrue(gemms, f"no GEMM kernel was traced: {kernels}")
        off_green = [(n, s) for n, s in gemms if s != streams["mark_green"]]
        self.assertFalse(
            off_green, f"GEMM kernel(s) not on the green-context stream "
            f"{streams['mark_green']}: {off_green}")

        # The probe on the same cached stream, and on an ordinary one to
        # show that it can see more than SMs - k SMs.
        confined = _sms_seen(green, device)
        spread = _sms_seen(torch.cuda.current_stream(device), device)
        self.assertGreater(
            len(spread), sms - k, f"the probe saw only {len(spread)} SMs on "
            f"an ordinary stream; it cannot show a bound of {sms - k}")
        self.assertLessEqual(len(confined), part_sms,
                             f"green-context probe ran on {sorted(confined)}")

        expected = fn()
        with sm_carveout(k):
            got = fn()
        tf32 = torch.backends.cuda.matmul.allow_tf32
        self.assertEqual(got, expected, **_tolerance(torch.float32, tf32))

    @onlyCUDA
    @dtypes(*DTYPES)
    @parametrize("op", GEMM_OPS)
    @parametrize("carveout", CARVEOUTS)
    def test_carveout_limits_grid(self, device, dtype, op, carveout):
        self._skip_without_cuda_kernels()
        fn = _make_gemm(op, device, dtype)
        if dtype == torch.float32:
            # cuBLAS's fp32 kernels are not persistent: a green context
            # bounds them, not their grid.
            self._assert_confined_to_green_context(fn, carveout, device)
            return
        self._assert_grid_within_carveout(fn, carveout, device)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float32, torch.float64)
    @parametrize("carveout", (0, 16))
    def test_gemms_match_float64(self, device, dtype, carveout):
        # Against float64, not against the same op: once a carveout block
        # has run, PyTorch's GEMMs dispatch through the carveout kernels even
        # at k = 0, and a wrong result there is wrong on both sides.
        self._skip_without_cuda_kernels()
        with sm_carveout(8):
            pass
        s = 1 / math.sqrt(256)
        a = _randn(4, 96, 256, device=device, dtype=dtype, scale=s)
        b = _randn(4, 256, 80, device=device, dtype=dtype)
        c = _randn(4, 96, 80, device=device, dtype=dtype)
        a64, b64, c64 = a.double(), b.double(), c.double()
        cases = {
            "mm": (lambda: torch.mm(a[0], b[0]), a64[0] @ b64[0]),
            "addmm": (lambda: torch.addmm(c[0], a[0], b[0], beta=0.5,
                                          alpha=2.0),
                      0.5 * c64[0] + 2.0 * (a64[0] @ b64[0])),
            "bmm": (lambda: torch.bmm(a, b), a64 @ b64),
            "baddbmm": (lambda: torch.baddbmm(c, a, b, beta=0.5, alpha=2.0),
                        0.5 * c64 + 2.0 * (a64 @ b64)),
            "baddbmm_": (lambda: c.clone().baddbmm_(a, b, beta=0.5,
                                                    alpha=2.0),
                         0.5 * c64 + 2.0 * (a64 @ b64)),
        }
        tf32 = torch.backends.cuda.matmul.allow_tf32
        for name, (fn, want) in cases.items():
            with sm_carveout(carveout):
                got = fn()
            self.assertEqual(got.double(), want, msg=name,
                             **_tolerance(dtype, tf32))

    @onlyCUDA
    @parametrize("tf32", [False, True])
    @parametrize("carveout", CARVEOUTS)
    def test_carveout_limits_grid_fp32_mm(self, device, tf32, carveout):
        self._skip_without_cuda_kernels()
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            self._assert_confined_to_green_context(
                _make_gemm("mm", device, torch.float32), carveout, device)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous

    @onlyCUDA
    def test_carveout_fp32_too_few_sms_raises(self, device):
        # k = SMs - 1 leaves one SM, below every green-context partition:
        # float32 raises naming k instead of silently using every SM, while
        # bf16 (persistent kernels, SM count target) still runs.
        self._skip_without_cuda_kernels()
        self._skip_without_green_context(device)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        k = sms - 1
        a = _randn(256, 128, device=device, dtype=torch.float32)
        b = _randn(128, 64, device=device, dtype=torch.float32)
        with sm_carveout(k):
            with self.assertRaisesRegex(
                    RuntimeError, rf"k = {k} leaves 1 of {sms} SMs"):
                torch.mm(a, b)
            half = torch.mm(a.bfloat16(), b.bfloat16())
        self.assertEqual(half, torch.mm(a.bfloat16(), b.bfloat16()),
                         **_tolerance(torch.bfloat16))

    @onlyCUDA
    @parametrize("k_a, k_b", [(16, 16), (16, 17)])
    def test_two_caller_streams_do_not_wait_on_each_other_cuda(
            self, device, k_a, k_b):
        # The case on the GPU: stream B queues a long spin (a
        # stand-in for a collective) and then a float32 GEMM, which runs on
        # a green-context stream; stream A's next float32 GEMM must finish
        # while B still spins. A cache shared by caller streams makes A's
        # GEMM wait for B's spin and GEMM. On 132 SMs k = 16 and 17 plan the
        # same 112-SM partition.
        self._skip_without_cuda_kernels()
        self._skip_without_green_context(device)
        a = _randn(512, 512, device=device, dtype=torch.float32)
        stream_a = torch.cuda.Stream(device)
        stream_b = torch.cuda.Stream(device)
        stream_a.wait_stream(torch.cuda.current_stream(device))
        stream_b.wait_stream(torch.cuda.current_stream(device))
        a_done = torch.cuda.Event()
        with torch.cuda.stream(stream_a), sm_carveout(k_a):
            expected = torch.mm(a, a)  # A's restricted stream exists now
        torch.cuda.synchronize(device)
        with torch.cuda.stream(stream_b), sm_carveout(k_b):
            torch.cuda._sleep(_TWO_CALLER_SPIN_CYCLES)
            torch.mm(a, a)
        with torch.cuda.stream(stream_a), sm_carveout(k_a):
            got = torch.mm(a, a)
            a_done.record(stream_a)
        a_done.synchronize()
        b_still_spinning = not stream_b.query()
        torch.cuda.synchronize(device)
        self.assertTrue(b_still_spinning,
                        msg="stream A's GEMM waited for stream B's work")
        self.assertEqual(got, expected)

    @onlyCUDA
    def test_carveout_fp32_graph_capture_passes_through(self, device):
        # Documented choice (CarveoutStreamCache.h): under capture the GEMM
        # stays on the capturing stream with the SM count target only; the
        # graph still replays correctly after its input changes.
        self._skip_without_cuda_kernels()
        a = _randn(512, 256, device=device, dtype=torch.float32, scale=0.1)
        b = _randn(256, 384, device=device, dtype=torch.float32)
        graph = torch.cuda.CUDAGraph()
        with sm_carveout(16):
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                torch.mm(a, b)  # warm-up outside capture, as torch advises
            torch.cuda.current_stream(device).wait_stream(side)
            with torch.cuda.graph(graph):
                out = torch.mm(a, b)
        a.copy_(_randn(512, 256, device=device, dtype=torch.float32,
                       scale=0.1))
        graph.replay()
        torch.cuda.synchronize(device)
        self.assertEqual(out, a @ b, **_tolerance(torch.float32,
                         torch.backends.cuda.matmul.allow_tf32))

    @onlyCUDA
    @unittest.skipIf(not PLATFORM_SUPPORTS_FP8, "needs fp8 (SM89+)")
    @parametrize("carveout", CARVEOUTS)
    def test_carveout_limits_grid_scaled_mm(self, device, carveout):
        # Stock cuBLASLt path: it reads the context setting sm_carveout sets.
        self._skip_without_cuda_kernels()
        a = torch.randn(2048, 1024, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(2048, 1024, device=device).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)

        def fn():
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16)

        self._assert_grid_within_carveout(fn, carveout, device)
        expected = fn()
        with sm_carveout(carveout):
            self.assertEqual(fn(), expected, atol=2e-2 * 32, rtol=2e-2)

    @onlyCUDA
    @dtypes(*DTYPES)
    @parametrize("carveout", CARVEOUTS)
    def test_carveout_limits_grid_grouped_mm(self, device, dtype, carveout):
        # torch._grouped_mm is routed to our kernels inside the block; all
        # their kernels (argument fill, zero tail, GEMM) respect the limit.
        self._skip_without_cuda_kernels()
        groups, k = 16, 512
        a = _randn(8192, k, device=device, dtype=dtype, scale=k ** -0.5)
        b = _randn(groups, k, 1024, device=device, dtype=dtype)
        offs = torch.arange(1, groups + 1, device=device,
                            dtype=torch.int32) * (8192 // groups)

        def fn():
            return torch._grouped_mm(a, b, offs)

        sms = torch.cuda.get_device_properties(device).multi_processor_count
        with sm_carveout(carveout):
            launched = launched_kernels(fn)
            out = fn()
        self.assertTrue(launched, "no kernel was traced")
        for name, ctas in launched:
            self.assertLessEqual(ctas, sms - carveout, name)
        previous = _route_gemms(True)
        try:
            expected = fn()
        finally:
            _restore_routes(previous)
        self.assertEqual(out, expected, **_tolerance(dtype))

    @onlyCUDA
    @dtypes(*DTYPES)
    @parametrize("op", GEMM_OPS)
    @parametrize("layout", ["nn", "tn", "nt", "tt"])
    def test_carveout_results_match(self, device, dtype, op, layout):
        self._skip_without_cuda_kernels()
        fn = _make_gemm(op, device, dtype, size=512, k=384, batch=3,
                        a_t=layout[0] == "t", b_t=layout[1] == "t")
        expected = fn()
        with sm_carveout(16):
            if HAS_EXTENSION:
                self.assertTrue(carveout_mod.carveout_gemms_routed())
            got = fn()
        self.assertEqual(got, expected, **_tolerance(dtype))

    @onlyCUDA
    @dtypes(*DTYPES)
    def test_carveout_odd_layouts_match_reference(self, device, dtype):
        # Sliced, expanded and zero-size operands; out= and in-place forms.
        self._skip_without_cuda_kernels()
        tol = _tolerance(dtype)
        big = _randn(70, 130, device=device, dtype=dtype, scale=0.1)
        a = big[2:42:2, 0:128:2]       # no unit stride: copied for cuBLAS
        b = big[1:65, 7:40]            # row-major with ld 130
        row = _randn(33, device=device, dtype=dtype)
        c = _randn(20, 33, device=device, dtype=dtype)
        batch = _randn(1, 64, 33, device=device, dtype=dtype).expand(4, 64, 33)
        a3 = _randn(4, 20, 64, device=device, dtype=dtype, scale=0.1)
        ref = (a.double() @ b.double())
        with sm_carveout(8):
            self.assertEqual(torch.mm(a, b), ref.to(dtype), **tol)
            self.assertEqual(torch.addmm(row, a, b),
                             (ref + row.double()).to(dtype), **tol)
            self.assertEqual(torch.addmm(c, a, b, beta=0),
                             ref.to(dtype), **tol)
            out = torch.empty(33, 20, device=device, dtype=dtype).t()
            torch.mm(a, b, out=out)  # column-major out: written via a copy
            self.assertEqual(out, ref.to(dtype), **tol)
            c2 = c.clone()
            c2.addmm_(a, b, alpha=0.5)
            self.assertEqual(c2, (c.double() + 0.5 * ref).to(dtype), **tol)
            self.assertEqual(torch.bmm(a3, batch),
                             (a3.double() @ batch.double()).to(dtype), **tol)
            empty_k = torch.mm(a[:, :0], b[:0])
            self.assertEqual(empty_k, torch.zeros_like(empty_k))
            self.assertEqual(torch.addmm(c, a[:, :0], b[:0], beta=2),
                             2 * c, **tol)
            self.assertEqual(torch.mm(a[:0], b).shape, (0, 33))

    @onlyCUDA
    @dtypes(torch.float64, torch.complex64)
    def test_carveout_other_dtypes_use_stock_kernel(self, device, dtype):
        # Dtypes our cuBLAS path does not take run PyTorch's kernel under the
        # same cuBLAS SM-count guard.
        self._skip_without_cuda_kernels()
        a = torch.randn(65, 33, device=device, dtype=dtype)
        b = torch.randn(33, 17, device=device, dtype=dtype)
        expected = a @ b
        with sm_carveout(8):
            self.assertEqual(a @ b, expected)
            self.assertEqual(torch.addmm(expected, a, b), 2 * expected)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float32)
    def test_carveout_backward(self, device, dtype):
        # Autograd keeps PyTorch's formulas; their mm calls are routed too.
        self._skip_without_cuda_kernels()
        x = _randn(256, 128, device=device, dtype=dtype, scale=0.1)
        w = _randn(64, 128, device=device, dtype=dtype, scale=0.1)
        bias = _randn(64, device=device, dtype=dtype)
        grads = []
        for k in (0, 32):
            xs, ws, bs = (t.detach().requires_grad_() for t in (x, w, bias))
            with sm_carveout(k):
                F.linear(xs, ws, bs).square().sum().backward()
            grads.append((xs.grad, ws.grad, bs.grad))
        for got, expected in zip(grads[1], grads[0]):
            self.assertEqual(got, expected, **_tolerance(dtype))

    @needs_extension
    @onlyCUDA
    def test_carveout_out_of_range_raises(self, device):
        self._skip_without_cuda_kernels()
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        before = torch._C._get_sm_carveout_experimental()
        with self.assertRaisesRegex(RuntimeError,
                                    rf"0 <= k < {sms}.*k = {sms}"):
            with overlap_ops.sm_carveout(sms):
                self.fail("the block must not run")
        self.assertEqual(torch._C._get_sm_carveout_experimental(), before)
        self.assertFalse(carveout_mod.carveout_gemms_routed())


instantiate_device_type_tests(TestSMCarveout, globals(), only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()
