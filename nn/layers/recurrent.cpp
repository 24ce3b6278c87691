// RNN, LSTM, GRU and their cells. The formulas are those of PyTorch's documentation of torch.nn.RNN,
// LSTM and GRU; the steps below are shared by the layers and the cells.
#include "nn/layers/recurrent.h"

#include <cmath>

#include "nn/dropout.h"
#include "nn/init.h"
#include "tensor/decimal.h"
#include "tensor/error.h"

namespace ember::nn {

namespace {

// One step from x_proj = x W_ih^T + b_ih (which the layers compute for all steps at once) and the
// previous state.
Tensor rnn_step(const Tensor& x_proj, const Tensor& h, const RecurrentWeights& w, bool relu_activation) {
  const Tensor pre = x_proj + linear(h, w.weight_hh, w.bias_hh);
  return relu_activation ? relu(pre) : tanh(pre);
}

LSTMState lstm_step(const Tensor& x_proj, const LSTMState& state, const RecurrentWeights& w) {
  const std::vector<Tensor> gates = chunk(x_proj + linear(state.h, w.weight_hh, w.bias_hh), 4, -1);  // i, f, g, o
  const Tensor c = sigmoid(gates[1]) * state.c + sigmoid(gates[0]) * tanh(gates[2]);
  const Tensor h = sigmoid(gates[3]) * tanh(c);
  return {w.weight_hr.defined() ? linear(h, w.weight_hr) : h, c};
}

Tensor gru_step(const Tensor& x_proj, const Tensor& h, const RecurrentWeights& w) {
  // The hidden part of n is gated by r before it meets the input part, so the two stay apart.
  const std::vector<Tensor> x = chunk(x_proj, 3, -1);                                // r, z, n
  const std::vector<Tensor> hh = chunk(linear(h, w.weight_hh, w.bias_hh), 3, -1);  // r, z, n
  const Tensor r = sigmoid(x[0] + hh[0]), z = sigmoid(x[1] + hh[1]);
  const Tensor n = tanh(x[2] + r * hh[2]);
  return n + z * (h - n);  // (1 - z) * n + z * h in one product fewer
}

bool is_relu(const std::string& type, const std::string& nonlinearity) {
  if (nonlinearity != "tanh" && nonlinearity != "relu")
    throw ValueError(type + ": nonlinearity must be 'tanh' or 'relu', got '" + nonlinearity + "'");
  return nonlinearity == "relu";
}

void check_sizes(const std::string& type, int64_t input_size, int64_t hidden_size) {
  if (input_size <= 0 || hidden_size <= 0)
    throw ValueError(type + ": input_size and hidden_size must be positive, got input_size=" +
                     std::to_string(input_size) + " hidden_size=" + std::to_string(hidden_size));
}

// PyTorch's init of every recurrent parameter.
void draw_uniform(const std::vector<Tensor>& params, int64_t hidden_size) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (Tensor t : params) init::uniform_(t, -bound, bound);
}

void check_pair(const std::string& type, const Tensor& h, const Tensor& c, const char* h_name, const char* c_name) {
  if (h.defined() != c.defined())
    throw ValueError(type + ": " + h_name + " and " + c_name + " must be given together, or neither for zeros; got " +
                     (h.defined() ? h_name : c_name) + " alone");
}

}  // namespace

// ---- the layers

