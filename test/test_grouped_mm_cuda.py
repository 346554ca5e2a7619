# Owner(s): ["module: cuda"]
"""Tests for the sync-free CUDA _grouped_mm kernels (device offsets).

The contract tests of test_grouped_mm.py, instantiated for CUDA, plus what
only a GPU shows: no host synchronisation in any dtype or layout
(set_sync_debug_mode("error")), CUDA graph replay after the offsets are
overwritten in place, the launched grid under the SM carveout, bad offsets
that never fault, and checked mode (TORCH_GROUPED_MM_CHECK_OFFSETS=1).
Nothing here runs without a GPU. The Hopper kernels' own tests (their
forced plans) are in test_grouped_mm_sm90.py.

The kernel family is chosen per call, and TORCH_GROUPED_MM_BACKEND
(auto | sm90 | sm80 | generic) is read at every call, so the whole CUDA suite
runs on another path by setting it for the process. The SM80 path runs on
any GPU from SM80 on, Hopper included:

    TORCH_GROUPED_MM_BACKEND=sm80 python3 -m pytest test/test_grouped_mm_cuda.py

test_backend_selects_kernels checks, from the profiler's kernel names, that
the family the process asked for (auto: the GPU's) is the one that runs.
Operands a forced path cannot take (odd sizes, unaligned strides) still fall
back to the generic kernel, and so does float32 while TF32 is not allowed
(GROUPED_MM_TEST_TF32=1 allows it for the whole run).
"""

from __future__ import annotations

import contextlib
import os
import sys

