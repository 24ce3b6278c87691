// What the data-parallel tests (DDP, ZeRO) train: small models, the global batch of each step and
// each rank's shard of it, and the comparison of parameters.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "nn/models/mlp.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace ember_test {

using namespace ember;

// The global batch of a step: `global` samples of the model's input shape, labels in [0, 10).
struct Batch {
  Tensor x, y;
};
inline Batch global_batch(const Shape& sample, int64_t global, uint64_t step) {
  Generator gen(4242 + step);
  Shape shape = {global};
  for (int64_t d : sample) shape.push_back(d);
  return {randn(shape, {}, &gen), randint(0, 10, {global}, DType::i64, &gen)};
}
inline Batch shard(const Batch& b, int rank, int world) {
  const int64_t n = b.x.shape()[0] / world;
  return {b.x.narrow(0, rank * n, n), b.y.narrow(0, rank * n, n)};
}

inline std::shared_ptr<nn::UnaryModule> make_model(const std::string& kind, uint64_t seed) {
  manual_seed(seed);
  if (kind == "mlp") return std::make_shared<nn::MLP>(20, std::vector<int64_t>{32, 16}, 10);
  return std::make_shared<nn::SmallCNN>(10, 1, 12);
}
inline Shape sample_shape(const std::string& kind) { return kind == "mlp" ? Shape{20} : Shape{1, 12, 12}; }

inline double max_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = a[i].to_vector<double>(), y = b[i].to_vector<double>();
    for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, std::abs(x[k] - y[k]));
  }
  return worst;
}

// A module whose second layer takes no part in the output.
class HalfUsed : public nn::UnaryModule {
 public:
  HalfUsed() {
    used = register_module("used", std::make_shared<nn::Linear>(4, 3));
    unused = register_module("unused", std::make_shared<nn::Linear>(4, 3));
  }
  Tensor forward(const Tensor& x) override { return (*used)(x); }
  std::shared_ptr<nn::Linear> used, unused;
};

}  // namespace ember_test
