# Owner(s): ["module: cuda"]
"""Tests for the Hopper (SM90) kernels of the CUDA _grouped_mm.

What the contract tests of test_grouped_mm_cuda.py (which run these kernels
on an SM90 GPU through the default dispatch) do not pin down: TF32 on
padded K groups, the single-kernel tiles and the TF32 kernel that reads
N-major weights directly, each checked against a float64 reference per
group. TORCH_GROUPED_MM_BACKEND=sm90 pins the Hopper kernels. The tests
skip on other GPUs.
"""

from __future__ import annotations

import os
import sys

import torch
from torch.testing._internal.common_device_type import (
    instantiate_device_type_tests,
)
from torch.testing._internal.common_utils import (
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
    launched_kernels,
)
from test_grouped_mm import (  # noqa: E402
    _backend,
    _grouped_mm,
    _poison_allocator,
    _randn,
    GroupedMMTestCase,
)
from test_grouped_mm_cuda import (  # noqa: E402
    _allow_tf32,
    _capture_graph,
    _FAMILY_KERNELS,
    _is_bounded_copy,
)


def _sm90_gemm_names(names):
    """The Hopper GEMM kernels among launched kernel names, repeats kept."""
    return [name for name in names if _FAMILY_KERNELS["sm90"] in name]


def _sm90(a, b, offs=None, bias=None, out_dtype=None):
    """The default dispatch with the Hopper backend pinned, so a suite run
    with another backend forced still reaches the Hopper kernels."""
    with _backend("sm90"):
        return _grouped_mm(a, b, offs, bias, out_dtype)


def _tf32_k_group_pad(tokens: int, groups: int) -> int:
    """The group alignment, in floats, of the K-major copies TF32 WGMMA
    reads when grouped along K: 16 bytes, or a 128-byte line from 256
    tokens per group on average (tf32_k_group_pad, GroupedMMTf32Route.h)."""
    return 32 if groups > 0 and tokens >= 256 * groups else 4


class HopperTestCase(GroupedMMTestCase):
    """Tests of the Hopper (SM90) kernels alone: they skip on other
    GPUs. No tests of its own."""

    def setUp(self):
        super().setUp()
        if torch.cuda.get_device_capability()[0] != 9:
            self.skipTest("Hopper (SM90) kernels only")


def _run_padded_k(test, device, sizes, m, n, a_transposed=True,
                  b_transposed=False, offs_dtype=torch.int32, extra_k=0,
                  bias=False, b_misaligned=False, deferred=None, op=None,
                  pad=None):
    """One call on the padded path, checked against float64 per group by
    test; extra_k columns of a (rows of b) lie past offs[-1];
    b_misaligned: b a row-major view with row stride n + 1, starting 4
    bytes into its storage; op: the grouped mm to run (default: the Hopper
    backend pinned, _sm90) and pad: the group alignment in floats it uses
    (default: the rule's). The check of which kernels ran uses the
    profiler, which skips the test under compute-sanitizer: a test making
    more than one call passes a list as deferred, gets the checks appended
    and runs them after its last call, so every call runs under memcheck
    first."""
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
    op = op or _sm90
    if pad is None:
        pad = _tf32_k_group_pad(total, groups)
    width = (total + pad - 1) // pad * pad + pad * groups
    with _allow_tf32(True):
        # NaN blocks where the padded copies and the output will be
        # allocated, all alive at once so each gets its own memory: a
        # gap the GEMM read would show.
        blocks = [torch.full(shape, float("nan"), device=device)
                  for shape in [(groups, m, n), (m, width), (n, width)]]
        del blocks
        out = op(a, b, offs, bias_t)
        assert_matches_reference(
            test, out, reference_grouped_mm(a, b, offs, bias_t), 2, 2,
            offs, tolerance(torch.float32, test.device_type))
    # The 16-byte gather copies an operand whose K is strided and whose
    # other index is contiguous with a multiple of 4 floats (wgrad's
    # layouts); the generic kernel copies the others.
    gathers = (a_transposed and m % 4 == 0) + (
        not b_transposed and n % 4 == 0 and not b_misaligned)

    def check_kernels():
        # Under compute-sanitizer the profiler records nothing and this
        # skips, after the kernels above ran under memcheck.
        with _allow_tf32(True):
            names = [name for name, _ in launched_kernels(
                lambda: op(a, b, offs, bias_t))]
        test.assertTrue(_sm90_gemm_names(names), names)
        test.assertEqual(
            sum("padded_k_gather_kernel" in name for name in names),
            gathers, names)
        test.assertEqual(
            sum(_is_bounded_copy(name) for name in names),
            2 - gathers, names)

    if deferred is None:
        check_kernels()
    else:
        deferred.append(check_kernels)


