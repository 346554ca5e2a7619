# Owner(s): ["module: cuda"]
"""SM carveout: every CUDA GEMM honours torch._C._set_sm_carveout_experimental(k).

For mm, addmm, linear, bmm, baddbmm, _scaled_mm (fp8) and _grouped_mm in
bf16/fp16, the launched grid (args.grid in the profiler's chrome trace)
leaves k SMs free for k in {8, 16, 32, 66}, and results equal the
no-carveout results. float32 GEMMs (TF32 or not) are checked differently,
see below. On the CPU, GEMMs ignore the setting.

What "uses at most SMs - k SMs" means. A CTA runs on one SM, so a kernel
whose grid has at most SMs - k CTAs can occupy at most SMs - k SMs: that is
the property checked, for every GEMM kernel launched under the carveout. It
is exactly how persistent kernels (cuBLAS's Hopper kernels, CUTLASS, the
grouped-mm kernels) honour the carveout: they size their grid from the SM
budget and loop over tiles. A kernel that launches one CTA per output tile
(no persistent loop) has no such bound: the hardware scheduler spreads its
waves over every SM, whatever the target says. The tests accept such a
kernel only when it was already non-persistent without carveout (grid >
SMs) and the launch shows that the target reached the library (a different
kernel or grid); they report it by name otherwise. cuBLAS's float32,
float64 and complex kernels are of that kind, so float32 GEMMs run on a
stream of a CUDA green context of SMs - k SMs: the tests check that their
kernels leave the caller's stream. Torch's elementwise kernels (the copy of
`self` into the output before a GEMM with beta != 0) are not GEMMs and are
left out of the check.

The policy (the SM budget, the green-context partition for every k) and the
restricted-stream cache have C++ tests (aten/src/ATen/test/
cuda_sm_carveout_test.cpp, cuda_carveout_stream_cache_test.cpp).
"""

from __future__ import annotations

import math
import os
import sys
import unittest
from typing import Callable, ContextManager

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launched_kernels import (  # noqa: E402
    carveout_set,
    launched_kernels,
    launched_kernels_on_streams,
)

CARVEOUTS = (8, 16, 32, 66)
GEMM_OPS = ("mm", "addmm", "linear", "bmm", "baddbmm")
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# Elementwise helpers (copies of `self`) are not GEMMs; see the module doc.
NON_GEMM_KERNELS = ("elementwise_kernel",)
# CUDA green contexts (cuDevSmResourceSplitByCount) need CUDA 12.8.
GREEN_CONTEXT_CUDA = (12, 8)


def _tolerance(dtype: torch.dtype, tf32: bool = False) -> dict[str, float]:
    """atol/rtol for outputs of unit scale (inputs are scaled by 1/sqrt(K))."""
    if dtype == torch.bfloat16:
        return {"atol": 2e-2, "rtol": 2e-2}
    if dtype == torch.float16:
        return {"atol": 5e-3, "rtol": 5e-3}
    if tf32:
        return {"atol": 5e-3, "rtol": 5e-3}
    return {"atol": 1e-4, "rtol": 1e-4}


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


