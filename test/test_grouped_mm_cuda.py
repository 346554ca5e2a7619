# Owner(s): ["module: cuda"]
"""Tests for the sync-free CUDA _grouped_mm kernels (device offsets).

The contract tests of test_grouped_mm.py, instantiated for CUDA, plus what
only a GPU shows: no host synchronisation in any dtype or layout
(set_sync_debug_mode("error")), CUDA graph replay after the offsets are
overwritten in place, the launched grid under the SM carveout, bad offsets
that never fault, and checked mode. Same mode detection as
test_grouped_mm.py (extension or patched wheel). Nothing here runs without
a GPU.

The kernel family is chosen per call, and OVERLAP_OPS_GROUPED_MM_BACKEND
(auto | sm90 | sm80 | generic) is read at every call, so the whole CUDA suite
runs on another path by setting it for the process. The SM80 path runs on
any GPU from SM80 on, the H200 included (tools/gpu_session.sh testsm80):

    OVERLAP_OPS_GROUPED_MM_BACKEND=sm80 python3 -m pytest test/test_grouped_mm_cuda.py

test_backend_selects_kernels checks, from the profiler's kernel names, that
the family the process asked for (auto: the GPU's) is the one that runs.
Operands a forced path cannot take (odd sizes, unaligned strides) still fall
back to the generic kernel, and so does float32 while TF32 is not allowed
(OVERLAP_OPS_TEST_TF32=1 allows it for the whole run).
"""

from __future__ import annotations

import contextlib
import os
import sys
import unittest.mock

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
    launched_kernels,
    launched_kernels_under_carveout,
)
from test_grouped_mm import (  # noqa: E402
    _BACKEND_ENV,
    _backend,
    _grouped_mm,
    _poison_allocator,
    _randn,
    DTYPES,
    GroupedMMTestCase,
    make_contract_tests,
    needs_extension,
    overlap_ops,
)

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


def _sm90_gemm_names(names):
    """The Hopper GEMM kernels among launched kernel names, repeats kept."""
    return [name for name in names if _FAMILY_KERNELS["sm90"] in name]


def _wgrad_operands(device, dtype, sizes, m, n):
    """wgrad's layouts: a = grad_out^T (column-major, m x tokens), b = x
    (tokens x n, row-major)."""
    a = _randn(m, sum(sizes), device=device, dtype=dtype, transposed=True)
    b = _randn(sum(sizes), n, device=device, dtype=dtype)
    return a, b


def _mixed_group_operands(device, dtype, layout):
    """a, b, bias and offs for five groups of mixed sizes (an empty group,
    a one-row group, rows past offs[-1] in 2d_3d), in the fwd layouts
    (2d_3d) or wgrad's (2d_2d)."""
    sizes = [300, 0, 1, 777, 130]
    if layout == "2d_3d":
        a = _randn(sum(sizes) + 5, 96, device=device, dtype=dtype)
        b = _randn(len(sizes), 96, 520, device=device, dtype=dtype)
        n = 520
    else:
        a, b = _wgrad_operands(device, dtype, sizes, 520, 264)
        n = 264
    bias = _randn(len(sizes), n, device=device, dtype=dtype)
    return a, b, bias, make_offsets(sizes, device)


def _check_wgrad_cases(test, device, dtype, cases, env):
    """Each (sizes, m, n, with_bias) wgrad case under `env` (a context
    manager factory) and a carveout of SMs - 8, so each CTA walks many
    tiles, checked against float64 per group by test._run_and_check."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    with carveout_set(sms - 8):
        for sizes, m, n, with_bias in cases:
            a, b = _wgrad_operands(device, dtype, sizes, m, n)
            bias = (_randn(len(sizes), n, device=device, dtype=dtype)
                    if with_bias else None)
            with env():
                test._run_and_check(a, b, make_offsets(sizes, device), bias)


def _sm90_env(**settings):
    """os.environ patched with the Hopper backend pinned and `settings`
    (NAME=value switches) for the duration of a with block."""
    return unittest.mock.patch.dict(os.environ,
                                    {_BACKEND_ENV: "sm90", **settings})


# Forward cases for the alternative tile walks: (sizes, k, n, with_bias),
# with empty, one-row and ragged groups and more than 1024 groups.
_WALK_FWD_CASES = [([300, 0, 1, 777, 130, 2048], 136, 520, True),
                   ([(i * 5) % 7 for i in range(1100)], 72, 264, False),
                   ([4096, 0, 2500], 256, 1032, False)]


def _check_fwd_walk_cases(test, device, dtype, b_transposed, envs, calls=1,
                          cases=_WALK_FWD_CASES):
    """`cases` ((sizes, k, n, with_bias), by default _WALK_FWD_CASES) under
    each of envs (context manager factories), `calls` times each, on a
    carveout of SMs - 8 (each CTA walks many tiles), checked against
    float64 per group by test._run_and_check."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    with carveout_set(sms - 8):
        for sizes, k, n, with_bias in cases:
            a, b = _fwd_operands(device, dtype, sizes, k, n, b_transposed)
            bias = (_randn(len(sizes), n, device=device, dtype=dtype)
                    if with_bias else None)
            offs = make_offsets(sizes, device)
            for env in envs:
                with env():
                    for _ in range(calls):
                        test._run_and_check(a, b, offs, bias)


def _check_graph_replays(test, device, dtype, env, replays):
    """One fwd call of 8 groups over 4096 rows captured under env on a
    carveout of SMs - 8, replayed after overwriting the offsets with each
    of `replays` ("balanced" or "skewed") and the input with new values;
    every replay's output (NaN-filled before it) matches float64."""
    groups = 8
    sizes_of = {"balanced": group_sizes("balanced", 4096, groups),
                "skewed": group_sizes("skewed", 4096, groups, seed=3)}
    a = _randn(4096, 256, device=device, dtype=dtype)
    b = _randn(groups, 256, 768, device=device, dtype=dtype)
    offs = make_offsets(sizes_of["balanced"], device)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    with carveout_set(sms - 8):
        with env():
            graph, out = _capture_graph(lambda: _grouped_mm(a, b, offs))
        for dist in replays:
            offs.copy_(make_offsets(sizes_of[dist], device))
            a.copy_(torch.randn_like(a))
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert_matches_reference(
                test, out, reference_grouped_mm(a, b, offs), a.dim(),
                b.dim(), offs, tolerance(dtype, test.device_type))


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


def _fwd_operands(device, dtype, sizes, k, n, b_transposed):
    """A forward call's operands: a (sum(sizes), k) row-major; b (groups,
    k, n) row-major, or a column-major (K contiguous) view when
    b_transposed."""
    a = _randn(sum(sizes), k, device=device, dtype=dtype)
    b = _randn(len(sizes), k, n, device=device, dtype=dtype,
               transposed=b_transposed)
    return a, b


def _windowed_fwd_case(device, dtype, sizes, n, tile_rows, tile_cols,
                       ctas, waves):
    """A forward call (K 64, row-major weights) and the launches windowed
    launches make of it on `ctas` CTAs of tile_rows x tile_cols tiles
    (tile_count_bound and launch_windows of GroupedMMTileOrder.h)."""
    a, b = _fwd_operands(device, dtype, sizes, 64, n, False)
    bound = torch.ops.overlap_ops._sm90_tile_count_bound(
        len(sizes), True, sum(sizes), 0, n, tile_rows, tile_cols, 1, 1)
    _, launches = torch.ops.overlap_ops._sm90_launch_windows(
        bound, ctas, 1, waves, 32)
    return a, b, make_offsets(sizes, device), launches


# The one argument-filling kernel, with each tensor-core path's writer.
_FILL_KERNEL = {"sm80": "Sm80ArgumentWriter", "sm90": "Sm90ArgumentWriter"}


def _tf32_mn_b_direct(rows: int, groups: int, a_row_major: bool) -> bool:
    """Whether a TF32 call grouped along rows with row-major weights (rows
    of a in groups groups) runs the Hopper kernel that reads them directly:
    OVERLAP_OPS_SM90_TF32_MN_B=direct always, copy never, auto (the
    default) for a row-major a where GroupedMMTf32Route.h says it wins."""
    mode = os.environ.get("OVERLAP_OPS_SM90_TF32_MN_B") or "auto"
    if mode == "auto":
        return torch.ops.overlap_ops._tf32_mn_b_direct_wins(rows, groups,
                                                            a_row_major)
    return mode == "direct"


def _expected_family(device, dtype, hopper_tf32="sm80",
                     grouped_along_k=False, b_n_major=False,
                     rows=None, groups=None, a_row_major=True) -> str:
    """The kernel family a call with aligned operands should run, from the
    process's OVERLAP_OPS_GROUPED_MM_BACKEND, the GPU and the TF32 switch
    (the dispatch rules of GroupedMMKernels.h). hopper_tf32: the family
    GroupedMMTf32Route.h picks for the call under TF32 on Hopper (the
    tests' calls are small, so SM80 unless the SM90 path copies no more
    than the SM80 one); grouped_along_k: a 2d x 2d call, which TF32 WGMMA
    runs only on padded copies: forced SM90 takes them, auto only for
    large m and n (never the tests' small calls), and never with
    OVERLAP_OPS_SM90_TF32_PADDED_K=off; b_n_major: a 2d x 3d call with
    row-major weights (rows of a, required then, in groups groups; a
    row-major unless a_row_major is False), which the Hopper kernel that
    reads them directly may take (_tf32_mn_b_direct)."""
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


