/// @file
/// Recurrent layers with PyTorch's semantics: RNN, LSTM and GRU over whole sequences, and RNNCell,
/// LSTMCell and GRUCell for one step. They are composed of ember's differentiable ops (linear,
/// sigmoid, tanh, relu, chunk, stack, dropout), so autograd and every backend serve them with no
/// kernel of their own. Parameter names, shapes, gate order (LSTM: i, f, g, o; GRU: r, z, n) and
/// initialisation are PyTorch's, so a PyTorch state dict loads into them.
///
/// Sizes below: L steps, N sequences in the batch, H_in input features, H hidden_size, H_out the
/// size of the hidden state (proj_size for an LSTM with projections, else H), D = 2 when
/// bidirectional, else 1.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "tensor/nvtx.h"

namespace ember::nn {

/// The settings RNN, LSTM and GRU share beyond their sizes, with PyTorch's defaults.
struct RecurrentOptions {
  int64_t num_layers = 1;      ///< layers stacked, each reading the output of the one below
  bool bias = true;            ///< whether every layer has bias_ih and bias_hh
  bool batch_first = false;    ///< input and output are (N, L, features) instead of (L, N, features); states never are
  double dropout = 0.0;        ///< dropout of each layer's output except the last's, in training mode only
  bool bidirectional = false;  ///< a second direction in every layer, reading the sequence backwards
};

/// What RNN, LSTM and GRU return.
struct RecurrentOutput {
  /// The last layer's hidden state at every step, both directions concatenated: (L, N, D*H_out),
  /// (N, L, D*H_out) batch first, (L, D*H_out) for an unbatched input.
  Tensor output;
  /// The final hidden state of every layer and direction (layer k's reverse direction at 2k + 1):
  /// (D*num_layers, N, H_out), or (D*num_layers, H_out) for an unbatched input.
  Tensor h_n;
  /// LSTM's final cell states, (D*num_layers, N, H) or (D*num_layers, H); undefined for RNN and GRU.
  Tensor c_n;
};

/// The parameters of one layer and direction (PyTorch's weight_ih_l{k}, ...); G is the number of
/// gates (RNN 1, LSTM 4, GRU 3). Undefined where the layer has none.
struct RecurrentWeights {
  /// (G*H, input features of the layer): H_in for layer 0, D*H_out above @{
  Tensor weight_ih;
  /// @}
  /// (G*H, H_out) @{
  Tensor weight_hh;
  /// @}
  /// (G*H) each, undefined without bias @{
  Tensor bias_ih, bias_hh;
  /// @}
  /// (proj_size, H): LSTM's projection of the hidden state, undefined without one @{
  Tensor weight_hr;
  /// @}
};

/// What LSTMCell returns, and the state an LSTM step carries.
struct LSTMState {
  Tensor h;  ///< the hidden state, (N, H_out) or (H_out) unbatched
  Tensor c;  ///< the cell state, (N, H) or (H) unbatched
};

/// The base of the recurrent layers and cells. Their forward takes states beside the input and
/// returns more than one tensor, so it is public (as MultiheadAttention's); it runs the forward
/// hooks and profiler range that a call m(x) has, so hooks and ZeRO-3's gathering of parameters
/// see both ways in. m(x) itself runs from zero states and gives the output alone.
class RecurrentModule : public UnaryModule {
 protected:
  /// compute() with the forward hooks and profiler range of a call m(x) around it; the hooks see
  /// `input` and the tensor output_of(result).
  template <class Compute, class OutputOf>
  auto hooked(const Tensor& input, Compute&& compute, OutputOf&& output_of) {
    std::optional<nvtx::ModuleScope> range;
    if (nvtx::enabled()) range.emplace(range_label());
    if (has_forward_hooks()) run_forward_pre_hooks(input);
    auto result = compute();
    if (has_forward_hooks()) run_forward_hooks(input, output_of(result));
    return result;
  }
};

/// The part RNN, LSTM and GRU share (PyTorch's RNNBase): the parameters of every layer and
/// direction, the checks of the input and initial states, and the loop over layers, directions and
/// steps. Each layer projects the input of all its steps in one product (x W_ih^T + b_ih over the
/// whole sequence), then steps through time for the hidden part.
class RecurrentLayer : public RecurrentModule {
 public:
  std::string extra_repr() const override;
  /// Draws every parameter from U(-1/sqrt(H), 1/sqrt(H)) (PyTorch's init).
  void reset_parameters();
  int64_t num_directions() const { return options.bidirectional ? 2 : 1; }  ///< D: 2 when bidirectional, else 1
  int64_t state_size() const { return proj_size > 0 ? proj_size : hidden_size; }  ///< H_out

