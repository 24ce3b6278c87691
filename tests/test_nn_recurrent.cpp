// nn::RNN, LSTM, GRU and their cells: output and state shapes in every layout, PyTorch's parameter
// names and shapes, values against a reference written here as plain loops over the formulas of
// PyTorch's documentation (with weights set by hand, and with drawn ones over stacked and
// bidirectional layers), dropout between layers, hooks, gradcheck in f64, and argument errors.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "autograd/gradcheck.h"
#include "helpers.h"
#include "nn/layers/recurrent.h"
#include "tensor/error.h"

using namespace ember;
using namespace ember_test;

namespace {

enum class Kind { rnn_tanh, rnn_relu, lstm, gru };

int64_t gates_of(Kind k) { return k == Kind::lstm ? 4 : k == Kind::gru ? 3 : 1; }

// ---- the reference: one sequence at a time, every value a double in a row-major vector

double sigmoid_of(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// The parameters of one layer and direction, as host values.
struct RefWeights {
  std::vector<double> w_ih, w_hh, b_ih, b_hh, w_hr;  // b_* and w_hr empty when absent
};

// W v + b for W (rows, v.size()) row-major; b empty for none.
std::vector<double> affine(const std::vector<double>& W, const std::vector<double>& b, const std::vector<double>& v) {
  const size_t cols = v.size(), rows = W.size() / cols;
  std::vector<double> out(rows);
  for (size_t r = 0; r < rows; ++r) {
    double acc = b.empty() ? 0.0 : b[r];
    for (size_t c = 0; c < cols; ++c) acc += W[r * cols + c] * v[c];
    out[r] = acc;
  }
  return out;
}

// One step of cell `kind` for one sequence: h (H_out) and c (H, LSTM only) are updated in place.
void reference_step(Kind kind, const RefWeights& w, const std::vector<double>& x, std::vector<double>& h,
                    std::vector<double>& c) {
  const std::vector<double> gi = affine(w.w_ih, w.b_ih, x), gh = affine(w.w_hh, w.b_hh, h);
  const size_t H = gi.size() / gates_of(kind);
  std::vector<double> next(H);
  for (size_t j = 0; j < H; ++j) {
    switch (kind) {
      case Kind::rnn_tanh: next[j] = std::tanh(gi[j] + gh[j]); break;
      case Kind::rnn_relu: next[j] = std::max(0.0, gi[j] + gh[j]); break;
      case Kind::lstm: {
        const double i = sigmoid_of(gi[j] + gh[j]), f = sigmoid_of(gi[H + j] + gh[H + j]);
        const double g = std::tanh(gi[2 * H + j] + gh[2 * H + j]), o = sigmoid_of(gi[3 * H + j] + gh[3 * H + j]);
        c[j] = f * c[j] + i * g;
        next[j] = o * std::tanh(c[j]);
        break;
      }
      case Kind::gru: {
        const double r = sigmoid_of(gi[j] + gh[j]), z = sigmoid_of(gi[H + j] + gh[H + j]);
        const double n = std::tanh(gi[2 * H + j] + r * gh[2 * H + j]);
        next[j] = (1 - z) * n + z * h[j];
        break;
      }
    }
  }
  h = kind == Kind::lstm && !w.w_hr.empty() ? affine(w.w_hr, {}, next) : next;
}

std::vector<double> host(const Tensor& t) { return t.defined() ? t.to_vector<double>() : std::vector<double>{}; }

RefWeights ref_weights(const nn::RecurrentWeights& w) {
  return {host(w.weight_ih), host(w.weight_hh), host(w.bias_ih), host(w.bias_hh), host(w.weight_hr)};
}

struct RefResult {
  std::vector<double> output, h_n, c_n;  // (L, N, D*H_out), (D*layers, N, H_out), (D*layers, N, H)
};

// The whole stack over x (L, N, H_in) from h0 (D*layers, N, H_out) and c0 (D*layers, N, H), without dropout.
RefResult reference_layers(Kind kind, const nn::RecurrentLayer& layer, std::vector<double> x, int64_t L, int64_t N,
                           const std::vector<double>& h0, const std::vector<double>& c0) {
  const int64_t D = layer.num_directions(), Hs = layer.state_size(), H = layer.hidden_size;
  const int64_t layers = layer.options.num_layers;
  RefResult res;
  res.h_n.resize(D * layers * N * Hs);
  if (kind == Kind::lstm) res.c_n.resize(D * layers * N * H);
  int64_t features = layer.input_size;
  for (int64_t k = 0; k < layers; ++k) {
    std::vector<double> out(L * N * D * Hs);
    for (int64_t d = 0; d < D; ++d) {
      const RefWeights w = ref_weights(layer.weights[k * D + d]);
      const int64_t s = k * D + d;
      for (int64_t n = 0; n < N; ++n) {
        std::vector<double> h(h0.begin() + (s * N + n) * Hs, h0.begin() + (s * N + n + 1) * Hs);
        std::vector<double> c;
        if (kind == Kind::lstm) c.assign(c0.begin() + (s * N + n) * H, c0.begin() + (s * N + n + 1) * H);
        for (int64_t step = 0; step < L; ++step) {
          const int64_t t = d == 0 ? step : L - 1 - step;
          const std::vector<double> xt(x.begin() + (t * N + n) * features, x.begin() + (t * N + n + 1) * features);
          reference_step(kind, w, xt, h, c);
          for (int64_t j = 0; j < Hs; ++j) out[((t * N + n) * D + d) * Hs + j] = h[j];
        }
        for (int64_t j = 0; j < Hs; ++j) res.h_n[(s * N + n) * Hs + j] = h[j];
        for (int64_t j = 0; j < static_cast<int64_t>(c.size()); ++j) res.c_n[(s * N + n) * H + j] = c[j];
      }
    }
    x = out;
    features = D * Hs;
  }
  res.output = x;
  return res;
}

// ---- the layers under test

std::shared_ptr<nn::RecurrentLayer> make_layer(Kind kind, int64_t in, int64_t hidden, const nn::RecurrentOptions& o,
                                               int64_t proj = 0) {
  switch (kind) {
    case Kind::rnn_tanh: return std::make_shared<nn::RNN>(in, hidden, o, "tanh");
    case Kind::rnn_relu: return std::make_shared<nn::RNN>(in, hidden, o, "relu");
    case Kind::lstm: return std::make_shared<nn::LSTM>(in, hidden, o, proj);
    case Kind::gru: return std::make_shared<nn::GRU>(in, hidden, o);
  }
  return nullptr;
}

// The layer's forward with states h0 (and c0 for an LSTM).
nn::RecurrentOutput call(nn::RecurrentLayer& layer, const Tensor& x, const Tensor& h0, const Tensor& c0) {
  if (auto* lstm = dynamic_cast<nn::LSTM*>(&layer)) return lstm->forward(x, h0, c0);
  if (auto* rnn = dynamic_cast<nn::RNN*>(&layer)) return rnn->forward(x, h0);
  return dynamic_cast<nn::GRU&>(layer).forward(x, h0);
}

std::string kind_name(Kind k) {
  switch (k) {
    case Kind::rnn_tanh: return "RNN tanh";
    case Kind::rnn_relu: return "RNN relu";
    case Kind::lstm: return "LSTM";
    case Kind::gru: return "GRU";
  }
  return "";
}

const std::vector<Kind> kKinds = {Kind::rnn_tanh, Kind::rnn_relu, Kind::lstm, Kind::gru};

void check_close(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  INFO(what);
  const std::vector<double> g = got.to_vector<double>();
  REQUIRE(g.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(g[i] - want[i]));
  CHECK(worst < 1e-12);
}

// Sets a parameter's values (in place, as load_state_dict does).
void set_values(Tensor param, const std::vector<double>& values) {
  NoGradGuard no_grad;
  copy_(param, from_vector(values, param.shape()));
}

}  // namespace

TEST_SUITE("cpu") {
TEST_CASE("recurrent: output and state shapes in every layout") {
  const int64_t L = 5, N = 3, I = 4, H = 6;
  for (Kind kind : kKinds) {
    for (bool bidirectional : {false, true}) {
      for (bool batch_first : {false, true}) {
        const int64_t D = bidirectional ? 2 : 1;
        const auto layer = make_layer(kind, I, H, {.num_layers = 2, .batch_first = batch_first,
                                                   .bidirectional = bidirectional});
        INFO(kind_name(kind), " bidirectional=", bidirectional, " batch_first=", batch_first);
        const Tensor batched = batch_first ? randn({N, L, I}) : randn({L, N, I});
        const nn::RecurrentOutput out = call(*layer, batched, {}, {});
        CHECK(out.output.shape() == (batch_first ? Shape{N, L, D * H} : Shape{L, N, D * H}));
        CHECK(out.h_n.shape() == Shape{2 * D, N, H});  // states are never batch first
        CHECK(out.c_n.defined() == (kind == Kind::lstm));
        if (kind == Kind::lstm) CHECK(out.c_n.shape() == Shape{2 * D, N, H});
        CHECK((*layer)(batched).shape() == out.output.shape());

        const nn::RecurrentOutput single = call(*layer, randn({L, I}), {}, {});
        CHECK(single.output.shape() == Shape{L, D * H});
        CHECK(single.h_n.shape() == Shape{2 * D, H});
        if (kind == Kind::lstm) CHECK(single.c_n.shape() == Shape{2 * D, H});
      }
    }
  }
  // With projections, h (and the output) has proj_size features and the cell state hidden_size.
  nn::LSTM projected(I, H, {.num_layers = 2, .bidirectional = true}, 2);
  const nn::RecurrentOutput out = projected.forward(randn({L, N, I}), {}, {});
  CHECK(out.output.shape() == Shape{L, N, 4});
  CHECK(out.h_n.shape() == Shape{4, N, 2});
  CHECK(out.c_n.shape() == Shape{4, N, H});
  // Cells: (N, H_in) -> (N, H), (H_in) -> (H).
  nn::RNNCell rnn_cell(I, H);
  nn::GRUCell gru_cell(I, H);
  nn::LSTMCell lstm_cell(I, H);
  CHECK(rnn_cell.forward(randn({N, I}), {}).shape() == Shape{N, H});
  CHECK(gru_cell.forward(randn({I}), randn({H})).shape() == Shape{H});
  const nn::LSTMState state = lstm_cell.forward(randn({N, I}), randn({N, H}), randn({N, H}));
  CHECK(state.h.shape() == Shape{N, H});
  CHECK(state.c.shape() == Shape{N, H});
  CHECK(lstm_cell(randn({I})).shape() == Shape{H});
}

TEST_CASE("recurrent: parameter names, shapes and order are PyTorch's; init within 1/sqrt(hidden_size)") {
  // torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2).named_parameters(), written out.
  nn::LSTM lstm(3, 5, {.num_layers = 2, .bidirectional = true}, 2);
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"weight_ih_l0", {20, 3}},         {"weight_hh_l0", {20, 2}},         {"bias_ih_l0", {20}},
      {"bias_hh_l0", {20}},              {"weight_hr_l0", {2, 5}},          {"weight_ih_l0_reverse", {20, 3}},
      {"weight_hh_l0_reverse", {20, 2}}, {"bias_ih_l0_reverse", {20}},      {"bias_hh_l0_reverse", {20}},
      {"weight_hr_l0_reverse", {2, 5}},  {"weight_ih_l1", {20, 4}},         {"weight_hh_l1", {20, 2}},
      {"bias_ih_l1", {20}},              {"bias_hh_l1", {20}},              {"weight_hr_l1", {2, 5}},
      {"weight_ih_l1_reverse", {20, 4}}, {"weight_hh_l1_reverse", {20, 2}}, {"bias_ih_l1_reverse", {20}},
      {"bias_hh_l1_reverse", {20}},      {"weight_hr_l1_reverse", {2, 5}},
  };
  const auto params = lstm.named_parameters();
  REQUIRE(params.size() == expected.size());
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(params[i].first == expected[i].first);
    CHECK(params[i].second.shape() == expected[i].second);
  }
  CHECK(lstm.state_dict().size() == expected.size());
  CHECK(lstm.weights[3].weight_hr.is_same(lstm.parameter("weight_hr_l1_reverse")));

  nn::GRU gru(3, 4, {.bias = false});
  CHECK(gru.state_dict().size() == 2);
  CHECK(gru.parameter("weight_ih_l0").shape() == Shape{12, 3});
  CHECK(gru.parameter("weight_hh_l0").shape() == Shape{12, 4});
  nn::RNN rnn(3, 4, {.num_layers = 2});
  CHECK(rnn.parameter("weight_ih_l1").shape() == Shape{4, 4});
  CHECK_FALSE(rnn.parameter("weight_ih_l0_reverse").defined());

  nn::LSTMCell cell(3, 4);
  CHECK(cell.named_parameters().size() == 4);
  CHECK(cell.parameter("weight_ih").shape() == Shape{16, 3});
  CHECK(cell.parameter("weight_hh").shape() == Shape{16, 4});
  CHECK(cell.parameter("bias_hh").shape() == Shape{16});
  CHECK(nn::RNNCell(3, 4, false).named_parameters().size() == 2);

  // U(-1/sqrt(H), 1/sqrt(H)) for every parameter, biases included (not Linear's init).
  nn::GRU wide(8, 100);
  for (const auto& [name, p] : wide.named_parameters()) {
    INFO(name);
    CHECK(amax(abs(p)).item<double>() <= 0.1);
    CHECK(amax(abs(p)).item<double>() > 0.09);
  }
}

