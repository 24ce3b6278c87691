#include "train/deepspeed_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tensor/atomic_file.h"
#include "tensor/decimal.h"
#include "tensor/error.h"
#include "tensor/json_check.h"
#include "tensor/printable.h"
#include "tensor/safetensors.h"

namespace ember::train {

namespace {

using nlohmann::json;

// A JSON value of the file as a message shows it: escaped and cut.
std::string shown(const json& v) { return printable(v.dump(), 80); }

constexpr int kMaxDepth = 32;  // DeepSpeed's configs nest three levels

// Reads the values of one JSON object, naming each key by its path ("zero_optimization.stage") in
// messages, and remembers which keys were used so the rest can be reported.
class Section {
 public:
  Section(const json& object, std::string path, const std::string& source, std::vector<std::string>& warnings)
      : object_(object), path_(std::move(path)), source_(source), warnings_(warnings) {
    if (!object_.is_object())
      throw FormatError(source_ + ": " + (path_.empty() ? std::string("the top level") : "\"" + printable(path_, 80) + "\"") +
                        " is not a JSON object");
  }
  // Names the keys no accessor asked for.
  ~Section() {
    for (const auto& [key, value] : object_.items())
      if (!used_.count(key))
        warnings_.push_back(source_ + ": \"" + name(key) + "\" is not a setting ember knows; it is ignored");
  }
  Section(const Section&) = delete;
  Section& operator=(const Section&) = delete;

  // The key's dotted path as a message shows it (keys are the file's: escaped and cut).
  std::string name(const std::string& key) const { return printable(path_.empty() ? key : path_ + "." + key, 80); }
  // The value under key, or null when absent or "auto".
  const json* find(const std::string& key) {
    used_.insert(key);
    const auto it = object_.find(key);
    if (it == object_.end()) return nullptr;
    if (it->is_string() && it->get_ref<const std::string&>() == "auto") {
      warnings_.push_back(source_ + ": \"" + name(key) + "\" is \"auto\": ember's own value is used");
      return nullptr;
    }
    return &*it;
  }
  std::optional<bool> boolean(const std::string& key) {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) throw FormatError(source_ + ": \"" + name(key) + "\" must be true or false, got " + shown(*v));
    return v->get<bool>();
  }
  std::optional<double> number(const std::string& key) {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) throw FormatError(source_ + ": \"" + name(key) + "\" must be a number, got " + shown(*v));
    const double d = v->get<double>();
    if (!std::isfinite(d)) throw ValueError(source_ + ": \"" + name(key) + "\" is " + shown(*v) + ", not a finite number");
    return d;
  }
  // A whole number in [lo, hi] (DeepSpeed writes bucket sizes as 5e8, so an integral float counts).
  std::optional<int64_t> integer(const std::string& key, int64_t lo, int64_t hi) {
    const auto d = number(key);
    if (!d) return std::nullopt;
    if (*d != std::floor(*d) || *d < static_cast<double>(lo) || *d > static_cast<double>(hi))
      throw ValueError(source_ + ": \"" + name(key) + "\" is " + shown(object_.at(key)) + "; expected a whole number in [" +
                       std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<int64_t>(*d);
  }
  std::optional<std::string> string(const std::string& key) {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) throw FormatError(source_ + ": \"" + name(key) + "\" must be a string, got " + shown(*v));
    return v->get<std::string>();
  }
  // The nested object under key, or null.
  std::unique_ptr<Section> section(const std::string& key) {
    const json* v = find(key);
    return v ? std::make_unique<Section>(*v, name(key), source_, warnings_) : nullptr;
  }
  const std::string& source() const { return source_; }

 private:
  const json& object_;
  std::string path_;
  const std::string& source_;
  std::vector<std::string>& warnings_;
  std::set<std::string> used_;
};

constexpr int64_t kElements = int64_t(1) << 40;