  // The settings are const: the parameters were registered for them.
  /// H_in and H @{
  const int64_t input_size, hidden_size;
  /// @}
  const int64_t proj_size;         ///< LSTM's projection size (0: none); always 0 for RNN and GRU
  const RecurrentOptions options;  ///< layers, bias, batch_first, dropout, bidirectional
  /// The parameters of layer k in direction d at index k*D + d (the tensors the module registered).
  std::vector<RecurrentWeights> weights;

 protected:
  /// The step a layer repeats.
  enum class Cell { rnn_tanh, rnn_relu, lstm, gru };
  /// Registers the parameters of every layer and direction with PyTorch's names and draws them.
  /// ValueError naming the value unless the sizes and num_layers are positive, dropout is in
  /// [0, 1] and proj_size is in [0, hidden_size).
  RecurrentLayer(Cell cell, const std::string& type, int64_t input_size, int64_t hidden_size,
                 const RecurrentOptions& options, int64_t proj_size);
  /// The layers over input from h0 (and, for an LSTM, c0); undefined states start at zeros.
  /// ShapeError naming the expected and the given shapes when input or a state does not fit.
  RecurrentOutput run(const Tensor& input, const Tensor& h0, const Tensor& c0);
  /// run() as a public forward calls it, with the hooks around (RecurrentModule::hooked).
  RecurrentOutput run_hooked(const Tensor& input, const Tensor& h0, const Tensor& c0) {
    return hooked(input, [&] { return run(input, h0, c0); }, [](const RecurrentOutput& r) { return r.output; });
  }