RecurrentLayer::RecurrentLayer(Cell cell, const std::string& type, int64_t input, int64_t hidden,
                               const RecurrentOptions& o, int64_t proj)
    : input_size(input), hidden_size(hidden), proj_size(proj), options(o), cell_(cell) {
  check_sizes(type, input, hidden);
  if (o.num_layers <= 0) throw ValueError(type + ": num_layers must be positive, got " + std::to_string(o.num_layers));
  if (!(o.dropout >= 0 && o.dropout <= 1))
    throw ValueError(type + ": dropout must be in [0, 1], got " + decimal_text(o.dropout));
  if (proj < 0 || (proj > 0 && proj >= hidden))
    throw ValueError(type + ": proj_size must be in [0, hidden_size=" + std::to_string(hidden) + "), got " +
                     std::to_string(proj));
  const int64_t gates = cell == Cell::lstm ? 4 : cell == Cell::gru ? 3 : 1;
  const int64_t D = num_directions(), H_out = state_size();
  for (int64_t k = 0; k < o.num_layers; ++k) {
    for (int64_t d = 0; d < D; ++d) {
      const std::string suffix = "_l" + std::to_string(k) + (d == 1 ? "_reverse" : "");
      const int64_t layer_input = k == 0 ? input : D * H_out;
      RecurrentWeights w;
      w.weight_ih = register_parameter("weight_ih" + suffix, empty({gates * hidden, layer_input}));
      w.weight_hh = register_parameter("weight_hh" + suffix, empty({gates * hidden, H_out}));
      if (o.bias) {
        w.bias_ih = register_parameter("bias_ih" + suffix, empty({gates * hidden}));
        w.bias_hh = register_parameter("bias_hh" + suffix, empty({gates * hidden}));
      }
      if (proj > 0) w.weight_hr = register_parameter("weight_hr" + suffix, empty({proj, hidden}));
      weights.push_back(w);
    }
  }
  reset_parameters();
}

void RecurrentLayer::reset_parameters() { draw_uniform(parameters(false), hidden_size); }

std::string RecurrentLayer::extra_repr() const {
  std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
  if (proj_size > 0) s += ", proj_size=" + std::to_string(proj_size);
  if (options.num_layers != 1) s += ", num_layers=" + std::to_string(options.num_layers);
  if (!options.bias) s += ", bias=False";
  if (options.batch_first) s += ", batch_first=True";
  if (options.dropout != 0) s += ", dropout=" + decimal_text(options.dropout);
  if (options.bidirectional) s += ", bidirectional=True";
  return s;
}

void RecurrentLayer::check_input(const Tensor& input) const {
  if (input.dim() != 2 && input.dim() != 3)
    throw ShapeError(name() + ": input must be " + (options.batch_first ? "(N, L, H_in)" : "(L, N, H_in)") +
                     " or (L, H_in) unbatched, got " + to_string(input.shape()));
  if (input.size(-1) != input_size)
    throw ShapeError(name() + ": input " + to_string(input.shape()) + " has " + std::to_string(input.size(-1)) +
                     " features, expected input_size=" + std::to_string(input_size));
  const int64_t steps = input.dim() == 3 && options.batch_first ? input.size(1) : input.size(0);
  if (steps == 0) throw ShapeError(name() + ": input " + to_string(input.shape()) + " has no steps");
}

// (D*num_layers, N, size), or (D*num_layers, size) for an unbatched input.
Shape RecurrentLayer::state_shape(const Tensor& input, int64_t size) const {
  const int64_t layers = num_directions() * options.num_layers;
  if (input.dim() == 2) return {layers, size};
  return {layers, input.size(options.batch_first ? 0 : 1), size};
}

void RecurrentLayer::check_state(const Tensor& state, const char* what, const Shape& expected,
                                 const Tensor& input) const {
  if (state.defined() && !(state.shape() == expected))
    throw ShapeError(name() + ": " + what + " " + to_string(state.shape()) + " must be " + to_string(expected) +
                     " for input " + to_string(input.shape()));
}