void read_zero(Section& s, DeepSpeedConfig& c) {
  c.zero_stage = s.integer("stage", 0, 3);
  const auto knob = [&](const char* key, auto& field, auto value) {
    if (!value) return;
    field = *value;
    c.zero_knobs.insert(key);
  };
  knob("reduce_bucket_size", c.zero.reduce_bucket_size, s.integer("reduce_bucket_size", 1, kElements));
  knob("allgather_bucket_size", c.zero.allgather_bucket_size, s.integer("allgather_bucket_size", 1, kElements));
  knob("overlap_comm", c.zero.overlap_comm, s.boolean("overlap_comm"));
  knob("contiguous_gradients", c.zero.contiguous_gradients, s.boolean("contiguous_gradients"));
  knob("reduce_scatter", c.zero.reduce_scatter, s.boolean("reduce_scatter"));
  knob("stage3_prefetch_bucket_size", c.zero.stage3_prefetch_bucket_size,
       s.integer("stage3_prefetch_bucket_size", 1, kElements));
  knob("stage3_param_persistence_threshold", c.zero.stage3_param_persistence_threshold,
       s.integer("stage3_param_persistence_threshold", 0, kElements));
  if (const auto allgather = s.boolean("allgather_partitions"); allgather && !*allgather)
    throw ValueError(s.source() + ": \"" + s.name("allgather_partitions") +
                     "\" is false, but ember always all-gathers the updated partitions");
  // offload_optimizer and offload_param {"device": "cpu" | "none" | "nvme", "pin_memory": ...}, or
  // the older cpu_offload: true for the optimizer. ember offloads to the host, never to NVMe.
  const auto offload = [&](const char* key, const char* what, bool& field) {
    const json* v = s.find(key);
    if (!v) return;
    std::string device;
    if (v->is_boolean()) device = v->get<bool>() ? "cpu" : "none";
    else if (v->is_object() && v->contains("device") && (*v)["device"].is_string()) device = (*v)["device"].get<std::string>();
    if (device != "cpu" && device != "none")
      throw ValueError(s.source() + ": \"" + s.name(key) + "\" is " + shown(*v) + ": ember offloads " + what +
                       " to the host (\"device\": \"cpu\") or not (\"none\")");
    field = device == "cpu";
    c.zero_knobs.insert(std::string(key) == "cpu_offload" ? "offload_optimizer" : key);
  };
  offload("offload_optimizer", "the optimizer", c.zero.offload_optimizer);
  offload("cpu_offload", "the optimizer", c.zero.offload_optimizer);
  offload("offload_param", "the parameters", c.zero.offload_param);
}

void read_fp16(Section& s, DeepSpeedConfig& c) {
  if (!s.boolean("enabled").value_or(false)) return;
  c.precision = Precision::naive_fp16;
  if (const auto v = s.number("loss_scale")) {
    // A fixed scale multiplies float32 losses: a normal float32 number, as GradScaler's scales.
    if (*v != 0 && !(*v >= 0x1p-126 && *v <= 0x1p127))
      throw ValueError(s.source() + ": \"" + s.name("loss_scale") + "\" is " + decimal_text(*v) +
                       "; expected 0 (dynamic) or a scale in [2^-126, 2^127]");
    c.loss_scaler.loss_scale = *v;
  }
  if (const auto v = s.integer("initial_scale_power", 0, 64)) c.loss_scaler.initial_scale_power = static_cast<int>(*v);
  if (const auto v = s.integer("loss_scale_window", 1, kElements)) c.loss_scaler.loss_scale_window = *v;
  if (const auto v = s.integer("hysteresis", 1, kElements)) c.loss_scaler.hysteresis = *v;
  if (const auto v = s.number("min_loss_scale")) {
    if (!(*v > 0)) throw ValueError(s.source() + ": \"" + s.name("min_loss_scale") + "\" must be > 0");
    c.loss_scaler.min_loss_scale = *v;
  }
}