TEST_CASE("recurrent: one step with weights set by hand against the formulas") {
  // H_in = 2, H = 2, one sequence of one step from a given state: every weight set explicitly.
  const std::vector<double> x = {0.5, -1.0}, h0 = {0.25, -0.5}, c0 = {1.0, -0.75};
  const auto ramp = [](int64_t n, double start, double step) {
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<double>(i % 7) * (i % 2 ? -1 : 1);
    return v;
  };
  for (Kind kind : kKinds) {
    INFO(kind_name(kind));
    const int64_t G = gates_of(kind);
    const RefWeights w{ramp(2 * G * 2, 0.1, 0.15), ramp(2 * G * 2, -0.2, 0.1), ramp(2 * G, 0.05, 0.2),
                       ramp(2 * G, -0.1, 0.05), {}};
    const auto layer = make_layer(kind, 2, 2, {});
    layer->to(DType::f64);
    set_values(layer->weights[0].weight_ih, w.w_ih);
    set_values(layer->weights[0].weight_hh, w.w_hh);
    set_values(layer->weights[0].bias_ih, w.b_ih);
    set_values(layer->weights[0].bias_hh, w.b_hh);
    std::vector<double> h = h0, c = c0;
    reference_step(kind, w, x, h, c);
    const Tensor c_init = kind == Kind::lstm ? from_vector(c0, {1, 1, 2}) : Tensor();
    const nn::RecurrentOutput out = call(*layer, from_vector(x, {1, 1, 2}), from_vector(h0, {1, 1, 2}), c_init);
    check_close(out.output, h, "output");
    check_close(out.h_n, h, "h_n");
    if (kind == Kind::lstm) check_close(out.c_n, c, "c_n");
    // relu clips: at least one of the two values must be positive for the check to mean something.
    CHECK(std::max(std::fabs(h[0]), std::fabs(h[1])) > 0.05);
  }
  // The cells on the same values.
  nn::RNNCell rnn_cell(2, 2);
  nn::GRUCell gru_cell(2, 2);
  nn::LSTMCell lstm_cell(2, 2);
  for (nn::Module* m : std::vector<nn::Module*>{&rnn_cell, &gru_cell, &lstm_cell}) m->to(DType::f64);
  const std::vector<std::pair<Kind, nn::RecurrentCell*>> cells = {
      {Kind::rnn_tanh, &rnn_cell}, {Kind::gru, &gru_cell}, {Kind::lstm, &lstm_cell}};
  for (const auto& [kind, cell] : cells) {
    INFO(cell->name());
    const int64_t G = gates_of(kind);
    const RefWeights w{ramp(2 * G * 2, 0.3, -0.1), ramp(2 * G * 2, 0.2, 0.1), ramp(2 * G, -0.05, 0.1),
                       ramp(2 * G, 0.1, -0.05), {}};
    set_values(cell->weight_ih, w.w_ih);
    set_values(cell->weight_hh, w.w_hh);
    set_values(cell->bias_ih, w.b_ih);
    set_values(cell->bias_hh, w.b_hh);
    std::vector<double> h = h0, c = c0;
    reference_step(kind, w, x, h, c);
    const Tensor xt = from_vector(x, {2}), ht = from_vector(h0, {2});  // unbatched
    if (kind == Kind::lstm) {
      const nn::LSTMState s = lstm_cell.forward(xt, ht, from_vector(c0, {2}));
      check_close(s.h, h, "h'");
      check_close(s.c, c, "c'");
    } else {
      check_close(kind == Kind::gru ? gru_cell.forward(xt, ht) : rnn_cell.forward(xt, ht), h, "h'");
    }
  }
}

