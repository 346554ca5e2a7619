# Owner(s): ["module: cuda"]
"""The overlap_ops extension's CUDA grouped-mm tests beside the series'.

test_grouped_mm_cuda.py (the series' test) runs torch._grouped_mm, routed to
the extension in extension mode. This file names what only the extension
exposes: the checked-offsets switch, and, through its test-only module
(overlap_ops._testing, op grouped_mm_sm90), the Hopper kernels with parts
of the dispatch rule's plan replaced (tile config, token tile, tile order,
store tile, tile chunk, launch windows, K group alignment), plus the host
rules of that plan checked on the CPU. Not part of the patch series.
"""

from __future__ import annotations

import os
import sys
import unittest

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
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402
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
    _backend,
    _grouped_mm,
    _randn,
    GroupedMMTestCase,
)
from test_grouped_mm_cuda import (  # noqa: E402
    _allow_tf32,
    _capture_graph,
    _is_bounded_copy,
)
from test_grouped_mm_sm90 import (  # noqa: E402
    _run_padded_k,
    _sm90,
    _sm90_gemm_names,
    HopperTestCase,
)

needs_extension = unittest.skipIf(
    not HAS_EXTENSION, "tests the overlap_ops extension's API")


def _testing_ops():
    """The test-only ops of the extension (torch_ext/csrc/testing/),
    registered under torch.ops.overlap_ops_testing by its test module."""
    import overlap_ops._testing  # noqa: F401  (a missing module must fail)

    return torch.ops.overlap_ops_testing


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


def _check_wgrad_cases(test, device, dtype, cases, op):
    """Each (sizes, m, n, with_bias) wgrad case run by `op` (a grouped mm,
    as _sm90_plan returns) on a carveout of SMs - 8, so each CTA walks many
    tiles, checked against float64 per group by test._run_and_check."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    with carveout_set(sms - 8):
        for sizes, m, n, with_bias in cases:
            a, b = _wgrad_operands(device, dtype, sizes, m, n)
            bias = (_randn(len(sizes), n, device=device, dtype=dtype)
                    if with_bias else None)
            test._run_and_check(a, b, make_offsets(sizes, device), bias,
                                op=op)


def _sm90_plan(**plan):
    """A grouped mm (a, b, offs, bias, out_dtype) -> out that runs the
    Hopper kernels with parts of the dispatch rule's plan replaced by
    `plan` (config, token_tile, raster, store_tile_cols, tile_chunk,
    launch_waves, k_group_pad: the test-only op grouped_mm_sm90 of
    torch_ext/csrc/testing/RegisterGroupedMMSm90CUDA.cpp). The backend is
    pinned to sm90 around each call, as in _sm90."""
    def run(a, b, offs=None, bias=None, out_dtype=None):
        with _backend("sm90"):
            return _testing_ops().grouped_mm_sm90(a, b, offs, bias,
                                                  out_dtype, **plan)
    return run


# Forward cases for the alternative tile walks: (sizes, k, n, with_bias),
# with empty, one-row and ragged groups and more than 1024 groups.
_WALK_FWD_CASES = [([300, 0, 1, 777, 130, 2048], 136, 520, True),
                   ([(i * 5) % 7 for i in range(1100)], 72, 264, False),
                   ([4096, 0, 2500], 256, 1032, False)]


def _check_fwd_walk_cases(test, device, dtype, b_transposed, ops, calls=1,
                          cases=_WALK_FWD_CASES):
    """`cases` ((sizes, k, n, with_bias), by default _WALK_FWD_CASES) run by
    each of ops (grouped mms, as _sm90_plan returns), `calls` times each, on
    a carveout of SMs - 8 (each CTA walks many tiles), checked against
    float64 per group by test._run_and_check."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    with carveout_set(sms - 8):
        for sizes, k, n, with_bias in cases:
            a, b = _fwd_operands(device, dtype, sizes, k, n, b_transposed)
            bias = (_randn(len(sizes), n, device=device, dtype=dtype)
                    if with_bias else None)
            offs = make_offsets(sizes, device)
            for op in ops:
                for _ in range(calls):
                    test._run_and_check(a, b, offs, bias, op=op)


def _check_graph_replays(test, device, dtype, op, replays):
    """One fwd call of 8 groups over 4096 rows, run by op (a grouped mm),
    captured on a carveout of SMs - 8, replayed after overwriting the
    offsets with each of `replays` ("balanced" or "skewed") and the input
    with new values; every replay's output (NaN-filled before it) matches
    float64."""
    groups = 8
    sizes_of = {"balanced": group_sizes("balanced", 4096, groups),
                "skewed": group_sizes("skewed", 4096, groups, seed=3)}
    a = _randn(4096, 256, device=device, dtype=dtype)
    b = _randn(groups, 256, 768, device=device, dtype=dtype)
    offs = make_offsets(sizes_of["balanced"], device)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    with carveout_set(sms - 8):
        graph, out = _capture_graph(lambda: op(a, b, offs))
        for dist in replays:
            offs.copy_(make_offsets(sizes_of[dist], device))
            a.copy_(torch.randn_like(a))
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert_matches_reference(
                test, out, reference_grouped_mm(a, b, offs), a.dim(),
                b.dim(), offs, tolerance(dtype, test.device_type))


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
    bound = _testing_ops().sm90_tile_count_bound(
        len(sizes), True, sum(sizes), 0, n, tile_rows, tile_cols, 1, 1)
    _, launches = _testing_ops().sm90_launch_windows(
        bound, ctas, 1, waves, 32)
    return a, b, make_offsets(sizes, device), launches


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


class TestExtensionCheckedOffsets(GroupedMMTestCase):
    """overlap_ops.checked_offsets(), the Python switch over
    TORCH_GROUPED_MM_CHECK_OFFSETS."""

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


