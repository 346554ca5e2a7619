# Owner(s): ["module: cuda"]
"""The overlap_ops extension's SM-carveout API: ``overlap_ops.sm_carveout(k)``,
its bookkeeping, and the policy and restricted-stream cache reached through
the test-only module ``overlap_ops._testing``. Not part of the patch series:
test_sm_carveout.py (the series' test) checks the GEMMs under
``torch._C._set_sm_carveout_experimental(k)``, and the series' C++ tests
(aten/src/ATen/test/cuda_sm_carveout_test.cpp,
cuda_carveout_stream_cache_test.cpp) the policy and the cache.

CPU tests cover the policy, the cache driven by the C++ tests' counting
double (aten/src/ATen/test/carveout_stream_fakes.h), and the
context manager: the context setting and the dispatcher routes it changes,
restored on exit and after an exception. CUDA tests check the context
manager end to end and, through the cached green-context stream, that
float32 GEMMs' partition confines a %smid probe to SMs - k SMs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import unittest
import unittest.mock
from typing import Optional

import torch
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    onlyCPU,
    onlyCUDA,
)
from torch.testing._internal.common_utils import parametrize, run_tests, TestCase

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402
from launched_kernels import launched_kernels_on_streams  # noqa: E402
from test_sm_carveout import (  # noqa: E402
    _make_gemm,
    assert_grid_within_carveout,
    _sms_seen,
    _tolerance,
    CARVEOUTS,
    NON_GEMM_KERNELS,
)

if HAS_EXTENSION:  # with the extension, its test-only ops must load
    from overlap_ops import _testing
    from overlap_ops import carveout as carveout_mod
else:
    _testing = None
    carveout_mod = None


def _grouped_routed() -> bool:
    previous = overlap_ops.route_torch_grouped_mm(False)
    overlap_ops.route_torch_grouped_mm(previous)
    return previous


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
    backend does; see test_extension_cu_mask.py. The default ``max_entries`` is more
    than any scenario here touches, so nothing is evicted."""
    return _testing.green_context_stream_scenario(
        num_threads, calls_per_thread, carveouts, num_devices, capturing,
        total_sms=total_sms, min_partition=min_partition,
        alignment=alignment, max_entries=max_entries)


