// ddp: data-parallel training in one page. Every rank builds the same MLP, wraps it in
// dist::DistributedDataParallel and trains on its share of each global batch of a synthetic task
// (the label of a point is the best of 4 scores a fixed random "teacher" gives it). Backward averages
// the gradients across ranks while it runs, so every rank takes the same step and the weights stay
// equal, which the program checks at the end, with the loss going down.
//   ./ember launch -n 2 build/examples/ddp --steps 200
//   ./ember launch -n 4 build/examples/ddp --backend-all-reduce     (Gloo's all_reduce, not ember's ring)
#include <CLI/CLI.hpp>

#include "flags.h"

#include <cstdio>

#include "dist/distributed_data_parallel.h"
#include "dist/init.h"
#include "nn/loss.h"
#include "nn/models/mlp.h"
#include "optim/sgd.h"

int main(int argc, char** argv) {
  int steps = 100;
  int64_t batch_size = 32;
  double lr = 0.1;
  bool backend_all_reduce = false;
  CLI::App app{"Train an MLP with DistributedDataParallel on every rank of a job.", "ddp"};
  app.add_option("--steps", steps, "optimizer steps")->check(CLI::Range(1, 1000000));
  app.add_option("--batch-size", batch_size, "examples per rank and step (the global batch: x world size)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--lr", lr, "SGD learning rate (momentum 0.9)")->check(ember_examples::number_in(0.0, 10.0));
  app.add_flag("--backend-all-reduce", backend_all_reduce, "average with the backend's all_reduce, not ember's ring");
  CLI11_PARSE(app, argc, argv);

  using namespace ember;
  try {
    const auto group = dist::init_process_group();
    const int rank = group->rank(), world = group->size();
    constexpr int64_t kFeatures = 32, kClasses = 4;

    manual_seed(static_cast<uint64_t>(rank));  // different weights per rank: DDP starts everyone from rank 0's
    dist::DDPOptions options;
    if (backend_all_reduce) options.use_ring = false;  // else the backend's default: the ring over Gloo
    dist::DistributedDataParallel model(std::make_shared<nn::MLP>(kFeatures, std::vector<int64_t>{64}, kClasses), group,
                                        options);
    optim::SGD sgd(model.parameters(), {.lr = lr, .momentum = 0.9});
    Generator teacher_gen(123);
    const Tensor teacher = randn({kFeatures, kClasses}, {}, &teacher_gen);

    double first_loss = 0, loss_now = 0;
    for (int step = 0; step < steps; ++step) {
      // The global batch of this step, the same on every rank; each rank takes its own rows.
      Generator gen(1000 + static_cast<uint64_t>(step));
      const Tensor x = randn({batch_size * world, kFeatures}, {}, &gen);
      const Tensor y = argmax(matmul(x, teacher), 1);
      const Tensor mine_x = x.narrow(0, rank * batch_size, batch_size), mine_y = y.narrow(0, rank * batch_size, batch_size);

      sgd.zero_grad();
      Tensor loss = cross_entropy(model(mine_x), mine_y);
      loss.backward();  // returns with the gradients averaged over the ranks
      sgd.step();

      Tensor mean_loss = loss.detach().clone();  // this rank's loss; the job's is the mean over ranks
      group->all_reduce(mean_loss, dist::ReduceOp::avg);
      loss_now = mean_loss.item<double>();
      if (step == 0) first_loss = loss_now;
      if (rank == 0 && (step % 20 == 0 || step == steps - 1))
        std::printf("step %4d  loss %.4f  (global batch %lld on %d ranks)\n", step, loss_now,
                    static_cast<long long>(batch_size * world), world);
    }

    // Every rank took the same steps: the weights agree bit for bit.
    Tensor checksum = zeros({1}, DType::f64);
    for (const Tensor& p : model.parameters()) checksum = add(checksum, sum(p.to(DType::f64)));
    Tensor lowest = checksum.clone(), highest = checksum.clone();
    group->all_reduce(lowest, dist::ReduceOp::min);
    group->all_reduce(highest, dist::ReduceOp::max);
    group->barrier();
    if (lowest.item<double>() != highest.item<double>()) {
      std::fprintf(stderr, "rank %d: the ranks' weights differ (checksums %.17g to %.17g)\n", rank, lowest.item<double>(),
                   highest.item<double>());
      return 1;
    }
    if (!(loss_now < first_loss)) {
      std::fprintf(stderr, "rank %d: the loss did not go down (%.4f, then %.4f)\n", rank, first_loss, loss_now);
      return 1;
    }
    if (rank == 0) std::printf("weights equal on all %d ranks; loss %.4f -> %.4f\n", world, first_loss, loss_now);
  } catch (const Error& e) {
    std::fprintf(stderr, "ddp: %s\n", e.what());
    return 1;
  }
  return 0;
}
