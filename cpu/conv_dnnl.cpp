// conv2d through oneDNN's convolution primitives (dnnl.hpp, v2.x API). Tensors are handed over as
// memory descriptors with their own strides, so NCHW and channels-last ones can be read and written
// in place; or in the layouts oneDNN picks (format_tag::any), with reorders copying in and out. A
// geometry's plan is made on its first call and cached (the one in oneDNN's layouts, or with
// EMBER_CPU_CONV_BENCHMARK=1 the fastest of the candidates, timed), so a training loop creates and
// chooses once; scratch memory comes from ember's allocator (user scratchpad mode), which also lets
// two threads run the same cached primitive at once.
#include "cpu/conv_dnnl.h"

#include <dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "tensor/env_switch.h"
#include "tensor/ops.h"

namespace ember::cpu {

namespace {

using dnnl::memory;
using Md = memory::desc;

enum class Pass { forward, backward_input, backward_weight };

// set_cpu_conv_dnnl's switch, read from the environment on first use (tests read it while registering).
std::atomic<bool>& dnnl_switch() {
  static std::atomic<bool> on{env_choice("EMBER_CPU_CONV", {"onednn", "ember"}, "onednn") == "onednn"};
  return on;
}

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// A stream per thread: oneDNN's CPU streams are cheap, and one shared by threads would order nothing.
dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// bf16 only on CPUs whose instructions do bf16 dot products (oneDNN's jit_bf16:avx512_core_bf16);
// elsewhere ember's f32 copies run, as before. f16: oneDNN 2.6 has no CPU convolution for it (creating
// one fails on this Zen 5 with avx512_bf16).
std::optional<memory::data_type> dnnl_type(DType dt) {
  if (dt == DType::f32) return memory::data_type::f32;
  if (dt == DType::bf16 && __builtin_cpu_supports("avx512bf16")) return memory::data_type::bf16;
  return std::nullopt;
}

// t's layout, NCHW-ordered dims with its strides; for weights with groups, (G, O/G, C/G, kH, kW).
Md user_md(const Tensor& t, memory::data_type type, int64_t groups = 1) {
  const Shape& s = t.shape();
  const Strides& st = t.strides();
  if (groups == 1) return Md({s[0], s[1], s[2], s[3]}, type, {st[0], st[1], st[2], st[3]});
  const int64_t og = s[0] / groups;
  return Md({groups, og, s[1], s[2], s[3]}, type, {og * st[0], st[0], st[1], st[2], st[3]});
}

// One step of a plan: a primitive and the scratch memory it asks for.
struct Step {
  dnnl::primitive prim;
  Md scratch;
};

// A cached pass: the convolution in its own layouts (md), with reorders from the caller's layouts of
// the two inputs and back to the caller's layout of the output where they differ.
struct Plan {
  Step conv;
  int arg[3];  // the DNNL_ARG_* of input 0, input 1 and the output
  Md md[3];
  std::optional<Step> reorder[3];
};

dnnl::primitive_attr scratch_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

Step reorder_step(const Md& from, const Md& to) {
  const dnnl::reorder::primitive_desc pd(engine(), from, engine(), to, scratch_attr());
  return {dnnl::reorder(pd), pd.scratchpad_desc()};
}

struct Geometry {
  memory::dims strides, dilates, pad_l, pad_r;
};

// oneDNN counts dilation from 0 and wants the bottom/right padding that yields the output size
// (oneDNN's "Convolution" developer guide); a stride that skips the last rows makes it negative.
Geometry geometry(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p) {
  Geometry g{{p.stride[0], p.stride[1]}, {p.dilation[0] - 1, p.dilation[1] - 1}, {p.padding[0], p.padding[1]}, {0, 0}};
  for (int d = 0; d < 2; ++d)
    g.pad_r[d] = (y[2 + d] - 1) * p.stride[d] + (w[2 + d] - 1) * p.dilation[d] + 1 - x[2 + d] - p.padding[d];
  return g;
}

// The convolution of pass on layouts (src, weights, dst), or nullopt where oneDNN has only reference code.
std::optional<Plan> make_conv(Pass pass, const Md& src, const Md& wei, const Md& dst, const Geometry& g) {
  using namespace dnnl;
  const auto direct = algorithm::convolution_direct;
  const primitive_attr attr = scratch_attr();
  const convolution_forward::primitive_desc fwd(
      {prop_kind::forward_training, direct, src, wei, dst, g.strides, g.dilates, g.pad_l, g.pad_r}, attr, engine());
  Plan plan;
  auto finish = [&](const auto& pd, const primitive& prim, int a0, const Md& m0, int a1, const Md& m1, int a2,
                    const Md& m2) -> std::optional<Plan> {
    if (std::strstr(pd.impl_info_str(), "ref")) return std::nullopt;
    plan.conv = {prim, pd.scratchpad_desc()};
    plan.arg[0] = a0, plan.arg[1] = a1, plan.arg[2] = a2;
    plan.md[0] = m0, plan.md[1] = m1, plan.md[2] = m2;
    return plan;
  };
  switch (pass) {
    case Pass::forward:
      return finish(fwd, convolution_forward(fwd), DNNL_ARG_SRC, fwd.src_desc(), DNNL_ARG_WEIGHTS, fwd.weights_desc(),
                    DNNL_ARG_DST, fwd.dst_desc());
    case Pass::backward_input: {
      const convolution_backward_data::primitive_desc pd(
          {direct, src, wei, dst, g.strides, g.dilates, g.pad_l, g.pad_r}, attr, engine(), fwd);
      return finish(pd, convolution_backward_data(pd), DNNL_ARG_DIFF_DST, pd.diff_dst_desc(), DNNL_ARG_WEIGHTS,
                    pd.weights_desc(), DNNL_ARG_DIFF_SRC, pd.diff_src_desc());
    }
    case Pass::backward_weight: {
      const convolution_backward_weights::primitive_desc pd(
          {direct, src, wei, dst, g.strides, g.dilates, g.pad_l, g.pad_r}, attr, engine(), fwd);
      return finish(pd, convolution_backward_weights(pd), DNNL_ARG_DIFF_DST, pd.diff_dst_desc(), DNNL_ARG_SRC,
                    pd.src_desc(), DNNL_ARG_DIFF_WEIGHTS, pd.diff_weights_desc());
    }
  }
  return std::nullopt;
}

// Whether a plan's layouts pad a tensor to more than twice its size: the blocked layouts round
// channels up to 16 (AVX-512), so the stem's 3-channel input gradient becomes 5x larger: its
// backward-data ran at 0.04 TFLOPS on 2 Zen 5 cores, 0.10-0.13 in the caller's layout.
bool pads_channels(const Plan& plan, const Md (&user)[3]) {
  for (int i = 0; i < 3; ++i)
    if (plan.md[i].get_size() > 2 * user[i].get_size()) return true;
  return false;
}

// The plans oneDNN offers for a pass on the caller's layouts user[] (input 0, input 1, output, in
// the order of make_conv's arguments), with tensors as they lie or in layouts of oneDNN's choice:
// all in oneDNN's; weights in oneDNN's (reordered every call, as PyTorch does); all as they lie.
// The first is the default plan: for NCHW tensors all in oneDNN's blocked layouts, whose kernels are
// never far off; for channels-last ones the activations as they lie, which oneDNN's NHWC kernels
// read in place (2 Zen 5 cores: the blocked plan's reorders cost up to half of the 1x1 convs' time).
// Plans that mostly compute on padding are left out. Empty where oneDNN declines the pass.
std::vector<Plan> make_plans(Pass pass, const Md (&user)[3], const Geometry& g, bool channels_last) {
  // Which of src, weights, dst each of (input 0, input 1, output) is, per pass.
  static constexpr int kRole[3][3] = {{0, 1, 2}, {2, 1, 0}, {2, 0, 1}};
  const int* role = kRole[static_cast<int>(pass)];
  Md by_role[3];
  for (int i = 0; i < 3; ++i) by_role[role[i]] = user[i];
  auto any = [](const Md& m) { return Md(m.dims(), m.data_type(), memory::format_tag::any); };
  std::vector<Plan> plans;
  // The default first; keep_fastest then drops a slow plan after one run.
  const int order[2][3] = {{2, 1, 0}, {1, 2, 0}};
  for (const int theirs : order[channels_last]) {  // 2: all in oneDNN's layout, 1: weights, 0: none
    std::optional<Plan> plan;
    try {
      plan = make_conv(pass, theirs == 2 ? any(by_role[0]) : by_role[0], theirs ? any(by_role[1]) : by_role[1],
                       theirs == 2 ? any(by_role[2]) : by_role[2], g);
    } catch (const dnnl::error&) {  // no implementation for these layouts
    }
    if (!plan || pads_channels(*plan, user)) continue;
    for (int i = 0; i < 3; ++i)
      if (plan->md[i] != user[i])
        plan->reorder[i] = i < 2 ? reorder_step(user[i], plan->md[i]) : reorder_step(plan->md[i], user[i]);
    const bool seen = std::any_of(plans.begin(), plans.end(), [&](const Plan& q) {
      return q.md[0] == plan->md[0] && q.md[1] == plan->md[1] && q.md[2] == plan->md[2];
    });
    if (!seen) plans.push_back(std::move(*plan));
  }
  return plans;
}

// A cached pass: its candidate plans until the first call has timed them, then the fastest alone.
struct Cache {
  std::mutex mutex;
  std::map<std::vector<int64_t>, std::vector<Plan>> plans;
};

Cache& cache() {
  static Cache c;
  return c;
}

void push_layout(std::vector<int64_t>& key, const Tensor& t) {
  key.insert(key.end(), t.shape().begin(), t.shape().end());
  key.insert(key.end(), t.strides().begin(), t.strides().end());
}

Tensor bytes(size_t n) { return Tensor::empty({static_cast<int64_t>(n)}, DType::u8); }

void execute(const Step& step, std::unordered_map<int, memory> args) {
  Tensor scratch;
  if (const size_t n = step.scratch.get_size()) {
    scratch = bytes(n);
    args.insert({DNNL_ARG_SCRATCHPAD, memory(step.scratch, engine(), scratch.raw_data())});
  }
  step.prim.execute(stream(), args);
}

// Runs plan on the tensors t (input 0, input 1, output) of layouts user.
void execute(const Plan& plan, const Md (&user)[3], const Tensor* const (&t)[3]) {
  std::unordered_map<int, memory> args;
  Tensor held[3];  // the reorder buffers, alive until the convolution has run
  for (int i = 0; i < 3; ++i) {
    const memory mine(user[i], engine(), t[i]->raw_data());
    if (!plan.reorder[i]) {
      args.insert({plan.arg[i], mine});
      continue;
    }
    held[i] = bytes(plan.md[i].get_size());
    const memory theirs(plan.md[i], engine(), held[i].raw_data());
    args.insert({plan.arg[i], theirs});
    if (i < 2) execute(*plan.reorder[i], {{DNNL_ARG_FROM, mine}, {DNNL_ARG_TO, theirs}});
  }
  execute(plan.conv, args);
  if (plan.reorder[2])
    execute(*plan.reorder[2],
            {{DNNL_ARG_FROM, args.at(plan.arg[2])}, {DNNL_ARG_TO, memory(user[2], engine(), t[2]->raw_data())}});
  stream().wait();
}

// Whether the first call of a geometry times the plans (EMBER_CPU_CONV_BENCHMARK=1, as PyTorch's
// cudnn.benchmark): faster where another plan wins, but the choice, and so the result's last bits,
// can then differ between processes (two ranks, or a run and its resume). Off by default.
bool timed_plans() {
  static const bool on = env_choice("EMBER_CPU_CONV_BENCHMARK", {"0", "1"}, "0") == "1";
  return on;
}

// Keeps the fastest of plans on these tensors (the best of three runs each; a plan whose run takes
// twice the best so far is dropped at once). Which wins depends on the shape: on 2 Zen 5 cores, NCHW
// 3x3 convs ran about 1.4x faster in oneDNN's blocked layout with reorders than on its im2col GEMM
// in place, the stem's backward-input 3x slower, and the GEMM's backward-weight of ResNet-18's first
// 3x3 convs at batch 16 ran at 2 GFLOP/s; at batch 2, reordering layer4's 3x3 weights (9 MiB) took
// about as long as the conv.
void keep_fastest(std::vector<Plan>& plans, const Md (&user)[3], const Tensor* const (&t)[3]) {
  size_t best = 0;
  double best_seconds = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    double seconds = 0;
    for (int run = 0; run < 3; ++run) {
      const auto start = std::chrono::steady_clock::now();
      execute(plans[i], user, t);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      seconds = run == 0 ? s : std::min(seconds, s);
      if (i > 0 && s > 2 * best_seconds) break;
    }
    if (i == 0 || seconds < best_seconds) best = i, best_seconds = seconds;
  }
  Plan kept = std::move(plans[best]);
  plans.clear();
  plans.push_back(std::move(kept));
}

// Runs pass on (a, b) into out, all NCHW-shaped; weights are the tensor of rank-4 shape[1] == C/groups.
bool run(Pass pass, const Tensor& a, const Tensor& b, const Tensor& out, const Conv2dParams& p) {
  const auto type = dnnl_type(out.dtype());
  if (!type || a.numel() == 0 || b.numel() == 0 || out.numel() == 0) return false;
  const Tensor* const t[3] = {&a, &b, &out};
  for (const Tensor* v : t)
    for (int d = 0; d < 4; ++d)
      if (v->strides()[d] < 1 && v->shape()[d] > 1) return false;  // broadcast views: ember's kernel reads them
  // Which tensor is x, w, y in this pass.
  const Tensor &x = pass == Pass::forward ? a : pass == Pass::backward_input ? out : b;
  const Tensor &w = pass == Pass::backward_weight ? out : b;
  const Tensor &y = pass == Pass::forward ? out : a;

  const bool channels_last = x.strides()[1] == 1 && x.shape()[1] > 1;
  std::vector<int64_t> key{static_cast<int64_t>(pass), static_cast<int64_t>(out.dtype()), get_num_threads(),
                           p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], p.groups};
  for (const Tensor* v : t) push_layout(key, *v);
  const Md user[3] = {user_md(a, *type, &a == &w ? p.groups : 1), user_md(b, *type, &b == &w ? p.groups : 1),
                      user_md(out, *type, &out == &w ? p.groups : 1)};
  const Plan* plan;
  {
    Cache& c = cache();
    const std::lock_guard lock(c.mutex);
    auto it = c.plans.find(key);
    if (it == c.plans.end())
      it = c.plans.emplace(key, make_plans(pass, user, geometry(x.shape(), w.shape(), y.shape(), p), channels_last))
               .first;
    if (it->second.empty()) return false;
    if (it->second.size() > 1) {
      if (timed_plans()) keep_fastest(it->second, user, t);
      else it->second.resize(1);  // oneDNN's own layouts: the same choice in every process
    }
    plan = &it->second[0];  // std::map nodes stay put, and a timed entry no longer changes
  }
  execute(*plan, user, t);
  return true;
}

}  // namespace

bool dnnl_conv_forward(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  return run(Pass::forward, x, w, y, p);
}

bool dnnl_conv_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dParams& p) {
  return run(Pass::backward_input, gy, w, gx, p);
}

bool dnnl_conv_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dParams& p) {
  return run(Pass::backward_weight, gy, x, gw, p);
}

}  // namespace ember::cpu

namespace ember {

void set_cpu_conv_dnnl(bool on) { cpu::dnnl_switch().store(on, std::memory_order_relaxed); }
bool cpu_conv_dnnl() { return cpu::dnnl_switch().load(std::memory_order_relaxed); }

size_t cpu_conv_dnnl_cache_size() {
  cpu::Cache& c = cpu::cache();
  const std::lock_guard lock(c.mutex);
  return static_cast<size_t>(std::count_if(c.plans.begin(), c.plans.end(), [](const auto& kv) { return !kv.second.empty(); }));
}

}  // namespace ember
