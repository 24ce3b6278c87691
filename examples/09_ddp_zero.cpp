// 09_ddp_zero: data parallelism on several processes, and what ZeRO saves. Every rank trains the
// same MLP with Adam on its share of each global batch, four ways: DistributedDataParallel (each
// rank holds everything: the weights, the gradients, Adam's two moments: 16 bytes per parameter in
// float32), then ZeRO stages 1, 2 and 3 (Rajbhandari et al. 2020), which cut the optimizer state,
// then the gradients, then the weights themselves into one shard per rank. Bytes per rank for Psi
// parameters on N ranks, float32 with Adam:
//     DDP 16 Psi    ZeRO-1 8 Psi + 8 Psi / N    ZeRO-2 4 Psi + 12 Psi / N    ZeRO-3 16 Psi / N
// Each run starts from rank 0's weights and sees the same batches, and ZeRO changes where the
// numbers live, not what they are: the program checks that the ranks end with equal weights, that
// each ZeRO stage ends where DDP does, that the loss went down, and prints the bytes each rank held
// beside the formula. (examples/ddp.cpp is DDP alone, in a page.)
//
// Read next: dist/data_parallel.h (the one interface this program trains through),
// dist/distributed_data_parallel.h (buckets, overlap with backward),
// dist/ring_all_reduce.h (the all-reduce DDP uses, phase by phase), dist/zero_partition.h (units,
// shards, what each stage frees and when), dist/zero_optimizer.h (ZeroOptimizer::step),
// tests/test_zero.cpp (the same claims on 2 and 4 ranks, in every precision mode).
//
//   ninja -C build examples/09_ddp_zero && ./ember launch -n 2 build/examples/09_ddp_zero
//   ./ember launch -n 4 build/examples/09_ddp_zero --hidden 1024
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>

#include "dist/data_parallel.h"
#include "dist/init.h"
#include "checks.h"
#include "flags.h"
#include "nn/loss.h"
#include "nn/models/mlp.h"
#include "optim/adam.h"

using namespace ember;
using ember_examples::Checks;
using ember_examples::number_in;

