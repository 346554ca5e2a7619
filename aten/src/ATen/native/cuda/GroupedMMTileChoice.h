#pragma once

// Which Hopper tile config runs a call, from what the host knows without a
// sync. Plain arithmetic, so the CPU tests check it (through a private op
// of the extension); GroupedMMSm90Dispatch.cpp reads the environment and
// applies it.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace at::native::grouped_mm::sm90 {

// kLarge: 128x256 cooperative tiles, 2-CTA clusters along M (many rows per
// group; the cluster shares each weight tile between two M tiles).
// kMedium: 128x128 pingpong tiles, no cluster: one M tile per group of up to
// 128 rows, so its weights are streamed once without an idle cluster CTA.
// kSmall: 64x128 pingpong tiles (decode-sized groups).
// kLargeSolo (the default for row-grouped calls past decode sizes, except
// 16-bit ones up to kWideTileMaxRows): kLarge's tiles without the cluster,
// so no group is padded to an even number of 128-row tiles, at the cost of
// each CTA loading its own weight tile (no multicast). It beat the
// medium/large split it replaced on all 12 bf16 fwd rows measured (0.91 vs
// 0.98 of stock in geometric mean, results/tiles/2026-11-30j), and on TF32
// once the short K tile gave it four stages: dgrad 0.95, fwd 1.00 of the
// split's time over the 27 rows past 32 rows per group
// (results/tf32/2026-11-30l-solo).
// kWide (16-bit row-grouped calls with small groups, see
// default_tile_config; float32 calls never run it): 64x256 pingpong tiles
// without clusters. Half the rows of large_solo's tile, so a group's last
// tile pads at most 63 rows, and two consumer warpgroups that overlap one
// tile's epilogue with the other's mainloop.
enum class TileConfig { kSmall, kMedium, kLarge, kLargeSolo, kWide };

// Each config's name for OVERLAP_OPS_SM90_TILE, in the enum's order.
constexpr std::array<std::string_view, 5> kTileConfigNames = {
    "small", "medium", "large", "large_solo", "wide"};
static_assert(kTileConfigNames.size() ==
              static_cast<size_t>(TileConfig::kWide) + 1);

constexpr std::string_view tile_config_name(TileConfig config) {
  return kTileConfigNames[static_cast<size_t>(config)];
}

constexpr std::optional<TileConfig> tile_config_named(std::string_view name) {
  for (size_t i = 0; i < kTileConfigNames.size(); ++i) {
    if (kTileConfigNames[i] == name) {
      return static_cast<TileConfig>(i);
    }
  }
  return std::nullopt;
}

// Mean rows per group up to this: 64-row tiles (decode sizes).
constexpr int64_t kSmallTileMaxRows = 32;
// Layouts whose groups share one row count: medium tiles up to this many
// rows, large beyond.
constexpr int64_t kMediumTileMaxRows = 128;
// 16-bit row-grouped calls: wide tiles up to this many mean rows per group
// (default_tile_config).
constexpr int64_t kWideTileMaxRows = 128;

// What the host knows of a call without a sync.
struct TileQuery {
  bool row_grouped;  // 2d x 3d (3d x 2d runs as one)
  // Row-grouped: total rows / groups (the mean); otherwise each group's m.
  int64_t rows_per_group;
  bool tf32;
};

// The heuristic (results/NOTES.md). Row-grouped calls past decode sizes
// run one kernel without clusters, so no group's tile count is padded to
// even. For 16-bit calls up to 128 rows per group on average that is wide,
// whose 64-row tiles pad a small group's last tile less: it beat
// large_solo on grin_moe (fwd 0.93, dgrad 0.95 of its time in geometric
// mean over the three distributions; results/tiles/2026-11-30k-wide) and,
// on shapes the rule was not fitted to, on olmoe_1b_7b, phi35_moe at 128
// rows and deepseek_v3_decode (results/tiles/2026-11-30k-tilecheck). Past
// that, and for TF32, large_solo (128x256), which beat the medium/large
// split on every measured bf16 row and wide on most (wide: mixtral_8x7b up
// to 1.17x, gpt_oss_120b_w13 skewed 1.09x-1.19x). A second bound, K and N
// both at most 2048 (wide won on qwen3_30b_a3b), failed on the new shapes
// (deepseek_v2_lite_w2 dgrad 1.22-1.28x large_solo's time) and is not
// used.
inline TileConfig default_tile_config(const TileQuery& q) {
  if (q.rows_per_group <= kSmallTileMaxRows) {
    return TileConfig::kSmall;
  }
  if (q.row_grouped) {
    return !q.tf32 && q.rows_per_group <= kWideTileMaxRows
        ? TileConfig::kWide
        : TileConfig::kLargeSolo;
  }
  return q.rows_per_group <= kMediumTileMaxRows ? TileConfig::kMedium
                                                : TileConfig::kLarge;
}