class TestSm90TileConfig(TestCase):
    """Which Hopper tile config, store tile, tile order and launch windows
    a call runs, from what the host knows without a sync
    (GroupedMMTileChoice.h, GroupedMMTileOrder.h), checked on the CPU
    through test-only ops."""

    @staticmethod
    def config(row_grouped, rows_per_group, tf32=False):
        return _testing_ops().sm90_tile_config(row_grouped, rows_per_group,
                                               tf32)

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
            return _testing_ops().sm90_raster_order(mean_m, mean_n)
        # wgrad of mixtral_8x7b_w2 (m 14336, n 4096): N first, which won
        # there.
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
        # so a group's token tiles share each weight tile in L2; weights
        # first on 256-token tiles, where N first lost on the large rows.
        swapped = _testing_ops().sm90_swapped_raster_order
        self.assertEqual(swapped(True), "n")
        self.assertEqual(swapped(False), "m")

    @needs_extension
    def test_chunked_tile_order(self):
        # GroupedMMTileOrder.h: each CTA takes `chunk` consecutive tiles of
        # every super-block of grid * chunk; chunk 1 is CUTLASS's order.
        def index(first, grid, cluster, chunk, step):
            return _testing_ops().sm90_chunked_tile_index(
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
        # GroupedMMTileOrder.h: windowed launches split a call's linear
        # tile index into windows of whole waves, at most max_launches of
        # them.
        bound = _testing_ops().sm90_tile_count_bound
        windows = _testing_ops().sm90_launch_windows

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
        # tiles, K-major large_solo) and groups hold at least 2048 rows on
        # average (smaller groups lost or tied), else one launch.
        def waves(direct, narrow, cluster, config, rows=4096):
            return _testing_ops().sm90_tf32_launch_waves(
                direct, narrow, cluster, config, rows)
        self.assertEqual(waves(True, False, False, "large_solo"), 8)
        self.assertEqual(waves(True, True, False, "large_solo"), 0)
        self.assertEqual(waves(True, False, True, "large_solo"), 0)
        self.assertEqual(waves(False, False, False, "large_solo"), 8)
        for config in ("small", "medium", "large"):
            self.assertEqual(waves(False, False, False, config), 0)
        self.assertEqual(waves(True, False, False, "large_solo", rows=2048),
                         8)
        for rows in (2047, 1024, 256):
            self.assertEqual(
                waves(True, False, False, "large_solo", rows=rows), 0)
            self.assertEqual(
                waves(False, False, False, "large_solo", rows=rows), 0)
        with self.assertRaisesRegex(RuntimeError, "config must be"):
            waves(False, False, False, "huge")

    @needs_extension
    def test_tf32_cluster_token_tile_default(self):
        # GroupedMMTileChoice.h: the direct read's 2-CTA clusters from 1024
        # rows per group on average up to the windows' 2048 (smaller groups
        # lost on balanced rows), on the H200's DRAM (peak 2 x 3201 MHz x
        # 6144 bits); on the H100's (2 x 2619 MHz x 5120 bits) the plain
        # tile won.
        h200, h100 = 2 * 3.201e9 * 768, 2 * 2.619e9 * 640

        def cluster(rows, groups, dram=h200):
            return _testing_ops().sm90_tf32_mn_b_cluster(rows, groups, dram)
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
            return _testing_ops().sm90_tile_chunk(
                config, same_16bit_out, grouped, extent, m, n)
        # The suite's wgrad rows (tokens per group, each group's output)
        # and what won there.
        rows = {"qwen3_decode": (8, 2048, 1536, 4),
                "deepseek_v3_decode": (64, 7168, 4096, 1),
                "grin_moe": (128, 4096, 6400, 1),
                "qwen3_30b_a3b_w2": (512, 768, 2048, 1)}
        for name, (tokens, m, n, expected) in rows.items():
            self.assertEqual(chunk("large", True, "k", tokens, m, n),
                             expected, name)
        self.assertEqual(chunk("large", True, "k", 0), 4)
        # The sweeps: 16 to 64 tokens with 96 tiles per group, 8 to 64 with
        # 256, won; 384 to 896 tiles did not, nor 128 tokens with 256 tiles
        # (skewed) or 256 tokens.
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
            return _testing_ops().sm90_store_tile_cols(
                config, same_16bit_out, grouped, extent)
        # The suite's wgrad rows (total tokens / experts) and the width
        # that won there.
        rows = {"qwen3_decode": (8, 128), "deepseek_v3_decode": (64, 128),
                "grin_moe": (128, 128), "gpt_oss_120b_w13": (256, 128),
                "qwen3_30b_a3b": (512, 64), "deepseek_v3_ep8": (1024, 64),
                "mixtral_8x7b": (4096, 64)}
        for name, (tokens, width) in rows.items():
            self.assertEqual(cols("large", True, "k", tokens), width, name)
        self.assertEqual(cols("large", True, "k", 0), 128)
        self.assertEqual(cols("large", True, "k", 257), 64)
        # large_solo's fwd and dgrad rows: 64 at every size the default
        # sends there.
        for rows_per_group in (129, 256, 512, 1024, 4096):
            self.assertEqual(cols("large_solo", True, "rows",
                                  rows_per_group), 64, rows_per_group)
        # Built only there: float32 output and TF32 keep CUTLASS's subtile,
        # and so do the other configs and groupings (large_solo on wgrad,
        # large on a row-grouped call, 3d x 3d: never the rule's picks).
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
        # Wide against large_solo: the rows' mean group sizes and the
        # config that won in geometric mean over the three distributions,
        # fwd and dgrad. qwen3_30b_a3b and deepseek_v2_lite_w2 (K and N at
        # most 2048) stay on large_solo: a bound on K and N that gave the
        # first to wide lost the second's dgrad.
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


class TestHopperTf32Route(TestCase):
    """Which kernels run float32 with TF32 allowed on Hopper
    (GroupedMMTf32Route.h): SM90 (TF32 WGMMA, K-major operands only, so an
    operand stored the other way is transposed first) or SM80 (mma.sync,
    either major, half the throughput). Checked on the CPU through a
    test-only op, on the suite's shapes where both were measured."""

    def family(self, m, k, n, groups, transpose_a=False, transpose_b=False,
               grouped_along_k=False):
        return _testing_ops().hopper_tf32_family(
            grouped_along_k, m, k, n, groups, transpose_a, transpose_b)

    @needs_extension
    def test_grouping_along_k_weighs_both_copies(self):
        # 2d x 2d: the SM90 path copies A (m x K) and B (K x n), K-major
        # with padded group starts; the SM80 kernels read them as they are.
        # SM90 wins when 1 / m + 1 / n < 1 / 700, the measured crossover
        # (wgrad: m = K, n = N of the case).
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
            # SM90 6.9 ms copy + 4.3 ms GEMM vs SM80 8.6 ms
            ("gpt_oss_120b_w13", 32768, 2880, 5760, 128): "sm80",
            # SM90 3.1 ms copy + 1.1 ms GEMM vs SM80 1.55 ms
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
        # above, fwd: with 256-token tiles it won every row from 256 rows
        # per group on, with 128-token tiles every row up to 128. A
        # column-major a keeps the route above.
        def direct(rows, groups, a_row_major=True):
            return _testing_ops().tf32_mn_b_direct_wins(
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
        # 128-token tiles against 256-token ones, same run, fwd: 0.72-0.93x
        # the previous default's time up to 128 rows per group, 1.35x at
        # 171 (grin_moe sparse) and 1.37-1.74x from 256 on.
        def narrow(rows, groups):
            return _testing_ops().tf32_mn_b_narrow_wins(rows, groups)
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
            return _testing_ops().tf32_mn_b_token_split_wins(
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
        # (0.81-0.98x the time of 16-byte starts), else on 16
        # bytes (4 floats; at 8 tokens per group the wider copies cost
        # more than the lines save, at 64 and 128 neither clearly won).
        def line_aligned(tokens, groups):
            pad = _testing_ops().tf32_k_group_pad(tokens, groups)
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
                layout = _testing_ops().tf32_padded_k_layout(sizes, pad)
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
            _testing_ops().tf32_padded_k_layout([3, -1], 4)

    @needs_extension
    def test_bad_arguments_name_themselves(self):
        with self.assertRaisesRegex(RuntimeError, "groups must be >= 1"):
            self.family(128, 128, 128, 0)
        with self.assertRaisesRegex(RuntimeError, "m, k and n must be >= 0"):
            self.family(-1, 128, 128, 1)


def _run_padded(test, device, sizes, m, n, pad=None, **kwargs):
    """_run_padded_k of test_grouped_mm_cuda.py, with the group alignment
    pad (floats) in place of the rule's, through the test-only op."""
    op = None if pad is None else _sm90_plan(k_group_pad=pad)
    _run_padded_k(test, device, sizes, m, n, op=op, pad=pad, **kwargs)


class TestTf32PaddedK(HopperTestCase):
    """TF32 grouped along K on Hopper with the group alignment of the
    K-major copies named through the test-only op."""

    @needs_extension
    def test_line_aligned_group_starts(self, device):
        # Groups on 128-byte lines of the copies (32 floats): by the rule
        # from 256 tokens per group on average, here also on small groups
        # and > 1024 groups (the test-only op), and 16 bytes on large ones.
        checks = []
        _run_padded(self, device, [300, 257, 0, 511, 1, 500], m=40, n=24,
                  deferred=checks)
        _run_padded(self, device, [13, 7, 0, 50, 1, 33], m=40, n=24, pad=32,
                  deferred=checks)
        _run_padded(self, device, [(i * 7) % 5 for i in range(1100)], m=16, n=8,
                  pad=32, deferred=checks)
        _run_padded(self, device, [300, 257, 0, 511, 1, 500], m=40, n=24, pad=4,
                  deferred=checks)
        for check in checks:
            check()


class TestSm90SingleKernelTiles(HopperTestCase):
    """The Hopper tile configs that run every group of a row-grouped call
    on one kernel without clusters: large_solo (128x256, the default past
    128 rows per group for 16-bit and past 32 for TF32) and wide (64x256
    pingpong, the 16-bit default from 33 to 128 rows per group), run by
    the rule or named through the test-only op. Correct with both majors
    of the weights and every output dtype they are built for."""

    @needs_extension
    def test_default_16_bit_tile_follows_mean_group_size(self, device):
        # By default a 16-bit row-grouped call launches wide's kernel up to
        # 128 rows per group on average and large_solo's beyond; compared
        # by kernel name with the same call on each named config.
        def gemm_kernels(a, b, offs, op):
            names = {name for name, _ in launched_kernels(
                lambda: op(a, b, offs))}
            return set(_sm90_gemm_names(names))

        for sizes, expected in [([100, 0, 129, 64, 120], "wide"),
                                ([300, 0, 129, 64, 640], "large_solo")]:
            offs = make_offsets(sizes, device)
            a = _randn(sum(sizes), 64, device=device, dtype=torch.bfloat16)
            b = _randn(len(sizes), 64, 256, device=device,
                       dtype=torch.bfloat16, transposed=True)
            default = gemm_kernels(a, b, offs, _sm90)
            self.assertTrue(default)
            self.assertEqual(
                default,
                gemm_kernels(a, b, offs, _sm90_plan(config=expected)),
                sizes)
            other = "large_solo" if expected == "wide" else "wide"
            self.assertFalse(
                default & gemm_kernels(a, b, offs, _sm90_plan(config=other)),
                sizes)

    @needs_extension
    @parametrize("tile", ["large_solo", "wide"])
    @parametrize("b_transposed", [False, True])
    def test_matches_reference(self, device, b_transposed, tile):
        # Odd 128-row tile counts (the case a cluster would pad), an empty
        # group, and more than 1024 groups, with the weights in either
        # major (the units with row-major A).
        dtype = torch.bfloat16
        op = _sm90_plan(config=tile)
        for sizes in ([300, 0, 129, 1, 640],
                      [(i * 5) % 7 for i in range(1100)]):
            offs = make_offsets(sizes, device)
            a, b = _fwd_operands(device, dtype, sizes, 64, 256, b_transposed)
            self._run_and_check(a, b, offs, op=op)
            names = [name for name, _ in
                     launched_kernels(lambda: op(a, b, offs))]
            # One GEMM launch.
            self.assertEqual(len(_sm90_gemm_names(names)), 1, names)

    @needs_extension
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
        op = _sm90_plan(config=tile)
        for dtype, out_dtype in cases:
            a = _randn(sum(sizes), 64, device=device, dtype=dtype)
            b = _randn(len(sizes), 64, 256, device=device, dtype=dtype,
                       transposed=True)
            bias = _randn(len(sizes), 256, device=device, dtype=dtype)
            with _allow_tf32(True):
                self._run_and_check(a, b, offs, bias, out_dtype, op=op)
                names = [name for name, _ in launched_kernels(
                    lambda: op(a, b, offs, bias, out_dtype))]
            self.assertEqual(len(_sm90_gemm_names(names)), 1, (dtype, names))

    @needs_extension
    def test_wide_is_not_built_for_float32(self, device):
        # The rule never gives TF32 wide, so its unit does not build it:
        # naming it raises instead of running another kernel.
        sizes = [300, 0, 129, 64, 640]
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes), 64, device=device, dtype=torch.float32)
        b = _randn(len(sizes), 64, 256, device=device, dtype=torch.float32,
                   transposed=True)
        with _allow_tf32(True):
            with self.assertRaisesRegex(RuntimeError, "not built"):
                _sm90_plan(config="wide")(a, b, offs)


class TestSm90Tf32Tiles(HopperTestCase):
    """The Hopper TF32 kernels (half the configs' K extent, so a stage
    holds as many bytes as a 16-bit one) on every tile config their unit
    builds, named through the test-only op, checked against float64 per
    group: each a kernel of its own."""

    @needs_extension
    def test_matches_reference(self, device):
        # K-major weights (no copy), K not a multiple of the 32-float
        # tile, odd 128-row tile counts, an empty group, a bias.
        sizes = [300, 0, 129, 1, 640]
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes) + 5, 72, device=device, dtype=torch.float32)
        b = _randn(len(sizes), 72, 256, device=device, dtype=torch.float32,
                   transposed=True)
        bias = _randn(len(sizes), 256, device=device, dtype=torch.float32)
        tiles = ("small", "medium", "large", "large_solo")
        with _allow_tf32(True):
            for tile in tiles:
                self._run_and_check(a, b, offs, bias,
                                    op=_sm90_plan(config=tile))
            # Last: under compute-sanitizer the profiler records nothing
            # and this skips, after every kernel ran under memcheck.
            gemms = {}
            for tile in tiles:
                names = [name for name, _ in launched_kernels(
                    lambda: _sm90_plan(config=tile)(a, b, offs, bias))]
                found = _sm90_gemm_names(names)
                self.assertEqual(len(found), 1, names)
                gemms[tile] = found[0]
        self.assertEqual(len(set(gemms.values())), len(tiles), gemms)


