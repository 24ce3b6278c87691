// libFuzzer target: Optimizer::load_state_dict on state dicts built from the input, then a step.
// A state dict read from a file is keys with indices in them ("state.3.exp_avg",
// "param_groups.1.lr") and tensors of any shape and dtype. Bytes mutated inside a safetensors file
// rarely keep its header valid while moving an index, so fuzz_checkpoint seldom reaches the checks
// behind the parser: this target builds the dict directly. It starts from the true state dict of a
// stepped optimizer (two param groups, per-parameter state) or from nothing, and each record of the
// input replaces, adds or removes one entry: a key made of a kind, an index and a name from the
// optimizers' vocabulary, with a tensor of a chosen shape, dtype and values. Whatever loads must
// then step. Only ember's typed errors may come out.
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tests/fuzz/fuzz_file.h"

namespace {

using namespace ember;

// The input, read front to back; past its end every read gives 0.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | byte();
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

// The names SGD's and AdamW's state dicts use, and a few they do not.
constexpr std::array kNames = {"params",  "lr",       "momentum", "dampening",  "weight_decay",   "nesterov",
                               "maximize", "beta1",   "beta2",    "eps",        "amsgrad",        "initial_lr",
                               "step",    "exp_avg",  "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer", ""};
constexpr std::array kDTypes = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32};

std::vector<Tensor> parameters() {
  std::vector<Tensor> params;
  for (const Shape& shape : {Shape{3, 2}, Shape{2}, Shape{4}}) {
    Tensor p = ones(shape);
    p.requires_grad_(true);
    params.push_back(p);
  }
  return params;
}

// Two groups: the first two parameters, then the third.
template <class Optimizer, class Options>
std::unique_ptr<optim::Optimizer> two_groups(const Options& options) {
  std::vector<Tensor> params = parameters();
  auto optimizer = std::make_unique<Optimizer>(std::vector<Tensor>{params[0], params[1]}, options);
  optimizer->add_param_group({params[2]});
  return optimizer;
}

std::unique_ptr<optim::Optimizer> make(bool adam) {
  if (adam) return two_groups<optim::AdamW>(optim::AdamWOptions{});
  return two_groups<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
}

void step(optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups())
    for (Tensor& p : group.params) p.set_grad(full(p.shape(), Scalar(0.5)));
  optimizer.step();
}

// One key: "state.<i>.<name>", "param_groups.<i>.<name>", or bytes of the input.
std::string key_of(Bytes& in) {
  const uint8_t kind = in.byte();
  const uint8_t index_byte = in.byte();
  const uint32_t index = index_byte & 0x80 ? in.u32() : index_byte;  // now and then a large one
  const std::string name = kNames[in.byte() % kNames.size()];
  switch (kind % 4) {
    case 0: return "state." + std::to_string(index) + "." + name;
    case 1: return "param_groups." + std::to_string(index) + "." + name;
    case 2: return "param_groups." + std::to_string(index) + (name.empty() ? "" : "." + name);
    default: {
      std::string raw;
      for (uint8_t n = in.byte() % 24; n > 0; --n) raw += static_cast<char>(in.byte());
      return raw;
    }
  }
}

// A tensor of up to 2 dims of up to 7 elements each, of one of kDTypes, its values from the input.
Tensor tensor_of(Bytes& in) {
  const uint8_t form = in.byte();
  Shape shape;
  for (int d = 0; d < form % 3; ++d) shape.push_back(in.byte() % 8);
  const DType dtype = kDTypes[(form >> 2) % kDTypes.size()];
  std::vector<double> values(static_cast<size_t>(numel(shape)));
  for (double& v : values) v = static_cast<int8_t>(in.byte()) / 4.0;
  return from_vector(values, shape).to(dtype);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const uint8_t setup = in.byte();
  const bool adam = setup & 1;
  StateDict dict;
  if (setup & 2) {  // the true state of a stepped optimizer of the same kind
    auto source = make(adam);
    step(*source);
    dict = source->state_dict();
  }
  while (!in.empty()) {
    const uint8_t op = in.byte();
    if (op % 4 == 0 && !dict.empty()) {  // remove the entry at a position
      auto it = dict.begin();
      std::advance(it, in.byte() % dict.size());
      dict.erase(it);
      continue;
    }
    const std::string key = key_of(in);
    dict[key] = op % 4 == 1 ? Tensor() : tensor_of(in);  // now and then an undefined tensor
  }
  auto optimizer = make(adam);
  ember::fuzz::expect_clean([&] {
    optimizer->load_state_dict(dict);
    step(*optimizer);
  });
  return 0;
}
