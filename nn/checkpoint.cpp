#include "nn/checkpoint.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>

#include "autograd/grad_mode.h"
#include "autograd/saved_tensor.h"
#include "tensor/autocast.h"
#include "tensor/random.h"

namespace ember::nn {

namespace {

thread_local int recompute_depth = 0;  // nested recomputes (a checkpoint inside a checkpoint)

constexpr DeviceType kDeviceTypes[] = {DeviceType::cpu, DeviceType::cuda};

// This thread's autocast state for each device type, to enter again for the recompute.
struct AutocastState {
  bool enabled[std::size(kDeviceTypes)];
  DType dtype[std::size(kDeviceTypes)];
  bool cache_enabled;

  static AutocastState current() {
    AutocastState s{};
    for (size_t i = 0; i < std::size(kDeviceTypes); ++i) {
      s.enabled[i] = amp::is_autocast_enabled(kDeviceTypes[i]);
      s.dtype[i] = amp::get_autocast_dtype(kDeviceTypes[i]);
    }
    s.cache_enabled = amp::is_autocast_cache_enabled();
    return s;
  }
};

// A saved tensor's shape, dtype and device: the recompute must save the same.
struct SavedMeta {
  Shape shape;
  DType dtype;
  Device device;
  bool operator==(const SavedMeta&) const = default;
  static SavedMeta of(const Tensor& t) { return {t.shape(), t.dtype(), t.device()}; }
  std::string str() const { return to_string(shape) + " " + dtype_name(dtype) + " on " + device.str(); }
};

// One checkpointed call: what its recompute needs, and the tensors the recompute saved until the
// nodes of the first run take them. The first run's nodes hold it through their packed tensors.
class Frame {
 public:
  Frame(CheckpointFunction fn, const std::vector<Tensor>& inputs)
      : fn_(std::move(fn)), inputs_(inputs), rng_(default_generator().state()), autocast_(AutocastState::current()) {
    for (const Tensor& t : inputs_) versions_.push_back(t.defined() ? t.version() : 0);
  }

  // Called by the first run's pack hook: the index by which the node will ask for the tensor again.
  size_t add(const Tensor& saved) {
    metas_.push_back(SavedMeta::of(saved));
    return metas_.size() - 1;
  }

  // Saved tensor `index`, recomputing them all when it is not at hand (the first time, or again in
  // a second backward with retain_graph).
  Tensor take(size_t index) {
    if (index >= recomputed_.size() || !recomputed_[index].has_value()) recompute();
    Tensor t = std::move(*recomputed_[index]);
    recomputed_[index].reset();  // each node takes its tensors once per backward: free them as it goes
    return t;
  }

 private:
  void recompute() {
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (inputs_[i].defined() && inputs_[i].version() != versions_[i])
        throw AutogradError("checkpoint: input " + std::to_string(i) + " (shape " + to_string(inputs_[i].shape()) +
                            ") was modified in place after the checkpointed forward (it is at version " +
                            std::to_string(inputs_[i].version()) + ", the forward saw version " +
                            std::to_string(versions_[i]) + "): its recompute would differ");
    std::vector<Tensor> saved;
    // A backward that records itself (create_graph) differentiates through the saved tensors: they
    // keep the recompute's graph, whose nodes then keep what they save. Otherwise that graph is
    // dropped at once and its nodes' saves are never asked for.
    const bool keep_graph = autograd::GradMode::is_enabled();
    {
      struct Kept : autograd::PackedTensor {
        Tensor value;
        explicit Kept(Tensor t) : value(std::move(t)) {}
        Tensor unpack() override { return value; }
      };
      struct Dropped : autograd::PackedTensor {
        Tensor unpack() override { throw AutogradError("checkpoint: the graph of a recompute is not for backward"); }
      };
      const auto dropped = std::make_shared<Dropped>();
      const autograd::SavedTensorHooks hooks([&](const Tensor& t) -> std::shared_ptr<autograd::PackedTensor> {
        saved.push_back(keep_graph ? t : t.detach());
        if (keep_graph) return std::make_shared<Kept>(t);
        return dropped;
      });
      // The default generator replays the forward's draws, then goes on where it was.
      Generator& gen = default_generator();
      struct Recomputing {
        Generator& gen;
        GeneratorState resume;
        Recomputing(Generator& g, GeneratorState from) : gen(g), resume(g.state()) {
          gen.set_state(from);
          ++recompute_depth;
        }
        ~Recomputing() {
          gen.set_state(resume);
          --recompute_depth;
        }
      } recomputing(gen, rng_);
      const autograd::EnableGradGuard grad;
      std::optional<amp::Autocast> autocast[std::size(kDeviceTypes)];
      for (size_t i = 0; i < std::size(kDeviceTypes); ++i)
        autocast[i].emplace(kDeviceTypes[i], autocast_.dtype[i], autocast_.enabled[i], autocast_.cache_enabled);
      fn_(inputs_);
    }
    if (saved.size() != metas_.size())
      throw AutogradError("checkpoint: the recompute saved " + std::to_string(saved.size()) +
                          " tensors for backward, the checkpointed forward " + std::to_string(metas_.size()) +
                          ": the function must compute the same ops again");
    for (size_t i = 0; i < saved.size(); ++i)
      if (!(SavedMeta::of(saved[i]) == metas_[i]))
        throw AutogradError("checkpoint: saved tensor " + std::to_string(i) + " of the recompute is " +
                            SavedMeta::of(saved[i]).str() + ", the checkpointed forward saved " + metas_[i].str());
    recomputed_.assign(saved.size(), std::nullopt);
    for (size_t i = 0; i < saved.size(); ++i) recomputed_[i] = std::move(saved[i]);
  }