class TestTf32MnBDirect(HopperTestCase):
    """TF32 calls grouped along rows with row-major (N-major) weights run
    the swapped Hopper kernel, D^T = W^T X^T with W^T read through
    registers (GroupedMMSm90Tf32MnB.cuh), and no transposing copy of the
    weights, for a row-major a. Each test runs its three kernels, named
    through the test-only op: the 256-token tile (wide), the 128-token
    tile (narrow, the default up to 96 rows per group) and 2-CTA clusters
    (cluster, the default from 1024 to 2047 on fast DRAM), each walking its
    tiles M first and N first. Checked against float64 per group. The
    token split (both kernels, each group on one, chosen on the device)
    has its own tests below."""

    _KERNEL = "Tf32RegisterAMainloop"

    def _names(self, op, a, b, offs, bias):
        return [name for name, _ in launched_kernels(
            lambda: op(a, b, offs, bias))]

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
        tiles = ("wide", "narrow", "cluster")
        with _allow_tf32(True):
            for tile in tiles:
                # Both tile orders.
                for raster in ("m", "n"):
                    self._run_and_check(
                        a, b, offs, bias_t,
                        op=_sm90_plan(token_tile=tile, raster=raster))
            # Last: under compute-sanitizer the profiler records nothing
            # and this skips, after every kernel's call above ran under
            # memcheck.
            for tile in tiles:
                names = self._names(_sm90_plan(token_tile=tile), a, b, offs,
                                    bias_t)
                gemms = _sm90_gemm_names(names)
                self.assertEqual(len(gemms), 1, names)
                self.assertIn(self._KERNEL, gemms[0])
                self.assertFalse(
                    any(_is_bounded_copy(name) for name in names), names)
                gemm_per_tile[tile] = gemms[0]
        self.assertEqual(len(set(gemm_per_tile.values())), len(tiles),
                         gemm_per_tile)

    @needs_extension
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

    @needs_extension
    def test_bias_k0_free_rows_past_the_last_offset(self, device):
        # The epilogue adds each group's bias along D^T's rows; rows past
        # offs[-1] are zeros.
        self._check(device, [33, 0, 190, 4], k=40, n=136, bias=True,
                    extra_rows=23)

    @needs_extension
    @parametrize("offs_dtype", [torch.int32, torch.int64])
    def test_more_than_1024_groups(self, device, offs_dtype):
        sizes = [(i * 7) % 5 for i in range(1500)]  # zeros and 1..4
        self._check(device, sizes, k=32, n=64, offs_dtype=offs_dtype)

    @needs_extension
    def test_odd_weight_tiles_and_more_k_tiles_than_stages(self, device):
        # N = 328: three 128-row weight tiles, so the 2-CTA cluster pads one
        # (with a bias); K = 200: seven 32-float K tiles, more than the
        # stages, so stages are released and refilled inside the mainloop;
        # groups past 256 tokens.
        self._check(device, [300, 0, 520, 7], k=200, n=328, bias=True)

    @needs_extension
    def test_token_tile_follows_the_mean_group_size(self, device):
        # Up to 96 rows per group on average the default is the 128-token
        # kernel; past 128, the 256-token one; between, both (a token
        # split).
        def gemm(sizes, op):
            offs = make_offsets(sizes, device)
            a = _randn(sum(sizes), 64, device=device, dtype=torch.float32)
            b = _randn(len(sizes), 64, 128, device=device,
                       dtype=torch.float32)
            with _allow_tf32(True):
                gemms = _sm90_gemm_names(self._names(op, a, b, offs, None))
            self.assertEqual(len(gemms), 1, gemms)
            return gemms[0]
        # (Means past 96 rows split by default: test_token_split_*.)
        small, large = [40, 0, 80], [200, 0, 280]
        self.assertEqual(gemm(small, _sm90),
                         gemm(small, _sm90_plan(token_tile="narrow")))
        self.assertEqual(gemm(large, _sm90),
                         gemm(large, _sm90_plan(token_tile="wide")))
        self.assertNotEqual(gemm(large, _sm90), gemm(small, _sm90))
        # 1024 to 2047 rows per group on average: the 2-CTA clusters where
        # the device's peak DRAM bandwidth reaches the rule's bound, else
        # the plain 256-token tile.
        clustered = [1500, 0, 1700]
        props = torch.cuda.get_device_properties(device)
        dram = 2 * props.memory_clock_rate * 1e3 * props.memory_bus_width / 8
        expected = ("cluster" if _testing_ops().sm90_tf32_mn_b_cluster(
            sum(clustered), len(clustered), dram) else "wide")
        self.assertEqual(gemm(clustered, _sm90),
                         gemm(clustered, _sm90_plan(token_tile=expected)))
        self.assertNotEqual(
            gemm(clustered, _sm90_plan(token_tile="cluster")),
            gemm(clustered, _sm90_plan(token_tile="wide")))

    @needs_extension
    def test_cluster_and_windowed_wide_tile_match_reference(self, device):
        # The clusters (the default on fast DRAM, also named here) on
        # ragged groups (one empty, K and N not multiples of the tiles, a
        # bias, rows past offs[-1]), with and without a carveout; and the
        # windowed launches of the plain 256-token tile on the same call.
        sizes = [1500, 0, 1201, 1777]
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes) + 9, 72, device=device, dtype=torch.float32)
        b = _randn(len(sizes), 72, 200, device=device, dtype=torch.float32)
        bias = _randn(len(sizes), 200, device=device, dtype=torch.float32)
        with _allow_tf32(True):
            for carveout in (None, 9):
                with carveout_set(carveout):
                    for op in (_sm90, _sm90_plan(token_tile="cluster")):
                        self._run_and_check(a, b, offs, bias, op=op)
            self._run_and_check(
                a, b, offs, bias,
                op=_sm90_plan(token_tile="wide", launch_waves=2))
            # Last (the profiler records nothing under compute-sanitizer,
            # and this skips): one GEMM kernel, within SMs - 9.
            sms = torch.cuda.get_device_properties(
                device).multi_processor_count
            grids = launched_kernels_under_carveout(
                lambda: _sm90_plan(token_tile="cluster")(a, b, offs, bias),
                carveout=9)
        gemms = [(name, ctas) for name, ctas in grids if self._KERNEL in name]
        self.assertEqual(len(gemms), 1, grids)
        self.assertLessEqual(gemms[0][1], sms - 9, gemms)

    @needs_extension
    def test_token_split_matches_reference_and_runs_both_kernels(
            self, device):
        # Groups on both sides of the 128-token tile and at its edges (0,
        # 1, 127, 128, 129, 255, 256, 257), a bias, rows past offs[-1], K
        # and N not multiples of the tiles; about 100 rows per group on
        # average, so the default splits. With and without a carveout.
        sizes = [0, 1, 127, 128, 129, 255, 256, 257, 7, 0, 3, 0, 150, 99]
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes) + 11, 72, device=device, dtype=torch.float32)
        self.assertTrue(_testing_ops().tf32_mn_b_token_split_wins(
            a.shape[0], len(sizes)))
        b = _randn(len(sizes), 72, 200, device=device, dtype=torch.float32)
        bias = _randn(len(sizes), 200, device=device, dtype=torch.float32)
        ops = (_sm90, _sm90_plan(token_tile="split"),
               _sm90_plan(token_tile="narrow"))
        with _allow_tf32(True):
            for carveout in (None, 9):
                with carveout_set(carveout):
                    for op in ops:
                        self._run_and_check(a, b, offs, bias, op=op)
                        self._run_and_check(a, b, offs, op=op)

            # Last (the profiler records nothing under compute-sanitizer,
            # and this skips): the split runs the 128-token kernel and the
            # 256-token one, each within SMs - 9; narrow runs the first
            # alone.
            def gemms(op):
                grids = launched_kernels_under_carveout(
                    lambda: op(a, b, offs, bias), carveout=9)
                found = [(name, ctas) for name, ctas in grids
                         if self._KERNEL in name]
                self.assertTrue(found, grids)
                return found
            narrow = gemms(_sm90_plan(token_tile="narrow"))
            wide = gemms(_sm90_plan(token_tile="wide"))
            split = gemms(_sm90)
        self.assertEqual(sorted(name for name, _ in split),
                         sorted([narrow[0][0], wide[0][0]]), split)
        self.assertNotEqual(narrow[0][0], wide[0][0])
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        self.assertTrue(all(ctas <= sms - 9 for _, ctas in split), split)
        self.assertEqual(len(narrow), 1, narrow)

    @needs_extension
    def test_token_split_where_the_rule_does_not_split(self, device):
        # A split of a call whose mean takes the 256-token tile (216 rows
        # per group), and the 128-token tile alone where the rule splits
        # (100). Both checked against the reference first, so memcheck runs
        # them too.
        calls = []
        for tile, sizes in (("split", [700, 40, 0, 129, 128, 300]),
                            ("narrow", [100, 0, 200])):
            offs = make_offsets(sizes, device)
            a = _randn(sum(sizes), 64, device=device, dtype=torch.float32)
            b = _randn(len(sizes), 64, 136, device=device,
                       dtype=torch.float32)
            op = _sm90_plan(token_tile=tile)
            with _allow_tf32(True):
                self._run_and_check(a, b, offs, op=op)
            calls.append((tile, op, a, b, offs))
        # Last: under compute-sanitizer the profiler records nothing and
        # this skips.
        for tile, op, a, b, offs in calls:
            with _allow_tf32(True):
                names = self._names(op, a, b, offs, None)
            gemms = [name for name in _sm90_gemm_names(names)
                     if self._KERNEL in name]
            self.assertEqual(len(gemms), 2 if tile == "split" else 1, names)