// A config pinned for a tuning run (OVERLAP_OPS_SM90_TILE), where it
// applies: wide (built for 16-bit only) to 16-bit calls only. Elsewhere
// nullopt: the heuristic decides.
inline std::optional<TileConfig> forced_tile_config(TileConfig requested,
                                                    const TileQuery& q) {
  if (requested == TileConfig::kWide && q.tf32) {
    return std::nullopt;
  }
  return requested;
}

// The config a call runs: the requested one where it applies, else the
// heuristic.
inline TileConfig tile_config_for(const TileQuery& q,
                                  std::optional<TileConfig> requested) {
  if (requested) {
    if (const auto forced = forced_tile_config(*requested, q)) {
      return *forced;
    }
  }
  return default_tile_config(q);
}

// The 128x256 configs' epilogue subtile: the output columns of each TMA
// store of the tile. 0 is CUTLASS's choice (128x32 for 16-bit output).
// Wider subtiles take fewer barriers and stores per tile, and their smem
// comes out of the mainloop stages (64 columns keep four, 128 keep three).
// They are built for 16-bit calls with output in the input dtype, on the
// large config for calls grouped along K (wgrad) and on large_solo for
// row-grouped ones (fwd, dgrad).
//
// large, grouped along K: measured on the H200
// (results/tiles/2026-12-01d-store-tile, bf16 and fp16 wgrad on every row
// of the suite, against CUTLASS's subtile): 64 and 128 columns both took
// 0.95 of its time in geometric mean, and neither slowed a row by more
// than 3%. 128 won most where groups have few tokens, so each output tile
// takes few K steps and the stores dominate (deepseek_v3_decode 0.83-0.87,
// grin_moe 0.88-0.90, gpt_oss_120b 0.91-0.97; 256 tokens per group or
// fewer); 64 won on qwen3_30b_a3b at 512 (0.93-0.99 against 0.97-1.00 for
// 128, whose mainloop has one stage fewer). This rule then took 0.95 of
// CUTLASS's time in a second run (bf16 0.85-0.99, fp16 0.85-1.02) and 0.98
// on the second suite's bf16 wgrad.
//
// large_solo, row-grouped: 64 columns. On the 84 bf16/fp16 fwd and dgrad
// rows of the suite that run large_solo (results/tiles/
// 2026-12-01e-solo-store-tile) 64 took 0.990 of CUTLASS's time in
// geometric mean (0.95-1.01 per row), 128 0.993 (0.955-1.03): long K per
// tile, so the stores matter less than in wgrad.
constexpr int64_t kStoreTile128MaxTokens = 256;
constexpr int kSoloStoreTileCols = 64;

struct StoreTileQuery {
  TileConfig config;
  // 16-bit inputs with output in the input dtype.
  bool same_16bit_out;
  // Grouped along K (wgrad), or along rows (fwd, dgrad); neither for 3d x 3d.
  bool k_grouped;
  bool row_grouped;
  // The grouped dimension's mean extent per group, rounded down: tokens
  // per group when grouped along K.
  int64_t mean_extent;
};

inline int store_tile_cols_for(const StoreTileQuery& q) {
  if (!q.same_16bit_out) {
    return 0;
  }
  if (q.config == TileConfig::kLarge && q.k_grouped) {
    return q.mean_extent <= kStoreTile128MaxTokens ? 128 : 64;
  }
  if (q.config == TileConfig::kLargeSolo && q.row_grouped) {
    return kSoloStoreTileCols;
  }
  return 0;
}

