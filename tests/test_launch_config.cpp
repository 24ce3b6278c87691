// The launch arithmetic of the CUDA kernels (cuda/launch_config.h), checked on any machine: grid
// sizes at and past 2^31 elements and for empty work, the 65,535 limit of a grid's y, and fused
// attention's shared-memory plan at every head dim.
#include <doctest/doctest.h>

#include <vector>

#include "cuda/launch_config.h"

using namespace ember::cuda;

namespace {
// Devices whose figures the plans are sized for: (multiprocessors, threads per multiprocessor). The
// last is none that exists: its wave alone asks for more than a grid's y allows.
struct DeviceShape {
  int sm_count, max_threads_per_sm;
};
const std::vector<DeviceShape> kDevices = {{1, 1024}, {108, 2048}, {132, 2048}, {100000, 2048}};
// cudaDevAttrMaxSharedMemoryPerBlockOptin: 163 KB on an A100 (sm_80), 227 KB on an H100 (sm_90).
constexpr size_t kA100SharedBytes = 166912, kH100SharedBytes = 232448;
}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("grid_blocks_for: at most two waves, at least one block, for 2^31 + 1 elements and for none") {
  for (const DeviceShape d : kDevices) {
    CAPTURE(d.sm_count);
    const int64_t wave = int64_t{d.sm_count} * (d.max_threads_per_sm / kThreads) * 2;
    CHECK(grid_blocks_for((int64_t{1} << 31) + 1, kThreads, d.sm_count, d.max_threads_per_sm) == wave);
    CHECK(grid_blocks_for(int64_t{1} << 40, kThreads, d.sm_count, d.max_threads_per_sm) == wave);
    CHECK(grid_blocks_for(0, kThreads, d.sm_count, d.max_threads_per_sm) == 1);
    CHECK(grid_blocks_for(1, kThreads, d.sm_count, d.max_threads_per_sm) == 1);
    CHECK(grid_blocks_for(kThreads + 1, kThreads, d.sm_count, d.max_threads_per_sm) == 2);
    CHECK(grid_blocks_for(5 * 128, 128, d.sm_count, d.max_threads_per_sm) == std::min<int64_t>(5, 2 * d.sm_count * (d.max_threads_per_sm / 128)));
  }
}

TEST_CASE("plan_reduce_for: splits fill the device, cover len without an empty split, and stay within a grid's y") {
  struct Case {
    int64_t outer, len, inner;
  };
  const std::vector<Case> cases = {
      {1, 25216, 768},            // a ViT-B/16 bias gradient: 768 columns over 25,216 rows
      {1, int64_t{1} << 40, 1},   // one enormous row
      {3, int64_t{1} << 35, 2},   // few columns over an enormous len
      {int64_t{1} << 22, 64, 1},  // many short rows: the outputs fill the device alone
      {1, 1, 1}, {7, 3, 5}, {0, 100, 1}, {4, 0, 3},
  };
  for (const DeviceShape d : kDevices)
    for (const Case c : cases) {
      CAPTURE(d.sm_count);
      CAPTURE(c.outer);
      CAPTURE(c.len);
      CAPTURE(c.inner);
      const ReducePlan p = plan_reduce_for(c.outer, c.len, c.inner, d.sm_count, d.max_threads_per_sm);
      CHECK(p.splits >= 1);
      CHECK(p.splits <= kMaxGridY);
      CHECK(p.chunk >= 1);
      if (c.len > 0 && c.outer * c.inner > 0) {
        CHECK(p.chunk * p.splits >= c.len);        // every element folded
        CHECK((p.splits - 1) * p.chunk < c.len);   // the last split is not empty
      }
    }
  // The bias gradient is split on a large GPU (3 blocks of outputs alone), the many short rows not.
  CHECK(plan_reduce_for(1, 25216, 768, 132, 2048).splits > 1);
  CHECK(plan_reduce_for(int64_t{1} << 22, 64, 1, 132, 2048).splits == 1);
}

