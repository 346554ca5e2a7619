# Owner(s): ["module: rocm"]
"""CPU tests of the ROCm SM carveout host logic, through the overlap_ops
extension's test-only module (overlap_ops._testing). Not part of the patch
series, whose C++ test aten/src/ATen/test/cuda_cu_mask_test.cpp checks the
same mask builder (tools/checks/run_cpp_tests.sh runs it on the CPU).

Covers ``aten/src/ATen/cuda/CUMask.cpp`` (the CU mask builder) exhaustively
over every carveout k of several AMD parts, checked against a small simulator
of how the driver maps mask bits to XCCs, in CUs and in the SMs that users'
k counts (WGPs on gfx10+ in WGP mode), plus regression tests showing that
upstream's ``_getCarveoutStream`` formula breaks the contract. Also drives
``CarveoutStreamCache`` with the extension's counting test double (streams
created once per (device, k), events reused, ordering, graph capture, no
leaks) with streams restricted by the CU mask.

No GPU is needed. What still needs an MI300 is listed in the README
("ROCm carveout").
"""

from __future__ import annotations

import os
import sys
import unittest
from typing import NamedTuple

from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION  # noqa: E402

if HAS_EXTENSION:  # with the extension, its test-only ops must load
    from overlap_ops import _testing
else:
    _testing = None

# The builder and the stream-cache double are C++ without a Python binding
# in torch; the extension's test-only module exposes them.
needs_extension = unittest.skipIf(
    not HAS_EXTENSION,
    "reaches the C++ mask builder through overlap_ops._testing "
    "(extension mode only)")

_WORD_BITS = 32
_CUS_PER_WGP = 2


class _Part(NamedTuple):
    """CU topology of one AMD GPU (one GCD / one partition)."""

    name: str
    total_cus: int  # physical CUs: one mask bit each
    num_xcc: int
    wgp_pairs: bool  # gfx10+: the driver enables CUs in WGP pairs
    # CUs per SM as HIP counts SMs (multiProcessorCount, the unit of k):
    # 2 on gfx10+ in WGP mode, HIP's default, where it counts WGPs.
    cus_per_sm: int = 1

    @property
    def sms(self) -> int:
        """What torch.cuda.get_device_properties().multi_processor_count
        reports, i.e. the range of k: 0 <= k < sms."""
        return self.total_cus // self.cus_per_sm


_MI300X = _Part("mi300x", 304, 8, False)  # gfx942, 8 XCCs x 38 CUs
_MI250X = _Part("mi250x", 110, 1, False)  # gfx90a, one GCD
_MI355X = _Part("mi355x", 256, 8, False)  # gfx950, 8 XCCs x 32 CUs
_MI300A = _Part("mi300a", 228, 6, False)  # gfx942, 6 XCCs x 38 CUs
_RX7900 = _Part("gfx1100", 96, 1, True)  # RDNA3, 48 WGPs
_RX6800 = _Part("gfx1030", 60, 1, True)  # RDNA2, 30 WGPs
_PARTS = [_MI300X, _MI250X, _MI355X, _MI300A, _RX7900, _RX6800]
# The same gfx10+ parts as HIP reports them by default (WGP mode):
# multiProcessorCount is 48 (30) WGPs, so k counts WGPs; with
# GPU_ENABLE_WGP_MODE=0 HIP counts CUs and the parts above apply.
_RX7900_WGP = _RX7900._replace(name="gfx1100_wgp_mode", cus_per_sm=2)
_RX6800_WGP = _RX6800._replace(name="gfx1030_wgp_mode", cus_per_sm=2)
_SM_PARTS = _PARTS + [_RX7900_WGP, _RX6800_WGP]


def _part_name(part: _Part) -> str:
    return part.name


class _Occupancy(NamedTuple):
    """What the driver would enable for a mask (see ``_simulate``)."""

    per_xcc: list[int]  # enabled CUs per XCC
    bits_past_last_cu: int  # set bits the driver ignores (no such CU)
    split_wgps: int  # WGP pairs whose two bits disagree (gfx10+)


