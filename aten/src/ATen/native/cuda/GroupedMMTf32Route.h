#pragma once

// Which tensor-core family runs a float32 grouped mm with TF32 allowed on
// Hopper. TF32 WGMMA (the SM90 kernels) reads K-major operands only, so an
// operand stored the other way is first transposed by a copy through
// global memory; TF32 mma.sync (the SM80 kernels) reads either major, at
// about half the throughput. Decided from host-known sizes only; plain
// arithmetic, so it is testable on the CPU.

#include <cstdint>

namespace at::native::grouped_mm {

enum class Tf32Family { kSm90, kSm80 };

// The throughputs the route weighs, as measured on a Hopper part: the
// tiled transposing copy (read + write), and the SM80 and SM90 TF32 GEMMs
// on large groups. Other Hopper parts scale these together, so the
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
// 1 / 700 lies between the measured SM90 win (1.14e-3) and SM80 win
// (1.79e-3).
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
// as they are: no copy, and SM90 throughput. Against the route above it won
// at every group size (with the token tile below), so it runs every such
// call with a row-major A. A column-major A would be copied by the swapped
// kernel and read as it is by the SM80 kernels, so the route above decides
// those calls. rows: the call's total rows (host-known), groups: G.
inline bool tf32_mn_b_direct_wins(int64_t rows, int64_t groups,
                                  bool a_row_major) {
  return a_row_major && groups > 0 && rows >= 0;
}

// The swapped kernel's token tile: 128 tokens up to this many rows per
// group on average, where a 256-token tile would be mostly padding; 256
// beyond.
constexpr int64_t kMnBNarrowMaxRowsPerGroup = 128;

inline bool tf32_mn_b_narrow_wins(int64_t rows, int64_t groups) {
  return groups > 0 && rows <= kMnBNarrowMaxRowsPerGroup * groups;
}

// Where the 128-token tile wins on the mean, single groups can still hold
// more rows than it (a sparse distribution's live groups). The host cannot
// see the sizes without a sync, so past this many rows per group on
// average the call runs both kernels (a token split): groups of at most 128
// rows on the 128-token tile, larger ones on the 256-token tile, decided on
// the device by the fill. Past 96 rows per group on average, a call with a
// quarter of its groups empty has its live groups past 128 rows. Not where
// the mean takes the 256-token tile: balanced and sparse calls lost there,
// and the host cannot tell them from the skewed ones that won.
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
// lines, which the GEMM pays for. Each group widens the copies by up to a
// line, which small groups pay for instead: lines win from 256 tokens per
// group on average.
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