RecurrentOutput RecurrentLayer::run(const Tensor& input, const Tensor& h0, const Tensor& c0) {
  check_input(input);
  const bool lstm = cell_ == Cell::lstm;
  const Shape h_shape = state_shape(input, state_size()), c_shape = state_shape(input, hidden_size);
  check_state(h0, "h0", h_shape, input);
  if (lstm) check_state(c0, "c0", c_shape, input);
  // Everything below runs on (L, N, features) and states (D*num_layers, N, size).
  const bool batched = input.dim() == 3;
  Tensor x = !batched ? unsqueeze(input, 1) : options.batch_first ? input.transpose(0, 1) : input;
  const TensorOptions like_input = TensorOptions(input.dtype()).with_device(input.device());
  const auto initial = [&](const Tensor& given, const Shape& shape) {
    if (given.defined()) return batched ? given : unsqueeze(given, 1);
    return zeros(batched ? shape : Shape{shape[0], 1, shape[1]}, like_input);
  };
  const Tensor h_init = initial(h0, h_shape);
  const Tensor c_init = lstm ? initial(c0, c_shape) : Tensor();

  const int64_t L = x.size(0), D = num_directions();
  std::vector<Tensor> h_n, c_n;
  for (int64_t k = 0; k < options.num_layers; ++k) {
    std::vector<Tensor> directions;
    for (int64_t d = 0; d < D; ++d) {
      const RecurrentWeights& w = weights[k * D + d];
      const Tensor x_proj = linear(x, w.weight_ih, w.bias_ih);  // every step's input part in one product
      LSTMState state{select(h_init, 0, k * D + d), lstm ? select(c_init, 0, k * D + d) : Tensor()};
      std::vector<Tensor> outputs(L);
      for (int64_t s = 0; s < L; ++s) {
        const int64_t t = d == 0 ? s : L - 1 - s;
        const Tensor x_t = select(x_proj, 0, t);
        switch (cell_) {
          case Cell::rnn_tanh: state.h = rnn_step(x_t, state.h, w, false); break;
          case Cell::rnn_relu: state.h = rnn_step(x_t, state.h, w, true); break;
          case Cell::lstm: state = lstm_step(x_t, state, w); break;
          case Cell::gru: state.h = gru_step(x_t, state.h, w); break;
        }
        outputs[t] = state.h;
      }
      directions.push_back(stack(outputs, 0));
      h_n.push_back(state.h);
      if (lstm) c_n.push_back(state.c);
    }
    x = D == 1 ? directions[0] : cat(directions, 2);
    if (k + 1 < options.num_layers) x = dropout(x, options.dropout, is_training());
  }
  RecurrentOutput out{x, stack(h_n, 0), lstm ? stack(c_n, 0) : Tensor()};
  if (!batched) {
    out.output = squeeze(out.output, 1);
    out.h_n = squeeze(out.h_n, 1);
    if (lstm) out.c_n = squeeze(out.c_n, 1);
  } else if (options.batch_first) {
    out.output = out.output.transpose(0, 1);
  }
  return out;
}

RNN::RNN(int64_t input, int64_t hidden, const RecurrentOptions& o, const std::string& nl)
    : RecurrentLayer(is_relu("RNN", nl) ? Cell::rnn_relu : Cell::rnn_tanh, "RNN", input, hidden, o, 0),
      nonlinearity(nl) {}

std::string RNN::extra_repr() const {
  return RecurrentLayer::extra_repr() + (nonlinearity == "tanh" ? "" : ", nonlinearity='" + nonlinearity + "'");
}

RecurrentOutput RNN::forward(const Tensor& input, const Tensor& h0) { return run_hooked(input, h0, {}); }

LSTM::LSTM(int64_t input, int64_t hidden, const RecurrentOptions& o, int64_t proj)
    : RecurrentLayer(Cell::lstm, "LSTM", input, hidden, o, proj) {}

RecurrentOutput LSTM::forward(const Tensor& input, const Tensor& h0, const Tensor& c0) {
  check_pair("LSTM", h0, c0, "h0", "c0");
  return run_hooked(input, h0, c0);
}

GRU::GRU(int64_t input, int64_t hidden, const RecurrentOptions& o)
    : RecurrentLayer(Cell::gru, "GRU", input, hidden, o, 0) {}

RecurrentOutput GRU::forward(const Tensor& input, const Tensor& h0) { return run_hooked(input, h0, {}); }

// ---- the cells

RecurrentCell::RecurrentCell(const std::string& type, int64_t input, int64_t hidden, bool bias, int64_t gates)
    : input_size(input), hidden_size(hidden) {
  check_sizes(type, input, hidden);
  weight_ih = register_parameter("weight_ih", empty({gates * hidden, input}));
  weight_hh = register_parameter("weight_hh", empty({gates * hidden, hidden}));
  if (bias) {
    bias_ih = register_parameter("bias_ih", empty({gates * hidden}));
    bias_hh = register_parameter("bias_hh", empty({gates * hidden}));
  }
  reset_parameters();
}