TEST_CASE("recurrent: stacked, bidirectional, projected layers against the reference in every layout") {
  const int64_t L = 4, N = 3, I = 3, H = 5, layers = 2;
  for (Kind kind : kKinds) {
    for (int64_t proj : {0, 2}) {
      if (proj > 0 && kind != Kind::lstm) continue;
      const auto layer = make_layer(kind, I, H, {.num_layers = layers, .bidirectional = true}, proj);
      layer->to(DType::f64);
      INFO(kind_name(kind), " proj_size=", proj);
      const int64_t Hs = layer->state_size();
      const std::vector<double> x = random_values(L * N * I, DType::f64, -1, 1, false, 11);
      const std::vector<double> h0 = random_values(2 * layers * N * Hs, DType::f64, -1, 1, false, 12);
      const std::vector<double> c0 = random_values(2 * layers * N * H, DType::f64, -1, 1, false, 13);
      const RefResult want = reference_layers(kind, *layer, x, L, N, h0, c0);
      const Tensor xt = from_vector(x, {L, N, I}), h0t = from_vector(h0, {2 * layers, N, Hs});
      const Tensor c0t = kind == Kind::lstm ? from_vector(c0, {2 * layers, N, H}) : Tensor();

      const nn::RecurrentOutput seq_first = call(*layer, xt, h0t, c0t);
      check_close(seq_first.output, want.output, "output");
      check_close(seq_first.h_n, want.h_n, "h_n");
      if (kind == Kind::lstm) check_close(seq_first.c_n, want.c_n, "c_n");

      // Batch first, with the same parameters: the same values, transposed in and out; the states are not.
      const auto batch_first_layer = make_layer(kind, I, H, {.num_layers = layers, .batch_first = true,
                                                             .bidirectional = true}, proj);
      batch_first_layer->to(DType::f64);
      batch_first_layer->load_state_dict(layer->state_dict());
      const nn::RecurrentOutput batch_first = call(*batch_first_layer, contiguous(xt.transpose(0, 1)), h0t, c0t);
      check_close(contiguous(batch_first.output.transpose(0, 1)), want.output, "batch-first output");
      check_close(batch_first.h_n, want.h_n, "batch-first h_n");

      // Unbatched: sequence 1 alone.
      const RefResult one = reference_layers(kind, *layer, random_values(L * I, DType::f64, -1, 1, false, 14), L, 1,
                                             std::vector<double>(h0.begin(), h0.begin() + 2 * layers * Hs),
                                             std::vector<double>(c0.begin(), c0.begin() + 2 * layers * H));
      const Tensor c_one = kind == Kind::lstm ? from_vector(std::vector<double>(c0.begin(), c0.begin() + 2 * layers * H),
                                                            {2 * layers, H})
                                              : Tensor();
      const nn::RecurrentOutput single =
          call(*layer, from_vector(random_values(L * I, DType::f64, -1, 1, false, 14), {L, I}),
               from_vector(std::vector<double>(h0.begin(), h0.begin() + 2 * layers * Hs), {2 * layers, Hs}), c_one);
      check_close(single.output, one.output, "unbatched output");
      check_close(single.h_n, one.h_n, "unbatched h_n");
      if (kind == Kind::lstm) check_close(single.c_n, one.c_n, "unbatched c_n");

      // Without states: zeros.
      const RefResult zero = reference_layers(kind, *layer, x, L, N, std::vector<double>(h0.size(), 0.0),
                                              std::vector<double>(c0.size(), 0.0));
      check_close(call(*layer, xt, {}, {}).output, zero.output, "output from zero states");
    }
  }
}