class TestTf32PaddedK(HopperTestCase):
    """TF32 grouped along K on Hopper's SM90 kernels: A and B copied
    K-major with each group's K range moved to a 16-byte boundary, or a
    128-byte line from 256 tokens per group on average
    (copy_k_groups_padded), since TMA needs aligned group bases and the
    offsets are arbitrary. Forced here with TORCH_GROUPED_MM_BACKEND
    =sm90 (the default route takes them only for large m and n, which
    these small calls are not)."""

    def _run(self, device, sizes, m, n, **kwargs):
        _run_padded_k(self, device, sizes, m, n, **kwargs)

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

    def test_generic_copy_of_both_operands(self, device):
        # Neither operand in a layout the gather reads (m = 30, b
        # unaligned): the generic kernel copies both. It leaves the gaps
        # between groups unwritten (the gather writes zeros), so this is
        # where the NaN-filled memory under the copies would show a GEMM
        # reading a gap; on 16-byte starts and on 128-byte lines (from 256
        # tokens per group).
        checks = []
        self._run(device, [13, 7, 0, 50, 1, 33], m=30, n=24,
                  b_misaligned=True, deferred=checks)
        self._run(device, [300, 257, 0, 511, 1, 500], m=30, n=24,
                  b_misaligned=True, deferred=checks)
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
        with _allow_tf32(True):
            _poison_allocator((3, 16, 18), device, torch.float32)
            out = _sm90(a, b, offs)
            assert_matches_reference(
                self, out, reference_grouped_mm(a, b, offs), 2, 2, offs,
                tolerance(torch.float32, self.device_type))
            names = [name for name, _ in
                     launched_kernels(lambda: _sm90(a, b, offs))]
        self.assertFalse(any(_is_bounded_copy(name) for name in names),
                         names)

    def test_bad_offsets_do_not_crash(self, device):
        # Decreasing, negative and past-the-end offsets: the copies and the
        # GEMM stay in bounds (the values are unspecified) and the context
        # lives on.
        a = _randn(32, 64, device=device, dtype=torch.float32,
                   transposed=True)
        b = _randn(64, 16, device=device, dtype=torch.float32)
        with _allow_tf32(True):
            for values in ([10, 5, 64, 64], [-7, 20, 30, 40],
                           [10, 20, 30, 500], [2**31 - 1, 0, -5, 10]):
                offs = torch.tensor(values, device=device, dtype=torch.int32)
                out = _sm90(a, b, offs)
                torch.cuda.synchronize()
                self.assertEqual(out.shape, (4, 32, 16))
        self._run(device, [16, 16, 16, 16], m=32, n=16)


class TestSm90SingleKernelTiles(HopperTestCase):
    """The Hopper tile configs that run every group of a row-grouped call
    on one kernel without clusters: large_solo (128x256, the default past
    128 rows per group for 16-bit and past 32 for TF32) and wide (64x256
    pingpong, the 16-bit default from 33 to 128 rows per group)."""

    def test_default_tile_per_dtype(self, device):
        # The rule, not a named config: a row-grouped call past decode
        # sizes launches one GEMM in every dtype (large_solo here: 226 rows
        # per group).
        sizes = [300, 0, 129, 64, 640]
        offs = make_offsets(sizes, device)
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            a = _randn(sum(sizes), 64, device=device, dtype=dtype)
            b = _randn(len(sizes), 64, 256, device=device, dtype=dtype,
                       transposed=True)
            with _allow_tf32(True):
                self._run_and_check(a, b, offs, op=_sm90)
                names = [name for name, _ in launched_kernels(
                    lambda: _sm90(a, b, offs))]
            self.assertEqual(len(_sm90_gemm_names(names)), 1,
                             (dtype, names))


class TestTf32MnBDirect(HopperTestCase):
    """TF32 calls grouped along rows with row-major (N-major) weights run
    the swapped Hopper kernel, D^T = W^T X^T with W^T read through
    registers (GroupedMMSm90Tf32MnB.cuh), and no transposing copy of the
    weights, for a row-major a; checked against float64 per group. The
    token split (both token tiles, each group on one, chosen on the
    device) replays in a CUDA graph with groups moved across the split."""

    _KERNEL = "Tf32RegisterAMainloop"

    def _names(self, op, a, b, offs, bias):
        return [name for name, _ in launched_kernels(
            lambda: op(a, b, offs, bias))]

    def test_unaligned_weights_take_the_copy_route(self, device):
        # N = 18 floats: rows of the weights are not 16-byte aligned, so
        # TMA cannot read them as they are; the call goes another way.
        self.assertFalse(self._ran_direct([40, 0, 88], k=32, n=18))

    def _ran_direct(self, sizes, a_transposed=False, k=64, n=128):
        """Runs and checks the call by the default dispatch; whether the
        swapped kernel ran."""
        offs = make_offsets(sizes, device=self.device_type)
        a = _randn(sum(sizes), k, device=self.device_type,
                   dtype=torch.float32, transposed=a_transposed)
        b = _randn(len(sizes), k, n, device=self.device_type,
                   dtype=torch.float32)
        with _allow_tf32(True):
            self._run_and_check(a, b, offs, op=_sm90)
            names = self._names(_sm90, a, b, offs, None)
        self.assertTrue(names)
        return any(self._KERNEL in name for name in names)

    def test_default_reads_directly_for_a_row_major_a(self, device):
        # 160 rows per group on average (256-token tiles) and 80 (128-token
        # tiles): the swapped kernel. A column-major a (which the swapped
        # kernel would copy) keeps the route of GroupedMMTf32Route.h.
        self.assertTrue(self._ran_direct([200, 0, 280]))
        self.assertTrue(self._ran_direct([64, 96]))
        self.assertFalse(self._ran_direct([200, 0, 280], a_transposed=True))

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
        with _allow_tf32(True):
            graph, out = _capture_graph(lambda: _sm90(a, b, offs, bias))
        for sizes in replays:
            offs.copy_(make_offsets(sizes, device))
            a.copy_(torch.randn_like(a))
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert_matches_reference(
                self, out, reference_grouped_mm(a, b, offs, bias), 2, 3,
                offs, tolerance(torch.float32, self.device_type, tf32=True))


instantiate_device_type_tests(TestTf32PaddedK, globals(), only_for=("cuda",))
instantiate_device_type_tests(TestSm90SingleKernelTiles, globals(),
                              only_for=("cuda",))
instantiate_device_type_tests(TestTf32MnBDirect, globals(),
                              only_for=("cuda",))

if __name__ == "__main__":
    run_tests()