// The chunked tile order (GroupedMMTileOrder.h): each CTA takes
// kChunkedOrderTiles consecutive output tiles at a time instead of one
// every grid size, so it changes group (and rewrites its TMA descriptors,
// ~0.9 us) every 4 tiles instead of at nearly every tile. Built for the
// wider-store large kernels of 16-bit wgrad (store_tile_cols != 0), and
// chosen where groups have few tokens, so each tile is short and the
// switches dominate, and where a group has few output tiles, so a CTA
// changes group at nearly every step of the plain order (with more tiles
// per group than the grid has CTAs it changes group every few steps
// already). Measured on the H200 (results/tiles/2026-12-02-tile-chunk,
// bf16 wgrad, same-run A/B): chunk 4 took 0.80 of the plain order's time
// on qwen3_decode (8 tokens and 96 tiles per group; 0.85 skewed) but
// 1.03-1.04 on deepseek_v3_decode (64) and grin_moe (128), and up to 1.16
// on qwen3_30b_a3b_w2 skewed (512; chunk 8 1.51: more groups in flight
// than L2 holds). The sweep in the same directory (sweep/) set the
// bounds: chunk 4 took 0.79-0.85 of the plain order's time at 16 and 32
// tokens with 96 tiles per group and 0.88-0.94 at 8 and 16 tokens with
// 256, but 1.00-1.02 with 384 to 896 tiles (8 and 16 tokens). A second
// sweep (results/tiles/2026-12-03c-chunk-sweep2) went on to 256 tokens:
// chunk 4 took 0.83-0.86 of the plain order's time at 64 tokens with 96
// tiles and 0.92-0.96 with 256; at 128 tokens 0.86-0.94 with 96 tiles
// but 0.95-1.00 with 256, and at 256 tokens up to 1.07 (skewed). So the
// bound is 64 tokens, where both tile counts and both group-size
// distributions won.
constexpr int64_t kChunkedOrderMaxTokens = 64;
constexpr int64_t kChunkedOrderMaxGroupTiles = 264;
constexpr int kChunkedOrderTiles = 4;

// q: the call (store_tile_cols_for's query); store_tile_cols: the subtile
// it runs (a pinned CUTLASS subtile has no chunked kernel); group_m x
// group_n: each group's output (wgrad: host-known).
inline int tile_chunk_for(const StoreTileQuery& q, int store_tile_cols,
                          int64_t group_m, int64_t group_n) {
  const bool built = q.config == TileConfig::kLarge && q.k_grouped &&
      q.same_16bit_out && store_tile_cols != 0;
  // The large config's 128x256 tiles.
  const int64_t group_tiles = ((group_m + 127) / 128) * ((group_n + 255) / 256);
  return built && q.mean_extent <= kChunkedOrderMaxTokens &&
          group_tiles <= kChunkedOrderMaxGroupTiles
      ? kChunkedOrderTiles
      : 1;
}

// Which way the persistent scheduler walks a group's output tiles.
// Consecutive CTAs take consecutive tiles, so one wave of CTAs shares the
// operand tiles of the dimension walked first; the other operand streams
// through L2 once per wave. Walking first along the group's smaller
// dimension keeps the smaller operand (m x k against k x n, so m against
// n) the one that is read again, where it can stay in L2. CUTLASS's group
// scheduler walks M first. Measured on the H200 (results/tf32/
// 2026-12-01b-raster, bf16 wgrad): N first won where it changes the order
// on the suite, mixtral_8x7b_w2 (m 14336 > n 4096: 0.95-0.96x the time
// of M first); the K-major kernels take this rule. mean_m / mean_n: the
// host-known sizes of a group's output (a row-grouped call's mean rows
// per group for the grouped one). Ties keep M first.
enum class RasterOrder { kAlongM, kAlongN };

inline RasterOrder raster_order_for(int64_t mean_m, int64_t mean_n) {
  return mean_m <= mean_n ? RasterOrder::kAlongM : RasterOrder::kAlongN;
}

// The swapped TF32 kernel (N-major weights read directly; its M is the
// weights' N, its N the tokens). On 256-token tiles, M first: N first
// lost on the large rows (mixtral_8x7b_w13 skewed 1.07x, qwen3_30b_a3b_w13
// skewed 1.06x the time of M first, results/tf32/2026-12-01b-raster). On
// 128-token tiles (groups of up to 128 rows on average), tokens first: a
// group of more than 128 rows then has its token tiles of one weight tile
// on neighbouring CTAs, which read that weight tile from L2 together
// rather than streaming the group's weights again per token tile. There
// it took grin_moe's fwd to 0.93 (skewed) and 0.95 (sparse) of M first's
// time, and changed no other narrow row by more than 1%
// (results/tiles/2026-12-02-tile-chunk/tf32; 0.96 and 0.96 in its
// confirm run; the same rows in the 12-01b raster run: 0.93-1.02).
inline RasterOrder swapped_raster_order_for(bool narrow_token_tile) {
  return narrow_token_tile ? RasterOrder::kAlongN : RasterOrder::kAlongM;
}