@unittest.skipIf(not HAS_EXTENSION, "tests the overlap_ops extension's API")
class TestExtensionSMCarveout(TestCase):
    def setUp(self):
        super().setUp()
        self.addCleanup(torch._C._set_sm_carveout_experimental,
                        torch._C._get_sm_carveout_experimental())
        self.addCleanup(carveout_mod.route_carveout_gemms,
                        carveout_mod.carveout_gemms_routed())
        # The routing test/conftest.py turns on for every test is restored
        # after each test; the context manager's tests start without it.
        self.addCleanup(overlap_ops.route_torch_grouped_mm,
                        overlap_ops.route_torch_grouped_mm(False))

    # ------------------------------------------------------------------
    # The policy (CPU)
    # ------------------------------------------------------------------

    @onlyCPU
    @parametrize("total_sms,k,expected", [
        (132, 0, 132), (132, 8, 124), (132, 66, 66), (132, 131, 1),
        (78, 32, 46), (1, 0, 1)])
    def test_sm_count_after_carveout(self, device, total_sms, k, expected):
        self.assertEqual(_testing.sm_count_after_carveout(total_sms, k),
                         expected)

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

    @onlyCPU
    def test_green_stream_cache_too_few_sms_raises(self, device):
        with self.assertRaisesRegex(RuntimeError, r"k = 128 leaves 4 of 132"):
            _green_scenario(2, 3, [128])
        with self.assertRaisesRegex(RuntimeError, r"0 <= k < 132"):
            _green_scenario(1, 1, [132])

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

    @onlyCPU
    def test_context_restores_after_exception(self, device):
        torch._C._set_sm_carveout_experimental(None)
        carveout_mod.route_carveout_gemms(False)
        with self.assertRaisesRegex(ValueError, "boom"):
            with overlap_ops.sm_carveout(16):
                self.assertEqual(self._state(), (16, True, True))
                raise ValueError("boom")
        self.assertEqual(self._state(), (None, True, False))

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

    @onlyCPU
    @parametrize("k", [None, 0])
    def test_no_carveout_routes_nothing(self, device, k):
        torch._C._set_sm_carveout_experimental(4)
        carveout_mod.route_carveout_gemms(False)
        with overlap_ops.sm_carveout(k) as got:
            self.assertEqual(got, 0)
            self.assertEqual(self._state(), (None, False, False))
        self.assertEqual(self._state(), (4, False, False))

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

    @onlyCPU
    def test_context_keeps_previous_routes(self, device):
        # Routing the user turned on before the block stays on after it.
        overlap_ops.route_torch_grouped_mm(True)
        carveout_mod.route_carveout_gemms(True)
        torch._C._set_sm_carveout_experimental(2)
        with overlap_ops.sm_carveout(8):
            pass
        self.assertEqual(self._state(), (2, True, True))

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

    @onlyCPU
    def test_failed_entry_changes_nothing(self, device):
        torch._C._set_sm_carveout_experimental(2)
        before = self._state()

        def fail():
            raise RuntimeError("registration failed")

        with unittest.mock.patch.object(carveout_mod,
                                        "_route_carveout_gemms_once", fail):
            with self.assertRaisesRegex(RuntimeError, "registration failed"):
                with overlap_ops.sm_carveout(8):
                    self.fail("the block must not run")
        self.assertEqual(self._state(), before)

    @onlyCPU
    def test_one_block_enters_once(self, device):
        torch._C._set_sm_carveout_experimental(None)
        block = overlap_ops.sm_carveout(8)
        with block:
            with self.assertRaisesRegex(RuntimeError, "already entered"):
                with block:
                    pass
            self.assertEqual(torch._C._get_sm_carveout_experimental(), 8)
        self.assertIsNone(torch._C._get_sm_carveout_experimental())
        with block as k:  # entered again after leaving: fine
            self.assertEqual(k, 8)

    @onlyCPU
    @dtypes(torch.float32, torch.float64)
    def test_cpu_gemms_unchanged_inside(self, device, dtype):
        a = torch.randn(33, 17, dtype=dtype)
        b = torch.randn(17, 9, dtype=dtype)
        expected = a @ b
        with overlap_ops.sm_carveout(8):
            self.assertEqual(a @ b, expected)
            self.assertEqual(torch.addmm(expected, a, b), 2 * expected)

    def _carveout_and_grouped_route(self) -> tuple[Optional[int], bool]:
        return torch._C._get_sm_carveout_experimental(), _grouped_routed()

    @onlyCPU
    def test_compile_and_the_context_manager(self, device):
        # Documented in docs/DESIGN.md. Entering and leaving a block change
        # process state, so Dynamo must never trace them: a trace would run
        # them at compile time, and a failed one would leave k set. A block
        # inside compiled code breaks the graph and runs eagerly, with k set
        # inside and restored after, from the first call on; fullgraph=True
        # refuses it. Compiled code called inside a block sees k.
        a = torch.randn(16, 8)
        b = torch.randn(8, 4)
        seen = []

        @torch.compiler.disable
        def probe():
            seen.append((torch._C._get_sm_carveout_experimental(),
                         _grouped_routed()))

        def block_inside(x, y):
            with overlap_ops.sm_carveout(8):
                z = x @ y
                probe()
            return z.relu()

        def plain(x, y):
            probe()
            return (x @ y).relu()

        overlap_ops.route_torch_grouped_mm(False)
        torch._C._set_sm_carveout_experimental(None)
        expected = (a @ b).relu()
        torch._dynamo.reset()
        try:
            with self.assertRaises(Exception):
                torch.compile(block_inside, fullgraph=True)(a, b)
            self.assertEqual(self._carveout_and_grouped_route(), (None, False))
            torch._dynamo.reset()
            compiled = torch.compile(block_inside)
            for _ in range(2):
                self.assertEqual(compiled(a, b), expected)
                self.assertEqual(self._carveout_and_grouped_route(), (None, False))
            self.assertEqual(seen, [(8, True), (8, True)])
            seen.clear()
            torch._dynamo.reset()
            compiled = torch.compile(plain)
            with overlap_ops.sm_carveout(8):
                self.assertEqual(compiled(a, b), expected)
            self.assertEqual(seen, [(8, True)])
            self.assertEqual(self._carveout_and_grouped_route(), (None, False))
        finally:
            torch._dynamo.reset()

    # ------------------------------------------------------------------
    # CUDA: the context manager and the green-context partition
    # ------------------------------------------------------------------

    def _skip_without_cuda_kernels(self):
        if not overlap_ops.has_cuda_kernels():
            self.skipTest("overlap_ops was built without its CUDA kernels")

    @onlyCUDA
    @parametrize("op", ["mm", "bmm", "linear"])
    @parametrize("carveout", [16, 66])
    def test_context_manager_limits_grid(self, device, op, carveout):
        # From nothing routed: the block routes the aten GEMMs, and their
        # bf16 kernels leave k SMs free, as under the context setting
        # (test_sm_carveout.py).
        self._skip_without_cuda_kernels()
        carveout_mod.route_carveout_gemms(False)
        fn = _make_gemm(op, device, torch.bfloat16)
        expected = fn()
        assert_grid_within_carveout(self, fn, carveout, device,
                                    within=overlap_ops.sm_carveout)
        with overlap_ops.sm_carveout(carveout):
            got = fn()
        self.assertEqual(got, expected, **_tolerance(torch.bfloat16))

    def _skip_without_green_context(self, device: str) -> None:
        if not hasattr(torch.cuda, "_compile_kernel"):
            self.skipTest("the %smid probe needs torch.cuda._compile_kernel")
        reason = carveout_mod.green_context_unavailable_reason(device)
        if reason is not None:
            self.skipTest(f"CUDA green contexts unavailable: {reason}")

    @onlyCUDA
    @parametrize("tf32", [False, True])
    @parametrize("carveout", CARVEOUTS)
    def test_green_context_confines_fp32_mm(self, device, tf32, carveout):
        """float32 GEMMs inside sm_carveout(k) run on the green-context
        stream of (device, k), whose kernels see at most SMs - k SMs."""
        self._skip_without_cuda_kernels()
        self._skip_without_green_context(device)
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        self.addCleanup(setattr, torch.backends.cuda.matmul, "allow_tf32",
                        previous)
        k = carveout
        fn = _make_gemm("mm", device, torch.float32)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        green, part_sms = _green_stream(device, k)
        self.assertGreater(part_sms, 0)
        self.assertLessEqual(part_sms, sms - k)

        def traced():
            fn()
            _sms_seen(green, device, "mark_green")
            _sms_seen(torch.cuda.current_stream(device), device,
                      "mark_current")

        with overlap_ops.sm_carveout(k):
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

    @onlyCUDA
    def test_carveout_out_of_range_raises(self, device):
        self._skip_without_cuda_kernels()
        carveout_mod.route_carveout_gemms(False)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        before = torch._C._get_sm_carveout_experimental()
        with self.assertRaisesRegex(RuntimeError,
                                    rf"0 <= k < {sms}.*k = {sms}"):
            with overlap_ops.sm_carveout(sms):
                self.fail("the block must not run")
        self.assertEqual(torch._C._get_sm_carveout_experimental(), before)
        self.assertFalse(carveout_mod.carveout_gemms_routed())


instantiate_device_type_tests(TestExtensionSMCarveout, globals(),
                              only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()
