#pragma once

// Which tensor-core family runs a float32 grouped mm with TF32 allowed on
// Hopper. TF32 WGMMA (the SM90 kernels) reads K-major operands only, so an
// operand stored the other way is first transposed by a copy through
// global memory; TF32 mma.sync (the SM80 kernels) reads either major, at
// about half the throughput. Decided from host-known sizes only; plain
// arithmetic, so the CPU tests check it (through a private op of the
// extension).

#include <cstdint>

namespace at::native::grouped_mm {

enum class Tf32Family { kSm90, kSm80 };

// Measured on the H200 (results/tf32, results/kernels/2026-11-30h-tf32-*):
// the tiled transposing copy moves 2.46 TB/s (read + write); the SM80 TF32
// GEMM runs at ~137 TFLOP/s on the mixtral_8x7b rows. The SM90 one ran at
// ~282 TFLOP/s with the configs' full K extent and at ~330 with the short
// K tile, now its default (dgrad, which copies nothing: mixtral_8x7b_w13
// 11.4-11.7 ms, deepseek_v3_ep8_w2 2.9-3.2 ms; results/tf32/
// 2026-11-30k-shortk). Other Hopper parts scale these together, so the
// crossover below moves little.
constexpr double kTransposeBytesPerSecond = 2.46e12;
constexpr double kSm90Tf32FlopsPerSecond = 330e12;
constexpr double kSm80Tf32FlopsPerSecond = 137e12;

// The work of one call as the host knows it: m x k x n summed over groups
// (a 2d x 3d call: m = total rows; 2d x 2d: k = total K), the groups, and
// the operands only the SM90 path would copy to the other major (a: m x k;
// b: one k x n matrix per group); copies both paths make cost both the
// same. Grouped along K, m and n alone decide (kPaddedKMaxInverseSum).
struct Tf32Work {
  bool grouped_along_k;  // 2d x 2d: SM90 copies both, K-major and padded
  int64_t m;
  int64_t k;
  int64_t n;
  int64_t groups;
  bool transpose_a;
  bool transpose_b;
};

// Grouped along K, the SM90 path copies both operands (m x K and K x n)
// and the SM80 kernels neither, so the copies cost K (m + n) against work
// of K m n: SM90 wins when 1 / m + 1 / n is below a crossover, whatever K.
// Measured on the H200 with both paths in one run, and the short K tile
// (results/tf32/2026-11-30k-padkcheck): SM90 won at 1.14e-3
// (qwen3_30b_a3b_w13: 2.57-2.82 vs 2.86-3.05 ms; qwen3_decode: 0.53-0.56
// vs 0.60-0.64 ms) and below, SM80 at 1.79e-3 (qwen3_30b_a3b_w2: 1.42-1.69
// vs 1.63-1.74 ms). 1 / 700 lies between the two. (With the full K tile
// SM80 still won at 1.14e-3, results/tf32/2026-11-30j-padk.)
constexpr double kPaddedKMaxInverseSum = 1.0 / 700.0;

// The SM90 kernels unless the time to transpose exceeds what their higher
// throughput saves: with a transposed B of G x K x N floats against a
// 2 M K N FLOP problem, SM90 wins from about 380 rows per group on.
inline Tf32Family hopper_tf32_family(const Tf32Work& w) {
  if (!w.transpose_a && !w.transpose_b) {
    return Tf32Family::kSm90;
  }
  if (w.grouped_along_k) {
    return w.m > 0 && w.n > 0 &&
            1.0 / double(w.m) + 1.0 / double(w.n) < kPaddedKMaxInverseSum
        ? Tf32Family::kSm90
        : Tf32Family::kSm80;
  }
  const double float_bytes = 4.0;
  const double moved =  // read and written once each
      2.0 * float_bytes *
      ((w.transpose_a ? double(w.m) * double(w.k) : 0.0) +
       (w.transpose_b ? double(w.groups) * double(w.k) * double(w.n) : 0.0));
  const double flops = 2.0 * double(w.m) * double(w.k) * double(w.n);
  const double transpose_s = moved / kTransposeBytesPerSecond;
  const double saved_s =
      flops / kSm80Tf32FlopsPerSecond - flops / kSm90Tf32FlopsPerSecond;
  return transpose_s < saved_s ? Tf32Family::kSm90 : Tf32Family::kSm80;
}

// Row-grouped calls with row-major (N-major) weights can instead run the
// swapped Hopper kernel (GroupedMMSm90Tf32MnB.cuh), which reads the weights
// as they are: no copy, and SM90 throughput. Measured on the H200 against
// the route above, same run: with 256-token tiles it won every row from
// 256 rows per group on (0.51-0.97x the time, results/tf32/
// 2026-11-30m-direct); with 128-token tiles (tf32_mn_b_narrow_wins) it won
// every row up to 128 rows per group, the decode rows included (0.72-0.93x,
// results/tf32/2026-12-01a-narrow). So it runs every such call.
// rows: the call's total rows (a's row count, host-known), groups: G.
// Measured with a row-major A only; a column-major A would be copied by
// the swapped kernel and read as it is by the SM80 kernels, so the route
// above decides those calls.
inline bool tf32_mn_b_direct_wins(int64_t rows, int64_t groups,
                                  bool a_row_major) {
  return a_row_major && groups > 0 && rows >= 0;
}

// The swapped kernel's token tile: 128 tokens up to this many rows per
// group on average, 256 beyond. Same run (results/tf32/2026-12-01a-narrow):
// 128-token tiles took 0.72-0.93x the time of the previous default at 8-128
// rows per group, and 1.35x (grin_moe sparse, 171) to 1.74x (mixtral, 4096)
// the 256-token tiles' time above.
constexpr int64_t kMnBNarrowMaxRowsPerGroup = 128;

inline bool tf32_mn_b_narrow_wins(int64_t rows, int64_t groups) {
  return groups > 0 && rows <= kMnBNarrowMaxRowsPerGroup * groups;
}

// Where the 128-token tile wins on the mean, single groups can still hold
// more rows than it: grin_moe sparse has a mean of 128 but live groups of
// 170, where the 256-token tile takes 0.80x the time. The host cannot see
// the sizes without a sync, so past this many rows per group on average
// the call runs both kernels (a token split): groups of at most 128 rows
// on the 128-token tile, larger ones on the 256-token tile, each group on
// one of the two, decided on the device by the fill. Measured against the
// 128-token tile alone, same rounds (results/tf32/2026-12-03d-split):
// grin_moe sparse 0.80, balanced 1.02, skewed 1.02 (its large groups gain
// less than a second launch and its partial last wave cost);
// deepseek_v3_decode (mean 64) 1.00 / 1.03 / 1.01, so not there. Past 96
// rows per group on average, a call with a quarter of its groups empty
// has its live groups past 128 rows, the case the split wins. Not past
// 128 either (results/tf32/2026-12-03e-split-*, means of 256-768 rows
// per group, split over the 256-token tile, two runs): skewed rows
// 0.86-1.00 (their small groups leave the 256-token tile), but balanced
// and sparse rows 0.99-1.04 (geometric mean 1.002 and 1.014), and the
// host cannot tell them apart.
constexpr int64_t kMnBTokenSplitMinRowsPerGroup = 96;

inline bool tf32_mn_b_token_split_wins(int64_t rows, int64_t groups) {
  return tf32_mn_b_narrow_wins(rows, groups) &&
      rows > kMnBTokenSplitMinRowsPerGroup * groups;
}

// The narrow kernel's token tile (Tf32MnBNarrowTileConfig): a token split
// runs the groups of at most this many rows on it.
constexpr int64_t kMnBNarrowTokens = 128;

// Grouped along K, the SM90 path reads K-major copies whose groups start
// at a multiple of this many floats (GroupedMMPaddedK.h). 16 bytes is all
// TMA needs, but then the K tiles of most groups straddle two 128-byte
// lines, and the GEMM pays for it: with groups on 128-byte lines it took
// 0.81-0.85x the time on Mixtral's wgrad, the copies 0.92x
// (results/kernels/2026-12-03g-gather-and-pad.md). Each group widens the
// copies by up to a line, which small groups pay for instead. Measured on
// every TF32 wgrad row in one run (results/tf32/2026-12-03g-kpad), 128-byte
// starts over 16-byte ones: 0.81-0.98x the time at 256 to 4096 tokens per
// group on average, 0.98-1.01x at 128 (grin_moe), 1.02-1.03x at 64
// (deepseek_v3_decode; two of its three rows inside the run's A/A band of
// 0.98-1.02), 1.12-1.14x at 8 (qwen3_decode).
constexpr int64_t kTf32KTmaPad = 4;   // floats: 16 bytes
constexpr int64_t kTf32KLinePad = 32;  // floats: a 128-byte line
constexpr int64_t kTf32KLinePadMinTokensPerGroup = 256;

// tokens: the grouped K extent (host-known), groups: G.
inline int64_t tf32_k_group_pad(int64_t tokens, int64_t groups) {
  return groups > 0 && tokens >= kTf32KLinePadMinTokensPerGroup * groups
      ? kTf32KLinePad
      : kTf32KTmaPad;
}

}  // namespace at::native::grouped_mm