class TestSm90TileOrder(HopperTestCase):
    """The Hopper kernels walking each group's output tiles M first and N
    first (named through the test-only op; the rule is raster_order_for in
    GroupedMMTileChoice.h): the same results, checked against float64 per
    group, with groups that are empty, of one row and ragged, and a bias
    fused in the epilogue. A carveout leaves 8 CTAs, so each walks many
    tiles in the order under test."""

    @needs_extension
    @dtypes(torch.bfloat16, torch.float32)
    @parametrize("layout", ["2d_3d", "2d_2d"])
    @parametrize("raster", ["m", "n"])
    def test_matches_reference(self, device, dtype, layout, raster):
        a, b, bias, offs = _mixed_group_operands(device, dtype, layout)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        with carveout_set(sms - 8), _allow_tf32(True):
            self._run_and_check(a, b, offs, bias,
                                op=_sm90_plan(raster=raster))


class TestSm90StoreTile(HopperTestCase):
    """The large config's wider store tiles, which 16-bit wgrad (calls
    grouped along K, output in the input dtype) runs by default: its output
    stored through 128x64 or 128x128 subtiles instead of CUTLASS's 128x32
    (each named here through the test-only op), and 64-column subtiles on
    large_solo for 16-bit fwd and dgrad (test_large_solo_*). Each width
    runs its own kernel and gives the same results, checked against float64
    per group: empty groups (exact zeros), one-token groups, ragged m and n
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
    _WIDER = r"ILi2ELi2ELi64E|<2, 2, 64,|ILi4ELi2ELi32E|<4, 2, 32,"

    def _store_tile(self, cols, tile="large"):
        """The call on `tile` with `cols` store tiles ("auto": the rule's,
        "cutlass": CUTLASS's), in CUTLASS's tile order where the chunked
        one is not built (it is on 128 columns only)."""
        plan = {"config": tile}
        if cols != "auto":
            plan["store_tile_cols"] = 0 if cols == "cutlass" else int(cols)
            if cols != "128":
                plan["tile_chunk"] = 1
        return _sm90_plan(**plan)

    def _gemm_kernel(self, op, a, b, offs, **kwargs):
        names = {name for name, _ in launched_kernels(
            lambda: op(a, b, offs, **kwargs))}
        kernels = _sm90_gemm_names(names)
        self.assertEqual(len(kernels), 1, kernels)
        return next(iter(kernels))

    @needs_extension
    @dtypes(torch.bfloat16, torch.float16)
    @parametrize("cols", ["auto", "cutlass", "64", "128"])
    def test_matches_reference(self, device, dtype, cols):
        cases = [([300, 0, 1, 77, 130], 520, 264, True),
                 ([(i * 5) % 7 for i in range(1100)], 136, 72, False),
                 ([700, 0, 513, 1], 264, 200, True)]
        _check_wgrad_cases(self, device, dtype, cases, self._store_tile(cols))

    @needs_extension
    def test_runs_its_own_kernel(self, device):
        sizes = [40, 0, 300]
        a, b = _wgrad_operands(device, torch.bfloat16, sizes, 256, 512)
        offs = make_offsets(sizes, device)
        for cols, policy in self._EPILOGUE_POLICY.items():
            self.assertRegex(
                self._gemm_kernel(self._store_tile(cols), a, b, offs),
                policy)

    @needs_extension
    @dtypes(torch.bfloat16, torch.float16)
    def test_default_width_by_tokens_per_group(self, device, dtype):
        # store_tile_cols_for: 128 columns up to 256 tokens per group on
        # average, 64 beyond; by the default dispatch (large at m = 256)
        # and with large named.
        for op in (_sm90, self._store_tile("auto")):
            for sizes, width in (([40, 0, 300], "128"), ([256, 256], "128"),
                                 ([300, 0, 800], "64"), ([257, 257], "64")):
                a, b = _wgrad_operands(device, dtype, sizes, 256, 512)
                offs = make_offsets(sizes, device)
                self.assertRegex(self._gemm_kernel(op, a, b, offs),
                                 self._EPILOGUE_POLICY[width], sizes)

    # large_solo's store tiles: fwd and dgrad, 2d x 3d with row-major A and
    # the weights in either major (_fwd_operands).

    @needs_extension
    @dtypes(torch.bfloat16, torch.float16)
    @parametrize("b_transposed", [False, True])
    def test_large_solo_matches_reference(self, device, dtype, b_transposed):
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        cases = [([300, 0, 1, 77, 130], 264, 520, True),
                 ([(i * 5) % 7 for i in range(1100)], 72, 136, False)]
        with carveout_set(sms - 8):
            for sizes, k, n, with_bias in cases:
                a, b = _fwd_operands(device, dtype, sizes, k, n,
                                     b_transposed)
                bias = (_randn(len(sizes), n, device=device, dtype=dtype)
                        if with_bias else None)
                self._run_and_check(a, b, make_offsets(sizes, device), bias,
                                    op=self._store_tile("auto", "large_solo"))

    @needs_extension
    @parametrize("b_transposed", [False, True])
    def test_large_solo_runs_its_own_kernel(self, device, b_transposed):
        # 200 rows per group on average: large_solo by default too. 64
        # columns for bf16 and fp16 output, by default and named; float32
        # output keeps CUTLASS's subtile, and its unit builds no other.
        sizes = [200, 0, 400]
        a, b = _fwd_operands(device, torch.bfloat16, sizes, 256, 512,
                             b_transposed)
        offs = make_offsets(sizes, device)
        solo = self._store_tile("auto", "large_solo")
        for op in (_sm90, solo):
            self.assertRegex(self._gemm_kernel(op, a, b, offs),
                             self._EPILOGUE_POLICY["64"])
            self.assertRegex(self._gemm_kernel(op, a.half(), b.half(), offs),
                             self._EPILOGUE_POLICY["64"])
            self.assertNotRegex(
                self._gemm_kernel(op, a, b, offs, out_dtype=torch.float32),
                self._WIDER)
        with self.assertRaisesRegex(RuntimeError, "not built"):
            self._store_tile("64", "large_solo")(a, b, offs,
                                                 out_dtype=torch.float32)

    @needs_extension
    def test_float32_output_keeps_cutlass_tile(self, device):
        # Not built for float32 output: the rule leaves its subtile to
        # CUTLASS, and naming a width raises instead of running something
        # else.
        sizes = [40, 0, 300]
        a, b = _wgrad_operands(device, torch.bfloat16, sizes, 256, 512)
        offs = make_offsets(sizes, device)
        self.assertNotRegex(
            self._gemm_kernel(self._store_tile("auto"), a, b, offs,
                              out_dtype=torch.float32),
            self._WIDER)
        with self.assertRaisesRegex(RuntimeError, "not built"):
            self._store_tile("64")(a, b, offs, out_dtype=torch.float32)


class TestSm90TileChunk(HopperTestCase):
    """The chunked tile order (GroupedMMTileOrder.h; chunk 4 by default for
    16-bit wgrad with at most 64 tokens and 264 tiles per group, named here
    through the test-only op): each CTA of the large config takes `chunk`
    consecutive output tiles instead of one tile every grid size, so it
    changes group less often. Built for 16-bit wgrad (grouped along K,
    output in the input dtype) on 128-column store tiles. The same results
    as the float64 reference per group, with empty, one-token and ragged
    groups, more than 1024 groups, a bias, both rasters, and a carveout of
    SMs - 8 so each CTA walks many tiles; the kernel run is the chunked one
    where named or chosen, the plain one where not."""

    def _chunked(self, chunk, raster="auto"):
        return _sm90_plan(config="large", store_tile_cols=128,
                          tile_chunk=chunk, raster=raster)

    @needs_extension
    @dtypes(torch.bfloat16, torch.float16)
    @parametrize("chunk", [2, 4, 16])
    @parametrize("raster", ["m", "n"])
    def test_matches_reference(self, device, dtype, chunk, raster):
        cases = [([300, 0, 1, 77, 130], 520, 264, True),
                 ([(i * 5) % 7 for i in range(1100)], 136, 72, False),
                 ([700, 0, 513, 1], 264, 200, True),
                 ([8] * 40, 392, 1032, False)]
        _check_wgrad_cases(self, device, dtype, cases,
                           self._chunked(chunk, raster))

    @needs_extension
    def test_runs_the_chunked_kernel(self, device):
        sizes = [8] * 40
        a, b = _wgrad_operands(device, torch.bfloat16, sizes, 392, 1032)
        offs = make_offsets(sizes, device)

        def chunked(op):
            names = _sm90_gemm_names({name for name, _ in launched_kernels(
                lambda: op(a, b, offs))})
            self.assertEqual(len(names), 1, names)
            return "ChunkedGroupProblemShape" in next(iter(names))
        self.assertTrue(chunked(self._chunked(4)))
        self.assertFalse(chunked(self._chunked(1)))
        # The default dispatch (tile_chunk_for): 8 tokens per group take
        # the chunked order, 96 do not.
        self.assertTrue(chunked(_sm90))
        sizes = [96] * 40
        a, b = _wgrad_operands(device, torch.bfloat16, sizes, 392, 1032)
        offs = make_offsets(sizes, device)
        self.assertFalse(chunked(_sm90))


class TestSm90LaunchWindows(HopperTestCase):
    """Windowed launches (TileChoice::launch_waves), which TF32 calls take
    by default from 2048 rows per group on the kernels built for them (the
    direct read's 256-token tiles, K-major large_solo), named here through
    the test-only op on smaller calls: the call's tiles run as several
    launches of the chunked-order kernel, each a window of whole waves of
    the linear tile index (launch_windows in GroupedMMTileOrder.h), so the
    CTAs restart in step at every launch. The same results as the float64
    reference per group, with empty, one-row and ragged groups, more than
    1024 groups, a bias, and a carveout of SMs - 8 (many windows, and past
    32 the windows widen); the launch count follows launch_windows; graph
    replays with other offsets are right."""

    @needs_extension
    @parametrize("b_transposed", [False, True])
    def test_tf32_matches_reference(self, device, b_transposed):
        # Row-major weights on the direct read's 256-token tiles (more than
        # 128 rows per group on average), column-major ones on K-major
        # large_solo. The GEMMs launched are the chunked problem shape's.
        cases = [([300, 0, 1, 777, 130, 2048], 136, 520, True),
                 ([(i % 3) * 150 for i in range(1100)], 72, 264, False)]
        with _allow_tf32(True):
            _check_fwd_walk_cases(
                self, device, torch.float32, b_transposed,
                [_sm90_plan(launch_waves=waves) for waves in (2, 16)],
                cases=cases)
        # Last: the profiler is not there under compute-sanitizer. The last
        # case (no bias) on SMs - 8 again.
        sizes, k, n, _ = cases[-1]
        a, b = _fwd_operands(device, torch.float32, sizes, k, n, b_transposed)
        offs = make_offsets(sizes, device)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        with carveout_set(sms - 8), _allow_tf32(True):
            names = [name for name, _ in launched_kernels(
                lambda: _sm90_plan(launch_waves=2)(a, b, offs))]
        gemms = _sm90_gemm_names(names)
        self.assertGreater(len(gemms), 1, names)
        self.assertTrue(all("ChunkedGroupProblemShape" in g for g in gemms),
                        gemms)
        self.assertEqual(not b_transposed,
                         all("Tf32RegisterAMainloop" in g for g in gemms))

    @needs_extension
    def test_tf32_default_and_graph_replay(self, device):
        # By default, TF32 calls on the windowed kernels with at least 2048
        # rows per group on average take 8 waves per launch
        # (tf32_launch_waves_for), smaller groups one launch; a captured
        # windowed call replays right with other offsets.
        sms = torch.cuda.get_device_properties(device).multi_processor_count

        def gemm_launches(a, b, offs):
            return len(_sm90_gemm_names([name for name, _ in
                                         launched_kernels(
                lambda: _sm90(a, b, offs))]))
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
            _check_graph_replays(self, device, torch.float32,
                                 _sm90_plan(launch_waves=8),
                                 ("skewed", "balanced"))
            with carveout_set(sms - 2):
                for op in (_sm90, _sm90_plan(launch_waves=0)):
                    self._run_and_check(a, b, offs, op=op)
                    self._run_and_check(sa, sb, small_offs, op=op)
                # Last: the profiler is not there under compute-sanitizer.
                counts = (gemm_launches(a, b, offs),
                          gemm_launches(sa, sb, small_offs))
        self.assertEqual(counts, (launches, 1))

    @needs_extension
    def test_launch_count_follows_the_windows(self, device):
        # 8 CTAs, 2 waves per launch: 16 tiles a window. 5 groups over
        # 1000 rows on the direct read's 256-token x 128-column tiles, N
        # 1000: bound (4 + 5) x 8 = 72 tiles, 5 launches; the real 48 tiles
        # (1+2+0+1+2 token tiles of 8) fill three of them, the last two run
        # none.
        a, b, offs, launches = _windowed_fwd_case(
            device, torch.float32, [200, 300, 0, 1, 499], 1000, 256, 128,
            8, 2)
        self.assertEqual(launches, 5)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        with carveout_set(sms - 8), _allow_tf32(True):
            for waves, expected in ((2, launches), (0, 1)):
                op = _sm90_plan(launch_waves=waves)
                self._run_and_check(a, b, offs, op=op)
                kernels = _sm90_gemm_names([name for name, _ in
                                            launched_kernels(
                    lambda: op(a, b, offs))])
                self.assertEqual(len(kernels), expected, kernels)
                self.assertEqual(
                    waves == 2,
                    all("ChunkedGroupProblemShape" in k for k in kernels))


class TestSm90DirectClusterLaunch(HopperTestCase):
    """The Hopper kernels with a cluster (large: 2x1 CTAs, small: 1x2)
    launched through cudaLaunchKernelEx without CUTLASS's per-launch
    cudaFuncSetAttribute (launch_portable_cluster in GroupedMMSm90.cuh),
    named through the test-only op: the same results as the float64
    reference per group."""

    @needs_extension
    @dtypes(torch.bfloat16, torch.float32)
    @parametrize("layout", ["2d_3d", "2d_2d"])
    @parametrize("tile", ["large", "small"])
    def test_matches_reference(self, device, dtype, layout, tile):
        # TF32 2d x 3d with row-major weights would take the direct read,
        # where the config does not apply: the K-major kernels then.
        a, b, bias, offs = _mixed_group_operands(device, dtype, layout)
        op = _sm90_plan(config=tile, token_tile="none")
        with _allow_tf32(True):
            self._run_and_check(a, b, offs, bias, op=op)

    @needs_extension
    def test_many_groups(self, device):
        # More groups than one block of the fill handles, skewed and with
        # empty ones, on both cluster configs.
        sizes = [(g * 37) % 23 if g % 5 else 0 for g in range(1100)]
        sizes[7] = 400
        offs = make_offsets(sizes, device)
        a = _randn(sum(sizes), 64, device=device, dtype=torch.bfloat16)
        b = _randn(len(sizes), 64, 136, device=device, dtype=torch.bfloat16)
        for tile in ("large", "small"):
            self._run_and_check(a, b, offs, op=_sm90_plan(config=tile))


instantiate_device_type_tests(TestExtensionCheckedOffsets, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestTf32PaddedK, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90SingleKernelTiles, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90Tf32Tiles, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestTf32MnBDirect, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90TileOrder, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90StoreTile, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90DirectClusterLaunch, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90LaunchWindows, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestSm90TileChunk, globals(),
                              only_for=("cuda",))

if __name__ == "__main__":
    run_tests()