TEST_CASE("recurrent: dropout acts between layers in training mode only") {
  const Tensor x = randn({6, 2, 3});
  nn::LSTM plain(3, 8, {.num_layers = 2});
  nn::LSTM dropped(3, 8, {.num_layers = 2, .dropout = 0.5});
  dropped.load_state_dict(plain.state_dict());
  const Tensor want = plain.forward(x, {}, {}).output;
  CHECK_FALSE(allclose(dropped.forward(x, {}, {}).output, want));  // training: the first layer's output dropped
  dropped.eval();
  CHECK(equal(dropped.forward(x, {}, {}).output, want));
  // One layer: nothing between layers to drop, even in training mode.
  nn::GRU one(3, 8, {.dropout = 0.5});
  nn::GRU one_plain(3, 8);
  one_plain.load_state_dict(one.state_dict());
  CHECK(equal(one.forward(x, {}).output, one_plain.forward(x, {}).output));
}

TEST_CASE("recurrent: forward hooks run once around forward(input, states) and around m(x)") {
  nn::LSTM lstm(3, 4);
  int pre = 0, post = 0;
  Tensor seen;
  lstm.register_forward_pre_hook([&](nn::Module&, const Tensor&) { ++pre; });
  lstm.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& output) {
    ++post;
    seen = output;
  });
  const nn::RecurrentOutput out = lstm.forward(randn({5, 2, 3}), zeros({1, 2, 4}), zeros({1, 2, 4}));
  CHECK(pre == 1);
  CHECK(post == 1);
  CHECK(seen.is_same(out.output));
  const Tensor y = lstm(randn({5, 2, 3}));
  CHECK(pre == 2);
  CHECK(post == 2);
  CHECK(seen.is_same(y));
  nn::GRUCell cell(3, 4);
  cell.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) { ++post; });
  cell.forward(randn({3}), {});
  CHECK(post == 3);
}

