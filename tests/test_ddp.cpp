// DistributedDataParallel over Gloo with real forked ranks (tests/dist_ranks.h): training equals one
// process over the same global batch, no_sync accumulation, buckets and gradient views, unused
// parameters, buffer broadcast, and a rank that dies mid-backward.
#include <cmath>
#include <cstdio>

#include "dist/distributed_data_parallel.h"
#include "nn/loss.h"
#include "optim/sgd.h"
#include "tests/data_parallel_models.h"
#include "tests/dist_ranks.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember::dist;
using namespace ember_test;

namespace {

constexpr int kSteps = 3;
constexpr int64_t kGlobalBatch = 8;
// Measured: the largest parameter difference after 3 SGD steps is 0 on 2 ranks and 3e-8 (MLP) to 6e-8
// (SmallCNN) on 4, from the order of the f32 sums; 2e-6 leaves room for other CPUs' kernels.
constexpr double kTolerance = 2e-6;

// Rank r trains the model on its shard of each global batch with DDP; it also computes, alone, what
// one process gets from the whole global batch (the same shards, as gradient accumulation: batch
// norm sees each shard as DDP's ranks do) and compares the parameters.
std::string ddp_equals_one_process(int rank, int world, int port, const std::string& kind, bool use_ring) {
  auto pg = join_group(rank, world, port);
  DDPOptions options;
  options.use_ring = use_ring;
  options.first_bucket_mb = 0.001;  // several buckets even for these small models
  options.bucket_cap_mb = 0.002;
  // Each rank starts from other weights: the construction broadcasts rank 0's.
  DistributedDataParallel ddp(make_model(kind, 7 + rank), pg, options);
  optim::SGD sgd(ddp.parameters(), {.lr = 0.1, .momentum = 0.9});
  auto reference = make_model(kind, 7);
  optim::SGD ref_sgd(reference->parameters(), {.lr = 0.1, .momentum = 0.9});
  if (ddp.buckets().size() < 2) return "expected several buckets, got " + std::to_string(ddp.buckets().size());

  for (int step = 0; step < kSteps; ++step) {
    const Batch batch = global_batch(sample_shape(kind), kGlobalBatch, step);
    const Batch mine = shard(batch, rank, world);
    sgd.zero_grad();
    cross_entropy(ddp(mine.x), mine.y).backward();
    sgd.step();

    ref_sgd.zero_grad();
    for (int r = 0; r < world; ++r) {
      const Batch part = shard(batch, r, world);
      div(cross_entropy((*reference)(part.x), part.y), Scalar(static_cast<double>(world))).backward();
    }
    ref_sgd.step();
  }
  const double diff = max_difference(ddp.module()->parameters(), reference->parameters());
  if (rank == 0)
    std::printf("DDP %s on %d ranks (%s): max parameter difference to one process %.3g\n", kind.c_str(), world,
                use_ring ? "ring" : "Gloo all_reduce", diff);
  std::fflush(stdout);  // the rank ends with _exit
  if (!(diff <= kTolerance)) return kind + ": parameters differ from one process by " + std::to_string(diff);
  return "";
}

}  // namespace