def assert_grid_within_carveout(
        test: TestCase, fn: Callable[[], object], k: int, device: str,
        within: Callable[[int], ContextManager] = carveout_set) -> None:
    """Every GEMM kernel fn launches inside within(k) (default: the SM
    carveout set to k) leaves k SMs free; see the module docstring for
    non-persistent kernels."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    baseline = _gemm_kernels(launched_kernels(fn))  # no carveout
    with within(k):
        launched = _gemm_kernels(launched_kernels(fn))
    test.assertTrue(launched, "no GEMM kernel was traced")
    over = [(name, ctas) for name, ctas in launched if ctas > sms - k]
    if not over:
        return
    baseline_persistent = all(ctas <= sms for _, ctas in baseline)
    test.assertFalse(
        baseline_persistent,
        f"persistent kernel(s) ignored the carveout: {over} launched with "
        f"more than SMs - k = {sms - k} CTAs (no-carveout launch: "
        f"{baseline})")
    test.assertNotEqual(
        launched, baseline,
        f"non-persistent kernel(s) {over} and the SM count target did not "
        f"change cuBLAS's launch at all (no-carveout launch: {baseline})")


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


class TestSMCarveout(TestCase):
    def setUp(self):
        super().setUp()
        self.addCleanup(torch._C._set_sm_carveout_experimental,
                        torch._C._get_sm_carveout_experimental())

    @onlyCPU
    @dtypes(torch.float32, torch.float64)
    def test_cpu_gemms_unchanged_under_carveout(self, device, dtype):
        a = torch.randn(33, 17, dtype=dtype)
        b = torch.randn(17, 9, dtype=dtype)
        expected = a @ b
        with carveout_set(8):
            self.assertEqual(a @ b, expected)
            self.assertEqual(torch.addmm(expected, a, b), 2 * expected)

    # ------------------------------------------------------------------
    # CUDA: the launched grid and the results
    # ------------------------------------------------------------------

    def _assert_grid_within_carveout(self, fn: Callable[[], object], k: int,
                                     device: str) -> None:
        assert_grid_within_carveout(self, fn, k, device)

    def _skip_without_green_contexts(self) -> None:
        if not hasattr(torch.cuda, "_compile_kernel"):
            self.skipTest("the stream marker needs torch.cuda._compile_kernel")
        version = tuple(int(v) for v in torch.version.cuda.split(".")[:2])
        if version < GREEN_CONTEXT_CUDA:
            self.skipTest(f"CUDA green contexts need CUDA "
                          f"{GREEN_CONTEXT_CUDA}, torch has {version}")

    def _assert_off_the_caller_stream(self, fn: Callable[[], object],
                                      k: int, device: str) -> None:
        """float32 GEMMs under a carveout of k run on one stream that is not
        the caller's (the green-context stream of SMs - k SMs), and give the
        no-carveout results; see the module docstring."""
        self._skip_without_green_contexts()

        def traced():
            fn()
            _sms_seen(torch.cuda.current_stream(device), device,
                      "mark_current")

        with carveout_set(k):
            kernels = launched_kernels_on_streams(traced)
        current = {stream for name, _, stream in kernels
                   if name == "mark_current"}
        self.assertEqual(len(current), 1,
                         f"the marker is missing from the trace: {kernels}")
        gemms = [(name, stream) for name, _, stream in kernels
                 if not name.startswith("mark_")
                 and not any(tag in name for tag in NON_GEMM_KERNELS)]
        self.assertTrue(gemms, f"no GEMM kernel was traced: {kernels}")
        on_caller = [(n, s) for n, s in gemms if s in current]
        self.assertFalse(
            on_caller, f"GEMM kernel(s) on the caller's stream, where every "
            f"SM can run them: {on_caller}")
        self.assertEqual(len({s for _, s in gemms}), 1,
                         f"GEMM kernels on several streams: {gemms}")

        expected = fn()
        with carveout_set(k):
            got = fn()
        tf32 = torch.backends.cuda.matmul.allow_tf32
        self.assertEqual(got, expected, **_tolerance(torch.float32, tf32))

    @onlyCUDA
    @dtypes(*DTYPES)
    @parametrize("op", GEMM_OPS)
    @parametrize("carveout", CARVEOUTS)
    def test_carveout_limits_grid(self, device, dtype, op, carveout):
        fn = _make_gemm(op, device, dtype)
        if dtype == torch.float32:
            # cuBLAS's fp32 kernels are not persistent: a green context
            # bounds them, not their grid.
            self._assert_off_the_caller_stream(fn, carveout, device)
            return
        self._assert_grid_within_carveout(fn, carveout, device)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float32, torch.float64)
    @parametrize("carveout", (0, 16))
    def test_gemms_match_float64(self, device, dtype, carveout):
        # Against float64, not against the same op: where the carveout
        # kernels are registered, GEMMs dispatch through them even at k = 0,
        # and a wrong result there would be wrong on both sides.
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
            with carveout_set(carveout):
                got = fn()
            self.assertEqual(got.double(), want, msg=name,
                             **_tolerance(dtype, tf32))

    @onlyCUDA
    @parametrize("tf32", [False, True])
    @parametrize("carveout", CARVEOUTS)
    def test_carveout_limits_grid_fp32_mm(self, device, tf32, carveout):
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            self._assert_off_the_caller_stream(
                _make_gemm("mm", device, torch.float32), carveout, device)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous

    @onlyCUDA
    def test_carveout_fp32_too_few_sms_raises(self, device):
        # k = SMs - 1 leaves one SM, below every green-context partition:
        # float32 raises naming k instead of silently using every SM, while
        # bf16 (persistent kernels, SM count target) still runs.
        self._skip_without_green_contexts()
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        k = sms - 1
        a = _randn(256, 128, device=device, dtype=torch.float32)
        b = _randn(128, 64, device=device, dtype=torch.float32)
        with carveout_set(k):
            with self.assertRaisesRegex(
                    RuntimeError, rf"k = {k} leaves 1 of {sms} SMs"):
                torch.mm(a, b)
            half = torch.mm(a.bfloat16(), b.bfloat16())
        self.assertEqual(half, torch.mm(a.bfloat16(), b.bfloat16()),
                         **_tolerance(torch.bfloat16))

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float32)
    def test_carveout_out_of_range_raises(self, device, dtype):
        # The policy checks 0 <= k < SMs before any launch.
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        a = _randn(64, 32, device=device, dtype=dtype)
        b = _randn(32, 16, device=device, dtype=dtype)
        with carveout_set(sms):
            with self.assertRaisesRegex(RuntimeError,
                                        rf"0 <= k < {sms}.*k = {sms}"):
                torch.mm(a, b)
        # Nothing is left behind: the next GEMM runs.
        self.assertEqual(torch.mm(a, b).double(), a.double() @ b.double(),
                         **_tolerance(dtype))

    @onlyCUDA
    @parametrize("k_a, k_b", [(16, 16), (16, 17)])
    def test_two_caller_streams_do_not_wait_on_each_other_cuda(
            self, device, k_a, k_b):
        # Stream B queues a long spin (a stand-in for a collective) and then
        # a float32 GEMM, which runs on a green-context stream; stream A's
        # next float32 GEMM must finish while B still spins. Restricted
        # streams shared by caller streams make A's GEMM wait for B's spin
        # and GEMM. On 132 SMs k = 16 and 17 plan the same 112-SM partition.
        self._skip_without_green_contexts()
        a = _randn(512, 512, device=device, dtype=torch.float32)
        stream_a = torch.cuda.Stream(device)
        stream_b = torch.cuda.Stream(device)
        stream_a.wait_stream(torch.cuda.current_stream(device))
        stream_b.wait_stream(torch.cuda.current_stream(device))
        a_done = torch.cuda.Event()
        with torch.cuda.stream(stream_a), carveout_set(k_a):
            expected = torch.mm(a, a)  # A's restricted stream exists now
        torch.cuda.synchronize(device)
        with torch.cuda.stream(stream_b), carveout_set(k_b):
            torch.cuda._sleep(_TWO_CALLER_SPIN_CYCLES)
            torch.mm(a, a)
        with torch.cuda.stream(stream_a), carveout_set(k_a):
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
        a = _randn(512, 256, device=device, dtype=torch.float32, scale=0.1)
        b = _randn(256, 384, device=device, dtype=torch.float32)
        graph = torch.cuda.CUDAGraph()
        with carveout_set(16):
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
        # cuBLASLt's scaled mm: the SM count target.
        a = torch.randn(2048, 1024, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(2048, 1024, device=device).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)

        def fn():
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16)

        self._assert_grid_within_carveout(fn, carveout, device)
        expected = fn()
        with carveout_set(carveout):
            self.assertEqual(fn(), expected, atol=2e-2 * 32, rtol=2e-2)

    @onlyCUDA
    @dtypes(*DTYPES)
    @parametrize("carveout", CARVEOUTS)
    def test_carveout_limits_grid_grouped_mm(self, device, dtype, carveout):
        # Every kernel of the call (argument fill, zero tail, GEMM)
        # respects the limit.
        groups, k = 16, 512
        a = _randn(8192, k, device=device, dtype=dtype, scale=k ** -0.5)
        b = _randn(groups, k, 1024, device=device, dtype=dtype)
        offs = torch.arange(1, groups + 1, device=device,
                            dtype=torch.int32) * (8192 // groups)

        def fn():
            return torch._grouped_mm(a, b, offs)

        sms = torch.cuda.get_device_properties(device).multi_processor_count
        with carveout_set(carveout):
            launched = launched_kernels(fn)
            out = fn()
        self.assertTrue(launched, "no kernel was traced")
        for name, ctas in launched:
            self.assertLessEqual(ctas, sms - carveout, name)
        self.assertEqual(out, fn(), **_tolerance(dtype))

    @onlyCUDA
    @dtypes(*DTYPES)
    @parametrize("op", GEMM_OPS)
    @parametrize("layout", ["nn", "tn", "nt", "tt"])
    def test_carveout_results_match(self, device, dtype, op, layout):
        fn = _make_gemm(op, device, dtype, size=512, k=384, batch=3,
                        a_t=layout[0] == "t", b_t=layout[1] == "t")
        expected = fn()
        with carveout_set(16):
            got = fn()
        self.assertEqual(got, expected, **_tolerance(dtype))

    @onlyCUDA
    @dtypes(*DTYPES)
    def test_carveout_odd_layouts_match_reference(self, device, dtype):
        # Sliced, expanded and zero-size operands; out= and in-place forms.
        tol = _tolerance(dtype)
        big = _randn(70, 130, device=device, dtype=dtype, scale=0.1)
        a = big[2:42:2, 0:128:2]       # no unit stride: copied for cuBLAS
        b = big[1:65, 7:40]            # row-major with ld 130
        row = _randn(33, device=device, dtype=dtype)
        c = _randn(20, 33, device=device, dtype=dtype)
        batch = _randn(1, 64, 33, device=device, dtype=dtype).expand(4, 64, 33)
        a3 = _randn(4, 20, 64, device=device, dtype=dtype, scale=0.1)
        ref = (a.double() @ b.double())
        with carveout_set(8):
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
        # float64 and complex: the same results under the carveout.
        a = torch.randn(65, 33, device=device, dtype=dtype)
        b = torch.randn(33, 17, device=device, dtype=dtype)
        expected = a @ b
        with carveout_set(8):
            self.assertEqual(a @ b, expected)
            self.assertEqual(torch.addmm(expected, a, b), 2 * expected)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float32)
    def test_carveout_backward(self, device, dtype):
        # Autograd's mm calls run under the carveout too.
        x = _randn(256, 128, device=device, dtype=dtype, scale=0.1)
        w = _randn(64, 128, device=device, dtype=dtype, scale=0.1)
        bias = _randn(64, device=device, dtype=dtype)
        grads = []
        for k in (0, 32):
            xs, ws, bs = (t.detach().requires_grad_() for t in (x, w, bias))
            with carveout_set(k):
                F.linear(xs, ws, bs).square().sum().backward()
            grads.append((xs.grad, ws.grad, bs.grad))
        for got, expected in zip(grads[1], grads[0]):
            self.assertEqual(got, expected, **_tolerance(dtype))


instantiate_device_type_tests(TestSMCarveout, globals(), only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()