def _check_rows_per_group_rule(test, rule, expected):
    """A host rule of the direct read's token tile, rule(rows, groups) ->
    bool: on each named suite row of expected ({(name, total rows,
    groups): wins}), then the errors every such rule raises for bad
    arguments (check_rows_and_groups, RegisterTf32Route.cpp)."""
    for (name, total, groups), wins in expected.items():
        test.assertEqual(rule(total, groups), wins, name)
    with test.assertRaisesRegex(RuntimeError, "groups must be >= 1"):
        rule(10, 0)
    with test.assertRaisesRegex(RuntimeError, "rows must be >= 0"):
        rule(-1, 2)


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
            # The bias: the Hopper GEMM's epilogue (no other kernel, unless
            # OVERLAP_OPS_SM90_BIAS=kernel), the finishing kernel after the
            # SM80 GEMM, the generic kernel's own epilogue.
            finished = any("finish_groups_kernel" in n for n in names)
            bias_kernel = os.environ.get("OVERLAP_OPS_SM90_BIAS") == "kernel"
            self.assertEqual(
                finished, family == "sm80" or (family == "sm90" and bias_kernel),
                names)
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
        a = _randn(64, 32, device=device, dtype=dtype)
        b = _randn(4, 32, 16, device=device, dtype=dtype)
        for values in ([10, 5, 64, 64], [-7, 20, 30, 40], [10, 20, 30, 500],
                       [2**31 - 1, 0, -5, 10]):
            offs = torch.tensor(values, device=device, dtype=torch.int32)
            out = _grouped_mm(a, b, offs)
            torch.cuda.synchronize()
            self.assertEqual(out.shape, (64, 16))
        # The context is still alive and correct afterwards.
        offs = make_offsets([16, 16, 16, 16], device)
        self._run_and_check(a, b, offs)

    @needs_extension
    @dtypes(torch.bfloat16)
    def test_checked_mode_names_the_group(self, device, dtype):
        a = _randn(64, 32, device=device, dtype=dtype)
        b = _randn(4, 32, 16, device=device, dtype=dtype)
        offs = torch.tensor([10, 30, 20, 64], device=device, dtype=torch.int32)
        with overlap_ops.checked_offsets():
            with self.assertRaisesRegex(
                    RuntimeError, r"offs\[2\] = 20 is less than offs\[1\] = 30"):
                _grouped_mm(a, b, offs)

    def test_bad_backend_override_raises(self, device):
        a = _randn(12, 8, device=device, dtype=torch.bfloat16)
        b = _randn(2, 8, 4, device=device, dtype=torch.bfloat16)
        with _backend("no-such-backend"):
            with self.assertRaisesRegex(
                    RuntimeError,
                    "OVERLAP_OPS_GROUPED_MM_BACKEND must be one of auto, "
                    "sm90, sm80, generic; got 'no-such-backend'"):
                _grouped_mm(a, b, make_offsets([5, 7], device))

    @dtypes(torch.bfloat16, torch.float16, torch.float32)
    @parametrize("layout", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
    def test_backend_selects_kernels(self, device, dtype, layout):
        # The family OVERLAP_OPS_GROUPED_MM_BACKEND asks for (auto: the
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


class TestSm90TileConfig(TestCase):
    """Which Hopper tile config a call runs, from what the host knows
    without a sync (GroupedMMTileChoice.h), checked on the CPU through a
    private op: the heuristic and OVERLAP_OPS_SM90_TILE's pinned configs
    where they apply."""

    @staticmethod
    def config(row_grouped, rows_per_group, tf32=False, forced="auto"):
        return torch.ops.overlap_ops._sm90_tile_config(
            row_grouped, rows_per_group, tf32, forced)

    @needs_extension
    def test_row_grouped_defaults_by_dtype(self):
        # Decode sizes (mean rows per group up to 32): 64-row tiles.
        for tf32 in (False, True):
            self.assertEqual(self.config(True, 32, tf32), "small")
        # Beyond: 16-bit runs wide up to 128 rows per group and large_solo
        # past it (large_solo beat the split on every measured bf16 row,
        # wide beat large_solo up to 128 rows); TF32 runs large_solo (it
        # beat the split once the short K tile gave it four stages).
        for rows in (33, 64, 128):
            self.assertEqual(self.config(True, rows), "wide")
        for rows in (129, 1024, 1 << 20):
            self.assertEqual(self.config(True, rows), "large_solo")
        for rows in (33, 128, 1024, 1 << 20):
            self.assertEqual(self.config(True, rows, tf32=True), "large_solo")

    @needs_extension
    def test_raster_walks_the_smaller_extent_first(self):
        # One wave of CTAs shares the tiles of the extent it walks first,
        # so the smaller operand is the one read again (GroupedMMTileChoice.h).
        def raster(mean_m, mean_n):
            return torch.ops.overlap_ops._sm90_raster_order(mean_m, mean_n)
        # wgrad of mixtral_8x7b_w2 (m 14336, n 4096): N first, which won
        # there on the H200 (results/tf32/2026-12-01b-raster).
        self.assertEqual(raster(14336, 4096), "n")
        # Row-grouped 16-bit fwd: tokens (M) first, as before.
        self.assertEqual(raster(4096, 14336), "m")
        # A tie keeps the scheduler's default, M first.
        self.assertEqual(raster(4096, 4096), "m")
        self.assertEqual(raster(0, 0), "m")
        self.assertEqual(raster(4097, 4096), "n")
        with self.assertRaisesRegex(RuntimeError, "must be >= 0"):
            raster(-1, 4)
        # The swapped TF32 kernel: tokens (its N) first on 128-token tiles,
        # so a group's token tiles share each weight tile in L2 (grin_moe
        # skewed and sparse fwd 0.93 / 0.95 of M first's time); weights
        # first on 256-token tiles, where N first lost on the large rows
        # (results/tiles/2026-12-02-tile-chunk/tf32, tf32/2026-12-01b-raster).
        swapped = torch.ops.overlap_ops._sm90_swapped_raster_order
        self.assertEqual(swapped(True), "n")
        self.assertEqual(swapped(False), "m")

    @needs_extension
    def test_chunked_tile_order(self):
        # GroupedMMTileOrder.h: each CTA takes `chunk` consecutive tiles of
        # every super-block of grid * chunk; chunk 1 is CUTLASS's order.
        def index(first, grid, cluster, chunk, step):
            return torch.ops.overlap_ops._sm90_chunked_tile_index(
                first, grid, cluster, chunk, step)
        for grid, cluster in ((132, 2), (124, 2), (132, 1), (7, 1)):
            for first in range(grid):
                self.assertEqual(
                    [index(first, grid, cluster, 1, k) for k in range(5)],
                    [first + k * grid for k in range(5)])
            for chunk in (2, 4, 8, 16):
                steps = 3 * chunk + 1
                taken = {}
                for first in range(grid):
                    seq = [index(first, grid, cluster, chunk, k)
                           for k in range(steps)]
                    # Increasing, as the scheduler's forward scan needs.
                    self.assertEqual(seq, sorted(set(seq)), (grid, chunk))
                    # Runs of `chunk` consecutive cluster indices.
                    self.assertEqual(
                        [i // cluster for i in seq[:chunk]],
                        list(range(seq[0] // cluster,
                                   seq[0] // cluster + chunk)))
                    # A cluster's CTAs keep their offset in it.
                    self.assertTrue(all(i % cluster == first % cluster
                                        for i in seq))
                    for k, i in enumerate(seq):
                        taken[i] = (first, k)
                # A bijection: the first 3 super-blocks hold every index
                # below 3 * grid * chunk exactly once.
                covered = sorted(i for i in taken if i < 3 * grid * chunk)
                self.assertEqual(covered, list(range(3 * grid * chunk)))
        # qwen3_decode's wgrad on 132 SMs in 2-CTA clusters, chunk 4: the
        # CTA pair of cluster 1 takes cluster indices 4-7, then 268-271.
        self.assertEqual([index(3, 132, 2, 4, k) for k in (0, 3, 4)],
                         [9, 15, 537])
        with self.assertRaisesRegex(RuntimeError, "positive multiple"):
            index(0, 131, 2, 4, 0)
        with self.assertRaisesRegex(RuntimeError, "first_cta"):
            index(132, 132, 2, 4, 0)
        with self.assertRaisesRegex(RuntimeError, "chunk must be"):
            index(0, 132, 2, 0, 0)

    @needs_extension
    def test_launch_windows(self):
        # GroupedMMTileOrder.h: windowed launches
        # (OVERLAP_OPS_SM90_LAUNCH_WAVES) split a call's linear tile index
        # into windows of whole waves, at most max_launches of them.
        bound = torch.ops.overlap_ops._sm90_tile_count_bound
        windows = torch.ops.overlap_ops._sm90_launch_windows

        def round_up(x, unit):  # ceil(x / unit) * unit
            return -(-x // unit) * unit
        # mixtral_8x7b_w2 fwd-like: 8 groups over 32768 rows, N 4096, on
        # 128x256 tiles: 256 tile rows plus one padded row per group.
        self.assertEqual(bound(8, True, 32768, 0, 4096, 128, 256, 1, 1),
                         (256 + 8) * 16)
        # Every split of the rows fits under the bound.
        gen = torch.Generator().manual_seed(0)
        for groups in (1, 3, 8, 1100):
            for _ in range(5):
                cuts = torch.randint(0, 5000, (groups - 1,), generator=gen)
                edges = [0] + sorted(cuts.tolist()) + [5000]
                sizes = [hi - lo for lo, hi in zip(edges, edges[1:])]
                for tm, tn, cm, cn in ((128, 256, 1, 1), (128, 256, 2, 1)):
                    # The group scheduler's count: each group's tiles along
                    # both extents rounded up to the cluster.
                    real = (sum(round_up(-(-m // tm), cm) for m in sizes)
                            * round_up(-(-520 // tn), cn))
                    self.assertLessEqual(
                        real, bound(groups, True, 5000, 0, 520, tm, tn, cm,
                                    cn))
        # Grouped along K (wgrad) or batched: every group is m x n.
        self.assertEqual(bound(4, False, 999, 300, 520, 128, 256, 2, 1),
                         4 * 4 * 3)
        self.assertEqual(bound(0, True, 0, 0, 520, 128, 256, 1, 1), 0)
        # 4 waves of 132 CTAs per launch: 4224 tiles take 8 launches.
        self.assertEqual(windows(4224, 132, 1, 4, 32), [528, 8])
        self.assertEqual(windows(4225, 132, 1, 4, 32), [528, 9])
        # The chunked order's super-blocks stay whole: 4 tiles per turn.
        self.assertEqual(windows(4224, 132, 4, 2, 32), [1056, 4])
        # Past max_launches the windows widen instead.
        per_launch, launches = windows(100000, 8, 1, 2, 32)
        self.assertLessEqual(launches, 32)
        self.assertEqual(per_launch % 8, 0)
        self.assertGreaterEqual(per_launch * launches, 100000)
        # Nothing to run: still one launch (the kernel writes nothing).
        self.assertEqual(windows(0, 132, 1, 4, 32), [528, 1])
        with self.assertRaisesRegex(RuntimeError, "must be > 0"):
            windows(10, 0, 1, 4, 32)
        with self.assertRaisesRegex(RuntimeError, "must be >= 0"):
            bound(-1, True, 0, 0, 1, 128, 256, 1, 1)

    @needs_extension
    def test_tf32_launch_waves_default(self):
        # GroupedMMTileChoice.h: TF32 calls take windowed launches of 8
        # waves where their kernels are built (the direct read's 256-token
        # tiles, K-major large_solo with the short K tile) and groups hold
        # at least 2048 rows on average (Mixtral's 4096 won, 256-1024 lost
        # or tied), else one launch.
        def waves(direct, narrow, cluster, config, short_k, rows=4096):
            return torch.ops.overlap_ops._sm90_tf32_launch_waves(
                direct, narrow, cluster, config, short_k, rows)
        self.assertEqual(waves(True, False, False, "large_solo", True), 8)
        self.assertEqual(waves(True, True, False, "large_solo", True), 0)
        self.assertEqual(waves(True, False, True, "large_solo", True), 0)
        self.assertEqual(waves(False, False, False, "large_solo", True), 8)
        self.assertEqual(waves(False, False, False, "large_solo", False), 0)
        for config in ("small", "medium", "large"):
            self.assertEqual(waves(False, False, False, config, True), 0)
        self.assertEqual(
            waves(True, False, False, "large_solo", True, rows=2048), 8)
        for rows in (2047, 1024, 256):
            self.assertEqual(
                waves(True, False, False, "large_solo", True, rows=rows), 0)
            self.assertEqual(
                waves(False, False, False, "large_solo", True, rows=rows), 0)
        with self.assertRaisesRegex(RuntimeError, "config must be"):
            waves(False, False, False, "huge", True)

    @needs_extension
    def test_tf32_cluster_token_tile_default(self):
        # GroupedMMTileChoice.h: the direct read's 2-CTA clusters from 1024
        # rows per group on average up to the windows' 2048 (DeepSeek EP8's
        # 1024 won 0.92-1.00 of the plain 256-token tile in two runs;
        # Qwen3's 512 lost up to 1.04 on balanced rows), on the H200's DRAM
        # (peak 2 x 3201 MHz x 6144 bits); on the H100's (2 x 2619 MHz x
        # 5120 bits) the plain tile won 0.84-0.97 on two cards.
        h200, h100 = 2 * 3.201e9 * 768, 2 * 2.619e9 * 640

        def cluster(rows, groups, dram=h200):
            return torch.ops.overlap_ops._sm90_tf32_mn_b_cluster(
                rows, groups, dram)
        rows = {
            ("deepseek_v3_ep8_w13", 32768, 32): True,
            ("qwen3_30b_a3b_w13", 65536, 128): False,
            ("gpt_oss_120b_w13", 32768, 128): False,
            ("mixtral_8x7b_w2", 32768, 8): False,   # windows of 8 waves
            ("grin_moe", 1024, 8): False,
        }
        _check_rows_per_group_rule(self, cluster, rows)
        self.assertFalse(cluster(1024 * 5 - 1, 5))
        self.assertTrue(cluster(1024 * 5, 5))
        self.assertTrue(cluster(2048 * 5 - 1, 5))
        self.assertFalse(cluster(2048 * 5, 5))
        self.assertFalse(cluster(0, 3))
        # The bandwidth bound (4.4 TB/s) sits between the two cards.
        for rows_, groups in ((32768, 32), (1024 * 5, 5), (2048 * 5 - 1, 5)):
            self.assertFalse(cluster(rows_, groups, h100))
            self.assertFalse(cluster(rows_, groups, 4.4e12 - 1))
            self.assertTrue(cluster(rows_, groups, 4.4e12))
        with self.assertRaisesRegex(RuntimeError,
                                    "dram_bytes_per_second must be > 0"):
            cluster(32768, 32, 0.0)

    @needs_extension
    def test_tile_chunk_for_few_tokens_per_group(self):
        # The chunked tile order (GroupedMMTileChoice.h): chunk 4 for 16-bit
        # wgrad on large with at most 64 tokens and 264 output tiles
        # (128x256) per group, where group switches dominate; CUTLASS's
        # order (1) elsewhere.
        def chunk(config, same_16bit_out, grouped, extent, m=2048, n=1536):
            return torch.ops.overlap_ops._sm90_tile_chunk(
                config, same_16bit_out, grouped, extent, m, n)
        # The suite's wgrad rows (tokens per group, each group's output)
        # and what won there on the H200
        # (results/tiles/2026-12-02-tile-chunk).
        rows = {"qwen3_decode": (8, 2048, 1536, 4),
                "deepseek_v3_decode": (64, 7168, 4096, 1),
                "grin_moe": (128, 4096, 6400, 1),
                "qwen3_30b_a3b_w2": (512, 768, 2048, 1)}
        for name, (tokens, m, n, expected) in rows.items():
            self.assertEqual(chunk("large", True, "k", tokens, m, n),
                             expected, name)
        self.assertEqual(chunk("large", True, "k", 0), 4)
        # The sweeps (sweep/ in the same directory, and
        # results/tiles/2026-12-03c-chunk-sweep2): 16 to 64 tokens with 96
        # tiles per group, 8 to 64 with 256, won; 384 to 896 tiles did
        # not, nor 128 tokens with 256 tiles (skewed) or 256 tokens.
        for tokens, m, n in ((16, 2048, 1536), (32, 2048, 1536),
                             (64, 2048, 1536), (8, 4096, 2048),
                             (16, 4096, 2048), (32, 4096, 2048),
                             (64, 4096, 2048)):
            self.assertEqual(chunk("large", True, "k", tokens, m, n), 4)
        for tokens, m, n in ((8, 8192, 1536), (8, 16384, 1536),
                             (8, 7168, 4096), (16, 7168, 4096),
                             (8, 3584, 5120), (128, 2048, 1536),
                             (128, 4096, 2048), (256, 2048, 1536)):
            self.assertEqual(chunk("large", True, "k", tokens, m, n), 1)
        self.assertEqual(chunk("large", True, "k", 64), 4)
        self.assertEqual(chunk("large", True, "k", 65), 1)
        # 264 tiles of 128x256 per group, and one more row of tiles.
        self.assertEqual(chunk("large", True, "k", 8, 128 * 33, 256 * 8), 4)
        self.assertEqual(chunk("large", True, "k", 8, 128 * 33 + 1, 2048),
                         1)
        self.assertEqual(chunk("large", True, "k", 8, 0, 0), 4)
        # Built only with the wider store tiles of 16-bit wgrad on large.
        self.assertEqual(chunk("large", False, "k", 8), 1)
        self.assertEqual(chunk("large", True, "rows", 8), 1)
        self.assertEqual(chunk("large", True, "none", 8), 1)
        for config in ("small", "medium", "large_solo", "wide"):
            self.assertEqual(chunk(config, True, "k", 8), 1, config)
        with self.assertRaisesRegex(RuntimeError, "mean_extent must"):
            chunk("large", True, "k", -1)
        with self.assertRaisesRegex(RuntimeError, "group_m and group_n"):
            chunk("large", True, "k", 8, -1, 8)
        with self.assertRaisesRegex(RuntimeError, "config must be"):
            chunk("huge", True, "k", 8)

    @needs_extension
    def test_store_tile_widens_16_bit_same_dtype_output_only(self):
        # The 128x256 configs' epilogue subtile (GroupedMMTileChoice.h):
        # on large, for 16-bit wgrad with output in the input dtype, 128
        # columns up to 256 tokens per group and 64 beyond; on large_solo,
        # for 16-bit row-grouped calls (fwd, dgrad) with output in the input
        # dtype, 64; CUTLASS's (0) otherwise.
        def cols(config, same_16bit_out, grouped, extent):
            return torch.ops.overlap_ops._sm90_store_tile_cols(
                config, same_16bit_out, grouped, extent)
        # The suite's wgrad rows (total tokens / experts) and the width
        # that won there (results/tiles/2026-12-01d-store-tile).
        rows = {"qwen3_decode": (8, 128), "deepseek_v3_decode": (64, 128),
                "grin_moe": (128, 128), "gpt_oss_120b_w13": (256, 128),
                "qwen3_30b_a3b": (512, 64), "deepseek_v3_ep8": (1024, 64),
                "mixtral_8x7b": (4096, 64)}
        for name, (tokens, width) in rows.items():
            self.assertEqual(cols("large", True, "k", tokens), width, name)
        self.assertEqual(cols("large", True, "k", 0), 128)
        self.assertEqual(cols("large", True, "k", 257), 64)
        # large_solo's fwd and dgrad rows: 64 at every size the default
        # sends there (results/tiles/2026-12-01e-solo-store-tile).
        for rows_per_group in (129, 256, 512, 1024, 4096):
            self.assertEqual(cols("large_solo", True, "rows",
                                  rows_per_group), 64, rows_per_group)
        # Built only there: float32 output and TF32 keep CUTLASS's subtile,
        # and so do the other configs and groupings (a pinned large_solo
        # on wgrad, whose column-major A has no wider kernel; a pinned
        # large on a row-grouped call; 3d x 3d).
        self.assertEqual(cols("large", False, "k", 128), 0)
        self.assertEqual(cols("large_solo", False, "rows", 512), 0)
        self.assertEqual(cols("large_solo", True, "k", 512), 0)
        self.assertEqual(cols("large", True, "rows", 512), 0)
        self.assertEqual(cols("large", True, "none", 512), 0)
        self.assertEqual(cols("large_solo", True, "none", 512), 0)
        for config in ("small", "medium", "wide"):
            for grouped in ("k", "rows"):
                self.assertEqual(cols(config, True, grouped, 128), 0,
                                 (config, grouped))
        with self.assertRaisesRegex(RuntimeError, "mean_extent must"):
            cols("large", True, "k", -1)
        with self.assertRaisesRegex(RuntimeError, "config must be"):
            cols("huge", True, "k", 8)
        with self.assertRaisesRegex(RuntimeError, "grouped must be"):
            cols("large", True, "cols", 8)

    @needs_extension
    def test_row_grouped_16_bit_measured_rows(self):
        # The H200 A/Bs, wide vs large_solo (results/tiles/2026-11-30k-wide,
        # -tilecheck): the rows' mean group sizes and the config that won
        # in geometric mean over the three distributions, fwd and dgrad
        # (mixtral_8x7b_w13_short ties: wide 1.01x fwd, 0.98x dgrad).
        # qwen3_30b_a3b and deepseek_v2_lite_w2 (K and N at most 2048)
        # stay on large_solo: wide won the first by 3% and lost the
        # second's dgrad by 22-28%.
        rows = {
            "grin_moe": (128, "wide"),
            "olmoe_1b_7b": (128, "wide"),
            "phi35_moe_w13_short": (128, "wide"),
            "mixtral_8x7b_w13_short": (96, "wide"),
            "deepseek_v3_decode": (64, "wide"),
            "phi35_moe_w13": (256, "large_solo"),
            "gpt_oss_120b_w13": (256, "large_solo"),
            "qwen3_30b_a3b": (512, "large_solo"),
            "deepseek_v2_lite_w2": (768, "large_solo"),
            "mixtral_8x7b_w13": (4096, "large_solo"),
        }
        for name, (rows_per_group, config) in rows.items():
            self.assertEqual(self.config(True, rows_per_group), config, name)
        # TF32 and the other layouts never take it by default.
        self.assertEqual(self.config(True, 96, True), "large_solo")
        self.assertEqual(self.config(False, 96), "medium")

    @needs_extension
    def test_other_layouts_by_group_rows(self):
        # 2d x 2d and 3d x 3d: every group has m rows.
        self.assertEqual(self.config(False, 32), "small")
        self.assertEqual(self.config(False, 128), "medium")
        self.assertEqual(self.config(False, 129), "large")
        self.assertEqual(self.config(False, 4096, tf32=True), "large")

    @needs_extension
    def test_pinned_configs_apply_where_built(self):
        for name in ("small", "medium", "large", "large_solo"):
            for row_grouped in (False, True):
                self.assertEqual(self.config(row_grouped, 500, True, name),
                                 name)
        # wide: 16-bit only. Elsewhere the heuristic.
        self.assertEqual(self.config(True, 500, forced="wide"), "wide")
        self.assertEqual(self.config(False, 500, forced="wide"), "wide")
        self.assertEqual(self.config(True, 500, True, "wide"), "large_solo")
        self.assertEqual(self.config(False, 500, True, "wide"), "large")
        # The retired split and row_split are unknown names now.
        for name in ("huge", "split", "row_split"):
            with self.assertRaisesRegex(RuntimeError, "forced must be auto"):
                self.config(True, 500, forced=name)
        with self.assertRaisesRegex(RuntimeError, "rows_per_group must be"):
            self.config(True, -1)


class TestHopperTf32Route(TestCase):
    """Which kernels run float32 with TF32 allowed on Hopper
    (GroupedMMTf32Route.h): SM90 (TF32 WGMMA, K-major operands only, so an
    operand stored the other way is transposed first) or SM80 (mma.sync,
    either major, half the throughput). Checked on the CPU through a private
    op, on the suite's shapes where the H200 measured both (results/tf32:
    the forced SM80 path as a same-run variant)."""

    def family(self, m, k, n, groups, transpose_a=False, transpose_b=False,
               grouped_along_k=False):
        return torch.ops.overlap_ops._hopper_tf32_family(
            grouped_along_k, m, k, n, groups, transpose_a, transpose_b)

    @needs_extension
    def test_grouping_along_k_weighs_both_copies(self):
        # 2d x 2d: the SM90 path copies A (m x K) and B (K x n), K-major
        # with padded group starts; the SM80 kernels read them as they are.
        # SM90 wins when 1 / m + 1 / n < 1 / 700, the crossover measured
        # on the H200 (results/tf32/2026-11-30k-padkcheck, both paths in
        # one run; wgrad: m = K, n = N of the case).
        def along_k(m, k, n, groups):
            return self.family(m, k, n, groups, transpose_a=True,
                               transpose_b=True, grouped_along_k=True)
        # mixtral_8x7b_w13: SM90 19.0 ms vs SM80 26.2 (stock 15.8).
        self.assertEqual(along_k(4096, 32768, 14336, 8), "sm90")
        self.assertEqual(along_k(7168, 32768, 4096, 32), "sm90")
        # deepseek_v3_ep8_w2 (6.3e-4): SM90 5.5 ms vs SM80 6.7 (balanced).
        self.assertEqual(along_k(2048, 32768, 7168, 32), "sm90")
        # qwen3_30b_a3b_w13 (1.14e-3): SM90 2.57 ms vs SM80 2.87.
        self.assertEqual(along_k(2048, 65536, 1536, 128), "sm90")
        # qwen3_30b_a3b_w2 (1.79e-3): SM80 1.42 ms vs SM90 1.63.
        self.assertEqual(along_k(768, 65536, 2048, 128), "sm80")
        # Equal m and n: the crossover is at 1400, whatever K.
        self.assertEqual(along_k(1350, 1 << 20, 1350, 8), "sm80")
        self.assertEqual(along_k(1450, 1 << 20, 1450, 8), "sm90")
        # The tests' small calls stay on SM80.
        self.assertEqual(along_k(32, 256, 48, 8), "sm80")

    @needs_extension
    def test_k_major_operands_take_sm90(self):
        # dgrad (the weights read transposed, K-major): SM90 won every
        # measured row, grin_moe's 128 rows per group included.
        for rows_per_group in (8, 128, 4096):
            self.assertEqual(self.family(rows_per_group * 8, 4096, 6400, 8),
                             "sm90")

    @needs_extension
    def test_transposed_weights_take_sm80_below_about_380_rows(self):
        # (case, rows, K, N, experts) -> measured or expected winner.
        rows = {
            # measured: SM80 445 us vs SM90 976 us (stock 399)
            ("grin_moe", 1024, 4096, 6400, 8): "sm80",
            # SM90 6.9 ms copy + 4.3 ms GEMM vs SM80 8.6 ms (2026-11-30c)
            ("gpt_oss_120b_w13", 32768, 2880, 5760, 128): "sm80",
            # SM90 3.1 ms copy + 1.1 ms GEMM vs SM80 1.55 ms (2026-11-30c)
            ("deepseek_v3_decode", 2048, 7168, 4096, 32): "sm80",
            ("qwen3_decode", 1024, 2048, 1536, 128): "sm80",
            # predicted only: 512 rows per group, just past the crossover
            ("qwen3_30b_a3b_w13", 65536, 2048, 1536, 128): "sm90",
            # measured: SM90 9.8 ms vs SM80 13.0 ms (stock 5.9)
            ("deepseek_v3_ep8_w13", 32768, 7168, 4096, 32): "sm90",
            # measured: SM90 15.0 ms vs SM80 27.8 ms (stock 13.5)
            ("mixtral_8x7b_w13", 32768, 4096, 14336, 8): "sm90",
        }
        for (name, m, k, n, groups), winner in rows.items():
            self.assertEqual(self.family(m, k, n, groups, transpose_b=True),
                             winner, name)

    @needs_extension
    def test_row_major_weights_read_directly_at_every_size(self):
        # The swapped kernel (no copy of the weights) against the route
        # above, fwd on the H200: with 256-token tiles it won every row from
        # 256 rows per group on (results/tf32/2026-11-30m-direct), with
        # 128-token tiles every row up to 128 (results/tf32/
        # 2026-12-01a-narrow). A column-major a keeps the route above.
        def direct(rows, groups, a_row_major=True):
            return torch.ops.overlap_ops._tf32_mn_b_direct_wins(
                rows, groups, a_row_major)
        for rows, groups in ((1024, 128), (2048, 32), (1024, 8),
                             (32768, 8), (0, 3)):
            self.assertTrue(direct(rows, groups), (rows, groups))
            self.assertFalse(direct(rows, groups, False), (rows, groups))
        with self.assertRaisesRegex(RuntimeError, "groups must be >= 1"):
            direct(16, 0)
        with self.assertRaisesRegex(RuntimeError, "rows must be >= 0"):
            direct(-1, 2)

    @needs_extension
    def test_small_groups_take_the_narrow_token_tile(self):
        # 128-token tiles against 256-token ones, same run (results/tf32/
        # 2026-12-01a-narrow, fwd): 0.72-0.93x the previous default's time
        # up to 128 rows per group, 1.35x at 171 (grin_moe sparse) and
        # 1.37-1.74x from 256 on.
        def narrow(rows, groups):
            return torch.ops.overlap_ops._tf32_mn_b_narrow_wins(rows, groups)
        rows = {
            ("qwen3_decode", 1024, 128): True,         # 0.83-0.93x
            ("deepseek_v3_decode", 2048, 32): True,    # 0.81-0.83x
            ("grin_moe", 1024, 8): True,               # 0.72-0.88x
            ("gpt_oss_120b_w13", 32768, 128): False,   # 1.19-1.51x
            ("mixtral_8x7b_w2", 32768, 8): False,      # 1.67-1.74x
        }
        _check_rows_per_group_rule(self, narrow, rows)
        # The edge: 128 rows per group on average.
        self.assertTrue(narrow(128 * 5, 5))
        self.assertFalse(narrow(128 * 5 + 1, 5))
        self.assertTrue(narrow(0, 3))

    @needs_extension
    def test_token_split_past_96_rows_per_group(self):
        # GroupedMMTf32Route.h: where the 128-token tile wins on the mean,
        # past 96 rows per group on average the call splits its groups
        # between the 128- and 256-token kernels on the device (grin_moe
        # sparse: mean 128, live groups of 170; 0.80x the time). Never
        # where the mean already takes the 256-token tile (256-768 rows:
        # balanced and sparse rows up to 1.04x), nor at 64
        # (deepseek_v3_decode: 1.00-1.03x, no gain in any dist).
        def split(rows, groups):
            return torch.ops.overlap_ops._tf32_mn_b_token_split_wins(
                rows, groups)
        rows = {
            ("qwen3_decode", 1024, 128): False,
            ("deepseek_v3_decode", 2048, 32): False,
            ("grin_moe", 1024, 8): True,
            ("gpt_oss_120b_w13", 32768, 128): False,
            ("qwen3_30b_a3b_w13", 65536, 128): False,
            ("mixtral_8x7b_w2", 32768, 8): False,
        }
        _check_rows_per_group_rule(self, split, rows)
        self.assertFalse(split(96 * 5, 5))
        self.assertTrue(split(96 * 5 + 1, 5))
        self.assertTrue(split(128 * 5, 5))
        self.assertFalse(split(128 * 5 + 1, 5))
        self.assertFalse(split(0, 3))

    @needs_extension
    def test_transposed_activations_pay_per_row(self):
        # A copy of A (m x k) that only SM90 makes (3d x 3d with A
        # column-major: SM80 keeps it when B is row-major) costs the same
        # per row whatever the group count, so the width N decides.
        self.assertEqual(self.family(8192, 4096, 4096, 8, transpose_a=True),
                         "sm90")
        self.assertEqual(self.family(8192, 4096, 128, 8, transpose_a=True),
                         "sm80")

    @needs_extension
    def test_k_group_pad_lines_from_256_tokens_per_group(self):
        # GroupedMMTf32Route.h: groups start on 128-byte lines (32 floats)
        # of the padded copies from 256 tokens per group on average
        # (0.81-0.98x the time of 16-byte starts on the H200), else on 16
        # bytes (4 floats; at 8 tokens per group the wider copies cost
        # more than the lines save, at 64 and 128 neither clearly won).
        def line_aligned(tokens, groups):
            pad = torch.ops.overlap_ops._tf32_k_group_pad(tokens, groups)
            self.assertIn(pad, (4, 32))
            return pad == 32
        rows = {
            ("qwen3_decode", 1024, 128): False,        # 1.12-1.14x
            ("deepseek_v3_decode", 2048, 32): False,   # 1.02-1.03x, A/A 1.02
            ("grin_moe", 1024, 8): False,              # 0.98-1.01x
            ("gpt_oss_120b_w13", 32768, 128): True,    # 0.93-0.96x
            ("qwen3_30b_a3b_w13", 65536, 128): True,   # 0.95-0.98x
            ("deepseek_v3_ep8_w2", 32768, 32): True,   # 0.92x
            ("mixtral_8x7b_w13", 32768, 8): True,      # 0.81-0.93x
        }
        _check_rows_per_group_rule(self, line_aligned, rows)
        self.assertFalse(line_aligned(256 * 5 - 1, 5))
        self.assertTrue(line_aligned(256 * 5, 5))
        self.assertFalse(line_aligned(0, 3))

    @needs_extension
    def test_padded_k_layout_aligns_and_never_overlaps(self):
        # The 2d x 2d copies SM90 reads (GroupedMMPaddedK.h): every group
        # starts at a multiple of the pad, after the previous group's end,
        # and ends within the width; the width is a multiple of the pad.
        gen = torch.Generator().manual_seed(0)
        patterns = [[13, 7, 29, 1, 50], [0, 1, 0, 0, 3, 1, 0, 37], [0, 0],
                    [4, 8, 12], [(i * 7) % 5 for i in range(1500)],
                    torch.randint(0, 40, (300,), generator=gen).tolist()]
        for sizes in patterns:
            for pad in (1, 4, 8, 32):
                layout = torch.ops.overlap_ops._tf32_padded_k_layout(sizes,
                                                                    pad)
                starts, width = layout[:-1], layout[-1]
                self.assertEqual(len(starts), len(sizes))
                self.assertEqual(width % pad, 0)
                self.assertLessEqual(width,
                                     sum(sizes) + pad * (len(sizes) + 1))
                previous_end = 0
                for g, (start, size) in enumerate(zip(starts, sizes)):
                    self.assertEqual(start % pad, 0, (sizes, pad, g))
                    self.assertGreaterEqual(start, previous_end,
                                            (sizes, pad, g))
                    previous_end = start + size
                self.assertLessEqual(previous_end, width, (sizes, pad))
        with self.assertRaisesRegex(RuntimeError, r"sizes\[1\] must be >= 0"):
            torch.ops.overlap_ops._tf32_padded_k_layout([3, -1], 4)

    @needs_extension
    def test_bad_arguments_name_themselves(self):
        with self.assertRaisesRegex(RuntimeError, "groups must be >= 1"):
            self.family(128, 128, 128, 0)
        with self.assertRaisesRegex(RuntimeError, "m, k and n must be >= 0"):
            self.family(-1, 128, 128, 1)


class HopperTestCase(GroupedMMTestCase):
    """Tests of the Hopper (SM90) kernels alone: they skip on other
    GPUs. No tests of its own."""

    def setUp(self):
        super().setUp()
        if torch.cuda.get_device_capability()[0] != 9:
            self.skipTest("Hopper (SM90) kernels only")


_PADDED_K_COPY_ENV = "OVERLAP_OPS_SM90_TF32_PADDED_K_COPY"
_K_PAD_ENV = "OVERLAP_OPS_SM90_TF32_K_PAD"


class TestTf32PaddedK(HopperTestCase):
    """TF32 grouped along K on Hopper's SM90 kernels: A and B copied
    K-major with each group's K range moved to a 16-byte boundary, or a
    128-byte line from 256 tokens per group on average
    (copy_k_groups_padded), since TMA needs aligned group bases and the
    offsets are arbitrary. Forced here with OVERLAP_OPS_GROUPED_MM_BACKEND
    =sm90 (the default route takes them only for large m and n, which
    these small calls are not)."""

    # Plain functions as class attributes, not staticmethods:
    # instantiate_device_type_tests copies members with getattr, which
    # unwraps a staticmethod into a function that then binds self.
    def _forced_sm90(self):
        return unittest.mock.patch.dict(os.environ, {_BACKEND_ENV: "sm90"})

    def _run(self, device, sizes, m, n, a_transposed=True,
             b_transposed=False, offs_dtype=torch.int32, extra_k=0,
             bias=False, b_misaligned=False, deferred=None):
        """One call on the padded path, checked against float64 per group;
        extra_k columns of a (rows of b) lie past offs[-1]; b_misaligned:
        b a row-major view with row stride n + 1, starting 4 bytes into
        its storage. The check of which kernels ran uses the profiler,
        which skips the test under compute-sanitizer: a test making more
        than one call passes a list as deferred, gets the checks appended
        and runs them after its last call, so every call runs under
        memcheck first."""
        total = sum(sizes) + extra_k
        # wgrad's layouts: a = grad_out^T (column-major), b = x (row-major).
        a = _randn(m, total, device=device, dtype=torch.float32,
                   transposed=a_transposed)
        b = _randn(total, n, device=device, dtype=torch.float32,
                   transposed=b_transposed)
        if b_misaligned:
            b = _randn(total, n + 1, device=device,
                       dtype=torch.float32)[:, 1:]
        offs = make_offsets(sizes, device).to(offs_dtype)
        bias_t = (torch.randn(len(sizes), n, device=device) if bias
                  else None)
        groups = len(sizes)
        pad = {"16": 4, "128": 32}.get(
            os.environ.get(_K_PAD_ENV, ""),
            torch.ops.overlap_ops._tf32_k_group_pad(total, groups))
        width = (total + pad - 1) // pad * pad + pad * groups
        with _allow_tf32(True), self._forced_sm90():
            # NaN blocks where the padded copies and the output will be
            # allocated, all alive at once so each gets its own memory: a
            # gap the GEMM read would show.
            blocks = [torch.full(shape, float("nan"), device=device)
                      for shape in [(groups, m, n), (m, width), (n, width)]]
            del blocks
            out = _grouped_mm(a, b, offs, bias_t)
            assert_matches_reference(
                self, out, reference_grouped_mm(a, b, offs, bias_t), 2, 2,
                offs, tolerance(torch.float32, self.device_type))
        # The 16-byte gather copies an operand whose K is strided and whose
        # other index is contiguous with a multiple of 4 floats (wgrad's
        # layouts); the generic kernel copies the others.
        gathers = (a_transposed and m % 4 == 0) + (
            not b_transposed and n % 4 == 0 and not b_misaligned)
        if os.environ.get(_PADDED_K_COPY_ENV) == "generic":
            gathers = 0
        # The switches this call ran under, for a check run later.
        env = {name: value for name, value in os.environ.items()
               if name.startswith("OVERLAP_OPS_")}

        def check_kernels():
            # Under compute-sanitizer the profiler records nothing and this
            # skips, after the kernels above ran under memcheck.
            with _allow_tf32(True), \
                    unittest.mock.patch.dict(os.environ, env), \
                    self._forced_sm90():
                names = [name for name, _ in launched_kernels(
                    lambda: _grouped_mm(a, b, offs, bias_t))]
            self.assertTrue(_sm90_gemm_names(names), names)
            self.assertEqual(
                sum("padded_k_gather_kernel" in name for name in names),
                gathers, names)
            self.assertEqual(
                sum(_is_bounded_copy(name) for name in names),
                2 - gathers, names)

        if deferred is None:
            check_kernels()
        else:
            deferred.append(check_kernels)

    @parametrize("pattern", ["unaligned", "empty_and_k1", "skewed"])
    def test_group_starts_anywhere(self, device, pattern):
        # No group size a multiple of 4, so no K offset after the first is
        # 16-byte aligned in the original operands.
        sizes = {
            "unaligned": [13, 7, 29, 1, 50],
            "empty_and_k1": [0, 1, 0, 0, 3, 1, 0, 37],
            "skewed": group_sizes("skewed", 509, 9),
        }[pattern]
        self._run(device, sizes, m=72, n=40)

    @parametrize("offs_dtype", [torch.int32, torch.int64])
    def test_more_than_1024_groups(self, device, offs_dtype):
        sizes = [(i * 7) % 5 for i in range(1500)]  # zeros and 1..4
        self._run(device, sizes, m=24, n=16, offs_dtype=offs_dtype)

    def test_operands_of_any_major(self, device):
        # Each copy reads whichever major the operand has.
        checks = []
        for a_t, b_t in [(False, False), (False, True), (True, True)]:
            self._run(device, [5, 18, 0, 33], m=40, n=56, a_transposed=a_t,
                      b_transposed=b_t, deferred=checks)
        for check in checks:
            check()

    def test_operands_the_gather_cannot_read(self, device):
        # m = 30: a's K stride (30 floats) breaks 16-byte runs, so the
        # generic kernel copies a and the gather b. (n must stay a multiple
        # of 4: the output rows have to be 16-byte aligned for the Hopper
        # kernels.) Then b unaligned (row stride 25, base 4 bytes in): the
        # generic kernel copies b, the gather a.
        checks = []
        self._run(device, [13, 0, 29, 6], m=30, n=24, deferred=checks)
        self._run(device, [13, 0, 29, 6], m=28, n=24, b_misaligned=True,
                  deferred=checks)
        for check in checks:
            check()

    def test_generic_copy_pinned(self, device):
        # OVERLAP_OPS_SM90_TF32_PADDED_K_COPY=generic (A/B runs): the
        # generic kernel copies both operands in wgrad's layouts too. It
        # leaves the gaps between groups unwritten (the gather writes
        # zeros), so this is where the NaN-filled memory under the copies
        # would show a GEMM reading a gap.
        checks = []
        with unittest.mock.patch.dict(
                os.environ, {_PADDED_K_COPY_ENV: "generic"}):
            self._run(device, [13, 7, 0, 50, 1, 33], m=40, n=24,
                      deferred=checks)
            # And on 128-byte lines (from 256 tokens per group by default).
            self._run(device, [300, 257, 0, 511, 1, 500], m=40, n=24,
                      deferred=checks)
        for check in checks:
            check()

    def test_line_aligned_group_starts(self, device):
        # Groups on 128-byte lines of the copies (32 floats): by default
        # from 256 tokens per group on average, here also pinned
        # (OVERLAP_OPS_SM90_TF32_K_PAD=128) on small groups and > 1024
        # groups, and 16 bytes pinned on large ones.
        checks = []
        self._run(device, [300, 257, 0, 511, 1, 500], m=40, n=24,
                  deferred=checks)
        with unittest.mock.patch.dict(
                os.environ, {_K_PAD_ENV: "128"}):
            self._run(device, [13, 7, 0, 50, 1, 33], m=40, n=24,
                      deferred=checks)
            self._run(device, [(i * 7) % 5 for i in range(1100)], m=16,
                      n=8, deferred=checks)
        with unittest.mock.patch.dict(
                os.environ, {_K_PAD_ENV: "16"}):
            self._run(device, [300, 257, 0, 511, 1, 500], m=40, n=24,
                      deferred=checks)
        for check in checks:
            check()

    def test_k_past_the_last_offset_is_ignored(self, device):
        # The copies leave K indices past offs[-1] out; the result ignores
        # them.
        self._run(device, [10, 21, 3], m=32, n=24, extra_k=30)

    def test_bias_and_k0_groups(self, device):
        # The epilogue adds each group's bias; the fill writes the k = 0
        # groups' bias rows.
        self._run(device, [9, 0, 22, 0, 5], m=36, n=20, bias=True)

    def test_unaligned_output_falls_back_before_copying(self, device):
        # n = 18 floats: the (G, m, n) output rows are not 16-byte aligned,
        # so SM90 cannot store it; the call falls back without making the
        # padded copies first.
        sizes = [7, 12, 5]
        a = _randn(16, sum(sizes), device=device, dtype=torch.float32,
                   transposed=True)
        b = _randn(sum(sizes), 18, device=device, dtype=torch.float32)
        offs = make_offsets(sizes, device)
        with _allow_tf32(True), self._forced_sm90():
            _poison_allocator((3, 16, 18), device, torch.float32)
            out = _grouped_mm(a, b, offs)
            assert_matches_reference(
                self, out, reference_grouped_mm(a, b, offs), 2, 2, offs,
                tolerance(torch.float32, self.device_type))
            names = [name for name, _ in
                     launched_kernels(lambda: _grouped_mm(a, b, offs))]
        self.assertFalse(any(_is_bounded_copy(name) for name in names),
                         names)

    def test_bad_offsets_do_not_crash(self, device):
        # Decreasing, negative and past-the-end offsets: the copies and the
        # GEMM stay in bounds (the values are unspecified) and the context
        # lives on.
        a = _randn(32, 64, device=device, dtype=torch.float32,
                   transposed=True)
        b = _randn(64, 16, device=device, dtype=torch.float32)
        with _allow_tf32(True), self._forced_sm90():
            for values in ([10, 5, 64, 64], [-7, 20, 30, 40],
                           [10, 20, 30, 500], [2**31 - 1, 0, -5, 10]):
                offs = torch.tensor(values, device=device, dtype=torch.int32)
                out = _grouped_mm(a, b, offs)
                torch.cuda.synchronize()
                self.assertEqual(out.shape, (4, 32, 16))
        self._run(device, [16, 16, 16, 16], m=32, n=16)


class TestSm90SingleKernelTiles(HopperTestCase):
    """The Hopper tile configs that run every group on one kernel without
    clusters, forced: large_solo (128x256, the default for 16-bit
    row-grouped calls past 128 rows per group; every dtype) and wide
    (64x256 pingpong, the 16-bit default from 33 to 128 rows per group;
    16-bit only). Correct in every layout that reaches the Hopper
    kernels; the heuristic picks them by the mean group size."""

    def _forced(self, tile):
        # The backend pinned too: testsm80 and the sanitizer's sm80 and
        # generic configs run this file with another one set.
        return unittest.mock.patch.dict(
            os.environ, {"OVERLAP_OPS_SM90_TILE": tile,
                         _BACKEND_ENV: "sm90"})

    def test_default_tile_per_dtype(self, device):
        # The heuristic, not a forced config: a row-grouped call past
        # decode sizes launches one GEMM in every dtype (large_solo here:
        # 226 rows per group).
        sizes = [300, 0, 129, 64, 640]
        offs = make_offsets(sizes, device)
        env = {"OVERLAP_OPS_SM90_TILE": "auto", _BACKEND_ENV: "sm90",
               "OVERLAP_OPS_SM90_TF32_K_TILE": "auto"}
        for dtype, launches in [(torch.bfloat16, 1), (torch.float16, 1),
                                (torch.float32, 1)]:
            a = _randn(sum(sizes), 64, device=device, dtype=dtype)
            b = _randn(len(sizes), 64, 256, device=device, dtype=dtype,
                       transposed=True)
            with unittest.mock.patch.dict(os.environ, env), \
                    _allow_tf32(True):
                self._run_and_check(a, b, offs)
                names = [name for name, _ in launched_kernels(
                    lambda: _grouped_mm(a, b, offs))]
            self.assertEqual(len(_sm90_gemm_names(names)), launches,
                             (dtype, names))

    def test_default_16_bit_tile_follows_mean_group_size(self, device):
        # By default a 16-bit row-grouped call launches wide's kernel up to
        # 128 rows per group on average and large_solo's beyond; compared
        # by kernel name with the same call under each forced config.
        def gemm_kernels(a, b, offs, tile):
            env = {"OVERLAP_OPS_SM90_TILE": tile, _BACKEND_ENV: "sm90"}
            with unittest.mock.patch.dict(os.environ, env):
                names = {name for name, _ in launched_kernels(
                    lambda: _grouped_mm(a, b, offs))}
            return set(_sm90_gemm_names(names))

        for sizes, expected in [([100, 0, 129, 64, 120], "wide"),
                                ([300, 0, 129, 64, 640], "large_solo")]:
            offs = make_offsets(sizes, device)
            a = _randn(sum(sizes), 64, device=device, dtype=torch.bfloat16)
            b = _randn(len(sizes), 64, 256, device=device,
                       dtype=torch.bfloat16, transposed=True)
            default = gemm_kernels(a, b, offs, "auto")
            self.assertTrue(default)
            self.assertEqual(default, gemm_kernels(a, b, offs, expected),
                             sizes)
            other = "large_solo" if expected == "wide" else "wide"
            self.assertFalse(default & gemm_kernels(a, b, offs, other),
                             sizes)

    @parametrize("tile", ["large_solo", "wide"])
    @parametrize("layout", ["2d_3d", "2d_2d", "3d_3d"])
    def test_matches_reference(self, device, layout, tile):
        # Odd 128-row tile counts (the case the cluster pads), an empty
        # group, and more than 1024 groups.
        dtype = torch.bfloat16
        for sizes in ([300, 0, 129, 1, 640], [(i * 5) % 7 for i in range(1100)]):
            offs = make_offsets(sizes, device)
            total, groups = sum(sizes), len(sizes)
            if layout == "2d_3d":
                a = _randn(total, 64, device=device, dtype=dtype)
                b = _randn(groups, 64, 256, device=device, dtype=dtype)
            elif layout == "2d_2d":
                a = _randn(96, total, device=device, dtype=dtype,
                           transposed=True)
                b = _randn(total, 128, device=device, dtype=dtype)
            else:
                offs = None
                a = _randn(3, 200, 64, device=device, dtype=dtype)
                b = _randn(3, 64, 256, device=device, dtype=dtype)
            with self._forced(tile):
                self._run_and_check(a, b, offs)
                names = [name for name, _ in
                         launched_kernels(lambda: _grouped_mm(a, b, offs))]
            # One GEMM launch.
            self.assertEqual(len(_sm90_gemm_names(names)), 1, names)
            if layout == "3d_3d":
                break

    @parametrize("tile", ["large_solo", "wide"])
    def test_other_dtypes_match_reference(self, device, tile):
        # Odd tile counts and an empty group, with a bias; float32 through
        # TF32 (K-major weights: no copy decides the route).
        sizes = [300, 0, 129, 1]
        offs = make_offsets(sizes, device)
        cases = [(torch.float16, None), (torch.float16, torch.float32),
                 (torch.bfloat16, torch.float32)]
        if tile == "large_solo":
            cases.append((torch.float32, None))
        for dtype, out_dtype in cases:
            a = _randn(sum(sizes), 64, device=device, dtype=dtype)
            b = _randn(len(sizes), 64, 256, device=device, dtype=dtype,
                       transposed=True)
            bias = _randn(len(sizes), 256, device=device, dtype=dtype)
            with self._forced(tile), _allow_tf32(True):
                self._run_and_check(a, b, offs, bias, out_dtype)
                names = [name for name, _ in launched_kernels(
                    lambda: _grouped_mm(a, b, offs, bias, out_dtype))]
            self.assertEqual(len(_sm90_gemm_names(names)), 1, (dtype, names))

    def test_wide_leaves_float32_to_the_heuristic(self, device):
        # wide is built for 16-bit only: TF32 calls keep their default
        # (large_solo's kernel for these row counts).
        sizes = [300, 0, 129, 64, 640]
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes), 64, device=device, dtype=torch.float32)
        b = _randn(len(sizes), 64, 256, device=device, dtype=torch.float32,
                   transposed=True)
        def gemm_names(tile):
            with self._forced(tile), _allow_tf32(True), \
                    unittest.mock.patch.dict(
                        os.environ, {"OVERLAP_OPS_SM90_TF32_K_TILE": "auto"}):
                if tile == "wide":
                    self._run_and_check(a, b, offs)
                names = [name for name, _ in launched_kernels(
                    lambda: _grouped_mm(a, b, offs))]
            return _sm90_gemm_names(names)

        names = gemm_names("wide")
        self.assertEqual(len(names), 1, names)
        self.assertEqual(set(names), set(gemm_names("large_solo")))


class TestSm90Tf32ShortK(HopperTestCase):
    """The Hopper TF32 kernels with half the configs' K extent (as many
    bytes per mainloop stage as 16-bit; the default, pinned here with
    OVERLAP_OPS_SM90_TF32_K_TILE=short), for every tile config, checked
    against float64 per group and told apart from =long's kernels."""

    def _short_k(self, tile):
        return unittest.mock.patch.dict(
            os.environ, {"OVERLAP_OPS_SM90_TF32_K_TILE": "short",
                         "OVERLAP_OPS_SM90_TILE": tile,
                         _BACKEND_ENV: "sm90"})

    @parametrize("tile", ["small", "medium", "large", "large_solo"])
    def test_matches_reference(self, device, tile):
        # K-major weights (no copy), K not a multiple of the 32-float
        # tile, odd 128-row tile counts, an empty group, a bias.
        sizes = [300, 0, 129, 1, 640]
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes) + 5, 72, device=device, dtype=torch.float32)
        b = _randn(len(sizes), 72, 256, device=device, dtype=torch.float32,
                   transposed=True)
        bias = _randn(len(sizes), 256, device=device, dtype=torch.float32)
        def gemm_names():
            names = [name for name, _ in launched_kernels(
                lambda: _grouped_mm(a, b, offs, bias))]
            gemms = set(_sm90_gemm_names(names))
            self.assertTrue(gemms, names)
            return gemms

        with self._short_k(tile), _allow_tf32(True):
            self._run_and_check(a, b, offs, bias)
            short = gemm_names()
            with unittest.mock.patch.dict(
                    os.environ, {"OVERLAP_OPS_SM90_TF32_K_TILE": "long"}):
                long = gemm_names()
        # Other GEMM kernels than the default's (the profiler reports the
        # mangled names, in which the tile's K is not reliably readable;
        # the two configs differ in nothing else).
        self.assertFalse(short & long, (short, long))


class TestTf32MnBDirect(HopperTestCase):
    """TF32 calls grouped along rows with row-major (N-major) weights run
    the swapped Hopper kernel, D^T = W^T X^T with W^T read through
    registers (GroupedMMSm90Tf32MnB.cuh), and no transposing copy of the
    weights: by default for a row-major a, always with
    OVERLAP_OPS_SM90_TF32_MN_B=direct (pinned here), never with =copy.
    Each test runs its three kernels, pinned by OVERLAP_OPS_SM90_TILE: the
    256-token tile (large_solo), the 128-token tile (medium, the default up
    to 96 rows per group) and 2-CTA clusters (large, the default from 1024
    to 2047), each
    walking its tiles M first and N first, and swizzled by 4. Checked
    against float64 per group. The token split (both kernels, each group
    on one, chosen on the device) has its own tests below."""

    _KERNEL = "Tf32RegisterAMainloop"

    def _direct(self, tile="auto", raster="auto", swizzle="auto"):
        # The backend pinned to auto too, so a suite run with another one
        # forced still tests this kernel.
        return unittest.mock.patch.dict(
            os.environ, {"OVERLAP_OPS_SM90_TF32_MN_B": "direct",
                         _BACKEND_ENV: "auto", "OVERLAP_OPS_SM90_TILE": tile,
                         "OVERLAP_OPS_SM90_RASTER": raster,
                         "OVERLAP_OPS_SM90_SWIZZLE": swizzle})

    def _names(self, a, b, offs, bias):
        return [name for name, _ in launched_kernels(
            lambda: _grouped_mm(a, b, offs, bias))]

    def _check(self, device, sizes, k, n, bias=False, extra_rows=0,
               offs_dtype=torch.int32):
        """The call on each direct kernel: correct, one direct GEMM kernel,
        no copy of the weights, and the three kernels told apart."""
        offs = make_offsets(sizes, device).to(offs_dtype)
        a = _randn(sum(sizes) + extra_rows, k, device=device,
                   dtype=torch.float32)
        b = _randn(len(sizes), k, n, device=device, dtype=torch.float32)
        bias_t = (_randn(len(sizes), n, device=device, dtype=torch.float32)
                  if bias else None)
        gemm_per_tile = {}
        tiles = ("large_solo", "medium", "large")
        for tile in tiles:
            # Both tile orders, and the swizzle experiment's rounding.
            for raster, swizzle in (("m", "auto"), ("n", "auto"), ("m", "4")):
                with self._direct(tile, raster, swizzle), _allow_tf32(True):
                    self._run_and_check(a, b, offs, bias_t)
        # Last: under compute-sanitizer the profiler records nothing and
        # this skips, after every kernel's call above ran under memcheck.
        for tile in tiles:
            with self._direct(tile), _allow_tf32(True):
                names = self._names(a, b, offs, bias_t)
            gemms = _sm90_gemm_names(names)
            self.assertEqual(len(gemms), 1, names)
            self.assertIn(self._KERNEL, gemms[0])
            self.assertFalse(any(_is_bounded_copy(name) for name in names),
                             names)
            gemm_per_tile[tile] = gemms[0]
        self.assertEqual(len(set(gemm_per_tile.values())), len(tiles),
                         gemm_per_tile)

    @parametrize("pattern", ["ragged", "empty_and_one_row", "skewed"])
    def test_matches_reference(self, device, pattern):
        # K not a multiple of the 32-float tile, N not of the 128-row one,
        # group sizes not of the 256-token one.
        sizes = {
            "ragged": [300, 129, 1, 640, 77],
            "empty_and_one_row": [0, 1, 0, 0, 260, 1, 0],
            "skewed": group_sizes("skewed", 1500, 9),
        }[pattern]
        self._check(device, sizes, k=72, n=200)

    def test_bias_k0_free_rows_past_the_last_offset(self, device):
        # The epilogue adds each group's bias along D^T's rows; rows past
        # offs[-1] are zeros.
        self._check(device, [33, 0, 190, 4], k=40, n=136, bias=True,
                    extra_rows=23)

    @parametrize("offs_dtype", [torch.int32, torch.int64])
    def test_more_than_1024_groups(self, device, offs_dtype):
        sizes = [(i * 7) % 5 for i in range(1500)]  # zeros and 1..4
        self._check(device, sizes, k=32, n=64, offs_dtype=offs_dtype)

    def test_odd_weight_tiles_and_more_k_tiles_than_stages(self, device):
        # N = 328: three 128-row weight tiles, so the 2-CTA cluster pads one
        # (with a bias); K = 200: seven 32-float K tiles, more than the
        # stages, so stages are released and refilled inside the mainloop;
        # groups past 256 tokens.
        self._check(device, [300, 0, 520, 7], k=200, n=328, bias=True)

    def test_unaligned_weights_take_the_copy_route(self, device):
        # N = 18 floats: rows of the weights are not 16-byte aligned, so
        # TMA cannot read them as they are; the call goes the default way.
        self.assertFalse(self._ran_direct([40, 0, 88], "direct", k=32, n=18))

    def _ran_direct(self, sizes, mode, a_transposed=False, k=64, n=128):
        """Runs and checks the call; whether the swapped kernel ran."""
        offs = make_offsets(sizes, device=self.device_type)
        a = _randn(sum(sizes), k, device=self.device_type,
                   dtype=torch.float32, transposed=a_transposed)
        b = _randn(len(sizes), k, n, device=self.device_type,
                   dtype=torch.float32)
        with unittest.mock.patch.dict(
                os.environ, {"OVERLAP_OPS_SM90_TF32_MN_B": mode,
                             _BACKEND_ENV: "auto"}), _allow_tf32(True):
            self._run_and_check(a, b, offs)
            names = self._names(a, b, offs, None)
        self.assertTrue(names)
        return any(self._KERNEL in name for name in names)

    def test_default_reads_directly_for_a_row_major_a(self, device):
        # 160 rows per group on average (256-token tiles) and 80 (128-token
        # tiles): the swapped kernel. A column-major a (which the swapped
        # kernel would copy) keeps the route of GroupedMMTf32Route.h.
        self.assertTrue(self._ran_direct([200, 0, 280], "auto"))
        self.assertTrue(self._ran_direct([64, 96], "auto"))
        self.assertFalse(self._ran_direct([200, 0, 280], "auto",
                                          a_transposed=True))

    def test_token_tile_follows_the_mean_group_size(self, device):
        # Up to 96 rows per group on average the default is the 128-token
        # kernel, the one OVERLAP_OPS_SM90_TILE=medium pins; past 128, the
        # 256-token one (large_solo); between, both (a token split).
        def gemm(sizes, tile):
            offs = make_offsets(sizes, device)
            a = _randn(sum(sizes), 64, device=device, dtype=torch.float32)
            b = _randn(len(sizes), 64, 128, device=device,
                       dtype=torch.float32)
            with self._direct(tile), _allow_tf32(True):
                gemms = _sm90_gemm_names(self._names(a, b, offs, None))
            if not gemms:  # under compute-sanitizer
                self.skipTest("the profiler recorded no kernel")
            self.assertEqual(len(gemms), 1, gemms)
            return gemms[0]
        # (Means past 96 rows split by default: test_token_split_*.)
        small, large = [40, 0, 80], [200, 0, 280]
        self.assertEqual(gemm(small, "auto"), gemm(small, "medium"))
        self.assertEqual(gemm(large, "auto"), gemm(large, "large_solo"))
        self.assertNotEqual(gemm(large, "auto"), gemm(small, "auto"))
        # 1024 to 2047 rows per group on average: the 2-CTA clusters (the
        # kernel OVERLAP_OPS_SM90_TILE=large pins) where the device's peak
        # DRAM bandwidth reaches the rule's bound (the H200), else the
        # plain 256-token tile.
        clustered = [1500, 0, 1700]
        props = torch.cuda.get_device_properties(device)
        dram = 2 * props.memory_clock_rate * 1e3 * props.memory_bus_width / 8
        expected = ("large" if torch.ops.overlap_ops._sm90_tf32_mn_b_cluster(
            sum(clustered), len(clustered), dram) else "large_solo")
        self.assertEqual(gemm(clustered, "auto"), gemm(clustered, expected))
        self.assertNotEqual(gemm(clustered, "large"),
                            gemm(clustered, "large_solo"))

    def test_cluster_default_matches_reference_and_gives_way_to_windows(
            self, device):
        # The clustered default (on the H200; elsewhere the plain tile, so
        # the clusters are also pinned) on ragged groups (one empty, K and
        # N not multiples of the tiles, a bias, rows past offs[-1]), with
        # and without a carveout; with windows pinned the same call runs
        # the windowed 256-token tiles instead of raising for the clusters.
        sizes = [1500, 0, 1201, 1777]
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes) + 9, 72, device=device, dtype=torch.float32)
        b = _randn(len(sizes), 72, 200, device=device, dtype=torch.float32)
        bias = _randn(len(sizes), 200, device=device, dtype=torch.float32)
        for carveout in (None, 9):
            with carveout_set(carveout):
                for tile in ("auto", "large"):
                    with self._direct(tile), _allow_tf32(True):
                        self._run_and_check(a, b, offs, bias)
        with _sm90_env(OVERLAP_OPS_SM90_LAUNCH_WAVES="2",
                       OVERLAP_OPS_SM90_TF32_MN_B="direct",
                       OVERLAP_OPS_SM90_TILE="auto"), _allow_tf32(True):
            self._run_and_check(a, b, offs, bias)
        # Last (the profiler records nothing under compute-sanitizer, and
        # this skips): one GEMM kernel, within SMs - 9.
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        with self._direct(), _allow_tf32(True):
            grids = launched_kernels_under_carveout(
                lambda: _grouped_mm(a, b, offs, bias), carveout=9)
        gemms = [(name, ctas) for name, ctas in grids if self._KERNEL in name]
        self.assertEqual(len(gemms), 1, grids)
        self.assertLessEqual(gemms[0][1], sms - 9, gemms)

    def _split(self, setting, tile="auto", waves="auto"):
        return _sm90_env(OVERLAP_OPS_SM90_TF32_TOKEN_SPLIT=setting,
                         OVERLAP_OPS_SM90_TF32_MN_B="direct",
                         OVERLAP_OPS_SM90_TILE=tile,
                         OVERLAP_OPS_SM90_LAUNCH_WAVES=waves)

    def test_token_split_matches_reference_and_runs_both_kernels(
            self, device):
        # Groups on both sides of the 128-token tile and at its edges (0,
        # 1, 127, 128, 129, 255, 256, 257), a bias, rows past offs[-1], K
        # and N not multiples of the tiles; about 100 rows per group on
        # average, so the default splits. With and without a carveout.
        sizes = [0, 1, 127, 128, 129, 255, 256, 257, 7, 0, 3, 0, 150, 99]
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes) + 11, 72, device=device, dtype=torch.float32)
        self.assertTrue(torch.ops.overlap_ops._tf32_mn_b_token_split_wins(
            a.shape[0], len(sizes)))
        b = _randn(len(sizes), 72, 200, device=device, dtype=torch.float32)
        bias = _randn(len(sizes), 200, device=device, dtype=torch.float32)
        for carveout in (None, 9):
            with carveout_set(carveout):
                for setting in ("auto", "on", "off"):
                    with self._split(setting), _allow_tf32(True):
                        self._run_and_check(a, b, offs, bias)
                        self._run_and_check(a, b, offs)
        # Last (the profiler records nothing under compute-sanitizer, and
        # this skips): the split runs the 128-token kernel (what
        # OVERLAP_OPS_SM90_TILE=medium pins) and the 256-token one
        # (large_solo), each within SMs - 9; off runs the first alone.
        def gemms(setting, tile="auto"):
            with self._split(setting, tile), _allow_tf32(True):
                grids = launched_kernels_under_carveout(
                    lambda: _grouped_mm(a, b, offs, bias), carveout=9)
            found = [(name, ctas) for name, ctas in grids
                     if self._KERNEL in name]
            if not found:
                self.skipTest("the profiler recorded no kernel")
            return found
        narrow = gemms("off", "medium")
        wide = gemms("off", "large_solo")
        split = gemms("auto")
        self.assertEqual(sorted(name for name, _ in split),
                         sorted([narrow[0][0], wide[0][0]]), split)
        self.assertNotEqual(narrow[0][0], wide[0][0])
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        self.assertTrue(all(ctas <= sms - 9 for _, ctas in split), split)
        self.assertEqual([name for name, _ in gemms("off")],
                         [narrow[0][0]])

    def test_token_split_on_and_off_pinned(self, device):
        # on splits a call whose mean takes the 256-token tile (216 rows
        # per group); off keeps the 128-token tile alone where the default
        # splits (100). Both checked against the reference first, so
        # memcheck runs them too.
        calls = []
        for setting, sizes in (("on", [700, 40, 0, 129, 128, 300]),
                               ("off", [100, 0, 200])):
            offs = make_offsets(sizes, device)
            a = _randn(sum(sizes), 64, device=device, dtype=torch.float32)
            b = _randn(len(sizes), 64, 136, device=device,
                       dtype=torch.float32)
            with self._split(setting), _allow_tf32(True):
                self._run_and_check(a, b, offs)
            calls.append((setting, a, b, offs))
        # Last: under compute-sanitizer the profiler records nothing and
        # this skips.
        for setting, a, b, offs in calls:
            with self._split(setting), _allow_tf32(True):
                names = self._names(a, b, offs, None)
            gemms = [name for name in _sm90_gemm_names(names)
                     if self._KERNEL in name]
            self.assertEqual(len(gemms), 2 if setting == "on" else 1, names)

    def test_token_split_refuses_a_pinned_tile_or_windows(self, device):
        sizes = [100, 0, 200]
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes), 64, device=device, dtype=torch.float32)
        b = _randn(len(sizes), 64, 128, device=device, dtype=torch.float32)
        with self._split("on", tile="medium"), _allow_tf32(True):
            with self.assertRaisesRegex(
                    RuntimeError,
                    "TOKEN_SPLIT=on runs the 128- and 256-token kernels; "
                    "it cannot be combined with OVERLAP_OPS_SM90_TILE="
                    "medium"):
                _grouped_mm(a, b, offs)
        for setting in ("auto", "on"):  # 100 rows per group: both split
            with self._split(setting, waves="2"), _allow_tf32(True):
                with self.assertRaisesRegex(RuntimeError, "token split"):
                    _grouped_mm(a, b, offs)
        # on where the direct read does not run (the copy route pinned).
        with _sm90_env(OVERLAP_OPS_SM90_TF32_TOKEN_SPLIT="on",
                       OVERLAP_OPS_SM90_TF32_MN_B="copy"), _allow_tf32(True):
            with self.assertRaisesRegex(
                    RuntimeError, "TOKEN_SPLIT=on is built only for the "
                    "direct read"):
                _grouped_mm(a, b, offs)
        with self._split("sometimes"), _allow_tf32(True):
            with self.assertRaisesRegex(
                    RuntimeError, "OVERLAP_OPS_SM90_TF32_TOKEN_SPLIT must be "
                    "one of auto, on, off; got 'sometimes'"):
                _grouped_mm(a, b, offs)

    def test_token_split_graph_replay_moves_groups_across_the_split(
            self, device):
        # Which kernel runs a group is decided on the device, at every
        # replay: offsets overwritten in place move groups from one side
        # of 128 rows to the other (and one group to empty). 100 rows per
        # group on average (a's rows), so the default splits.
        replays = ([120, 0, 140, 60, 128, 0], [129, 250, 0, 2, 60, 7],
                   [0, 448, 0, 0, 0, 0])
        offs = make_offsets(replays[0], device)
        a = _randn(600, 64, device=device, dtype=torch.float32)
        b = _randn(6, 64, 136, device=device, dtype=torch.float32)
        bias = _randn(6, 136, device=device, dtype=torch.float32)
        with self._split("auto"), _allow_tf32(True):
            graph, out = _capture_graph(lambda: _grouped_mm(a, b, offs, bias))
        for sizes in replays:
            offs.copy_(make_offsets(sizes, device))
            a.copy_(torch.randn_like(a))
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert_matches_reference(
                self, out, reference_grouped_mm(a, b, offs, bias), 2, 3,
                offs, tolerance(torch.float32, self.device_type))

    def test_copy_never_reads_directly(self, device):
        # =copy keeps the route of GroupedMMTf32Route.h (a K-major copy of
        # the weights or the SM80 kernels) whatever the group sizes.
        self.assertFalse(self._ran_direct([200, 0, 280], "copy"))

    def test_bad_value_raises(self, device):
        a = _randn(8, 16, device=device, dtype=torch.float32)
        b = _randn(2, 16, 8, device=device, dtype=torch.float32)
        offs = make_offsets([3, 5], device)
        # The backend pinned to auto: with sm80 or generic forced the Hopper
        # dispatch, which reads the switch, is never reached.
        with unittest.mock.patch.dict(
                os.environ, {"OVERLAP_OPS_SM90_TF32_MN_B": "swapped",
                             _BACKEND_ENV: "auto"}), _allow_tf32(True):
            with self.assertRaisesRegex(RuntimeError,
                                        "OVERLAP_OPS_SM90_TF32_MN_B"):
                _grouped_mm(a, b, offs)


class TestSm90TileOrder(HopperTestCase):
    """The Hopper kernels walking each group's output tiles M first and N
    first (OVERLAP_OPS_SM90_RASTER, pinned here; the default is
    raster_order_for in GroupedMMTileChoice.h), and with the swizzle
    experiment (OVERLAP_OPS_SM90_SWIZZLE), whose rounding adds tiles wholly
    outside small groups: the same results, checked against float64 per
    group, with groups that are empty, of one row and ragged, and a bias
    fused in the epilogue (whose reads for the extra tiles memcheck
    checks, in the sanitize stage). A carveout leaves 8 CTAs, so each
    walks many tiles in the order under test."""

    @dtypes(torch.bfloat16, torch.float32)
    @parametrize("layout", ["2d_3d", "2d_2d"])
    @parametrize("order", ["m", "n", "m:8", "n:2"])
    def test_matches_reference(self, device, dtype, layout, order):
        raster, _, swizzle = order.partition(":")
        a, b, bias, offs = _mixed_group_operands(device, dtype, layout)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        with carveout_set(sms - 8):
            with unittest.mock.patch.dict(
                    os.environ, {_BACKEND_ENV: "sm90",
                                 "OVERLAP_OPS_SM90_RASTER": raster,
                                 "OVERLAP_OPS_SM90_SWIZZLE":
                                 swizzle or "auto"}), _allow_tf32(True):
                self._run_and_check(a, b, offs, bias)

    @parametrize("name", ["OVERLAP_OPS_SM90_RASTER",
                          "OVERLAP_OPS_SM90_SWIZZLE",
                          "OVERLAP_OPS_SM90_STORE_TILE",
                          "OVERLAP_OPS_SM90_HOST_PATH",
                          "OVERLAP_OPS_SM90_TILE_CHUNK",
                          "OVERLAP_OPS_SM90_SCHEDULER"])
    def test_bad_value_raises(self, device, name):
        a = _randn(8, 16, device=device, dtype=torch.bfloat16)
        b = _randn(2, 16, 8, device=device, dtype=torch.bfloat16)
        with unittest.mock.patch.dict(
                os.environ, {_BACKEND_ENV: "sm90", name: "3"}):
            with self.assertRaisesRegex(RuntimeError, name):
                _grouped_mm(a, b, make_offsets([3, 5], device))


class TestSm90StoreTile(HopperTestCase):
    """The large config's wider store tiles, which 16-bit wgrad (calls
    grouped along K, output in the input dtype) runs by default: its output
    stored through 128x64 or 128x128 subtiles instead of CUTLASS's 128x32
    (OVERLAP_OPS_SM90_STORE_TILE=cutlass|64|128 pins one), and the same
    subtiles on large_solo for 16-bit fwd and dgrad (64 columns by
    default: test_large_solo_*). Each width runs
    its own kernel and gives the same results, checked against float64 per
    group: empty groups (exact zeros), one-token groups, ragged m and n
    tile edges, a fused bias, more than 1024 groups, and a carveout of
    SMs - 8 so each CTA stores many tiles."""

    # The epilogue's dispatch policy in the kernel name, mangled or
    # demangled: Sm90PtrArrayTmaWarpSpecialized<StagesC, StagesD,
    # FragmentSize, ...>. FragmentSize is the subtile's elements per thread
    # of the two warp groups: 128x32 -> 16, 128x64 -> 32, 128x128 -> 64.
    _EPILOGUE_POLICY = {
        "cutlass": r"Sm90PtrArrayTmaWarpSpecialized(ILi4ELi2ELi16E|<4, 2, 16,)",
        "64": r"Sm90PtrArrayTmaWarpSpecialized(ILi4ELi2ELi32E|<4, 2, 32,)",
        "128": r"Sm90PtrArrayTmaWarpSpecialized(ILi2ELi2ELi64E|<2, 2, 64,)",
    }

    def _store_tile(self, cols, tile="large"):
        # The tile config pinned, so the switch cannot be bypassed by a
        # different tile choice.
        return unittest.mock.patch.dict(
            os.environ, {_BACKEND_ENV: "sm90",
                         "OVERLAP_OPS_SM90_TILE": tile,
                         "OVERLAP_OPS_SM90_STORE_TILE": cols})

    @contextlib.contextmanager
    def _no_switches(self):
        with unittest.mock.patch.dict(os.environ):
            for name in (_BACKEND_ENV, "OVERLAP_OPS_SM90_TILE",
                         "OVERLAP_OPS_SM90_STORE_TILE"):
                os.environ.pop(name, None)
            yield

    def _gemm_kernel(self, cols, a, b, offs, tile="large", **kwargs):
        # cols None: none of the three switches set (the default dispatch,
        # tile config and width), whatever the run pins for other tests.
        env = self._no_switches() if cols is None else \
            self._store_tile(cols, tile)
        with env:
            names = {name for name, _ in launched_kernels(
                lambda: _grouped_mm(a, b, offs, **kwargs))}
        kernels = _sm90_gemm_names(names)
        self.assertEqual(len(kernels), 1, (cols, kernels))
        return next(iter(kernels))

    @dtypes(torch.bfloat16, torch.float16)
    @parametrize("cols", ["auto", "cutlass", "64", "128"])
    def test_matches_reference(self, device, dtype, cols):
        cases = [([300, 0, 1, 77, 130], 520, 264, True),
                 ([(i * 5) % 7 for i in range(1100)], 136, 72, False),
                 ([700, 0, 513, 1], 264, 200, True)]
        _check_wgrad_cases(self, device, dtype, cases,
                           lambda: self._store_tile(cols))

    def test_runs_its_own_kernel(self, device):
        sizes = [40, 0, 300]
        a, b = _wgrad_operands(device, torch.bfloat16, sizes, 256, 512)
        offs = make_offsets(sizes, device)
        for cols, policy in self._EPILOGUE_POLICY.items():
            self.assertRegex(self._gemm_kernel(cols, a, b, offs), policy)

    @dtypes(torch.bfloat16, torch.float16)
    def test_default_width_by_tokens_per_group(self, device, dtype):
        # store_tile_cols_for: 128 columns up to 256 tokens per group on
        # average, 64 beyond; None: no switch set, so the default dispatch
        # and tile config (large at m = 256) choose it too.
        for cols in ("auto", None):
            for sizes, width in (([40, 0, 300], "128"), ([256, 256], "128"),
                                 ([300, 0, 800], "64"), ([257, 257], "64")):
                a, b = _wgrad_operands(device, dtype, sizes, 256, 512)
                offs = make_offsets(sizes, device)
                self.assertRegex(self._gemm_kernel(cols, a, b, offs),
                                 self._EPILOGUE_POLICY[width], (cols, sizes))

    # large_solo's store tiles: fwd and dgrad, 2d x 3d with row-major A and
    # the weights in either major (_fwd_operands).

    @dtypes(torch.bfloat16, torch.float16)
    @parametrize("cols", ["cutlass", "64", "128"])
    @parametrize("b_transposed", [False, True])
    def test_large_solo_matches_reference(self, device, dtype, cols,
                                          b_transposed):
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        cases = [([300, 0, 1, 77, 130], 264, 520, True),
                 ([(i * 5) % 7 for i in range(1100)], 72, 136, False)]
        with carveout_set(sms - 8):
            for sizes, k, n, with_bias in cases:
                a, b = _fwd_operands(device, dtype, sizes, k, n,
                                     b_transposed)
                bias = (_randn(len(sizes), n, device=device, dtype=dtype)
                        if with_bias else None)
                with self._store_tile(cols, "large_solo"):
                    self._run_and_check(a, b, make_offsets(sizes, device),
                                        bias)

    @parametrize("b_transposed", [False, True])
    def test_large_solo_runs_its_own_kernel(self, device, b_transposed):
        # 200 rows per group on average: large_solo by default too.
        sizes = [200, 0, 400]
        a, b = _fwd_operands(device, torch.bfloat16, sizes, 256, 512,
                             b_transposed)
        offs = make_offsets(sizes, device)
        for cols, policy in self._EPILOGUE_POLICY.items():
            self.assertRegex(
                self._gemm_kernel(cols, a, b, offs, tile="large_solo"),
                policy)
        # No switch set: 64 columns (store_tile_cols_for), for bf16 and
        # fp16; float32 output keeps CUTLASS's subtile.
        self.assertRegex(self._gemm_kernel(None, a, b, offs),
                         self._EPILOGUE_POLICY["64"])
        a16, b16 = a.half(), b.half()
        self.assertRegex(self._gemm_kernel(None, a16, b16, offs),
                         self._EPILOGUE_POLICY["64"])
        self.assertNotRegex(
            self._gemm_kernel(None, a, b, offs, out_dtype=torch.float32),
            r"ILi2ELi2ELi64E|<2, 2, 64,|ILi4ELi2ELi32E|<4, 2, 32,")
        # A pinned width is not built for float32 output.
        with self._store_tile("64", "large_solo"):
            with self.assertRaisesRegex(RuntimeError,
                                        "on the large_solo config is built "
                                        "only for bf16 -> bf16"):
                _grouped_mm(a, b, offs, out_dtype=torch.float32)

    def test_float32_output_keeps_cutlass_tile(self, device):
        # Not built for float32 output: the default leaves its subtile to
        # CUTLASS, and a pinned width says where it applies instead of
        # running something else.
        sizes = [40, 0, 300]
        a, b = _wgrad_operands(device, torch.bfloat16, sizes, 256, 512)
        offs = make_offsets(sizes, device)
        self.assertNotRegex(
            self._gemm_kernel("auto", a, b, offs, out_dtype=torch.float32),
            r"ILi2ELi2ELi64E|<2, 2, 64,|ILi4ELi2ELi32E|<4, 2, 32,")
        with self._store_tile("64"):
            with self.assertRaisesRegex(RuntimeError,
                                        "built only for bf16 -> bf16 and "
                                        "fp16 -> fp16 calls grouped along K"):
                _grouped_mm(a, b, offs, out_dtype=torch.float32)


class TestSm90TileChunk(HopperTestCase):
    """The chunked tile order (GroupedMMTileOrder.h; chunk 4 by default for
    16-bit wgrad with at most 32 tokens and 264 tiles per group, pinned here with
    OVERLAP_OPS_SM90_TILE_CHUNK): each CTA of the large config takes
    `chunk` consecutive output tiles instead of one tile every grid size,
    so it changes group less often. Built for 16-bit wgrad (grouped along
    K, output in the input dtype) with either store width. The same
    results as the float64 reference per group, with empty, one-token and
    ragged groups, more than 1024 groups, a bias, both rasters, and a
    carveout of SMs - 8 so each CTA walks many tiles; the kernel run is
    the chunked one where pinned or chosen, the plain one where switched
    off or not chosen; other calls raise while a chunk is pinned."""

    def _chunked(self, chunk, **extra):
        return _sm90_env(**{"OVERLAP_OPS_SM90_TILE": "large",
                            "OVERLAP_OPS_SM90_TILE_CHUNK": chunk, **extra})

    @dtypes(torch.bfloat16, torch.float16)
    @parametrize("chunk", ["2", "4", "16"])
    @parametrize("raster", ["m", "n"])
    def test_matches_reference(self, device, dtype, chunk, raster):
        # 128-column store tiles up to 256 tokens per group, 64 beyond.
        cases = [([300, 0, 1, 77, 130], 520, 264, True),
                 ([(i * 5) % 7 for i in range(1100)], 136, 72, False),
                 ([700, 0, 513, 1], 264, 200, True),
                 ([8] * 40, 392, 1032, False)]
        _check_wgrad_cases(
            self, device, dtype, cases,
            lambda: self._chunked(chunk, OVERLAP_OPS_SM90_RASTER=raster))

    def test_runs_the_chunked_kernel(self, device):
        sizes = [8] * 40
        a, b = _wgrad_operands(device, torch.bfloat16, sizes, 392, 1032)
        offs = make_offsets(sizes, device)

        def kernels():
            names = {name for name, _ in launched_kernels(
                lambda: _grouped_mm(a, b, offs))}
            return _sm90_gemm_names(names)
        def chunked(env):
            with env:
                names = kernels()
            self.assertEqual(len(names), 1, names)
            return "ChunkedGroupProblemShape" in next(iter(names))
        self.assertTrue(chunked(self._chunked("4")))
        self.assertFalse(chunked(self._chunked("off")))
        # The default (tile_chunk_for), no switch set: 8 tokens per group
        # take the chunked order, 96 do not.
        no_switches = unittest.mock.patch.dict(os.environ)
        with no_switches:
            for name in (_BACKEND_ENV, "OVERLAP_OPS_SM90_TILE",
                         "OVERLAP_OPS_SM90_TILE_CHUNK",
                         "OVERLAP_OPS_SM90_STORE_TILE"):
                os.environ.pop(name, None)
            self.assertTrue(chunked(contextlib.nullcontext()))
            sizes = [96] * 40
            a, b = _wgrad_operands(device, torch.bfloat16, sizes, 392, 1032)
            offs = make_offsets(sizes, device)
            self.assertFalse(chunked(contextlib.nullcontext()))

    def test_other_calls_raise(self, device):
        sizes = [40, 0, 300]
        a, b = _wgrad_operands(device, torch.bfloat16, sizes, 256, 512)
        offs = make_offsets(sizes, device)
        with self._chunked("4"):
            # float32 output: no wider store tile, so not built.
            with self.assertRaisesRegex(RuntimeError,
                                        "TILE_CHUNK is built only for"):
                _grouped_mm(a, b, offs, out_dtype=torch.float32)
        # A row-grouped call (fwd) on its default config.
        fa, fb = _fwd_operands(device, torch.bfloat16, sizes, 64, 128, False)
        with unittest.mock.patch.dict(
                os.environ, {_BACKEND_ENV: "sm90",
                             "OVERLAP_OPS_SM90_TILE_CHUNK": "4"}):
            with self.assertRaisesRegex(RuntimeError,
                                        "TILE_CHUNK is built only for"):
                _grouped_mm(fa, fb, offs)
        # off applies to every call.
        with unittest.mock.patch.dict(
                os.environ, {_BACKEND_ENV: "sm90",
                             "OVERLAP_OPS_SM90_TILE_CHUNK": "off"}):
            self._run_and_check(fa, fb, offs)


class TestSm90DynamicTiles(HopperTestCase):
    """The dynamic walk (OVERLAP_OPS_SM90_SCHEDULER=dynamic, an experiment
    off by default): after their first turns, CTAs take the next output
    tile from a global counter as they finish, so they cannot drift apart
    (ChunkedGroupTileScheduler in GroupedMMSm90TileScheduler.cuh). Built
    for large_solo with 64-column store tiles, 16-bit fwd and dgrad with
    the output in the input dtype. The same results as the float64
    reference per group, with empty, one-row and ragged groups, more than
    1024 groups, a bias, both rasters and a carveout of SMs - 8 (each CTA
    walks many tiles, most of them claimed from the counter); the counter
    is reset on every call, graph replays included; other calls raise
    while it is set."""

    def _dynamic(self, **extra):
        return _sm90_env(**{"OVERLAP_OPS_SM90_TILE": "large_solo",
                            "OVERLAP_OPS_SM90_STORE_TILE": "64",
                            "OVERLAP_OPS_SM90_SCHEDULER": "dynamic", **extra})

    @dtypes(torch.bfloat16, torch.float16)
    @parametrize("b_transposed", [False, True])
    @parametrize("raster", ["m", "n"])
    def test_matches_reference(self, device, dtype, b_transposed, raster):
        # Twice: the second call must start from a reset counter.
        _check_fwd_walk_cases(
            self, device, dtype, b_transposed,
            [lambda: self._dynamic(OVERLAP_OPS_SM90_RASTER=raster)], calls=2)

    def test_runs_the_dynamic_kernel(self, device):
        sizes = [700, 0, 513, 1]
        a, b = _fwd_operands(device, torch.bfloat16, sizes, 128, 512, False)
        offs = make_offsets(sizes, device)

        def dynamic(env):
            with env:
                names = _sm90_gemm_names({name for name, _ in launched_kernels(
                    lambda: _grouped_mm(a, b, offs))})
            self.assertEqual(len(names), 1, names)
            return "ChunkedGroupProblemShape" in names[0]
        self.assertTrue(dynamic(self._dynamic()))
        self.assertFalse(dynamic(self._dynamic(
            OVERLAP_OPS_SM90_SCHEDULER="static")))

    @dtypes(torch.bfloat16)
    def test_graph_replay_resets_the_counter(self, device, dtype):
        # 8 CTAs (a carveout of SMs - 8) against 96 tiles: past the first
        # 8 turns' 64 static tiles every CTA claims from the counter, so a
        # replay that did not reset it would skip tiles (NaN left).
        _check_graph_replays(self, device, dtype, self._dynamic,
                             ("skewed", "balanced", "balanced"))

    def test_other_calls_raise(self, device):
        sizes = [40, 0, 300]
        offs = make_offsets(sizes, device)
        a, b = _fwd_operands(device, torch.bfloat16, sizes, 64, 128, False)
        message = "SCHEDULER=dynamic is built only for"
        with self._dynamic():
            # float32 output: no 64-column store tile.
            with self.assertRaisesRegex(RuntimeError, message):
                _grouped_mm(a, b, offs, out_dtype=torch.float32)
            # wgrad (grouped along K).
            wa, wb = _wgrad_operands(device, torch.bfloat16, sizes, 256, 512)
            with self.assertRaisesRegex(RuntimeError, message):
                _grouped_mm(wa, wb, offs)
        with self._dynamic(OVERLAP_OPS_SM90_TILE="medium"):
            with self.assertRaisesRegex(RuntimeError, message):
                _grouped_mm(a, b, offs)
        # static applies to every call.
        with self._dynamic(OVERLAP_OPS_SM90_SCHEDULER="static",
                           OVERLAP_OPS_SM90_TILE="medium"):
            self._run_and_check(a, b, offs)


class TestSm90LaunchWindows(HopperTestCase):
    """Windowed launches (OVERLAP_OPS_SM90_LAUNCH_WAVES=2|4|8|16, an
    experiment off by default): the call's tiles run as several launches of
    the chunked-order kernel, each a window of whole waves of the linear
    tile index (launch_windows in GroupedMMTileOrder.h), so the CTAs
    restart in step at every launch. Built for large_solo with 64-column
    store tiles (16-bit fwd, dgrad) and large with wider store tiles
    (16-bit wgrad). The same results as the float64 reference per group,
    with empty, one-row and ragged groups, more than 1024 groups, a bias,
    both rasters and a carveout of SMs - 8 (many windows, and past 32 the
    windows widen); the launch count follows launch_windows; graph replays
    with other offsets are right; other calls raise while it is set."""

    def setUp(self):
        super().setUp()
        # The TF32 tests below check the default TF32 routes (the direct
        # read, the short K tile); memcheck runs of other configs pin
        # these switches for the whole process (tools/gpu_session.sh
        # sanitize), so unpin them here. A test's own pin still wins.
        defaults = unittest.mock.patch.dict(
            os.environ, {"OVERLAP_OPS_SM90_TF32_K_TILE": "auto",
                         "OVERLAP_OPS_SM90_TF32_MN_B": "auto"})
        defaults.start()
        self.addCleanup(defaults.stop)

    def _windows(self, waves="2", tile="large_solo", store_tile="64",
                 **extra):
        return _sm90_env(**{"OVERLAP_OPS_SM90_TILE": tile,
                            "OVERLAP_OPS_SM90_STORE_TILE": store_tile,
                            "OVERLAP_OPS_SM90_LAUNCH_WAVES": waves, **extra})

    @dtypes(torch.bfloat16, torch.float16)
    @parametrize("b_transposed", [False, True])
    @parametrize("raster", ["m", "n"])
    def test_matches_reference(self, device, dtype, b_transposed, raster):
        _check_fwd_walk_cases(
            self, device, dtype, b_transposed,
            [lambda w=waves: self._windows(w, OVERLAP_OPS_SM90_RASTER=raster)
             for waves in ("2", "16")])

    @dtypes(torch.bfloat16, torch.float16)
    @parametrize("store_tile", ["64", "128"])
    def test_wgrad_matches_reference(self, device, dtype, store_tile):
        cases = [([300, 0, 1, 777, 130], 520, 264, True),
                 ([(i * 3) % 5 for i in range(1030)], 136, 256, False)]
        _check_wgrad_cases(
            self, device, dtype, cases,
            lambda: self._windows("2", "large", store_tile))

    @parametrize("b_transposed", [False, True])
    def test_tf32_matches_reference(self, device, b_transposed):
        # TF32: row-major weights on the direct read's 256-token tiles
        # (more than 128 rows per group on average), column-major ones on
        # K-major large_solo with the short K tile; empty, one-row and
        # ragged groups, more than 1024 groups, a bias, a carveout of
        # SMs - 8. The GEMMs launched are the chunked problem shape's.
        cases = [([300, 0, 1, 777, 130, 2048], 136, 520, True),
                 ([(i % 3) * 150 for i in range(1100)], 72, 264, False)]
        with _allow_tf32(True):
            _check_fwd_walk_cases(
                self, device, torch.float32, b_transposed,
                [lambda w=waves: _sm90_env(OVERLAP_OPS_SM90_LAUNCH_WAVES=w)
                 for waves in ("2", "16")], cases=cases)
        # Last: the profiler is not there under compute-sanitizer. The last
        # case (no bias) on SMs - 8 again.
        sizes, k, n, _ = cases[-1]
        a, b = _fwd_operands(device, torch.float32, sizes, k, n, b_transposed)
        offs = make_offsets(sizes, device)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        with carveout_set(sms - 8):
            with _sm90_env(OVERLAP_OPS_SM90_LAUNCH_WAVES="2"), \
                    _allow_tf32(True):
                names = [name for name, _ in launched_kernels(
                    lambda: _grouped_mm(a, b, offs))]
        gemms = _sm90_gemm_names(names)
        self.assertGreater(len(gemms), 1, names)
        self.assertTrue(all("ChunkedGroupProblemShape" in g for g in gemms),
                        gemms)
        self.assertEqual(not b_transposed,
                         all("Tf32RegisterAMainloop" in g for g in gemms))

    def test_tf32_default_and_graph_replay(self, device):
        # Unset, TF32 calls on the windowed kernels with at least 2048 rows
        # per group on average take 8 waves per launch
        # (tf32_launch_waves_for), smaller groups one launch; a captured
        # windowed call replays right with other offsets.
        sms = torch.cuda.get_device_properties(device).multi_processor_count

        def gemm_launches(a, b, offs):
            with _sm90_env():
                return len(_sm90_gemm_names([name for name, _ in
                                             launched_kernels(
                    lambda: _grouped_mm(a, b, offs))]))
        # 2460 rows per group: the direct read's 256-token x 128-column
        # tiles on 2 CTAs.
        a, b, offs, launches = _windowed_fwd_case(
            device, torch.float32, [3000, 0, 1, 4999, 4300], 1000, 256, 128,
            2, 8)
        self.assertGreater(launches, 1)
        small = [600, 0, 1, 999, 1300]  # 580 rows per group
        sa, sb = _fwd_operands(device, torch.float32, small, 64, 1000,
                               False)
        small_offs = make_offsets(small, device)
        with _allow_tf32(True):
            _check_graph_replays(
                self, device, torch.float32,
                lambda: _sm90_env(OVERLAP_OPS_SM90_LAUNCH_WAVES="8"),
                ("skewed", "balanced"))
            with carveout_set(sms - 2):
                for env in ({}, {"OVERLAP_OPS_SM90_LAUNCH_WAVES": "off"}):
                    with _sm90_env(**env):
                        self._run_and_check(a, b, offs)
                        self._run_and_check(sa, sb, small_offs)
                # Last: the profiler is not there under compute-sanitizer.
                counts = (gemm_launches(a, b, offs),
                          gemm_launches(sa, sb, small_offs))
        self.assertEqual(counts, (launches, 1))

    def test_tf32_other_calls_raise(self, device):
        message = "LAUNCH_WAVES is built only for"
        offs = make_offsets([40, 0, 300], device)
        a, b = _fwd_operands(device, torch.float32, [40, 0, 300], 64, 128,
                             False)
        with _allow_tf32(True):
            # 113 rows per group: the direct read's token split, which
            # runs 128-token tiles first.
            with _sm90_env(OVERLAP_OPS_SM90_LAUNCH_WAVES="4"):
                with self.assertRaisesRegex(RuntimeError,
                                            "128-token tiles"):
                    _grouped_mm(a, b, offs)
            # The long K tile on the K-major kernel.
            a, b = _fwd_operands(device, torch.float32, [400, 0, 300], 64,
                                 128, True)
            offs = make_offsets([400, 0, 300], device)
            with _sm90_env(OVERLAP_OPS_SM90_LAUNCH_WAVES="4",
                           OVERLAP_OPS_SM90_TF32_K_TILE="long"):
                with self.assertRaisesRegex(RuntimeError, message):
                    _grouped_mm(a, b, offs)
            # A small wgrad goes to the SM80 kernels (the TF32 route; the
            # backend left to it).
            wa, wb = _wgrad_operands(device, torch.float32, [40, 0, 30], 8,
                                     8)
            with _sm90_env(OVERLAP_OPS_SM90_LAUNCH_WAVES="4",
                           **{_BACKEND_ENV: "auto"}):
                with self.assertRaisesRegex(RuntimeError,
                                            "SM80 or generic"):
                    _grouped_mm(wa, wb, make_offsets([40, 0, 30], device))
            # off applies to every call.
            with _sm90_env(OVERLAP_OPS_SM90_LAUNCH_WAVES="off"):
                self._run_and_check(a, b, offs)

    def test_launch_count_follows_the_windows(self, device):
        # 8 CTAs, 2 waves per launch: 16 tiles a window. 5 groups over
        # 1000 rows on 128x256 tiles, N 1000: bound (8 + 5) x 4 = 52 tiles,
        # 4 launches; the real 40 tiles (2+3+0+1+4 tile rows of 4) fill
        # three of them, the last one runs none.
        a, b, offs, launches = _windowed_fwd_case(
            device, torch.bfloat16, [200, 300, 0, 1, 499], 1000, 128, 256,
            8, 2)
        self.assertEqual(launches, 4)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        with carveout_set(sms - 8):
            for waves, expected in (("2", launches), ("off", 1)):
                with self._windows(waves):
                    self._run_and_check(a, b, offs)
                    kernels = _sm90_gemm_names([name for name, _ in
                                                launched_kernels(
                        lambda: _grouped_mm(a, b, offs))])
                self.assertEqual(len(kernels), expected, kernels)
                self.assertEqual(
                    waves == "2",
                    all("ChunkedGroupProblemShape" in k for k in kernels))

    @dtypes(torch.bfloat16)
    def test_graph_replay_with_other_offsets(self, device, dtype):
        # The windows come from host-known sizes only, so a replay whose
        # groups need other tiles must still run every tile (NaN left
        # otherwise): from balanced to skewed and back.
        _check_graph_replays(self, device, dtype, self._windows,
                             ("skewed", "balanced"))

    def test_other_calls_raise(self, device):
        sizes = [40, 0, 300]
        offs = make_offsets(sizes, device)
        a, b = _fwd_operands(device, torch.bfloat16, sizes, 64, 128, False)
        message = "LAUNCH_WAVES is built only for"
        with self._windows("4", tile="medium", store_tile="auto"):
            with self.assertRaisesRegex(RuntimeError, message):
                _grouped_mm(a, b, offs)
        with self._windows("4", OVERLAP_OPS_SM90_SCHEDULER="dynamic"):
            with self.assertRaisesRegex(RuntimeError, message):
                _grouped_mm(a, b, offs)
        with self._windows("4", OVERLAP_OPS_SM90_SWIZZLE="2"):
            with self.assertRaisesRegex(RuntimeError, message):
                _grouped_mm(a, b, offs)
        with self._windows("3"):
            with self.assertRaisesRegex(RuntimeError,
                                        "OVERLAP_OPS_SM90_LAUNCH_WAVES"):
                _grouped_mm(a, b, offs)
        # off applies to every call.
        with self._windows("off", tile="medium", store_tile="auto"):
            self._run_and_check(a, b, offs)


class TestSm90DirectClusterLaunch(HopperTestCase):
    """OVERLAP_OPS_SM90_HOST_PATH=direct (the default): the Hopper kernels
    with a cluster (large: 2x1 CTAs, small: 1x2) launched through
    cudaLaunchKernelEx without CUTLASS's per-launch cudaFuncSetAttribute
    (launch_portable_cluster in GroupedMMSm90.cuh), pinned here so the
    tests keep covering it if the default changes.
    The same results as the float64 reference per group, and the same
    kernels and grids as CUTLASS's launch, with and without a carveout;
    large_solo, which has no cluster, launches as before."""

    def _env(self, tile, host_path):
        # The backend pinned too: testsm80 and the sanitizer's sm80 and
        # generic configs run this file with another one set.
        return unittest.mock.patch.dict(os.environ, {
            _BACKEND_ENV: "sm90", "OVERLAP_OPS_SM90_TILE": tile,
            "OVERLAP_OPS_SM90_HOST_PATH": host_path})

    @dtypes(torch.bfloat16, torch.float32)
    @parametrize("layout", ["2d_3d", "2d_2d"])
    @parametrize("tile", ["large", "small", "large_solo"])
    def test_matches_reference(self, device, dtype, layout, tile):
        a, b, bias, offs = _mixed_group_operands(device, dtype, layout)
        with self._env(tile, "direct"), _allow_tf32(True):
            self._run_and_check(a, b, offs, bias)

    def test_many_groups(self, device):
        # More groups than one block of the fill handles, skewed and with
        # empty ones, on both cluster configs.
        sizes = [(g * 37) % 23 if g % 5 else 0 for g in range(1100)]
        sizes[7] = 400
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes), 64, device=device, dtype=torch.bfloat16)
        b = _randn(len(sizes), 64, 136, device=device, dtype=torch.bfloat16)
        for tile in ("large", "small"):
            with self._env(tile, "direct"):
                self._run_and_check(a, b, offs)

    @parametrize("carveout", [0, 8])
    @parametrize("tile", ["large", "small"])
    def test_same_kernels_and_grids_as_cutlass_launch(self, device, tile,
                                                       carveout):
        sizes = [300, 0, 1, 777, 130]
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes), 96, device=device, dtype=torch.bfloat16)
        b = _randn(len(sizes), 96, 520, device=device, dtype=torch.bfloat16)
        grids = {}
        for host_path in ("lean", "direct"):
            with self._env(tile, host_path):
                grids[host_path] = launched_kernels_under_carveout(
                    lambda: _grouped_mm(a, b, offs), carveout=carveout)
        self.assertTrue(_sm90_gemm_names([name for name, _ in
                                          grids["direct"]]), grids)
        self.assertEqual(grids["direct"], grids["lean"])


# CUDA only: the CPU kernel has its own tests in test_grouped_mm.py.
instantiate_device_type_tests(TestGroupedMM, globals(), only_for=("cuda",))
instantiate_device_type_tests(TestGroupedMMDeviceOffsets, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestTf32PaddedK, globals(), only_for=("cuda",))
instantiate_device_type_tests(TestSm90SingleKernelTiles, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90Tf32ShortK, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestTf32MnBDirect, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90TileOrder, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90StoreTile, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90DirectClusterLaunch, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90DynamicTiles, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90LaunchWindows, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90TileChunk, globals(),
                              only_for=("cuda",))

if __name__ == "__main__":
    run_tests()