TEST_SUITE("dist") {

TEST_CASE("DDP: the MLP and SmallCNN on 2 and 4 ranks train as one process over the global batch") {
  if (!has_gloo()) return;
  for (const std::string kind : {"mlp", "cnn"})
    for (int world : {2, 4})
      for (bool ring : {true, false}) {
        if (world == 4 && !ring) continue;  // the backend's all_reduce: 2 ranks are enough
        INFO(kind, " on ", world, " ranks, ", ring ? "ring" : "Gloo all_reduce");
        check_all_passed(run_ranks(world, [&](int rank, int w, int port) {
          return ddp_equals_one_process(rank, w, port, kind, ring);
        }, milliseconds(60000)));
      }
}

TEST_CASE("DDP: no_sync accumulates locally; the next backward averages the sum") {
  if (!has_gloo()) return;
  check_all_passed(run_ranks(2, [](int rank, int world, int port) -> std::string {
    auto pg = join_group(rank, world, port);
    DistributedDataParallel ddp(make_model("mlp", 3), pg);
    auto reference = make_model("mlp", 3);
    const Batch first = global_batch({20}, 4, 0), second = global_batch({20}, 4, 1);
    {
      auto guard = ddp.no_sync();
      const Batch mine = shard(first, rank, world);
      cross_entropy(ddp(mine.x), mine.y).backward();
    }
    // Not reduced yet: this rank's own gradient.
    const Batch mine = shard(first, rank, world);
    cross_entropy((*reference)(mine.x), mine.y).backward();
    const auto params = ddp.module()->parameters(), ref_params = reference->parameters();
    std::vector<Tensor> grads, ref_grads;
    for (size_t i = 0; i < params.size(); ++i) {
      grads.push_back(params[i].grad());
      ref_grads.push_back(ref_params[i].grad());
    }
    if (max_difference(grads, ref_grads) > 0) return "no_sync: the gradient was changed";
    // The synced backward: the average over ranks of both micro-batches' sum.
    const Batch mine2 = shard(second, rank, world);
    cross_entropy(ddp(mine2.x), mine2.y).backward();
    reference->zero_grad();
    for (int r = 0; r < world; ++r)
      for (const Batch* b : {&first, &second}) {
        const Batch part = shard(*b, r, world);
        div(cross_entropy((*reference)(part.x), part.y), Scalar(static_cast<double>(world))).backward();
      }
    grads.clear();
    ref_grads.clear();
    for (size_t i = 0; i < params.size(); ++i) {
      grads.push_back(params[i].grad());
      ref_grads.push_back(ref_params[i].grad());
    }
    const double diff = max_difference(grads, ref_grads);
    return diff <= kTolerance ? "" : "after no_sync: gradients differ by " + std::to_string(diff);
  }));
}

TEST_CASE("DDP: buckets in reverse registration order, .grad a view into its bucket") {
  if (!has_gloo()) return;
  check_all_passed(run_ranks(1, [](int rank, int world, int port) -> std::string {
    auto pg = join_group(rank, world, port);
    DDPOptions options;
    options.first_bucket_mb = (16.0 * 10 + 10) * 4 / (1 << 20);  // the last Linear's weight (16 x 10 floats) and bias
    options.bucket_cap_mb = 1;
    DistributedDataParallel ddp(make_model("mlp", 1), pg, options);  // 20-32-16-10
    const auto buckets = ddp.buckets();
    if (buckets.size() != 2) return "expected 2 buckets, got " + std::to_string(buckets.size());
    const std::vector<std::string> first = {"4.bias", "4.weight"};
    if (buckets[0].parameters != first) return "first bucket: " + buckets[0].parameters.front() + ", ...";
    if (buckets[1].parameters.back() != "0.weight" || buckets[1].numel != 20 * 32 + 32 + 32 * 16 + 16)
      return "second bucket: " + std::to_string(buckets[1].numel) + " elements ending with " + buckets[1].parameters.back();
    const Batch b = global_batch({20}, 4, 0);
    Tensor loss = cross_entropy(ddp(b.x), b.y);
    loss.backward({}, true);
    const auto once = ddp.module()->parameters()[0].grad().to_vector<double>();
    loss.backward();  // a second backward without a forward (retain_graph) reduces again
    const auto twice = ddp.module()->parameters()[0].grad().to_vector<double>();
    for (size_t i = 0; i < once.size(); ++i)
      if (std::abs(twice[i] - 2 * once[i]) > 1e-6) return "second backward: gradient " + std::to_string(twice[i]);
    // The gradients of module.4 sit back to back: bias, then weight.
    const auto p = ddp.module()->named_parameters();
    const Tensor bias_grad = p[5].second.grad(), weight_grad = p[4].second.grad();
    if (static_cast<const float*>(weight_grad.raw_data()) != static_cast<const float*>(bias_grad.raw_data()) + 10)
      return ".grad is not a view into the bucket";
    return "";
  }));
}

TEST_CASE("DDP: a parameter without a gradient is named; find_unused_parameters reduces the rest") {
  if (!has_gloo()) return;
  check_all_passed(run_ranks(2, [](int rank, int world, int port) -> std::string {
    auto pg = join_group(rank, world, port);
    const Tensor x = full({2, 4}, Scalar(1.0 + rank));
    {
      manual_seed(5);
      DistributedDataParallel ddp(std::make_shared<HalfUsed>(), pg);
      Tensor loss = ddp(x).sum();
      try {
        loss.backward();
        return "no error for the unused parameters";
      } catch (const ValueError& e) {
        const std::string m = e.what();
        if (m.find("unused.weight, unused.bias") == std::string::npos ||
            m.find("find_unused_parameters") == std::string::npos)
          return "message: " + m;
      }
    }
    DDPOptions options;
    options.find_unused_parameters = true;
    manual_seed(5);
    auto model = std::make_shared<HalfUsed>();
    DistributedDataParallel ddp(model, pg, options);
    ddp(x).sum().backward();
    // d(sum of used(x))/d(weight) = the column sums of x: rank r's rows hold 1 + r, averaged: 1.5 x 2 rows.
    const auto g = model->used->weight.grad().to_vector<double>();
    for (double v : g)
      if (std::abs(v - 3.0) > 1e-6) return "used.weight grad " + std::to_string(v) + ", expected 3";
    const auto u = model->unused->weight.grad().to_vector<double>();
    for (double v : u)
      if (v != 0) return "unused.weight grad " + std::to_string(v) + ", expected 0";
    return "";
  }));
}

TEST_CASE("DDP: rank 0's buffers before each forward") {
  if (!has_gloo()) return;
  check_all_passed(run_ranks(2, [](int rank, int world, int port) -> std::string {
    auto pg = join_group(rank, world, port);
    DistributedDataParallel ddp(make_model("cnn", 1), pg);
    auto cnn = std::static_pointer_cast<nn::SmallCNN>(ddp.module());
    Tensor mean = cnn->bn1->buffer("running_mean");
    fill_(mean, Scalar(10.0 + rank));  // the ranks disagree
    ddp.eval();                        // eval: batch norm reads the statistics, does not update them
    ddp(global_batch({1, 12, 12}, 2, 0).x);
    for (double v : mean.to_vector<double>())
      if (v != 10.0) return "running_mean " + std::to_string(v) + " after forward, expected rank 0's 10";
    return "";
  }));
}

TEST_CASE("DDP: a rank that dies before backward makes the other raise within the timeout, naming it") {
  if (!has_gloo()) return;
  const auto reports = run_ranks(2, [](int rank, int world, int port) -> std::string {
    auto pg = join_group(rank, world, port, milliseconds(2000), false);
    DistributedDataParallel ddp(make_model("mlp", 1), pg);
    const Batch b = global_batch({20}, 2, 0);
    Tensor loss = cross_entropy(ddp(b.x), b.y);
    if (rank == 1) ::_exit(0);
    const auto started = std::chrono::steady_clock::now();
    try {
      loss.backward();
      return "backward did not raise";
    } catch (const DistributedError& e) {
      const std::string m = e.what();
      if (m.find("rank 0/2") == std::string::npos || m.find("rank 1") == std::string::npos) return "message: " + m;
    }
    const auto took = std::chrono::steady_clock::now() - started;
    return took > std::chrono::milliseconds(5000) ? "raised only after " + std::to_string(took.count() / 1000000) + " ms" : "";
  });
  CHECK_MESSAGE(reports[0].empty(), reports[0]);
  CHECK(reports[1] == "<no report> (exit status 0)");
}

TEST_CASE("DDP: a backward through the wrapped module called directly keeps local gradients") {
  // It used to crash in the gradient hook: the buckets had not been set up by a DDP forward.
  if (!has_gloo()) return;
  check_all_passed(run_ranks(1, [](int rank, int world, int port) -> std::string {
    auto pg = join_group(rank, world, port);
    DistributedDataParallel ddp(make_model("mlp", 3), pg);
    auto reference = make_model("mlp", 3);
    const Batch b = global_batch({20}, 4, 0);
    cross_entropy((*ddp.module())(b.x), b.y).backward();
    cross_entropy((*reference)(b.x), b.y).backward();
    std::vector<Tensor> grads, ref_grads;
    for (const Tensor& p : ddp.module()->parameters()) grads.push_back(p.grad());
    for (const Tensor& p : reference->parameters()) ref_grads.push_back(p.grad());
    const double diff = max_difference(grads, ref_grads);
    return diff == 0 ? "" : "gradients differ by " + std::to_string(diff);
  }));
}

TEST_CASE("DDP: argument errors name the values") {
  if (!has_gloo()) return;
  check_all_passed(run_ranks(1, [](int rank, int world, int port) -> std::string {
    auto pg = join_group(rank, world, port);
    DDPOptions bad;
    bad.bucket_cap_mb = 0;
    std::string e = message_of<ValueError>([&] { DistributedDataParallel(make_model("mlp", 1), pg, bad); });
    if (e.find("bucket_cap_mb (0") == std::string::npos) return "bucket size: " + e;
    auto frozen = make_model("mlp", 1);
    for (Tensor p : frozen->parameters()) p.requires_grad_(false);
    e = message_of<ValueError>([&] { DistributedDataParallel(frozen, pg); });
    if (e.find("no parameter that requires grad") == std::string::npos) return "frozen: " + e;
    return "";
  }));
}

}  // TEST_SUITE