def _simulate(words: list[int], part: _Part) -> _Occupancy:
    """Simulates the driver's reading of a CU mask.

    Bit i of the mask is bit i % 32 of word i // 32 and, on multi-XCC parts,
    belongs to XCC i % num_xcc (amdkfd ``mqd_symmetrically_map_cu_mask``).
    On gfx10+ bits 2j and 2j+1 form WGP j.
    """
    bits = [(words[i // _WORD_BITS] >> (i % _WORD_BITS)) & 1
            for i in range(len(words) * _WORD_BITS)]
    per_xcc = [0] * part.num_xcc
    for i in range(part.total_cus):
        per_xcc[i % part.num_xcc] += bits[i]
    split = 0
    if part.wgp_pairs:
        split = sum(bits[i] != bits[i + 1]
                    for i in range(0, part.total_cus, _CUS_PER_WGP))
    return _Occupancy(per_xcc, sum(bits[part.total_cus:]), split)


def _expected_enabled(part: _Part, k: int, cus_per_k: int = 1) -> int:
    """CUs the contract enables when k units of cus_per_k CUs stay free:
    CUs - k * cus_per_k, WGP-rounded on gfx10+.

    With WGP pairs the carveout rounds up to whole WGPs (at least k CUs stay
    free), except that one WGP always stays enabled.
    """
    free = k * cus_per_k
    if not part.wgp_pairs:
        return part.total_cus - free
    free = -(-free // _CUS_PER_WGP) * _CUS_PER_WGP
    return max(part.total_cus - free, _CUS_PER_WGP)


def _contract_violations(words: list[int], part: _Part, k: int,
                         cus_per_k: int = 1) -> list[str]:
    """Returns how a mask breaks the carveout contract (empty: it holds).

    k counts CUs (build_cu_mask) by default; cus_per_k=part.cus_per_sm
    checks a carveout in SMs (build_sm_carveout_cu_mask).
    """
    problems = []
    if len(words) != -(-part.total_cus // _WORD_BITS):
        problems.append(f"{len(words)} words")
    if any(not 0 <= w < 2**_WORD_BITS for w in words):
        problems.append("word out of uint32 range")
        return problems
    occ = _simulate(words, part)
    wanted = _expected_enabled(part, k, cus_per_k)
    if sum(occ.per_xcc) != wanted:
        problems.append(f"enables {sum(occ.per_xcc)} CUs, wants {wanted}")
    if max(occ.per_xcc) - min(occ.per_xcc) > 1:
        problems.append(f"unbalanced XCCs {occ.per_xcc}")
    if occ.bits_past_last_cu:
        problems.append(f"{occ.bits_past_last_cu} bits past the last CU")
    if occ.split_wgps:
        problems.append(f"{occ.split_wgps} split WGPs")
    return problems


def _upstream_cu_mask(total_cus: int, k: int) -> list[int]:
    """Upstream ``_getCarveoutStream`` (aten/src/ATen/cuda/CUDABlas.cpp).

    Starts from a zero mask and sets k bits, top bits of the word first.
    ``0xffffffff << 32`` is undefined in C++; x86 masks the shift count to 5
    bits, so it yields 0xffffffff, modelled here. Indexing past the list
    raises IndexError where the C++ writes past the vector.
    """
    mask = [0] * -(-total_cus // _WORD_BITS)
    full_shifts, remainder = divmod(k, _WORD_BITS)
    for i in range(full_shifts):
        mask[i] = 0xFFFFFFFF
    shift = (_WORD_BITS - remainder) % _WORD_BITS  # x86: count & 31
    mask[full_shifts] = (0xFFFFFFFF << shift) & 0xFFFFFFFF
    return mask


def _cu_mask(part: _Part, k: int) -> list[int]:
    """Our builder, through the test-only op; k counts CUs."""
    return _testing.rocm_cu_mask(part.total_cus, k, part.num_xcc,
                                 part.wgp_pairs)


def _sm_carveout_mask(part: _Part, k: int) -> list[int]:
    """The mask the stream cache builds for a carveout of k SMs."""
    return _testing.rocm_sm_carveout_cu_mask(
        part.total_cus, part.cus_per_sm, k, part.num_xcc, part.wgp_pairs)


@needs_extension
class TestCUMask(TestCase):
    """The mask builder against the contract and the simulator."""

    def test_simulator_bit_to_xcc_mapping(self) -> None:
        # Bits 0..7 land on XCCs 0..7; bits 0 and 8 both on XCC 0.
        self.assertEqual(_simulate([0xFF] + [0] * 9, _MI300X).per_xcc,
                         [1] * 8)
        self.assertEqual(_simulate([0x101] + [0] * 9, _MI300X).per_xcc,
                         [2] + [0] * 7)
        # Bit 304 is past MI300X's last CU; bits 0/1 disagree on a WGP.
        self.assertEqual(
            _simulate([0] * 9 + [1 << 16], _MI300X).bits_past_last_cu, 1)
        self.assertEqual(_simulate([0b01, 0], _RX6800).split_wgps, 1)

    @parametrize("part", _PARTS, name_fn=_part_name)
    def test_cu_mask_contract_every_k(self, part: _Part) -> None:
        for k in range(part.total_cus):
            problems = _contract_violations(_cu_mask(part, k), part, k)
            self.assertEqual(problems, [], msg=f"{part.name} k={k}")

    @parametrize("part", _PARTS, name_fn=_part_name)
    def test_cu_mask_no_carveout_enables_every_cu(self, part: _Part) -> None:
        occ = _simulate(_cu_mask(part, 0), part)
        self.assertEqual(sum(occ.per_xcc), part.total_cus)

    @parametrize("part", [_RX7900, _RX6800], name_fn=_part_name)
    def test_cu_mask_wgp_rounds_carveout_up(self, part: _Part) -> None:
        # Odd k frees k + 1 CUs (whole WGPs); the last k keeps one WGP.
        self.assertEqual(sum(_simulate(_cu_mask(part, 3), part).per_xcc),
                         part.total_cus - 4)
        last = part.total_cus - 1
        self.assertEqual(
            sum(_simulate(_cu_mask(part, last), part).per_xcc),
            _CUS_PER_WGP)

    def test_cu_mask_mi300x_words(self) -> None:
        # k = 4: the lowest 300 bits, i.e. 9 full words and 12 bits.
        self.assertEqual(_cu_mask(_MI300X, 4), [0xFFFFFFFF] * 9 + [0xFFF])
        # k = 16 (a multiple of 8): every XCC keeps exactly 36 CUs.
        self.assertEqual(_simulate(_cu_mask(_MI300X, 16), _MI300X).per_xcc,
                         [36] * 8)


@needs_extension
class TestSMCarveoutUnits(TestCase):
    """k counts SMs as HIP reports them; the mask has one bit per CU."""

    @parametrize("part", _SM_PARTS, name_fn=_part_name)
    def test_sm_carveout_mask_every_k(self, part: _Part) -> None:
        for k in range(part.sms):
            problems = _contract_violations(
                _sm_carveout_mask(part, k), part, k, part.cus_per_sm)
            self.assertEqual(problems, [], msg=f"{part.name} k={k}")

    @parametrize("part", _SM_PARTS, name_fn=_part_name)
    def test_sm_count_target_hint(self, part: _Part) -> None:
        # The hipBLASLt hint is in SMs: SMs - k, and 0 (no hint) for k = 0.
        for k in range(part.sms):
            hint = _testing.rocm_sm_count_target(
                part.total_cus, part.cus_per_sm, k, part.wgp_pairs)
            enabled = _expected_enabled(part, k, part.cus_per_sm)
            self.assertEqual(hint, 0 if k == 0 else enabled // part.cus_per_sm,
                             msg=f"{part.name} k={k}")

    def test_wgp_mode_k_counts_wgps(self) -> None:
        # HIP reports 48 SMs (WGPs) for a 96-CU gfx1100: k = 8 frees 16 CUs,
        # and k = 47 leaves one WGP.
        occ = _simulate(_sm_carveout_mask(_RX7900_WGP, 8), _RX7900_WGP)
        self.assertEqual(sum(occ.per_xcc), 80)
        occ = _simulate(_sm_carveout_mask(_RX7900_WGP, 47), _RX7900_WGP)
        self.assertEqual((sum(occ.per_xcc), occ.split_wgps), (2, 0))
        with self.assertRaisesRegex(RuntimeError, r"0 <= k < 48 .* got k = 48"):
            _sm_carveout_mask(_RX7900_WGP, 48)

    def test_wgp_count_as_cu_count_is_wrong(self) -> None:
        # Regression: taking multiProcessorCount (48 WGPs) as the CU count
        # builds a 48-bit mask for 96 CUs, so k = 8 runs on 40 CUs, not 80.
        as_cus = _cu_mask(_Part("gfx1100", 48, 1, True), 8)
        occ = _simulate(as_cus + [0] * (3 - len(as_cus)), _RX7900)
        self.assertEqual(sum(occ.per_xcc), 40)
        self.assertNotEqual(
            _contract_violations(as_cus + [0], _RX7900_WGP, 8, 2), [])

    def test_cus_per_sm_must_divide(self) -> None:
        with self.assertRaisesRegex(RuntimeError, r"cus_per_sm must be >= 1 "
                                    r"and divide total_cus=96"):
            _testing.rocm_sm_carveout_cu_mask(96, 5, 4, 1, True)


_MULTI_XCC_PARTS = [p for p in _PARTS if p.num_xcc > 1]


def _xcc_round_mask(part: _Part, k: int) -> list[int]:
    """The mask of the XCC-granular option for a carveout of k SMs: the
    enabled count from the C++ rule, the mask for that count."""
    enabled = _testing.rocm_sm_carveout_enabled_cus(
        part.total_cus, part.cus_per_sm, k, part.num_xcc, part.wgp_pairs,
        whole_xcc_rounds=True)
    return _testing.rocm_cu_mask_enabling(part.total_cus, enabled)


@needs_extension
class TestXccRoundCarveout(TestCase):
    """The XCC-granular option, against the simulator, for every k."""

    @parametrize("part", _MULTI_XCC_PARTS, name_fn=_part_name)
    def test_every_xcc_keeps_the_same_cus_every_k(self, part: _Part) -> None:
        bad = {}
        for k in range(part.sms):
            occ = _simulate(_xcc_round_mask(part, k), part)
            free = part.total_cus - sum(occ.per_xcc)
            rounds = -(-k // part.num_xcc)
            # Whole rounds of num_xcc CUs free, at least k, fewer than
            # k + num_xcc; one round stays enabled when none would be.
            wanted_free = min(rounds * part.num_xcc,
                              part.total_cus - part.num_xcc)
            problems = []
            if len(set(occ.per_xcc)) != 1:
                problems.append(f"unequal XCCs {occ.per_xcc}")
            if free != wanted_free:
                problems.append(f"{free} CUs free, wants {wanted_free}")
            if occ.bits_past_last_cu:
                problems.append("bits past the last CU")
            if problems:
                bad[k] = problems
        self.assertEqual(bad, {})

    @parametrize("part", _MULTI_XCC_PARTS, name_fn=_part_name)
    def test_free_cus_at_least_k_until_one_round_is_left(
            self, part: _Part) -> None:
        last_full = part.total_cus - part.num_xcc
        for k in range(part.sms):
            enabled = sum(_simulate(_xcc_round_mask(part, k), part).per_xcc)
            if k <= last_full:
                self.assertGreaterEqual(part.total_cus - enabled, k)
            else:
                self.assertEqual(enabled, part.num_xcc)

    def test_mi300x_k4(self) -> None:
        # The lowest-bits rule leaves 38,38,38,38,37,37,37,37; whole rounds
        # free one CU per XCC.
        per_xcc = _simulate(_sm_carveout_mask(_MI300X, 4), _MI300X).per_xcc
        self.assertEqual(per_xcc, [38] * 4 + [37] * 4)
        per_xcc = _simulate(_xcc_round_mask(_MI300X, 4), _MI300X).per_xcc
        self.assertEqual(per_xcc, [37] * 8)

    @parametrize("part", [_MI250X, _RX7900, _RX7900_WGP],
                 name_fn=_part_name)
    def test_single_xcc_parts_are_unchanged(self, part: _Part) -> None:
        for k in range(part.sms):
            self.assertEqual(_xcc_round_mask(part, k),
                             _sm_carveout_mask(part, k))

    def test_mask_enabling_rejects_zero(self) -> None:
        with self.assertRaisesRegex(RuntimeError,
                                    r"enabled must be in \[1, 304\]"):
            _testing.rocm_cu_mask_enabling(304, 0)


@needs_extension
class TestHipblasltHint(TestCase):
    """Whether the SM_COUNT_TARGET hint is set, from the library version
    read at run time (major * 100000 + minor * 100 + patch)."""

    @parametrize("version, takes", [
        (100400, True),    # 1.4.0, the first with the attribute
        (100401, True),
        (100500, True),
        (200000, True),
        (100399, False),   # 1.3.99
        (100300, False),
        (1000, False),     # 0.10
        (0, False),
        (-1, False),       # the query failed: the mask alone
    ])
    def test_hint_decision(self, version: int, takes: bool) -> None:
        self.assertEqual(_testing.hipblaslt_takes_sm_count_target(version),
                         takes)


@needs_extension
class TestUpstreamCarveoutFormula(TestCase):
    """Regression tests: upstream's formula fails the contract we meet."""

    @parametrize("part", [_MI300X, _MI250X, _MI355X, _MI300A],
                 name_fn=_part_name)
    def test_upstream_formula_fails_contract(self, part: _Part) -> None:
        # Upstream enables k CUs (or k + 32), not CUs - k, so it can only
        # meet the contract where k == CUs - k.
        failing = [k for k in range(1, part.total_cus)
                   if _contract_violations(
                       _upstream_cu_mask(part.total_cus, k), part, k)]
        passing = set(range(1, part.total_cus)) - set(failing)
        allowed = {part.total_cus // 2} if part.total_cus % 2 == 0 else set()
        self.assertLessEqual(passing, allowed)  # subset
        self.assertGreater(len(failing), part.total_cus - 3)
        for k in failing:
            self.assertEqual(
                _contract_violations(_cu_mask(part, k), part, k), [])

    def test_upstream_enables_k_cus(self) -> None:
        upstream = _simulate(_upstream_cu_mask(304, 4), _MI300X)
        ours = _simulate(_cu_mask(_MI300X, 4), _MI300X)
        self.assertEqual(sum(upstream.per_xcc), 4)  # GEMM on 4 CUs
        self.assertEqual(sum(ours.per_xcc), 300)

    def test_upstream_shift_by_32(self) -> None:
        # k % 32 == 0: "<< 32" sets a whole extra word: 64 CUs for k = 32.
        self.assertEqual(_upstream_cu_mask(304, 32)[:3],
                         [0xFFFFFFFF, 0xFFFFFFFF, 0])
        self.assertEqual(sum(_simulate(_cu_mask(_MI300X, 32),
                                       _MI300X).per_xcc), 272)

    def test_upstream_sets_bits_past_last_cu(self) -> None:
        # k = 300 sets the top 12 bits of word 9: bits 308..319 on a part
        # whose last CU is 303.
        upstream = _simulate(_upstream_cu_mask(304, 300), _MI300X)
        self.assertEqual(upstream.bits_past_last_cu, 12)
        self.assertEqual(
            _simulate(_cu_mask(_MI300X, 300), _MI300X).bits_past_last_cu, 0)

    def test_upstream_writes_past_mask(self) -> None:
        # Upstream never checks k: k = CUs on MI355X indexes word 8 of 8.
        with self.assertRaises(IndexError):
            _upstream_cu_mask(256, 256)
        with self.assertRaisesRegex(RuntimeError, r"got k = 256"):
            _cu_mask(_MI355X, 256)


@needs_extension
class TestCUMaskErrors(TestCase):
    """Error messages name the argument and the valid range."""

    def _message(self, total_cus: int, k: int, num_xcc: int,
                 wgp_pairs: bool) -> str:
        with self.assertRaises(RuntimeError) as ctx:
            _testing.rocm_cu_mask(total_cus, k, num_xcc, wgp_pairs)
        return str(ctx.exception).splitlines()[0]

    def test_k_too_large(self) -> None:
        self.assertExpectedInline(
            self._message(304, 304, 8, False),
            """sm_carveout: the carveout must satisfy 0 <= k < 304 (the device's SM count), got k = 304""")  # noqa: B950

    def test_k_negative(self) -> None:
        self.assertExpectedInline(
            self._message(110, -1, 1, False),
            """sm_carveout: the carveout must satisfy 0 <= k < 110 (the device's SM count), got k = -1""")  # noqa: B950

    def test_total_cus_not_positive(self) -> None:
        self.assertExpectedInline(
            self._message(0, 0, 1, False),
            """build_cu_mask: total_cus must be positive, got total_cus=0""")

    def test_num_xcc_out_of_range(self) -> None:
        self.assertExpectedInline(
            self._message(304, 4, 0, False),
            """build_cu_mask: num_xcc must be in [1, 304] (at least one XCC, at most one per CU), got num_xcc=0""")  # noqa: B950

    def test_wgp_pairs_odd_cus(self) -> None:
        self.assertExpectedInline(
            self._message(61, 4, 1, True),
            """build_cu_mask: with wgp_pairs, total_cus must be a multiple of 2 (CUs come in WGP pairs), got total_cus=61""")  # noqa: B950

    def test_wgp_pairs_several_xcc(self) -> None:
        self.assertExpectedInline(
            self._message(96, 4, 2, True),
            """build_cu_mask: with wgp_pairs, num_xcc must be 1 (no gfx10+ part has several XCCs), got num_xcc=2""")  # noqa: B950


# More than any scenario here touches, so nothing is evicted.
_NO_EVICTION = 10_000


def _run_scenario(
    num_threads: int,
    calls_per_thread: int,
    carveouts: list[int],
    num_devices: int = 1,
    capturing: bool = False,
    part: _Part = _MI300X,
    max_entries: int = _NO_EVICTION,
    whole_xcc_rounds: bool = False,
) -> _testing.CarveoutScenarioCounts:
    """Drives CarveoutStreamCache with the counting double from threads
    (one caller stream each), restricting streams with the CU mask of
    ``part``; see ``_testing.cu_mask_stream_scenario``."""
    return _testing.cu_mask_stream_scenario(
        num_threads, calls_per_thread, carveouts, num_devices, capturing,
        total_cus=part.total_cus, num_xcc=part.num_xcc,
        wgp_pairs=part.wgp_pairs, cus_per_sm=part.cus_per_sm,
        max_entries=max_entries, whole_xcc_rounds=whole_xcc_rounds)


def _enabled_cus(part: _Part, k: int, whole_xcc_rounds: bool = False) -> int:
    return _testing.rocm_sm_carveout_enabled_cus(
        part.total_cus, part.cus_per_sm, k, part.num_xcc, part.wgp_pairs,
        whole_xcc_rounds)


def _keys_used(num_threads: int, calls_per_thread: int,
               carveouts: list[int], num_devices: int,
               part: _Part = _MI300X) -> set[tuple[int, int, int]]:
    """The (device, enabled CUs, caller thread) keys a scenario touches
    (k > 0 only)."""
    keys = set()
    for t in range(num_threads):
        for c in range(calls_per_thread):
            k = carveouts[(7 * t + c) % len(carveouts)]
            if k > 0:
                keys.add(((t + c) % num_devices, _enabled_cus(part, k), t))
    return keys


@needs_extension
class TestCarveoutStreamCache(TestCase):
    """The masked-stream cache, on the CPU through a counting double."""

    @parametrize("num_threads", [1, 4, 16])
    def test_streams_created_once_per_partition_and_caller(
            self, num_threads: int) -> None:
        calls, carveouts, devices = 300, [0, 4, 8, 16, 33], 2
        counts = _run_scenario(num_threads, calls, carveouts, devices)
        keys = len(_keys_used(num_threads, calls, carveouts, devices))
        forked = counts.forks - counts.pass_through
        self.assertEqual(counts.forks, num_threads * calls)
        self.assertEqual(counts.cache_entries, keys)
        self.assertEqual(counts.streams_created, keys)
        # A fork and a join event per key, reused by every call: no event
        # per call.
        self.assertEqual(counts.events_created, 2 * keys)
        self.assertEqual(counts.records, 2 * forked)  # fork + join
        self.assertEqual(counts.waits, 2 * forked)
        self.assertEqual(counts.wrong_stream, 0)
        self.assertEqual(counts.ordering_violations, 0)

    def test_cache_destroys_what_it_created(self) -> None:
        counts = _run_scenario(8, 100, [4, 8, 12], num_devices=4)
        self.assertGreater(counts.streams_created, 0)
        self.assertEqual(counts.streams_destroyed, counts.streams_created)
        self.assertEqual(counts.events_destroyed, counts.events_created)

    def test_no_carveout_is_free(self) -> None:
        counts = _run_scenario(4, 50, [0])
        self.assertEqual(counts.pass_through, counts.forks)
        self.assertEqual(
            (counts.streams_created, counts.events_created, counts.records),
            (0, 0, 0))

    def test_graph_capture_passes_through(self) -> None:
        # Documented choice: under capture the GEMM stays on the capturing
        # stream (a graph does not record the CU mask of a queue).
        counts = _run_scenario(4, 50, [4, 8], num_devices=2, capturing=True)
        self.assertEqual(counts.pass_through, counts.forks)
        self.assertEqual(
            (counts.streams_created, counts.events_created, counts.records,
             counts.waits), (0, 0, 0, 0))

    def test_graph_capture_still_checks_k(self) -> None:
        with self.assertRaisesRegex(RuntimeError, r"got k = 304"):
            _run_scenario(1, 1, [304], capturing=True)

    def test_bad_k_raises_and_caches_nothing(self) -> None:
        with self.assertRaisesRegex(RuntimeError, r"0 <= k < 96 "):
            _run_scenario(2, 3, [96], part=_RX7900)

    def test_wgp_part_streams_get_wgp_masks(self) -> None:
        # k = 1 and 2 CUs both free one WGP: one mask, one stream per
        # caller; k = 3 frees two.
        counts = _run_scenario(4, 40, [1, 2, 3], part=_RX7900)
        self.assertEqual(counts.streams_created, 4 * 2)
        self.assertEqual(counts.wrong_stream, 0)

    def test_k_with_the_same_mask_share_a_stream(self) -> None:
        # With whole XCC rounds on MI300X, k = 1..8 all enable 296 CUs.
        counts = _run_scenario(1, 64, list(range(1, 9)),
                               whole_xcc_rounds=True)
        self.assertEqual((counts.streams_created, counts.wrong_stream),
                         (1, 0))
        counts = _run_scenario(1, 64, list(range(1, 9)))
        self.assertEqual(counts.streams_created, 8)

    @parametrize("max_entries", [1, 3, 8])
    def test_entries_are_bounded(self, max_entries: int) -> None:
        # 8 caller streams x 2 devices x 4 masks = 64 keys.
        counts = _run_scenario(8, 200, [4, 8, 16, 33], num_devices=2,
                               max_entries=max_entries)
        self.assertLessEqual(counts.cache_entries, max_entries)
        # Evicted entries in use by a fork live until its join: at most
        # one per thread beyond the bound, plus the entry just evicted,
        # destroyed only once the cache's lock is released.
        self.assertLessEqual(counts.peak_live_streams, max_entries + 8 + 1)
        self.assertGreater(counts.streams_created, max_entries)
        self.assertEqual(counts.streams_destroyed, counts.streams_created)
        self.assertEqual(counts.events_destroyed, counts.events_created)
        self.assertEqual(counts.events_created, 2 * counts.streams_created)
        self.assertEqual(
            (counts.wrong_stream, counts.ordering_violations), (0, 0))

    def test_default_bound(self) -> None:
        counts = _run_scenario(16, 100, [4, 8, 16, 33], num_devices=2,
                               max_entries=0)
        self.assertEqual(counts.cache_entries, 64)
        self.assertEqual(counts.ordering_violations, 0)

    def test_wgp_mode_topology_counts_k_in_wgps(self) -> None:
        # The cache takes cus_per_sm from the backend's topology: on a
        # 96-CU part that HIP reports as 48 SMs, k = 47 is valid, 48 is not.
        counts = _run_scenario(4, 40, [1, 24, 47], part=_RX7900_WGP)
        self.assertEqual((counts.streams_created, counts.wrong_stream),
                         (4 * 3, 0))
        with self.assertRaisesRegex(RuntimeError, r"0 <= k < 48 "):
            _run_scenario(1, 1, [48], part=_RX7900_WGP)
        with self.assertRaisesRegex(RuntimeError, r"0 <= k < 48 "):
            _run_scenario(1, 1, [48], capturing=True, part=_RX7900_WGP)


instantiate_parametrized_tests(TestCUMask)
instantiate_parametrized_tests(TestSMCarveoutUnits)
instantiate_parametrized_tests(TestUpstreamCarveoutFormula)
instantiate_parametrized_tests(TestXccRoundCarveout)
instantiate_parametrized_tests(TestHipblasltHint)
instantiate_parametrized_tests(TestCarveoutStreamCache)

if __name__ == "__main__":
    run_tests()
