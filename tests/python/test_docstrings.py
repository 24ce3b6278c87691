"""The package's docstrings come from the /// comments of ember's headers (tools/docstrings.py), the
comments Doxygen reads: the reader of each, and that bound functions carry them."""

import importlib
import importlib.util
import pathlib

import pytest

import ember

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("docstrings", ROOT / "tools" / "docstrings.py")
docstrings = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docstrings)


def read(header):
    return dict(docstrings.header_docs(header))


def test_comments_above_and_after_declarations():
    got = read("""/// @file
/// What the file holds (not a declaration's).
#pragma once
namespace ember {
/// Zeros of a shape:
/// the second line joins the first.
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});  ///< Ones.
Tensor undocumented(const Tensor& x);
inline constexpr milliseconds kTimeout = std::chrono::minutes(10);  ///< How long a wait lasts.
/// Calls f with T.
template <class F>
decltype(auto) visit(DType d, F&& f) {
  if (d == DType::f32) { return f(); }
  return f();
}
}  // namespace ember
""")
    assert got == {"ember::zeros": "Zeros of a shape: the second line joins the first.", "ember::ones": "Ones.",
                   "ember::kTimeout": "How long a wait lasts.", "ember::visit": "Calls f with T."}


def test_classes_members_and_member_groups():
    got = read("""namespace ember::nn {
/// A layer.
class Linear : public UnaryModule {
 public:
  /// Builds it.
  Linear(int64_t in, int64_t out, bool bias = true);
  int64_t in() const { return in_; }  ///< Input features.
  /// the weights @{
  Tensor weight;
  Tensor bias;
  /// @}
  Tensor loose;
 private:
  struct Options {
    int64_t size = 0;  ///< Its size.
  };
};
/// After the class.
void after();
}
""")
    assert got == {"ember::nn::Linear": "A layer.", "ember::nn::Linear::Linear": "Builds it.",
                   "ember::nn::Linear::in": "Input features.", "ember::nn::Linear::weight": "the weights",
                   "ember::nn::Linear::bias": "the weights", "ember::nn::Linear::Options::size": "Its size.",
                   "ember::nn::after": "After the class."}


def test_operators_and_destructors_are_left_out():
    got = read("""namespace ember {
struct Size {
  bool operator==(const Size&) const = default;  ///< Same sizes.
  ~Size();  ///< Frees.
};
}
""")
    assert got == {}


def test_identifiers_of_the_generated_header():
    assert docstrings.identifier("ember::nn::Linear::weight") == "nn_Linear_weight"
    assert docstrings.identifier("ember::std") == "std_"  # not a C++ name it could shadow


def _function_and_method(pairs):
    """ember.<name> and ember.Tensor.<name>, which bind_ops.cpp's def_both binds together, of ember::<cpp> in
    tensor/ops.h, for each (name, cpp)."""
    return [(f"ember{owner}.{name}", "tensor/ops.h", f"ember::{cpp}")
            for name, cpp in pairs for owner in ("", ".Tensor")]