namespace {

constexpr int64_t kFeatures = 256, kClasses = 10;

struct RunResult {
  std::vector<float> weights;  // every parameter, flattened, at the end
  double first_loss = 0, last_loss = 0;
  int64_t bytes = 0;  // held by this rank's tensors after the last step
};

// The global batch of a step, the same on every rank (labels from a fixed random linear "teacher");
// each rank takes its own rows.
std::pair<Tensor, Tensor> my_share(int step, int rank, int world, int64_t per_rank) {
  Generator teacher_gen(123), gen(1000 + static_cast<uint64_t>(step));
  const Tensor teacher = randn({kFeatures, kClasses}, {}, &teacher_gen);
  const Tensor x = randn({per_rank * world, kFeatures}, {}, &gen);
  const Tensor y = argmax(matmul(x, teacher), 1);
  return {x.narrow(0, rank * per_rank, per_rank), y.narrow(0, rank * per_rank, per_rank)};
}

// The job's loss: the mean of the ranks' losses.
double job_loss(const Tensor& loss, dist::ProcessGroup& group) {
  Tensor mean = loss.detach().clone();
  group.all_reduce(mean, dist::ReduceOp::avg);
  return mean.item<double>();
}

std::vector<float> flat_weights(const nn::Module& model) {
  std::vector<float> all;
  for (const Tensor& p : model.parameters())
    for (float v : p.to_vector<float>()) all.push_back(v);
  return all;
}

int64_t host_bytes() { return static_cast<int64_t>(backend::memory_stats(kCPU).allocated); }

// stage 0: DDP; 1 to 3: ZeRO.
RunResult train(int stage, const std::shared_ptr<dist::ProcessGroup>& group, int steps, int64_t per_rank,
                int64_t hidden) {
  const int rank = group->rank(), world = group->size();
  const int64_t before = host_bytes();
  manual_seed(100 + static_cast<uint64_t>(rank));  // other weights on each rank: the wrappers start all from rank 0's
  auto model = std::make_shared<nn::MLP>(kFeatures, std::vector<int64_t>{hidden, hidden}, kClasses);
  RunResult r;
  const auto record = [&](int step, const Tensor& loss) {
    const double l = job_loss(loss, *group);
    if (step == 0) r.first_loss = l;
    r.last_loss = l;
  };
  // One loop for the four: DataParallel builds DDP around the model or ZeRO around the optimizer.
  dist::DataParallelOptions options{.strategy = stage == 0 ? dist::Strategy::ddp
                                                           : dist::parse_strategy("zero" + std::to_string(stage))};
  options.zero.stage3_param_persistence_threshold = 0;  // shard every layer, however small, as the formula counts
  dist::DataParallel dp(model, group, [](std::vector<Tensor> params) {
    return std::make_unique<optim::Adam>(std::move(params));  // under ZeRO, over this rank's shard only
  }, options);  // broadcasts rank 0's weights
  for (int step = 0; step < steps; ++step) {
    const auto [x, y] = my_share(step, rank, world, per_rank);
    Tensor loss = cross_entropy(dp(x), y);
    loss.backward();  // DDP: returns with the gradients averaged; ZeRO: each rank gets its shard's average
    dp.step();        // ZeRO: steps this rank's shard, then all-gathers the updated weights
    dp.zero_grad();
    record(step, loss);
  }
  r.bytes = host_bytes() - before;
  const auto whole = dp.gathered();  // stage 3 holds shards: gather them to compare
  r.weights = flat_weights(*model);
  return r;
}

// The ranks' weights are bit for bit the same: their checksums' minimum and maximum agree.
bool ranks_agree(const std::vector<float>& weights, dist::ProcessGroup& group) {
  double s = 0;
  for (float v : weights) s += v;
  Tensor lowest = full({1}, s, DType::f64), highest = full({1}, s, DType::f64);
  group.all_reduce(lowest, dist::ReduceOp::min);
  group.all_reduce(highest, dist::ReduceOp::max);
  return lowest.item<double>() == highest.item<double>();
}

double formula_bytes(int stage, double psi, double n) {
  switch (stage) {
    case 0: return 16 * psi;
    case 1: return 8 * psi + 8 * psi / n;
    case 2: return 4 * psi + 12 * psi / n;
    default: return 16 * psi / n;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 20;
  int64_t per_rank = 32, hidden = 512;
  double timeout_s = 60;
  CLI::App app{"Step 9 of the example ladder: DDP and ZeRO stages 1-3 on the ranks of a job "
               "(./ember launch -n 2 ...).", "09_ddp_zero"};
  app.add_option("--steps", steps, "Adam steps in each of the four runs")->check(CLI::Range(2, 100000))
      ->capture_default_str();
  app.add_option("--batch-size", per_rank, "examples per rank and step")->check(CLI::Range(int64_t{1}, int64_t{65536}))
      ->capture_default_str();
  app.add_option("--hidden", hidden, "width of the MLP's two hidden layers")
      ->check(CLI::Range(int64_t{1}, int64_t{16384}))->capture_default_str();
  app.add_option("--timeout", timeout_s, "seconds any collective may wait for a rank before failing")
      ->check(number_in(1.0, 3600.0))->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    dist::InitOptions init;
    init.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));  // a dead rank fails the job
    const auto group = dist::init_process_group(init);
    const int rank = group->rank(), world = group->size();
    Checks checks(rank == 0);
    const double psi = static_cast<double>(nn::MLP(kFeatures, {hidden, hidden}, kClasses).num_parameters());
    if (rank == 0)
      std::printf("%d ranks, an MLP of %.0f parameters, Adam, %d steps of %lld examples per rank\n\n"
                  "%-7s %14s %14s %7s %12s %12s\n", world, psi, steps, static_cast<long long>(per_rank), "run",
                  "MB per rank", "formula MB", "ratio", "last loss", "max |w - w_DDP|");
    std::vector<RunResult> runs;
    for (int stage = 0; stage <= 3; ++stage) {
      runs.push_back(train(stage, group, steps, per_rank, hidden));
      const RunResult& r = runs.back();
      double worst = 0;
      for (size_t i = 0; i < r.weights.size(); ++i)
        worst = std::max(worst, std::fabs(static_cast<double>(r.weights[i]) - runs.front().weights[i]));
      const double formula = formula_bytes(stage, psi, world);
      const std::string name = stage == 0 ? "DDP" : "ZeRO-" + std::to_string(stage);
      if (rank == 0)
        std::printf("%-7s %14.3f %14.3f %7.3f %12.4f %12.3g\n", name.c_str(), r.bytes / 1e6, formula / 1e6,
                    r.bytes / formula, r.last_loss, worst);
      checks.expect(ranks_agree(r.weights, *group), name + ": every rank ends with the same weights");
      checks.expect(r.last_loss < r.first_loss, name + ": the loss went down");
      if (stage > 0)
        checks.expect(worst <= 1e-5, name + ": the weights end where DDP's do (to float rounding)");
      checks.expect(std::fabs(r.bytes / formula - 1) < 0.05,
                    name + ": the bytes per rank are the formula's (within 5%)");
    }
    group->barrier();  // rank 0 serves the store: it stays until every rank is done
    return checks.exit_code();
  } catch (const Error& e) {
    std::fprintf(stderr, "09_ddp_zero: %s\n", e.what());
    return 1;
  }
}