TEST_CASE("plan_channel_reduction_for: splits within a grid's y for any batch, channels covered") {
  for (const DeviceShape d : kDevices)
    for (const bool columns : {false, true})
      for (const int64_t N : {int64_t{1}, int64_t{256}, int64_t{1} << 34}) {
        CAPTURE(N);
        const ChannelReduction r = plan_channel_reduction_for(N, 64, 56 * 56, columns, d.sm_count, d.max_threads_per_sm);
        CHECK(r.splits >= 1);
        CHECK(r.splits <= kMaxGridY);
        CHECK(r.chunk * r.splits >= N * 56 * 56);
        CHECK((r.splits - 1) * r.chunk < N * 56 * 56);
        CHECK(r.bx * r.by == kThreads);
      }
}

TEST_CASE("attention_plan: tiles aligned and disjoint within the block's bytes, which fit the GPUs' limits") {
  for (const int t : {2, 4, 8}) {  // f16/bf16, f32, f64 storage; computed in f32 (f64 for f64)
    const int a = t == 8 ? 8 : 4;
    for (int64_t e = 1; e <= kAttentionMaxHead; ++e)
      for (const bool backward : {false, true}) {
        CAPTURE(t);
        CAPTURE(e);
        CAPTURE(backward);
        const AttentionPlan p = attention_plan(t, a, e, e, backward);
        CHECK(p.e16 % 16 == 0);
        CHECK(p.e16 >= e);
        // (offset, bytes) of each tile the pass uses
        std::vector<std::pair<size_t, size_t>> tiles = {
            {p.q, attention_rows(kAttentionQueryTile, p.ld_qk, t)}, {p.k, attention_rows(p.bc, p.ld_qk, t)},
            {p.v, attention_rows(p.bc, p.ld_v, t)}, {p.p, attention_rows(kAttentionQueryTile, p.ld_p, t)}};
        if (backward) {
          tiles.push_back({p.g, attention_rows(kAttentionQueryTile, p.ld_v, t)});
          tiles.push_back({p.ds, attention_rows(kAttentionQueryTile, p.ld_p, t)});
          tiles.push_back({p.s, 2 * attention_rows(kAttentionQueryTile, p.ld_s, a)});  // s and dp
          tiles.push_back({p.m, attention_rows(kAttentionQueryTile, 1, a)});
          tiles.push_back({p.l, attention_rows(kAttentionQueryTile, 1, a)});
          tiles.push_back({p.d, attention_rows(kAttentionQueryTile, 1, a)});
        } else {
          tiles.push_back({p.s, attention_rows(kAttentionQueryTile, p.ld_s, a)});
          tiles.push_back({p.o, attention_rows(kAttentionQueryTile, p.ld_o, a)});
          tiles.push_back({p.m, attention_rows(kAttentionQueryTile, 1, a)});
          tiles.push_back({p.l, attention_rows(kAttentionQueryTile, 1, a)});
        }
        for (size_t i = 0; i < tiles.size(); ++i) {
          CHECK(tiles[i].first % 128 == 0);
          CHECK(tiles[i].first + tiles[i].second <= p.bytes);
          for (size_t j = 0; j < i; ++j)
            CHECK((tiles[i].first + tiles[i].second <= tiles[j].first || tiles[j].first + tiles[j].second <= tiles[i].first));
        }
        // What cuda_attention_fused allows: 16- and 32-bit inputs at every head dim on an A100 and an
        // H100; f64 up to 80 on an A100 and 112 on an H100.
        const size_t limit_a100 = kA100SharedBytes, limit_h100 = kH100SharedBytes;
        if (t < 8 || e <= 80) CHECK(p.bytes <= limit_a100);
        if (t < 8 || e <= 112) CHECK(p.bytes <= limit_h100);
      }
  }
}

}  // TEST_SUITE