  CheckpointFunction fn_;
  std::vector<Tensor> inputs_;
  std::vector<uint64_t> versions_;  // of the inputs when the forward ran
  GeneratorState rng_;              // the default generator's position when the forward began
  AutocastState autocast_;
  std::vector<SavedMeta> metas_;    // what the forward's nodes saved, in order
  std::vector<std::optional<Tensor>> recomputed_;
};

// What a node of the first run keeps instead of a saved tensor.
class CheckpointedTensor : public autograd::PackedTensor {
 public:
  CheckpointedTensor(std::shared_ptr<Frame> frame, size_t index) : frame_(std::move(frame)), index_(index) {}
  Tensor unpack() override { return frame_->take(index_); }

 private:
  std::shared_ptr<Frame> frame_;
  size_t index_;
};

}  // namespace

bool is_recomputing() { return recompute_depth > 0; }

std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs) {
  if (!fn) throw ValueError("checkpoint: the function is empty");
  if (!autograd::GradMode::is_enabled()) return fn(inputs);  // nothing is saved: nothing to recompute
  if (default_generator().capturing())
    throw CaptureError("checkpoint inside a captured step: a recompute cannot replay the step's random numbers; "
                       "train without compile or without activation checkpointing");
  auto frame = std::make_shared<Frame>(fn, inputs);
  const autograd::SavedTensorHooks hooks(
      [&frame](const Tensor& t) { return std::make_shared<CheckpointedTensor>(frame, frame->add(t)); });
  return fn(inputs);
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input) {
  if (!fn) throw ValueError("checkpoint: the function is empty");
  return checkpoint([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; }, {input})[0];
}

Tensor checkpoint_sequential(const Sequential& modules, int segments, const Tensor& input) {
  const auto n = static_cast<int64_t>(modules.size());
  if (segments < 1 || segments > n)
    throw ValueError("checkpoint_sequential: segments must be from 1 to the " + std::to_string(n) +
                     " modules, got " + std::to_string(segments));
  Tensor x = input;
  int64_t begin = 0;
  for (int s = 0; s < segments; ++s) {
    const int64_t end = n * (s + 1) / segments;
    // The children run one after another; the run's modules stay alive with the Sequential.
    auto run = [&modules, begin, end](const Tensor& in) {
      Tensor y = in;
      for (int64_t i = begin; i < end; ++i) y = (*modules[static_cast<size_t>(i)])(y);
      return y;
    };
    x = s + 1 < segments ? checkpoint(run, x) : run(x);
    begin = end;
  }
  return x;
}

Tensor UnaryModule::checkpointed_call(const Tensor& x) {
  // The recompute may come after the caller let go of the module: the graph keeps it alive.
  std::shared_ptr<Module> keep = weak_from_this().lock();
  return checkpoint([this, keep](const Tensor& in) { return call(in); }, x);
}

namespace {
// `root` and every module below it, depth first.
std::vector<const Module*> module_tree(const Module& root) {
  std::vector<const Module*> all{&root};
  for (size_t i = 0; i < all.size(); ++i)
    for (const auto& [name, child] : all[i]->named_children()) all.push_back(child.get());
  return all;
}
}  // namespace

int64_t apply_activation_checkpointing(Module& root, const std::vector<std::string>& module_types) {
  const std::vector<const Module*> all = module_tree(root);
  std::set<std::string> present;
  for (const Module* m : all) present.insert(m->name());
  std::string names;
  for (const std::string& p : present) names += (names.empty() ? "" : ", ") + p;
  for (const std::string& type : module_types)
    if (!present.count(type))
      throw ValueError("activation checkpointing: " + root.name() + " has no module of type \"" + type +
                       "\" (its module types: " + names + ")");
  std::vector<UnaryModule*> chosen;
  for (const Module* m : all) {
    if (std::find(module_types.begin(), module_types.end(), m->name()) == module_types.end()) continue;
    auto* unary = dynamic_cast<UnaryModule*>(const_cast<Module*>(m));
    if (!unary)
      throw ValueError("activation checkpointing: the modules of type \"" + m->name() +
                       "\" have no forward of one tensor to checkpoint");
    chosen.push_back(unary);
  }
  for (UnaryModule* m : chosen) m->set_activation_checkpointing(true);
  return static_cast<int64_t>(chosen.size());
}

std::vector<std::string> default_checkpoint_modules(const Module& model) {
  std::vector<std::string> blocks;
  if (model.name() == "ResNet") blocks = {"BasicBlock", "Bottleneck"};
  else if (model.name() == "VisionTransformer") blocks = {"Block"};
  else
    throw ValueError("activation checkpointing: no default module types for a " + model.name() +
                     " (ResNet and VisionTransformer have them); name the module types to checkpoint");
  std::vector<std::string> present;
  for (const std::string& b : blocks)
    for (const Module* m : module_tree(model))
      if (m->name() == b) {
        present.push_back(b);
        break;
      }
  return present;
}

}  // namespace ember::nn