TEST_CASE("recurrent: gradcheck of inputs, states and parameters in f64") {
  const int64_t L = 3, N = 2, I = 2, H = 3;
  for (Kind kind : {Kind::rnn_tanh, Kind::lstm, Kind::gru}) {
    INFO(kind_name(kind));
    const auto layer = make_layer(kind, I, H, {.num_layers = 2, .bidirectional = true}, kind == Kind::lstm ? 2 : 0);
    layer->to(DType::f64);
    const int64_t Hs = layer->state_size();
    std::vector<Tensor> inputs = {uniform_f64({L, N, I}, -1, 1, 21), uniform_f64({4, N, Hs}, -1, 1, 22)};
    if (kind == Kind::lstm) inputs.push_back(uniform_f64({4, N, H}, -1, 1, 23));
    const size_t first_param = inputs.size();
    for (const Tensor& p : layer->parameters()) inputs.push_back(p);  // perturbed in place: the layer reads them
    const autograd::MultiFunction f = [&](const std::vector<Tensor>& in) {
      const nn::RecurrentOutput out = call(*layer, in[0], in[1], kind == Kind::lstm ? in[2] : Tensor());
      std::vector<Tensor> results = {out.output, out.h_n};
      if (out.c_n.defined()) results.push_back(out.c_n);
      return results;
    };
    CHECK(first_param + layer->parameters().size() == inputs.size());
    const GradcheckResult r = gradcheck(f, inputs);
    CHECK(r.entries > 0);
  }
  nn::GRUCell gru_cell(I, H);
  nn::LSTMCell lstm_cell(I, H);
  nn::RNNCell rnn_cell(I, H);
  for (nn::Module* m : std::vector<nn::Module*>{&gru_cell, &lstm_cell, &rnn_cell}) m->to(DType::f64);
  std::vector<Tensor> in = {uniform_f64({N, I}, -1, 1, 31), uniform_f64({N, H}, -1, 1, 32),
                            uniform_f64({N, H}, -1, 1, 33)};
  for (const Tensor& p : lstm_cell.parameters()) in.push_back(p);
  gradcheck([&](const std::vector<Tensor>& v) {
    const nn::LSTMState s = lstm_cell.forward(v[0], v[1], v[2]);
    return std::vector<Tensor>{s.h, s.c};
  }, in);
  for (nn::RecurrentCell* cell : std::vector<nn::RecurrentCell*>{&gru_cell, &rnn_cell}) {
    INFO(cell->name());
    std::vector<Tensor> args = {in[0], in[1]};
    for (const Tensor& p : cell->parameters()) args.push_back(p);
    gradcheck([&](const std::vector<Tensor>& v) {
      return cell == &gru_cell ? gru_cell.forward(v[0], v[1]) : rnn_cell.forward(v[0], v[1]);
    }, args);
  }
}

