#pragma once

// Which Hopper tile config, store tile, tile order and launch windows a
// call runs, from what the host knows without a sync. Plain arithmetic, so
// it is testable on the CPU; GroupedMMSm90Dispatch.cpp applies it.

#include <cstdint>

namespace at::native::grouped_mm::sm90 {

// kSmall: 64x128 pingpong tiles for decode-sized groups.
// kMedium: 128x128 pingpong tiles without a cluster: one M tile per group
// of up to 128 rows, so no cluster CTA idles.
// kLarge: 128x256 cooperative tiles on 2-CTA clusters along M, which share
// each weight tile through multicast.
// kLargeSolo: kLarge's tiles without the cluster, so no group is padded to
// an even number of M tiles.
// kWide: 64x256 pingpong tiles without a cluster (16-bit only): a group's
// last tile pads at most 63 rows, and one warp group's epilogue overlaps
// the other's mainloop.
enum class TileConfig { kSmall, kMedium, kLarge, kLargeSolo, kWide };

// Mean rows per group up to this: 64-row tiles.
constexpr int64_t kSmallTileMaxRows = 32;
// Groups that share one row count (2d x 2d, 3d x 3d): medium tiles up to
// this many rows, large beyond.
constexpr int64_t kMediumTileMaxRows = 128;
// 16-bit row-grouped calls: wide tiles up to this many mean rows per group.
constexpr int64_t kWideTileMaxRows = 128;

// What the host knows of a call without a sync.
struct TileQuery {
  bool row_grouped;  // 2d x 3d (3d x 2d runs as one)
  // Row-grouped: total rows / groups (the mean); otherwise each group's m.
  int64_t rows_per_group;
  bool tf32;
};

// Row-grouped calls past decode sizes run one kernel without clusters, since
// the host cannot see which groups a cluster would pad. Up to 128 rows per
// group, 16-bit calls take wide, whose 64-row tiles pad a small group's last
// tile less; beyond, and for TF32, large_solo.
inline TileConfig tile_config_for(const TileQuery& q) {
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

// The 128x256 configs' epilogue subtile: output columns per TMA store, or
// 0 for CUTLASS's choice (128x32 for 16-bit output). Wider subtiles take
// fewer barriers and stores per tile; their shared memory comes out of the
// mainloop stages (64 columns keep four, 128 keep three). Built for 16-bit
// calls whose output is in the input dtype: on large for calls grouped
// along K (wgrad), where few tokens per group leave the stores dominant, so
// 128 columns win up to 256 tokens per group and 64 beyond; on large_solo
// for row-grouped calls, whose long K makes 64 enough.
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
// kChunkedOrderTiles consecutive output tiles at a time, so it changes group
// (and rewrites its TMA descriptors) every few tiles instead of at nearly
// every one. That pays where groups have few tokens, so each tile is short,
// and few output tiles, so the plain order changes group at nearly every
// step; with many tiles per group, more groups in flight than L2 holds make
// it lose. Built for 16-bit wgrad on large with 128-column store tiles.
constexpr int64_t kChunkedOrderMaxTokens = 64;
constexpr int64_t kChunkedOrderMaxGroupTiles = 264;
constexpr int kChunkedOrderTiles = 4;
static_assert(kChunkedOrderMaxTokens <= kStoreTile128MaxTokens,
              "the chunked order is built on the 128-column store tiles");

// q: the call (store_tile_cols_for's query); store_tile_cols: the subtile it
// runs; group_m x group_n: each group's output (host-known in wgrad).
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
// Consecutive CTAs take consecutive tiles, so a wave shares the operand
// tiles of the dimension walked first and streams the other through L2.
// Walking the smaller output extent first (m against n) keeps the smaller
// operand the one read again, where it can stay in L2. Ties keep CUTLASS's
// M first. mean_m / mean_n: a group's output as the host knows it.
enum class RasterOrder { kAlongM, kAlongN };

inline RasterOrder raster_order_for(int64_t mean_m, int64_t mean_n) {
  return mean_m <= mean_n ? RasterOrder::kAlongM : RasterOrder::kAlongN;
}

// The swapped TF32 kernel (its M is the weights' N, its N the tokens). On
// 128-token tiles, tokens first: a group's token tiles of one weight tile
// then run on neighbouring CTAs and read that weight tile from L2 together.
// On 256-token tiles, weights first: tokens first lost on the large groups.
inline RasterOrder swapped_raster_order_for(bool narrow_token_tile) {
  return narrow_token_tile ? RasterOrder::kAlongN : RasterOrder::kAlongM;
}

// Windowed launches (TileChoice::launch_waves) for TF32, where their kernels
// are built (the direct read's 256-token tiles, K-major large_solo) and
// groups hold at least kTf32WindowMinRowsPerGroup rows on average. TF32
// calls move more DRAM bytes than cuBLAS's; restarting the CTAs in step at
// each launch keeps tiles that share an operand close enough in time to
// read it from L2, which pays on long calls only, since each launch
// boundary costs the last wave's spread.
constexpr int kTf32LaunchWaves = 8;
constexpr int64_t kTf32WindowMinRowsPerGroup = 2048;

struct Tf32WindowQuery {
  bool direct_read;  // N-major weights read as they are (swapped kernel)
  bool narrow_token_tile;  // the direct read's 128-token tiles
  bool cluster_token_tile;  // the direct read's 2-CTA clusters
  TileConfig config;  // the K-major kernels' config
  int64_t rows_per_group;  // a row-grouped call's mean rows per group
};

inline bool tf32_windows_built(const Tf32WindowQuery& q) {
  if (q.direct_read) {
    return !q.narrow_token_tile && !q.cluster_token_tile;
  }
  return q.config == TileConfig::kLargeSolo;
}

// 0: one launch.
inline int tf32_launch_waves_for(const Tf32WindowQuery& q) {
  return tf32_windows_built(q) &&
          q.rows_per_group >= kTf32WindowMinRowsPerGroup
      ? kTf32LaunchWaves
      : 0;
}

// The direct read's 256-token tiles on 2-CTA clusters that share each
// token tile through multicast, from this many rows per group on average up
// to the windowed launches' bound (the windows are built without clusters).
// Smaller groups lost on balanced distributions.
constexpr int64_t kTf32ClusterMinRowsPerGroup = 1024;

// The clusters halve the token tile's L2 reads, which pays only where DRAM
// is fast enough to feed them: they won with the H200's 4.8 TB/s and lost
// with the H100's 3.35 TB/s. The bound sits just below the H200.
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
