#include "dist/zero_optimizer.h"

#include "optim/clip_grad.h"

namespace ember::dist {

void check_shardable(const optim::Optimizer& optimizer) {
  if (!optimizer.is_elementwise())
    throw NotImplementedError(std::string("ZeRO: ") + optimizer.name() +
                              " updates each parameter from norms of the whole parameter, but ZeRO gives each rank "
                              "slices of parameters to step: use SGD, Adam or AdamW, or DDP");
}

ZeroOptimizer::ZeroOptimizer(nn::Module& module, std::shared_ptr<ProcessGroup> group, const InnerFactory& make_inner,
                             ZeroOptions options)
    : partition_(module, std::move(group), options), inner_(make_inner(partition_.pieces())) {
  if (!inner_) throw ValueError("ZeroOptimizer: the factory returned no optimizer");
  check_shardable(*inner_);
}

Tensor ZeroOptimizer::clip_grad_norm_(double max_norm) {
  const Tensor total = partition_.total_norm(optim::total_grad_norm(partition_.pieces()));
  optim::clip_grads_to_norm_(partition_.pieces(), total.to(partition_.pieces().front().device()), max_norm);  // offloaded: to the host
  return total;
}

void ZeroOptimizer::step(const optim::StepInputs& inputs) {
  inner_->step(inputs);
  partition_.gather_updated_parameters();
}

void ZeroOptimizer::zero_grad() {
  inner_->zero_grad();
  partition_.zero_grad();
}

}  // namespace ember::dist