 private:
  Shape state_shape(const Tensor& input, int64_t size) const;
  void check_input(const Tensor& input) const;
  void check_state(const Tensor& state, const char* what, const Shape& expected, const Tensor& input) const;
  Cell cell_;
};

/// torch.nn.RNN: h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act tanh or relu.
class RNN : public RecurrentLayer {
 public:
  /// A stack of options.num_layers layers from input_size features to hidden_size; nonlinearity is
  /// "tanh" or "relu" (ValueError otherwise, and for the settings RecurrentLayer refuses).
  RNN(int64_t input_size, int64_t hidden_size, const RecurrentOptions& options = {},
      const std::string& nonlinearity = "tanh");
  std::string name() const override { return "RNN"; }
  std::string extra_repr() const override;
  /// The output sequence and final hidden states from h0 (zeros when undefined); c_n is undefined.
  RecurrentOutput forward(const Tensor& input, const Tensor& h0);
  const std::string nonlinearity;  ///< "tanh" or "relu"
 protected:
  Tensor forward(const Tensor& x) override { return run(x, {}, {}).output; }  ///< The output sequence from zero states.
};

/// torch.nn.LSTM: i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh
/// (split in four), c_t = f * c_{t-1} + i * g, h_t = o * tanh(c_t), then h_t W_hr^T with projections.
class LSTM : public RecurrentLayer {
 public:
  /// A stack of options.num_layers layers from input_size features to hidden_size, with proj_size > 0
  /// projecting each hidden state to proj_size (ValueError for the settings RecurrentLayer refuses).
  LSTM(int64_t input_size, int64_t hidden_size, const RecurrentOptions& options = {}, int64_t proj_size = 0);
  std::string name() const override { return "LSTM"; }
  /// The output sequence and final hidden and cell states from h0 and c0: both given, or both
  /// undefined for zeros (ValueError otherwise).
  RecurrentOutput forward(const Tensor& input, const Tensor& h0, const Tensor& c0);
 protected:
  Tensor forward(const Tensor& x) override { return run(x, {}, {}).output; }  ///< The output sequence from zero states.
};

/// torch.nn.GRU: r, z = sigmoid of x_t W_i{r,z}^T + b_i{r,z} + h_{t-1} W_h{r,z}^T + b_h{r,z},
/// n = tanh(x_t W_in^T + b_in + r * (h_{t-1} W_hn^T + b_hn)), h_t = (1 - z) * n + z * h_{t-1}.
class GRU : public RecurrentLayer {
 public:
  /// A stack of options.num_layers layers from input_size features to hidden_size (ValueError for the
  /// settings RecurrentLayer refuses).
  GRU(int64_t input_size, int64_t hidden_size, const RecurrentOptions& options = {});
  std::string name() const override { return "GRU"; }
  /// The output sequence and final hidden states from h0 (zeros when undefined); c_n is undefined.
  RecurrentOutput forward(const Tensor& input, const Tensor& h0);
 protected:
  Tensor forward(const Tensor& x) override { return run(x, {}, {}).output; }  ///< The output sequence from zero states.
};

/// The part RNNCell, LSTMCell and GRUCell share (PyTorch's RNNCellBase): one step of the matching
/// layer on input (N, H_in), or (H_in) unbatched, and states (N, H), or (H).
class RecurrentCell : public RecurrentModule {
 public:
  std::string extra_repr() const override;
  /// Draws every parameter from U(-1/sqrt(H), 1/sqrt(H)) (PyTorch's init).
  void reset_parameters();
  /// H_in and H (const: the parameters were registered for them) @{
  const int64_t input_size, hidden_size;
  /// @}
  /// (G*H, H_in), (G*H, H), and (G*H) each (undefined without bias), G the number of gates @{
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;
  /// @}
 protected:
  /// Registers weight_ih, weight_hh, bias_ih and bias_hh for `gates` gates and draws them;
  /// ValueError unless the sizes are positive.
  RecurrentCell(const std::string& type, int64_t input_size, int64_t hidden_size, bool bias, int64_t gates);
  /// input as (N, H_in): ShapeError naming its shape unless it is (N, H_in) or (H_in).
  Tensor batched_input(const Tensor& input) const;
  /// The state `what` as (N, H), zeros when undefined: ShapeError naming both shapes unless it is
  /// (N, H) for input (N, H_in) or (H) for input (H_in).
  Tensor batched_state(const Tensor& state, const char* what, const Tensor& input) const;
  /// The input part x W_ih^T + b_ih of a step on a batched input.
  Tensor project(const Tensor& x) const;
  /// The parameters as a RecurrentWeights, for the steps the layers take too.
  RecurrentWeights cell_weights() const { return {weight_ih, weight_hh, bias_ih, bias_hh, {}}; }
};

/// torch.nn.RNNCell: h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh), act tanh or relu.
class RNNCell : public RecurrentCell {
 public:
  /// nonlinearity is "tanh" or "relu" (ValueError otherwise, and unless the sizes are positive).
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true, const std::string& nonlinearity = "tanh");
  std::string name() const override { return "RNNCell"; }
  std::string extra_repr() const override;
  /// h' from input and hx (zeros when undefined).
  Tensor forward(const Tensor& input, const Tensor& hx);
  const std::string nonlinearity;  ///< "tanh" or "relu"
 protected:
  Tensor forward(const Tensor& x) override { return step(x, Tensor()); }  ///< h' from a zero state.
 private:
  Tensor step(const Tensor& input, const Tensor& hx);
};

/// torch.nn.LSTMCell: one LSTM step (see LSTM), without projections.
class LSTMCell : public RecurrentCell {
 public:
  /// ValueError unless the sizes are positive.
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  std::string name() const override { return "LSTMCell"; }
  /// (h', c') from input, hx and cx: both given, or both undefined for zeros (ValueError otherwise).
  LSTMState forward(const Tensor& input, const Tensor& hx, const Tensor& cx);
 protected:
  Tensor forward(const Tensor& x) override { return step(x, Tensor(), Tensor()).h; }  ///< h' from zero states.
 private:
  LSTMState step(const Tensor& input, const Tensor& hx, const Tensor& cx);
};

/// torch.nn.GRUCell: one GRU step (see GRU).
class GRUCell : public RecurrentCell {
 public:
  /// ValueError unless the sizes are positive.
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  std::string name() const override { return "GRUCell"; }
  /// h' from input and hx (zeros when undefined).
  Tensor forward(const Tensor& input, const Tensor& hx);
 protected:
  Tensor forward(const Tensor& x) override { return step(x, Tensor()); }  ///< h' from a zero state.
 private:
  Tensor step(const Tensor& input, const Tensor& hx);
};

}  // namespace ember::nn