// Windowed launches (TileChoice::launch_waves) by default for TF32, where
// their kernels are built (the direct read's 256-token tiles and K-major
// large_solo with the short K tile) and groups hold at least
// kTf32WindowMinRowsPerGroup rows on average. Measured on the H200, 8
// waves per launch against one launch, same rounds, two runs
// (results/tf32/2026-12-03b-windows and -windows-default): the Mixtral
// rows (4096 rows per group, 11-13 ms calls) 0.988 / 0.990 (fwd / dgrad,
// geometric mean) in the first and 0.984 / 0.965 in the second, 0.95-1.03
// per row; shorter calls with smaller groups lost: gpt_oss_120b_w13 (256
// rows per group) fwd 1.02-1.09, qwen3_30b_a3b_w13 (512) 1.00-1.03,
// deepseek_v3_ep8_w2 (1024, K 2048) 0.99-1.03; deepseek_v3_ep8_w13
// (1024, K 7168) 0.95-1.02 in both. TF32 moves 2-3x cuBLAS's DRAM bytes,
// and realigning the CTAs at each launch buys back clock where a call is
// long enough that the boundaries (~25 us each) are a small share.
constexpr int kTf32LaunchWaves = 8;
constexpr int64_t kTf32WindowMinRowsPerGroup = 2048;

struct Tf32WindowQuery {
  bool direct_read;  // N-major weights read as they are (swapped kernel)
  bool narrow_token_tile;  // the direct read's 128-token tiles
  bool cluster_token_tile;  // the direct read's 2-CTA clusters
  TileConfig config;  // the K-major kernels' config
  bool short_k;  // the K-major kernels' short K tile
  int64_t rows_per_group;  // a row-grouped call's mean rows per group
};

inline bool tf32_windows_built(const Tf32WindowQuery& q) {
  if (q.direct_read) {
    return !q.narrow_token_tile && !q.cluster_token_tile;
  }
  return q.config == TileConfig::kLargeSolo && q.short_k;
}

// 0: one launch.
inline int tf32_launch_waves_for(const Tf32WindowQuery& q) {
  return tf32_windows_built(q) &&
          q.rows_per_group >= kTf32WindowMinRowsPerGroup
      ? kTf32LaunchWaves
      : 0;
}

// The direct read's 256-token tiles on 2-CTA clusters that share each
// token tile, from this many rows per group on average up to the windowed
// launches' bound (which are built without clusters and take over there).
// Against the unclustered 256-token tile in the same runs, TF32 fwd
// (results/tf32/2026-12-01a-narrow, and 2026-12-03c-probe on another card
// and build): deepseek_v3_ep8_w13 (1024 rows per group) 1.005 / 0.978 /
// 0.918 and 0.996 / 0.967 / 0.922 (balanced / skewed / sparse),
// deepseek_v3_ep8_w2 (1024) 0.983 / 0.948 / 0.979; smaller groups won on
// skewed and sparse rows but lost up to 1.04 on balanced ones
// (qwen3_30b_a3b, 512), and Mixtral (4096) tied at 0.99-1.02. As the
// default (2026-12-03c-cluster-default): w13 0.98 / 0.96 / 0.91, w2 1.00
// / 0.95 / 0.95 of the unclustered tile.
constexpr int64_t kTf32ClusterMinRowsPerGroup = 1024;

// The clusters win only on fast DRAM. The direct read moves 2.3-3.3x the
// DRAM bytes of a GEMM per group (14.8 GB a call on deepseek_v3_ep8_w13,
// ncu on the H200). On the H100's 3.35 TB/s the unclustered tile won on
// three cards, 0.84-0.97 of the cluster's time on that row (and tied on
// deepseek_v3_ep8_w2, 0.99-1.02), in results/tf32:
//   2026-12-06-h100-direct-read-b9b3d75
//   2026-12-06b-h100-61aec982-b9b3d75
//   2026-12-06c-h100-836b9017-dram-rule-06d72b1
// while the H200's 4.8 TB/s gave the numbers above. Between the two
// nothing was measured, so the bound sits just below the H200 and other
// cards keep the plain tile.
constexpr double kTf32ClusterMinDramBytesPerSecond = 4.4e12;

// rows: a row-grouped call's total rows (host-known), groups: G,
// dram_bytes_per_second: the device's peak DRAM bandwidth.
inline bool tf32_mn_b_cluster_wins(int64_t rows, int64_t groups,
                                   double dram_bytes_per_second) {
  return groups > 0 &&
      dram_bytes_per_second >= kTf32ClusterMinDramBytesPerSecond &&
      rows >= kTf32ClusterMinRowsPerGroup * groups &&
      rows < kTf32WindowMinRowsPerGroup * groups;
}

}  // namespace at::native::grouped_mm::sm90