import torch
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
)
from torch.testing._internal.common_utils import (
    TestCase,
    parametrize,
    run_tests,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grouped_mm_reference import (  # noqa: E402
    assert_matches_reference,
    group_sizes,
    make_offsets,
    reference_grouped_mm,
    tolerance,
)
from launched_kernels import (  # noqa: E402
    carveout_set,
    launched_kernels_under_carveout,
)
from test_grouped_mm import (  # noqa: E402
    _BACKEND_ENV,
    _backend,
    _env,
    _grouped_mm,
    _randn,
    DTYPES,
    GroupedMMTestCase,
    make_contract_tests,
)

_CHECK_OFFSETS_ENV = "TORCH_GROUPED_MM_CHECK_OFFSETS"


def _clamped_spans(values: list[int], extent: int) -> list[tuple[int, int]]:
    """[start, end) of every group as the kernels clamp bad offsets."""
    spans = []
    for g, v in enumerate(values):
        start = min(max(values[g - 1], 0), extent) if g else 0
        spans.append((start, min(max(v, start), extent)))
    return spans


# Name fragments of each family's GEMM kernel. The profiler reports CUTLASS
# kernels by their mangled names (seen on the H200), so each fragment is one
# identifier that reads the same mangled and demangled.
_SM80_KERNEL = "GemmGrouped"  # CUTLASS 2.x cutlass::gemm::kernel::GemmGrouped
_FAMILY_KERNELS = {
    "sm80": _SM80_KERNEL,
    # CUTLASS 3.x pointer-array mainloop
    "sm90": "MainloopSm90ArrayTmaGmmaWarpSpecialized",
    "generic": "generic_grouped_mm_kernel",
}


def _capture_graph(fn):
    """(graph, output) of one call of fn captured in a CUDA graph, after a
    warm-up call on a side stream (outside the capture)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


# The one argument-filling kernel, with each tensor-core path's writer.
_FILL_KERNEL = {"sm80": "Sm80ArgumentWriter", "sm90": "Sm90ArgumentWriter"}


def _tf32_mn_b_direct(rows: int, groups: int, a_row_major: bool) -> bool:
    """Whether a TF32 call grouped along rows with row-major weights (rows
    of a in groups groups) runs the Hopper kernel that reads them directly:
    for every row-major a (tf32_mn_b_direct_wins, GroupedMMTf32Route.h)."""
    return a_row_major and groups > 0 and rows >= 0


def _expected_family(device, dtype, hopper_tf32="sm80",
                     grouped_along_k=False, b_n_major=False,
                     rows=None, groups=None, a_row_major=True) -> str:
    """The kernel family a call with aligned operands should run, from the
    process's TORCH_GROUPED_MM_BACKEND, the GPU and the TF32 switch
    (the dispatch rules of GroupedMMKernels.h). hopper_tf32: the family
    GroupedMMTf32Route.h picks for the call under TF32 on Hopper (the
    tests' calls are small, so SM80 unless the SM90 path copies no more
    than the SM80 one); grouped_along_k: a 2d x 2d call, which TF32 WGMMA
    runs only on padded copies: forced SM90 takes them, auto only for
    large m and n (never the tests' small calls); b_n_major: a 2d x 3d
    call with row-major weights (rows of a, required then, in groups
    groups; a row-major unless a_row_major is False), which the Hopper
    kernel that reads them directly may take (_tf32_mn_b_direct)."""
    if b_n_major and (rows is None or groups is None):
        raise ValueError("b_n_major needs rows and groups")
    requested = os.environ.get(_BACKEND_ENV) or "auto"
    major = torch.cuda.get_device_capability(device)[0]
    tf32 = dtype == torch.float32
    if tf32 and not torch.backends.cuda.matmul.allow_tf32:
        return "generic"  # exact float32
    if requested == "auto":
        requested = {9: "sm90", 8: "sm80", 12: "sm80"}.get(major, "generic")
        if requested == "sm90" and tf32:
            if grouped_along_k:
                return "sm80"
            if b_n_major and _tf32_mn_b_direct(rows, groups, a_row_major):
                return "sm90"
            return hopper_tf32
    if requested == "sm90" and major != 9:
        return "generic"
    if requested == "sm80" and major < 8:
        return "generic"
    return requested


@contextlib.contextmanager
def _allow_tf32(allowed):
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def _checked_offsets(value):
    """Sets TORCH_GROUPED_MM_CHECK_OFFSETS for the block."""
    return _env(_CHECK_OFFSETS_ENV, value)


# The contract tests (layouts, dtypes, bias, out_dtype, zeroed tail, empty
# and > 1024 groups, odd strides) on CUDA: TestGroupedMMCUDA.
TestGroupedMM = make_contract_tests()


class TestGroupedMMDeviceOffsets(GroupedMMTestCase):
    """What only the CUDA kernels promise: no host sync, CUDA graph replay
    with new offsets, the carveout's grid bound, no fault on bad offsets."""

    @dtypes(*DTYPES)
    def test_no_host_sync(self, device, dtype):
        sizes = [5, 0, 12, 3]
        offs = make_offsets(sizes, device)
        total = sum(sizes)
        calls = [
            (_randn(total, 32, device=device, dtype=dtype),
             _randn(4, 32, 16, device=device, dtype=dtype), offs),
            (_randn(4, 16, 32, device=device, dtype=dtype),
             _randn(32, total, device=device, dtype=dtype), offs),
            (_randn(16, total, device=device, dtype=dtype),
             _randn(total, 24, device=device, dtype=dtype), offs),
            (_randn(4, 16, 32, device=device, dtype=dtype),
             _randn(4, 32, 24, device=device, dtype=dtype), None),
        ]
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            outs = [_grouped_mm(a, b, o) for a, b, o in calls]
        finally:
            torch.cuda.set_sync_debug_mode(0)
        for (a, b, o), out in zip(calls, outs):
            assert_matches_reference(self, out, reference_grouped_mm(a, b, o),
                                     a.dim(), b.dim(), o,
                                     tolerance(dtype, self.device_type))

    @dtypes(torch.bfloat16, torch.float32)
    @parametrize("layout", ["2d_3d", "2d_2d"])
    def test_graph_replay_after_offsets_change(self, device, dtype, layout):
        groups = 8
        first = group_sizes("balanced", 256, groups)
        second = group_sizes("skewed", 256, groups, seed=3)
        offs = make_offsets(first, device)
        if layout == "2d_3d":
            a = _randn(256, 64, device=device, dtype=dtype)
            b = _randn(groups, 64, 48, device=device, dtype=dtype)
        else:
            a = _randn(32, 256, device=device, dtype=dtype)
            b = _randn(256, 48, device=device, dtype=dtype)
        graph, out = _capture_graph(lambda: _grouped_mm(a, b, offs))
        offs.copy_(make_offsets(second, device))
        a.copy_(torch.randn_like(a))
        graph.replay()
        torch.cuda.synchronize()
        assert_matches_reference(self, out, reference_grouped_mm(a, b, offs),
                                 a.dim(), b.dim(), offs,
                                 tolerance(dtype, self.device_type))

    @dtypes(torch.bfloat16, torch.float16, torch.float32)
    @parametrize("carveout", [8, 16, 32, 66])
    def test_carveout_limits_grid(self, device, dtype, carveout):
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        sizes = group_sizes("skewed", 4096, 16)
        a = _randn(4096, 256, device=device, dtype=dtype)
        b = _randn(16, 256, 512, device=device, dtype=dtype)
        offs = make_offsets(sizes, device)
        grids = launched_kernels_under_carveout(
            lambda: _grouped_mm(a, b, offs), carveout=carveout)
        self.assertTrue(grids, "no kernel was traced")
        for name, blocks in grids:
            self.assertLessEqual(blocks, sms - carveout, name)
        # Without a carveout the persistent GEMM grid still stops at one
        # CTA per SM. Copies beside it may launch more (the transposing copy
        # TF32 on Hopper makes where it does not read the weights directly
        # runs two blocks per SM).
        grids = launched_kernels_under_carveout(
            lambda: _grouped_mm(a, b, offs), carveout=0)
        gemm_grids = [blocks for name, blocks in grids
                      if any(fragment in name
                             for fragment in _FAMILY_KERNELS.values())]
        self.assertTrue(gemm_grids, f"no GEMM kernel was traced: {grids}")
        self.assertLessEqual(max(gemm_grids), sms)

    @dtypes(torch.bfloat16, torch.float32)
    @parametrize("call", ["wgrad_empty_group", "fwd_bias", "3d_2d_transposed",
                          "fwd_bias_strided"])
    def test_carveout_limits_helper_kernel_grids(self, device, dtype, call):
        # Every kernel a call launches beside the GEMM (finish, tail, and the
        # copies: operands re-laid out for a tensor-core path, the 3d x 2d
        # result transposed back, the float32 bias, strided offs) must stay
        # within SMs - k, and none may be torch's own elementwise copy.
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        carveout = 16
        a, b, offs, bias = _helper_kernel_call(call, device, dtype)
        grids = launched_kernels_under_carveout(
            lambda: _grouped_mm(a, b, offs, bias), carveout=carveout)
        names = [name for name, _ in grids]
        family = _expected_family(
            device, dtype, grouped_along_k=call == "wgrad_empty_group",
            b_n_major=call in ("fwd_bias", "fwd_bias_strided"),
            rows=a.size(0), groups=b.size(0),
            a_row_major=call != "fwd_bias_strided")
        # (3d_2d_transposed also runs with N-major weights: the transposed
        # problem's B is a^T. Its family is not asserted below; its A, b^T,
        # is column-major, so auto keeps it on the route.)
        if call == "wgrad_empty_group":
            # No bias: the tensor-core paths' fill writes the k = 0 zeros,
            # so no finishing kernel runs.
            self.assertFalse(
                any("finish_groups_kernel" in n for n in names), names)
            if family in _FILL_KERNEL:
                self.assertTrue(
                    any("fill_group_arguments" in n for n in names), names)
        if call == "fwd_bias":
            # The bias: the Hopper GEMM's epilogue (no other kernel), the
            # finishing kernel after the SM80 GEMM, the generic kernel's own
            # epilogue.
            finished = any("finish_groups_kernel" in n for n in names)
            self.assertEqual(finished, family == "sm80", names)
            if family == "generic":
                self.assertTrue(
                    any("generic_grouped_mm_kernel" in n for n in names),
                    names)
        if _expects_relayout(call, device, dtype):
            self.assertTrue(any(_is_bounded_copy(n) for n in names), names)
        for name, blocks in grids:
            self.assertLessEqual(blocks, sms - carveout, name)
            self.assertNotIn("elementwise_kernel", name)
        with carveout_set(carveout):
            self._run_and_check(a, b, offs, bias)
        self._run_and_check(a, b, offs, bias)  # no carveout

    def test_carveout_out_of_range_raises(self, device):
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        a = _randn(8, 16, device=device, dtype=torch.bfloat16)
        b = _randn(2, 16, 8, device=device, dtype=torch.bfloat16)
        offs = make_offsets([3, 5], device)
        with carveout_set(sms):
            with self.assertRaisesRegex(RuntimeError, r"0 <= k < \d+"):
                _grouped_mm(a, b, offs)

    @dtypes(torch.bfloat16)
    def test_bad_offsets_do_not_crash(self, device, dtype):
        # Unchecked, bad offsets are clamped on the device (group_problem):
        # group g spans [clamp(offs[g-1]), clamp(offs[g])) with both ends in
        # [0, extent] and the end at least the start. Every output value is
        # checked against float64 under that rule.
        a = _randn(64, 32, device=device, dtype=dtype)
        b = _randn(4, 32, 16, device=device, dtype=dtype)
        for values in ([10, 5, 64, 64], [-7, 20, 30, 40], [10, 20, 30, 500],
                       [2**31 - 1, 0, -5, 10]):
            offs = torch.tensor(values, device=device, dtype=torch.int32)
            out = _grouped_mm(a, b, offs)
            torch.cuda.synchronize()
            self.assertEqual(out.shape, (64, 16))
            self._assert_clamped_rows(out, a, b, values)
            # Grouped along K: group g's output is a[:, span] @ b[span],
            # zeros for an empty span; no two groups share an output.
            ak = _randn(8, 64, device=device, dtype=dtype)
            bk = _randn(64, 16, device=device, dtype=dtype)
            out_k = _grouped_mm(ak, bk, offs)
            torch.cuda.synchronize()
            rel = tolerance(dtype, "cuda")
            for g, (start, end) in enumerate(_clamped_spans(values, 64)):
                want = ak[:, start:end].double() @ bk[start:end].double()
                got = out_k[g].double()
                if start == end:
                    self.assertEqual(got, want, atol=0, rtol=0,
                                     msg=f"{values} g={g}: k = 0")
                    continue
                err = ((got - want).norm() / want.norm()).item()
                self.assertLessEqual(err, rel, f"{values} g={g}")
        # The context is still alive and correct afterwards.
        offs = make_offsets([16, 16, 16, 16], device)
        self._run_and_check(a, b, offs)

    def _assert_clamped_rows(self, out, a, b, values):
        """Each row of a 2d x 3d output holds a[r] @ b[g] for a group g whose
        clamped span holds r (decreasing offsets make spans overlap, and
        either group may write last), or zeros where r is past the clamped
        last offset and no group's span reaches it."""
        extent = a.shape[0]
        spans = _clamped_spans(values, extent)
        total = min(max(values[-1], 0), extent)
        a64, b64, got = a.double(), b.double(), out.double()
        rel = tolerance(a.dtype, "cuda")
        for r in range(extent):
            candidates = [a64[r] @ b64[g] for g, (s, e) in enumerate(spans)
                          if s <= r < e]
            if r >= total:
                candidates.append(torch.zeros_like(got[r]))
            self.assertTrue(candidates, f"{values}: row {r} has no writer")
            # A zero row must be exactly zero; a product row within the
            # output dtype's rounding of its largest element.
            matches = [
                (got[r] - c).abs().max().item()
                <= rel * c.abs().max().item() for c in candidates]
            self.assertTrue(any(matches),
                            f"{values}: row {r} matches no writer")

    @dtypes(torch.bfloat16)
    def test_checked_mode_names_the_group(self, device, dtype):
        # TORCH_GROUPED_MM_CHECK_OFFSETS is read at every call: checked mode
        # synchronises and names the first bad group.
        a = _randn(64, 32, device=device, dtype=dtype)
        b = _randn(4, 32, 16, device=device, dtype=dtype)
        offs = torch.tensor([10, 30, 20, 64], device=device, dtype=torch.int32)
        with _checked_offsets("1"):
            with self.assertRaisesRegex(
                    RuntimeError, r"offs\[2\] = 20 is less than offs\[1\] = 30"):
                _grouped_mm(a, b, offs)
        with _checked_offsets("0"):
            out = _grouped_mm(a, b, offs)  # clamped, no error
            torch.cuda.synchronize()
        self.assertEqual(out.shape, (64, 16))

    def test_bad_backend_override_raises(self, device):
        a = _randn(12, 8, device=device, dtype=torch.bfloat16)
        b = _randn(2, 8, 4, device=device, dtype=torch.bfloat16)
        with _backend("no-such-backend"):
            with self.assertRaisesRegex(
                    RuntimeError,
                    "TORCH_GROUPED_MM_BACKEND must be one of auto, "
                    "sm90, sm80, generic; got 'no-such-backend'"):
                _grouped_mm(a, b, make_offsets([5, 7], device))

    @dtypes(torch.bfloat16, torch.float16, torch.float32)
    @parametrize("layout", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
    def test_backend_selects_kernels(self, device, dtype, layout):
        # The family TORCH_GROUPED_MM_BACKEND asks for (auto: the
        # GPU's) is the one whose GEMM runs, and no other family's does, so
        # a suite run with the switch set really tests that path.
        # Under TF32 on Hopper, 3d x 2d runs as a transposed 2d x 3d whose
        # B is already K-major and whose A both paths copy: SM90. The
        # others need a copy of B that only SM90 makes: SM80 at this size.
        sizes = [40, 0, 72, 24, 56]  # 38 rows per group: no direct read
        expected = _expected_family(
            device, dtype, hopper_tf32="sm90" if layout == "3d_2d" else "sm80",
            grouped_along_k=layout == "2d_2d", b_n_major=layout == "2d_3d",
            rows=sum(sizes), groups=len(sizes))
        offs = make_offsets(sizes, device)
        total = sum(sizes)
        shapes = {
            "2d_3d": ((total, 64), (5, 64, 48)),
            "3d_2d": ((5, 40, 64), (64, total)),
            "2d_2d": ((56, total), (total, 48)),
            "3d_3d": ((5, 40, 64), (5, 64, 48)),
        }
        a_shape, b_shape = shapes[layout]
        a = _randn(*a_shape, device=device, dtype=dtype)
        b = _randn(*b_shape, device=device, dtype=dtype)
        if layout == "3d_3d":
            offs = None
        names = [name for name, _ in launched_kernels_under_carveout(
            lambda: _grouped_mm(a, b, offs), carveout=0)]
        for family, fragment in _FAMILY_KERNELS.items():
            ran = any(fragment in name for name in names)
            self.assertEqual(ran, family == expected,
                             f"{family} kernel ran: {ran}, expected "
                             f"{expected}; kernels: {names}")
        if expected in _FILL_KERNEL:
            self.assertTrue(any("fill_group_arguments" in name and
                                _FILL_KERNEL[expected] in name
                                for name in names), names)

    @dtypes(*DTYPES)
    @parametrize("layout", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
    @parametrize("out_fp32", [False, True])
    def test_forced_sm80_path_runs(self, device, dtype, layout, out_fp32):
        if torch.cuda.get_device_capability(device)[0] < 8:
            self.skipTest("the SM80 kernels need SM80 or later")
        if out_fp32 and dtype == torch.float32:
            self.skipTest("float32 inputs already give float32")
        groups = 6
        sizes = group_sizes("skewed", 200, groups)
        sizes[2] = 0  # an empty group (k = 0 in 2d x 2d)
        offs = make_offsets(sizes, device)
        total = sum(sizes) + 8  # rows / columns past offs[-1]
        shapes = {
            "2d_3d": ((total, 64), (groups, 64, 48)),
            "3d_2d": ((groups, 40, 64), (64, total)),
            "2d_2d": ((56, total), (total, 48)),
            "3d_3d": ((groups, 40, 64), (groups, 64, 48)),
        }
        a_shape, b_shape = shapes[layout]
        a = _randn(*a_shape, device=device, dtype=dtype)
        b = _randn(*b_shape, device=device, dtype=dtype)
        if layout == "3d_3d":
            offs = None
        bias = None
        if layout in ("2d_3d", "2d_2d"):
            bias = torch.randn(groups, 48, device=device, dtype=dtype)
        out_dtype = torch.float32 if out_fp32 else None
        with _backend("sm80"), _allow_tf32(True):
            self._run_and_check(a, b, offs, bias, out_dtype)
            grids = launched_kernels_under_carveout(
                lambda: _grouped_mm(a, b, offs, bias, out_dtype), carveout=0)
        names = [name for name, _ in grids]
        self.assertTrue(any(_SM80_KERNEL in n for n in names), names)

    @dtypes(torch.bfloat16, torch.float32)
    def test_forced_sm80_takes_fp32_only_with_tf32(self, device, dtype):
        # float32 takes the SM80 kernels only when TF32 is allowed.
        if torch.cuda.get_device_capability(device)[0] < 8:
            self.skipTest("the SM80 kernels need SM80 or later")
        a = _randn(64, 32, device=device, dtype=dtype)
        b = _randn(4, 32, 16, device=device, dtype=dtype)
        offs = make_offsets([16, 0, 40, 8], device)
        with _backend("sm80"), _allow_tf32(False):
            grids = launched_kernels_under_carveout(
                lambda: _grouped_mm(a, b, offs), carveout=0)
        ran_sm80 = any(_SM80_KERNEL in name for name, _ in grids)
        self.assertEqual(ran_sm80, dtype != torch.float32)


def _helper_kernel_call(call: str, device, dtype):
    """(a, b, offs, bias) of test_carveout_limits_helper_kernel_grids: groups
    [300, 0, 500, 200] plus 24 rows/columns past offs[-1]."""
    sizes = [300, 0, 500, 200]
    total = sum(sizes) + 24
    offs = make_offsets(sizes, device)
    if call == "wgrad_empty_group":
        # 2d x 2d: the tensor-core paths need a column-major a (a copy).
        return (_randn(256, total, device=device, dtype=dtype),
                _randn(total, 384, device=device, dtype=dtype), offs, None)
    if call == "3d_2d_transposed":
        # Computed as the transposed 2d x 3d problem on the tensor-core paths
        # (b^T re-laid out row-major), whose result is copied back.
        return (_randn(4, 96, 256, device=device, dtype=dtype, transposed=True),
                _randn(256, total, device=device, dtype=dtype), offs, None)
    bias = torch.randn(4, 384, device=device, dtype=dtype)
    if call == "fwd_bias":
        return (_randn(total, 256, device=device, dtype=dtype),
                _randn(4, 256, 384, device=device, dtype=dtype), offs, bias)
    # fwd_bias_strided: a column-major a (rows grouped need it row-major), a
    # transposed bias view and strided offsets: a copy of each.
    bias = torch.randn(384, 4, device=device, dtype=dtype).t()
    offs = torch.stack([offs, offs], dim=1)[:, 0]
    return (_randn(total, 256, device=device, dtype=dtype, transposed=True),
            _randn(4, 256, 384, device=device, dtype=dtype), offs, bias)


def _is_bounded_copy(name: str) -> bool:
    """A copy kernel of GroupedMMRelayout.cu (copy_within_sm_limit): the
    tile kernel (transposes, strided tensors) or the flat one (both
    tensors contiguous)."""
    return "relayout_kernel" in name or "flat_copy_kernel" in name


def _expects_relayout(call: str, device, dtype) -> bool:
    """Whether the call needs a copy (GroupedMMRelayout.cu) under the
    carveout: a bias to convert or a strided tensor on every path; an
    operand re-laid out for a bf16 tensor-core path. (float32 on the
    tensor-core paths is TF32, with other operand rules: not asserted.)"""
    if call == "fwd_bias_strided":
        return True
    if dtype == torch.float32:
        return False
    return call == "fwd_bias" or _expected_family(device, dtype) != "generic"


class TestKernelNameFragments(TestCase):
    """The fragments above against kernel names the profiler reported on
    the H200 (shortened), so a fragment that cannot match fails on the CPU
    rather than in a GPU run (first written as demangled qualified names,
    which the mangled names do not contain)."""

    seen = {
        "sm80": "_ZN7cutlass6KernelINS_4gemm6kernel11GemmGroupedINS1_11"
                "threadblock13MmaMultistageINS1_9GemmShapeILi128ELi128ELi32EEE",
        "sm90": "_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmUniversalINS1_"
                "17GroupProblemShapeIN4cute5tupleIJiiiEEEEENS1_10collective13"
                "CollectiveMmaINS1_39MainloopSm90ArrayTmaGmmaWarpSpecialized"
                "ILi6ENS6_IJNS5_1CILi1EEESD_SD_EEE",
        # Not in the H200 logs: the demangled form the profiler gives our
        # own (non-CUTLASS) kernels, such as fill_group_arguments.
        "generic": "void at::native::grouped_mm::(anonymous namespace)::"
                   "generic_grouped_mm_kernel<c10::BFloat16, float, int>(...)",
    }

    def test_each_fragment_matches_only_its_family(self):
        for family, fragment in _FAMILY_KERNELS.items():
            for other, name in self.seen.items():
                self.assertEqual(fragment in name, family == other,
                                 f"{family} fragment {fragment!r} vs {other}")


# CUDA only: the CPU kernel has its own tests in test_grouped_mm.py.
instantiate_device_type_tests(TestGroupedMM, globals(), only_for=("cuda",))
instantiate_device_type_tests(TestGroupedMMDeviceOffsets, globals(),
                              only_for=("cuda",))

if __name__ == "__main__":
    run_tests()