void read_optimizer(Section& s, DeepSpeedConfig& c) {
  const auto type = s.string("type");
  if (!type) throw ValueError(s.source() + ": \"optimizer\" has no \"type\"");
  std::string lower;
  for (char ch : *type) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower != "sgd" && lower != "adamw" && lower != "lamb")
    throw ValueError(s.source() + ": optimizer type \"" + printable(*type, 40) + "\" is not one of train's: SGD, AdamW, Lamb");
  c.optimizer = lower;
  const auto params = s.section("params");
  if (!params) return;
  c.lr = params->number("lr");
  c.weight_decay = params->number("weight_decay");
  if (lower == "sgd") c.momentum = params->number("momentum");
  // Settings train has no flag for must be ember's own.
  const double eps = lower == "lamb" ? 1e-6 : 1e-8;
  if (const auto v = params->number("eps"); v && *v != eps)
    throw ValueError(s.source() + ": \"optimizer.params.eps\" is " + std::to_string(*v) + "; train uses " + std::to_string(eps));
  if (const json* betas = params->find("betas")) {
    if (!(betas->is_array() && betas->size() == 2 && (*betas)[0].is_number() && (*betas)[1].is_number() &&
          (*betas)[0].get<double>() == 0.9 && (*betas)[1].get<double>() == 0.999))
      throw ValueError(s.source() + ": \"optimizer.params.betas\" is " + shown(*betas) + "; train uses [0.9, 0.999]");
  }
}

}  // namespace

DeepSpeedConfig parse_deepspeed_config(const std::string& text, const std::string& source) {
  // Checked before it is parsed: a key given twice in one object is refused, as DeepSpeed's own
  // loader does (JSON would keep the last value silently), and so is deep nesting.
  const JsonCheck check = check_json(text.data(), text.size(), kMaxDepth);
  if (check.huge_number) throw FormatError(source + ": holds a number too large for a double");
  if (!check.valid) throw FormatError(source + ": not JSON (at byte " + std::to_string(check.byte) + ")");
  if (check.too_deep) throw FormatError(source + ": nested deeper than " + std::to_string(kMaxDepth) + " levels");
  if (!check.repeated_key.empty())
    throw FormatError(source + ": the key \"" + printable(check.repeated_key, 80) + "\" is given twice in one object");
  const json root = json::parse(text);
  DeepSpeedConfig c;
  {
    Section top(root, "", source, c.warnings);
    if (auto zero = top.section("zero_optimization")) read_zero(*zero, c);
    if (auto fp16 = top.section("fp16")) read_fp16(*fp16, c);
    for (const char* key : {"bf16", "bfloat16"})
      if (auto bf16 = top.section(key); bf16 && bf16->boolean("enabled").value_or(false)) {
        if (c.precision) throw ValueError(source + ": fp16 and " + key + " are both enabled");
        c.precision = Precision::naive_bf16;
      }
    c.gradient_clipping = top.number("gradient_clipping");
    if (c.gradient_clipping && *c.gradient_clipping < 0)
      throw ValueError(source + ": \"gradient_clipping\" must be >= 0, got " + std::to_string(*c.gradient_clipping));
    c.micro_batch_size = top.integer("train_micro_batch_size_per_gpu", 1, kElements);
    c.train_batch_size = top.integer("train_batch_size", 1, kElements);
    c.gradient_accumulation_steps = top.integer("gradient_accumulation_steps", 1, kElements);
    if (auto optimizer = top.section("optimizer")) read_optimizer(*optimizer, c);
  }
  return c;
}

DeepSpeedConfig read_deepspeed_config(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw IOError("the DeepSpeed config " + path + (std::filesystem::exists(path, ec) ? " is not a regular file" : " does not exist"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError("cannot read the DeepSpeed config " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IOError("cannot read the DeepSpeed config " + path);
  return parse_deepspeed_config(text.str(), path);
}

}  // namespace ember::train