TEST_CASE("recurrent: bad settings and shapes are typed errors naming the values") {
  expect_error<ValueError>("hidden_size 0", [] { nn::LSTM(4, 0); }, {"LSTM", "hidden_size=0"});
  expect_error<ValueError>("num_layers 0", [] { nn::GRU(4, 8, {.num_layers = 0}); }, {"GRU", "num_layers", "0"});
  expect_error<ValueError>("dropout 1.5", [] { nn::RNN(4, 8, {.dropout = 1.5}); }, {"dropout", "1.5"});
  expect_error<ValueError>("nonlinearity", [] { nn::RNN(4, 8, {}, "sigmoid"); }, {"'tanh' or 'relu'", "'sigmoid'"});
  expect_error<ValueError>("cell nonlinearity", [] { nn::RNNCell(4, 8, true, "gelu"); }, {"RNNCell", "'gelu'"});
  expect_error<ValueError>("proj_size >= hidden_size", [] { nn::LSTM(4, 8, {}, 8); }, {"proj_size", "8"});
  expect_error<ValueError>("proj_size < 0", [] { nn::LSTM(4, 8, {}, -1); }, {"proj_size", "-1"});
  expect_error<ValueError>("cell input_size 0", [] { nn::GRUCell(0, 8); }, {"GRUCell", "input_size=0"});

  nn::LSTM lstm(4, 8, {.num_layers = 2});
  expect_error<ShapeError>("4-D input", [&] { lstm.forward(zeros({2, 3, 4, 5}), {}, {}); },
                           {"LSTM", "(L, N, H_in)", "(2, 3, 4, 5)"});
  expect_error<ShapeError>("features", [&] { lstm.forward(zeros({5, 3, 7}), {}, {}); },
                           {"(5, 3, 7)", "7 features", "input_size=4"});
  expect_error<ShapeError>("no steps", [&] { lstm.forward(zeros({0, 3, 4}), {}, {}); }, {"(0, 3, 4)", "no steps"});
  expect_error<ShapeError>("h0 layers", [&] { lstm.forward(zeros({5, 3, 4}), zeros({1, 3, 8}), zeros({2, 3, 8})); },
                           {"h0 (1, 3, 8) must be (2, 3, 8)", "(5, 3, 4)"});
  expect_error<ShapeError>("c0 batch", [&] { lstm.forward(zeros({5, 3, 4}), zeros({2, 3, 8}), zeros({2, 2, 8})); },
                           {"c0 (2, 2, 8) must be (2, 3, 8)"});
  expect_error<ShapeError>("3-D h0 for unbatched input",
                           [&] { lstm.forward(zeros({5, 4}), zeros({2, 1, 8}), zeros({2, 1, 8})); },
                           {"h0 (2, 1, 8) must be (2, 8)", "(5, 4)"});
  expect_error<ValueError>("h0 without c0", [&] { lstm.forward(zeros({5, 3, 4}), zeros({2, 3, 8}), {}); },
                           {"h0 and c0 must be given together", "h0 alone"});
  nn::GRU gru(4, 8, {.batch_first = true, .bidirectional = true});
  expect_error<ShapeError>("batch-first h0", [&] { gru.forward(zeros({3, 5, 4}), zeros({2, 5, 8})); },
                           {"h0 (2, 5, 8) must be (2, 3, 8)"});
  expect_error<ShapeError>("batch-first input", [&] { gru.forward(zeros({3}), {}); }, {"(N, L, H_in)", "(3,)"});

  nn::LSTMCell cell(4, 8);
  expect_error<ShapeError>("cell input", [&] { cell.forward(zeros({2, 5}), {}, {}); }, {"LSTMCell", "(N, 4)", "(2, 5)"});
  expect_error<ShapeError>("cell hx", [&] { cell.forward(zeros({2, 4}), zeros({3, 8}), zeros({2, 8})); },
                           {"hx (3, 8) must be (2, 8)"});
  expect_error<ShapeError>("unbatched cell hx", [&] { cell.forward(zeros({4}), zeros({1, 8}), zeros({8})); },
                           {"hx (1, 8) must be (8,)"});
  expect_error<ValueError>("cx without hx", [&] { cell.forward(zeros({4}), {}, zeros({8})); }, {"cx alone"});
}
}  // TEST_SUITE