# (Python attribute path, header, qualified C++ name) of the bindings whose docstring is their declaration's
# doc:: constant: functions, methods, classes and properties. Objects the Python package wraps are reached
# through ember._ember, whose docstrings these are.
BOUND = _function_and_method([
    ("neg", "neg"), ("negative", "neg"), ("abs", "abs"), ("sign", "sign"), ("exp", "exp"), ("log", "log"),
    ("log1p", "log1p"), ("sqrt", "sqrt"), ("rsqrt", "rsqrt"), ("sin", "sin"), ("cos", "cos"), ("tanh", "tanh"),
    ("sigmoid", "sigmoid"), ("relu", "relu"), ("silu", "silu"), ("erf", "erf"), ("reciprocal", "reciprocal"),
    ("square", "square"), ("logical_not", "logical_not"), ("gelu", "gelu"), ("clamp", "clamp"), ("pow", "pow"),
    ("add", "add"), ("sub", "sub"), ("mul", "mul"), ("div", "div"), ("maximum", "maximum"), ("minimum", "minimum"),
    ("eq", "eq"), ("ne", "ne"), ("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge"),
    ("masked_fill", "masked_fill"), ("equal", "equal"), ("allclose", "allclose"), ("isfinite_all", "all_finite"),
    ("argmax", "argmax"), ("argmin", "argmin"), ("logsumexp", "logsumexp"), ("softmax", "softmax"),
    ("log_softmax", "log_softmax"), ("matmul", "matmul"), ("mm", "mm"), ("bmm", "bmm"), ("transpose", "transpose"),
    ("unsqueeze", "unsqueeze"), ("squeeze", "squeeze"), ("flatten", "flatten"), ("narrow", "narrow"),
    ("select", "select"), ("chunk", "chunk"), ("index_select", "index_select"), ("gather", "gather"),
    ("scatter_add", "scatter_add"), ("index_add", "index_add"),
]) + [
    ("ember.where", "tensor/ops.h", "ember::where"),
    ("ember.linear", "tensor/ops.h", "ember::linear"),
    ("ember.broadcast_to", "tensor/ops.h", "ember::broadcast_to"),
    ("ember.Tensor.broadcast_to", "tensor/ops.h", "ember::broadcast_to"),
    ("ember.cat", "tensor/ops.h", "ember::cat"),
    ("ember.stack", "tensor/ops.h", "ember::stack"),
    ("ember.result_type", "tensor/ops.h", "ember::result_type"),
    ("ember.Tensor.permute", "tensor/ops.h", "ember::permute"),
    ("ember.Tensor.t", "tensor/tensor.h", "ember::Tensor::t"),
    ("ember.Tensor.sum_to_size", "tensor/ops.h", "ember::sum_to"),
    ("ember.ValuesIndices", "tensor/ops.h", "ember::ValuesIndices"),
    ("ember.Tensor.shape", "tensor/tensor.h", "ember::Tensor::shape"),
    ("ember.Tensor.dtype", "tensor/tensor.h", "ember::Tensor::dtype"),
    ("ember.Tensor.device", "tensor/tensor.h", "ember::Tensor::device"),
    ("ember.Tensor.ndim", "tensor/tensor.h", "ember::Tensor::dim"),
    ("ember.Tensor.is_floating_point", "tensor/tensor.h", "ember::Tensor::is_floating_point"),
    ("ember.Tensor.dim", "tensor/tensor.h", "ember::Tensor::dim"),
    ("ember.Tensor.ndimension", "tensor/tensor.h", "ember::Tensor::dim"),
    ("ember.Tensor.numel", "tensor/tensor.h", "ember::Tensor::numel"),
    ("ember.Tensor.nelement", "tensor/tensor.h", "ember::Tensor::numel"),
    ("ember.Tensor.storage_offset", "tensor/tensor.h", "ember::Tensor::offset"),
    ("ember.Tensor.is_contiguous", "tensor/tensor.h", "ember::Tensor::is_contiguous"),
    ("ember.Tensor.element_size", "tensor/dtype.h", "ember::dtype_size"),
    ("ember.Tensor.itemsize", "tensor/dtype.h", "ember::dtype_size"),
    ("ember.Tensor.clone", "tensor/ops.h", "ember::clone"),
    ("ember.Tensor.pin_memory", "tensor/ops.h", "ember::pin_memory"),
    ("ember.Tensor.is_same", "tensor/tensor.h", "ember::Tensor::is_same"),
    ("ember.Tensor._version", "tensor/tensor.h", "ember::Tensor::version"),
    ("ember.Tensor._use_count", "tensor/tensor.h", "ember::Tensor::use_count"),
    ("ember.autograd.Node", "autograd/node.h", "ember::autograd::Node"),
    ("ember.autograd.Node.name", "autograd/node.h", "ember::autograd::Node::name"),
    ("ember.autograd.FunctionCtx.save_for_backward", "autograd/function.h",
     "ember::autograd::FunctionContext::save_for_backward"),
    ("ember.autograd.FunctionCtx.saved_tensors", "autograd/function.h",
     "ember::autograd::FunctionContext::saved_tensors"),
    ("ember.autograd.FunctionCtx.mark_non_differentiable", "autograd/function.h",
     "ember::autograd::FunctionContext::mark_non_differentiable"),
    ("ember.is_grad_enabled", "autograd/grad_mode.h", "ember::autograd::GradMode::is_enabled"),
    ("ember._ember._set_grad_enabled", "autograd/grad_mode.h", "ember::autograd::GradMode::set_enabled"),
    ("ember._ember.is_anomaly_enabled", "autograd/grad_mode.h", "ember::autograd::AnomalyMode::is_enabled"),
    ("ember._ember._set_anomaly_enabled", "autograd/grad_mode.h", "ember::autograd::AnomalyMode::set_enabled"),
    ("ember.Tensor.grad_fn", "tensor/tensor.h", "ember::Tensor::grad_fn"),
    ("ember.Tensor.retain_grad", "tensor/tensor.h", "ember::Tensor::retain_grad"),
    ("ember.Generator", "tensor/random.h", "ember::Generator"),
    ("ember.Generator.initial_seed", "tensor/random.h", "ember::Generator::seed"),
    ("ember.Generator.set_state", "tensor/random.h", "ember::Generator::set_state"),
    ("ember.zeros", "tensor/ops.h", "ember::zeros"),
    ("ember.ones", "tensor/ops.h", "ember::ones"),
    ("ember.empty", "tensor/ops.h", "ember::empty"),
    ("ember.arange", "tensor/ops.h", "ember::arange"),
    ("ember.dtype.itemsize", "tensor/dtype.h", "ember::dtype_size"),
    ("ember.device", "tensor/device.h", "ember::Device"),
    ("ember.manual_seed", "tensor/random.h", "ember::manual_seed"),
    ("ember.set_num_threads", "tensor/ops.h", "ember::set_num_threads"),
    ("ember.get_num_threads", "tensor/ops.h", "ember::get_num_threads"),
    ("ember.use_deterministic_algorithms", "tensor/deterministic.h", "ember::set_deterministic"),
    ("ember.are_deterministic_algorithms_enabled", "tensor/deterministic.h", "ember::is_deterministic"),
    ("ember.promote_types", "tensor/dtype.h", "ember::promote_types"),
    ("ember.DTypeError", "tensor/error.h", "ember::DTypeError"),
    ("ember.IndexError", "tensor/error.h", "ember::IndexError"),
    ("ember.ValueError", "tensor/error.h", "ember::ValueError"),
    ("ember.NotImplementedError", "tensor/error.h", "ember::NotImplementedError"),
    ("ember.StateError", "tensor/error.h", "ember::StateError"),
    ("ember.CaptureError", "tensor/error.h", "ember::CaptureError"),
    ("ember.IOError", "tensor/atomic_file.h", "ember::IOError"),
    ("ember.FormatError", "tensor/safetensors.h", "ember::FormatError"),
    ("ember.DataError", "data/data_file.h", "ember::data::DataError"),
    ("ember.CollectiveMismatchError", "dist/error.h", "ember::dist::CollectiveMismatchError"),
    ("ember._ember._save_safetensors", "tensor/safetensors.h", "ember::save_safetensors"),
    ("ember.nn.functional.conv2d", "nn/conv.h", "ember::conv2d"),
    ("ember.nn.functional.avg_pool2d", "nn/pooling.h", "ember::avg_pool2d"),
    ("ember.nn.functional.adaptive_avg_pool2d", "nn/pooling.h", "ember::adaptive_avg_pool2d"),
    ("ember._ember._F.batch_norm", "nn/normalization.h", "ember::batch_norm"),
    ("ember.nn.functional.layer_norm", "nn/normalization.h", "ember::layer_norm"),
    ("ember._ember._F.dropout", "nn/dropout.h", "ember::dropout"),
    ("ember.nn.functional.embedding", "nn/embedding.h", "ember::embedding"),
    ("ember._ember._F.cross_entropy", "nn/loss.h", "ember::cross_entropy"),
    ("ember._ember._F.nll_loss", "nn/loss.h", "ember::nll_loss"),
    ("ember._ember._F.mse_loss", "nn/loss.h", "ember::mse_loss"),
    ("ember.nn.functional.scaled_dot_product_attention", "nn/attention.h", "ember::scaled_dot_product_attention"),
    ("ember._ember._ModuleHookHandle", "nn/module.h", "ember::nn::HookHandle"),
    ("ember._ember._ModuleHookHandle.remove", "nn/module.h", "ember::nn::HookHandle::remove"),
    ("ember._ember._Module.type_name", "nn/module.h", "ember::nn::Module::name"),
    ("ember._ember._Module.extra_repr", "nn/module.h", "ember::nn::Module::extra_repr"),
    ("ember._ember._Module.named_children", "nn/module.h", "ember::nn::Module::named_children"),
    ("ember._ember._Module.train", "nn/module.h", "ember::nn::Module::train"),
    ("ember._ember._Module.training", "nn/module.h", "ember::nn::Module::is_training"),
    ("ember._ember._Module.state_dict", "nn/module.h", "ember::nn::Module::state_dict"),
    ("ember._ember._Module.load_state_dict", "nn/module.h", "ember::nn::Module::load_state_dict"),
    ("ember._ember._Module.register_forward_pre_hook", "nn/module.h",
     "ember::nn::Module::register_forward_pre_hook"),
    ("ember._ember._Module.register_forward_hook", "nn/module.h", "ember::nn::Module::register_forward_hook"),
    ("ember._ember._Module.set_activation_checkpointing", "nn/module.h",
     "ember::nn::UnaryModule::set_activation_checkpointing"),
    ("ember._ember._Module.multihead_attention", "nn/layers/attention.h", "ember::nn::MultiheadAttention::forward"),
    ("ember._ember._nn.linear", "nn/layers/linear.h", "ember::nn::Linear"),
    ("ember._ember._nn.conv2d", "nn/layers/conv.h", "ember::nn::Conv2d"),
    ("ember._ember._nn.batch_norm2d", "nn/layers/normalization.h", "ember::nn::BatchNorm2d"),
    ("ember._ember._nn.layer_norm", "nn/layers/normalization.h", "ember::nn::LayerNorm"),
    ("ember._ember._nn.dropout", "nn/layers/normalization.h", "ember::nn::Dropout"),
    ("ember._ember._nn.embedding", "nn/layers/normalization.h", "ember::nn::Embedding"),
    ("ember._ember._nn.max_pool2d", "nn/layers/conv.h", "ember::nn::MaxPool2d"),
    ("ember._ember._nn.avg_pool2d", "nn/layers/conv.h", "ember::nn::AvgPool2d"),
    ("ember._ember._nn.adaptive_avg_pool2d", "nn/layers/conv.h", "ember::nn::AdaptiveAvgPool2d"),
    ("ember._ember._nn.identity", "nn/layers/linear.h", "ember::nn::Identity"),
    ("ember._ember._nn.flatten", "nn/layers/linear.h", "ember::nn::Flatten"),
    ("ember._ember._nn.relu", "nn/layers/linear.h", "ember::nn::ReLU"),
    ("ember._ember._nn.gelu", "nn/layers/linear.h", "ember::nn::GELU"),
    ("ember._ember._nn.silu", "nn/layers/linear.h", "ember::nn::SiLU"),
    ("ember._ember._nn.rnn", "nn/layers/recurrent.h", "ember::nn::RNN"),
    ("ember._ember._nn.lstm", "nn/layers/recurrent.h", "ember::nn::LSTM"),
    ("ember._ember._nn.gru", "nn/layers/recurrent.h", "ember::nn::GRU"),
    ("ember._ember._nn.rnn_cell", "nn/layers/recurrent.h", "ember::nn::RNNCell"),
    ("ember._ember._nn.lstm_cell", "nn/layers/recurrent.h", "ember::nn::LSTMCell"),
    ("ember._ember._nn.gru_cell", "nn/layers/recurrent.h", "ember::nn::GRUCell"),
    ("ember._ember._nn.mlp", "nn/models/mlp.h", "ember::nn::MLP"),
    ("ember._ember._nn.small_cnn", "nn/models/mlp.h", "ember::nn::SmallCNN"),
    ("ember._ember._nn.resnet", "nn/models/resnet.h", "ember::nn::ResNet"),
    ("ember._ember._nn.make_model", "train/model_zoo.h", "ember::train::make_model"),
    ("ember._ember._nn.apply_activation_checkpointing", "nn/checkpoint.h",
     "ember::nn::apply_activation_checkpointing"),
    ("ember._ember._nn.default_checkpoint_modules", "nn/checkpoint.h", "ember::nn::default_checkpoint_modules"),
    ("ember._ember._nn.calculate_gain", "nn/init.h", "ember::nn::init::calculate_gain"),
    ("ember._ember._nn.calculate_fan_in_and_fan_out", "nn/init.h", "ember::nn::init::calculate_fan_in_and_fan_out"),
    ("ember._ember._nn.uniform_", "nn/init.h", "ember::nn::init::uniform_"),
    ("ember._ember._nn.normal_", "nn/init.h", "ember::nn::init::normal_"),
    ("ember._ember._nn.constant_", "nn/init.h", "ember::nn::init::constant_"),
    ("ember._ember._nn.kaiming_uniform_", "nn/init.h", "ember::nn::init::kaiming_uniform_"),
    ("ember._ember._nn.kaiming_normal_", "nn/init.h", "ember::nn::init::kaiming_normal_"),
    ("ember._ember._nn.xavier_uniform_", "nn/init.h", "ember::nn::init::xavier_uniform_"),
    ("ember._ember._nn.xavier_normal_", "nn/init.h", "ember::nn::init::xavier_normal_"),
    ("ember._ember._nn.trunc_normal_", "nn/init.h", "ember::nn::init::trunc_normal_"),
    ("ember._ember._nn.is_recomputing", "nn/checkpoint.h", "ember::nn::is_recomputing"),
    ("ember._ember._Optimizer.name", "optim/optimizer.h", "ember::optim::Optimizer::name"),
    ("ember._ember._Optimizer.step", "optim/optimizer.h", "ember::optim::Optimizer::step"),
    ("ember._ember._Optimizer.zero_grad", "optim/optimizer.h", "ember::optim::Optimizer::zero_grad"),
    ("ember._ember._Optimizer.add_param_group", "optim/optimizer.h", "ember::optim::Optimizer::add_param_group"),
    ("ember._ember._Optimizer.defaults", "optim/optimizer.h", "ember::optim::Optimizer::defaults"),
    ("ember._ember._Optimizer.state", "optim/optimizer.h", "ember::optim::Optimizer::state"),
    ("ember._ember._Optimizer.num_params", "optim/optimizer.h", "ember::optim::Optimizer::num_params"),
    ("ember._ember._Optimizer.steps_taken", "optim/optimizer.h", "ember::optim::Optimizer::steps_taken"),
    ("ember._ember._Optimizer.is_elementwise", "optim/optimizer.h", "ember::optim::Optimizer::is_elementwise"),
    ("ember._ember._Optimizer.state_dict", "optim/optimizer.h", "ember::optim::Optimizer::state_dict"),
    ("ember._ember._Optimizer.load_state_dict", "optim/optimizer.h", "ember::optim::Optimizer::load_state_dict"),
    ("ember._ember._LRScheduler", "optim/lr_scheduler.h", "ember::optim::LRScheduler"),
    ("ember._ember._LRScheduler.step", "optim/lr_scheduler.h", "ember::optim::LRScheduler::step"),
    ("ember._ember._LRScheduler.rewind", "optim/lr_scheduler.h", "ember::optim::LRScheduler::rewind"),
    ("ember._ember._LRScheduler.get_last_lr", "optim/lr_scheduler.h", "ember::optim::LRScheduler::get_last_lr"),
    ("ember._ember._LRScheduler.last_epoch", "optim/lr_scheduler.h", "ember::optim::LRScheduler::last_epoch"),
    ("ember._ember._LRScheduler.base_lrs", "optim/lr_scheduler.h", "ember::optim::LRScheduler::base_lrs"),
    ("ember._ember._LRScheduler.state_dict", "optim/lr_scheduler.h", "ember::optim::LRScheduler::state_dict"),
    ("ember._ember._clip_grad_norm_", "optim/clip_grad.h", "ember::optim::clip_grad_norm_"),
    ("ember._ember._clip_grad_value_", "optim/clip_grad.h", "ember::optim::clip_grad_value_"),
    ("ember._ember._total_grad_norm", "optim/clip_grad.h", "ember::optim::total_grad_norm"),
    ("ember._ember._AutocastRegion.enter", "tensor/autocast.h", "ember::amp::Autocast::Autocast"),
    ("ember._ember.is_autocast_enabled", "tensor/autocast.h", "ember::amp::is_autocast_enabled"),
    ("ember._ember.is_autocast_cache_enabled", "tensor/autocast.h", "ember::amp::is_autocast_cache_enabled"),
    ("ember._ember._GradScaler", "optim/amp/grad_scaler.h", "ember::amp::GradScaler"),
    ("ember._ember._GradScaler.scale", "optim/amp/grad_scaler.h", "ember::amp::GradScaler::scale"),
    ("ember._ember._GradScaler.unscale_", "optim/amp/grad_scaler.h", "ember::amp::GradScaler::unscale_"),
    ("ember._ember._GradScaler.step", "optim/amp/grad_scaler.h", "ember::amp::GradScaler::step"),
    ("ember._ember._GradScaler.update", "optim/amp/grad_scaler.h", "ember::amp::GradScaler::update"),
    ("ember._ember._GradScaler.found_inf", "optim/amp/grad_scaler.h", "ember::amp::GradScaler::found_inf"),
    ("ember._ember._GradScaler.get_scale", "optim/amp/grad_scaler.h", "ember::amp::GradScaler::get_scale"),
    ("ember._ember._GradScaler.scale_tensor", "optim/amp/grad_scaler.h", "ember::amp::GradScaler::scale_tensor"),
    ("ember._ember._GradScaler.state_dict", "optim/amp/grad_scaler.h", "ember::amp::GradScaler::state_dict"),
    ("ember._ember._Dataset", "data/dataset.h", "ember::data::Dataset"),
    ("ember._ember._Dataset.bad_examples", "data/dataset.h", "ember::data::Dataset::bad_examples"),
    ("ember._ember._fashion_mnist", "data/dataset.h", "ember::data::FashionMNIST"),
    ("ember._ember._cifar10", "data/dataset.h", "ember::data::CIFAR10"),
    ("ember._ember._truncate", "data/dataset.h", "ember::data::TensorDataset::truncate"),
    ("ember._ember._permutation", "data/dataloader.h", "ember::data::permutation"),
    ("ember._ember._DataLoader.__len__", "data/dataloader.h", "ember::data::DataLoader::size"),
    ("ember._ember._DataLoader.set_epoch", "data/dataloader.h", "ember::data::DataLoader::set_epoch"),
    ("ember._ember._DataLoader.epoch_order", "data/dataloader.h", "ember::data::DataLoader::epoch_order"),
    ("ember._ember._Work.wait", "dist/work.h", "ember::dist::Work::wait"),
    ("ember._ember._Work.is_completed", "dist/work.h", "ember::dist::Work::is_completed"),
    ("ember._ember._ProcessGroup.rank", "dist/process_group.h", "ember::dist::ProcessGroup::rank"),
    ("ember._ember._ProcessGroup.size", "dist/process_group.h", "ember::dist::ProcessGroup::size"),
    ("ember._ember._ProcessGroup.backend", "dist/process_group.h", "ember::dist::ProcessGroup::backend_name"),
    ("ember._ember._ProcessGroup.device", "dist/process_group.h", "ember::dist::ProcessGroup::device"),
    ("ember._ember._ProcessGroup.all_reduce", "dist/process_group.h",
     "ember::dist::ProcessGroup::all_reduce_async"),
    ("ember._ember._ProcessGroup.broadcast", "dist/process_group.h", "ember::dist::ProcessGroup::broadcast_async"),
    ("ember._ember._ProcessGroup.reduce_scatter_tensor", "dist/process_group.h",
     "ember::dist::ProcessGroup::reduce_scatter_async"),
    ("ember._ember._ProcessGroup.send", "dist/process_group.h", "ember::dist::ProcessGroup::send_async"),
    ("ember._ember._ProcessGroup.recv", "dist/process_group.h", "ember::dist::ProcessGroup::recv_async"),
    ("ember._ember._ProcessGroup.barrier", "dist/process_group.h", "ember::dist::ProcessGroup::barrier_async"),
    ("ember._ember._distributed_data_parallel", "dist/distributed_data_parallel.h",
     "ember::dist::DistributedDataParallel::DistributedDataParallel"),
    ("ember._ember._ZeroOptimizer.step", "dist/zero_optimizer.h", "ember::dist::ZeroOptimizer::step"),
    ("ember._ember._ZeroOptimizer.zero_grad", "dist/zero_optimizer.h", "ember::dist::ZeroOptimizer::zero_grad"),
    ("ember._ember._ZeroOptimizer.clip_grad_norm_", "dist/zero_optimizer.h",
     "ember::dist::ZeroOptimizer::clip_grad_norm_"),
    ("ember._ember._ZeroOptimizer.inner", "dist/zero_optimizer.h", "ember::dist::ZeroOptimizer::inner"),
    ("ember._ember._ZeroOptimizer.pieces", "dist/zero_partition.h", "ember::dist::ZeroPartition::pieces"),
    ("ember._ember._ZeroOptimizer.stage", "dist/zero_partition.h", "ember::dist::ZeroPartition::stage"),
    ("ember._ember._DataParallel.step", "dist/data_parallel.h", "ember::dist::DataParallel::step"),
    ("ember._ember._DataParallel.zero_grad", "dist/data_parallel.h", "ember::dist::DataParallel::zero_grad"),
    ("ember._ember._DataParallel.clip_grad_norm_", "dist/data_parallel.h",
     "ember::dist::DataParallel::clip_grad_norm_"),
    ("ember._ember._DataParallel.optimizer", "dist/data_parallel.h", "ember::dist::DataParallel::optimizer"),
]


def resolve(path):
    """The object at a dotted path: modules imported, then attributes (a class's property as the property)."""
    parts = path.split(".")
    obj = importlib.import_module(parts[0])
    for i, name in enumerate(parts[1:], 1):
        try:
            obj = getattr(obj, name)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: i + 1]))
    return obj


@pytest.mark.parametrize("path, header, qualified", BOUND)
def test_bound_functions_carry_their_header_comment(path, header, qualified):
    comment = read((ROOT / header).read_text())[qualified]
    assert resolve(path).__doc__.rstrip().endswith(comment)