void RecurrentCell::reset_parameters() { draw_uniform(parameters(false), hidden_size); }

std::string RecurrentCell::extra_repr() const {
  return std::to_string(input_size) + ", " + std::to_string(hidden_size) + (bias_ih.defined() ? "" : ", bias=False");
}

Tensor RecurrentCell::batched_input(const Tensor& input) const {
  if ((input.dim() != 1 && input.dim() != 2) || input.size(-1) != input_size)
    throw ShapeError(name() + ": input must be (N, " + std::to_string(input_size) + ") or " +
                     to_string(Shape{input_size}) + " unbatched, got " + to_string(input.shape()));
  return input.dim() == 1 ? unsqueeze(input, 0) : input;
}

Tensor RecurrentCell::batched_state(const Tensor& state, const char* what, const Tensor& input) const {
  const Shape expected = input.dim() == 1 ? Shape{hidden_size} : Shape{input.size(0), hidden_size};
  if (!state.defined()) return zeros({input.dim() == 1 ? 1 : input.size(0), hidden_size},
                                     TensorOptions(input.dtype()).with_device(input.device()));
  if (!(state.shape() == expected))
    throw ShapeError(name() + ": " + what + " " + to_string(state.shape()) + " must be " + to_string(expected) +
                     " for input " + to_string(input.shape()));
  return input.dim() == 1 ? unsqueeze(state, 0) : state;
}

Tensor RecurrentCell::project(const Tensor& x) const { return linear(x, weight_ih, bias_ih); }

RNNCell::RNNCell(int64_t input, int64_t hidden, bool bias, const std::string& nl)
    : RecurrentCell("RNNCell", input, hidden, bias, 1), nonlinearity(nl) {
  is_relu("RNNCell", nl);
}

std::string RNNCell::extra_repr() const {
  return RecurrentCell::extra_repr() + (nonlinearity == "tanh" ? "" : ", nonlinearity='" + nonlinearity + "'");
}

Tensor RNNCell::forward(const Tensor& input, const Tensor& hx) {
  return hooked(input, [&] { return step(input, hx); }, [](const Tensor& h) { return h; });
}

Tensor RNNCell::step(const Tensor& input, const Tensor& hx) {
  const Tensor x = batched_input(input);
  const Tensor h = rnn_step(project(x), batched_state(hx, "hx", input), cell_weights(), nonlinearity == "relu");
  return input.dim() == 1 ? squeeze(h, 0) : h;
}

LSTMCell::LSTMCell(int64_t input, int64_t hidden, bool bias) : RecurrentCell("LSTMCell", input, hidden, bias, 4) {}

LSTMState LSTMCell::forward(const Tensor& input, const Tensor& hx, const Tensor& cx) {
  return hooked(input, [&] { return step(input, hx, cx); }, [](const LSTMState& s) { return s.h; });
}

LSTMState LSTMCell::step(const Tensor& input, const Tensor& hx, const Tensor& cx) {
  check_pair("LSTMCell", hx, cx, "hx", "cx");
  const Tensor x = batched_input(input);
  const LSTMState state{batched_state(hx, "hx", input), batched_state(cx, "cx", input)};
  LSTMState next = lstm_step(project(x), state, cell_weights());
  if (input.dim() == 1) next = {squeeze(next.h, 0), squeeze(next.c, 0)};
  return next;
}

GRUCell::GRUCell(int64_t input, int64_t hidden, bool bias) : RecurrentCell("GRUCell", input, hidden, bias, 3) {}

Tensor GRUCell::forward(const Tensor& input, const Tensor& hx) {
  return hooked(input, [&] { return step(input, hx); }, [](const Tensor& h) { return h; });
}

Tensor GRUCell::step(const Tensor& input, const Tensor& hx) {
  const Tensor x = batched_input(input);
  const Tensor h = gru_step(project(x), batched_state(hx, "hx", input), cell_weights());
  return input.dim() == 1 ? squeeze(h, 0) : h;
}

}  // namespace ember::nn
