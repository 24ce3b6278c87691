// 08_gradient_penalty: double backward, as research code uses it. WGAN-GP (Gulrajani et al. 2017)
// keeps a critic D near 1-Lipschitz by penalising its input gradient on points x^ between real and
// fake samples:
//     loss = E[D(fake)] - E[D(real)] + lambda E[(||grad_x D(x^)|| - 1)^2]
// The penalty holds a gradient, so training it differentiates a gradient: autograd::grad with
// create_graph records the backward pass as a graph of its own, and backward() then runs through
// it. ember's vjps are written with differentiable ops, so this needs nothing special.
// Part 1 checks the penalty's gradient with respect to the critic's weights against finite
// differences (gradcheck in float64). Part 2 trains a critic between two Gaussians N(0, I) and
// N(d e1, I): their Wasserstein-1 distance is d, reached by the critic D(x) = x1 of slope 1. The
// penalty is soft, so the trained critic trades a little penalty for a steeper slope: a critic of
// slope k scores k d - lambda (k - 1)^2, best at k = 1 + d / (2 lambda), so its estimate
// E[D(real)] - E[D(fake)] should land on d (1 + d / (2 lambda)), 2.2 for d = 2 and lambda = 10, and
// its input gradient's norm near k.
// Without the penalty (lambda = 0) nothing bounds the slope and the estimate runs away.
//
// Read next: autograd/engine.h (grad: create_graph, retain_graph), autograd/engine.cpp (how the
// backward of a backward is recorded), tensor/elementwise.cpp (the vjps of tanh and of its backward:
// each a differentiable op), autograd/gradcheck.h (gradcheck and gradgradcheck).
//
//   ninja -C build examples/08_gradient_penalty && build/examples/08_gradient_penalty
//   build/examples/08_gradient_penalty --distance 5 --steps 1000
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "checks.h"
#include "flags.h"
#include "optim/adam.h"
#include "tensor/ops.h"

using namespace ember;
using ember_examples::Checks;
using ember_examples::number_in;
using ember_examples::run_checked;

namespace {

// The critic D: R^2 -> R as a plain function of its weights {w1, b1, w2, b2, w3, b3}: two hidden
// layers of tanh, which is smooth, so finite differences of its derivatives are clean.
Tensor critic(const std::vector<Tensor>& w, const Tensor& x) {
  const Tensor h = tanh(linear(tanh(linear(x, w[0], w[1])), w[2], w[3]));
  return linear(h, w[4], w[5]).squeeze(1);  // (B, 2) -> (B)
}

std::vector<Tensor> init_critic(int64_t hidden, DType dtype, Generator& gen) {
  const auto layer = [&](int64_t in, int64_t out) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));  // PyTorch's Linear init
    return std::vector<Tensor>{(rand({out, in}, dtype, &gen) * 2.0 - 1.0) * bound,
                               (rand({out}, dtype, &gen) * 2.0 - 1.0) * bound};
  };
  std::vector<Tensor> w;
  for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{{2, hidden}, {hidden, hidden}, {hidden, 1}})
    for (Tensor& t : layer(in, out)) w.push_back(t.requires_grad_());
  return w;
}

// ||grad_x D(x^)|| at x^ = e real + (1 - e) fake, e ~ U[0, 1) per sample: (B).
Tensor gradient_norms(const std::vector<Tensor>& w, const Tensor& real, const Tensor& fake, Generator& gen) {
  // A gradient needs a graph even where the caller records none (gradcheck evaluates its finite
  // differences under NoGradGuard).
  EnableGradGuard grad_mode;
  const Tensor e = rand({real.size(0), 1}, real.dtype(), &gen);
  const Tensor x_hat = (e * real + (1.0 - e) * fake).detach().requires_grad_();
  // create_graph: the gradient is itself a recorded function of the weights, so the penalty can be
  // differentiated with respect to them (the second backward).
  const Tensor grad_x = autograd::grad({sum(critic(w, x_hat))}, {x_hat}, {}, /*retain_graph=*/true,
                                       /*create_graph=*/true)[0];  // (B, 2)
  return norm(grad_x, 2.0, {1});
}

// WGAN-GP's penalty, E[(||grad_x D(x^)|| - 1)^2].
Tensor gradient_penalty(const std::vector<Tensor>& w, const Tensor& real, const Tensor& fake, Generator& gen) {
  return mean(square(gradient_norms(w, real, fake, gen) - 1.0));
}

void check_against_finite_differences(Checks& checks) {
  std::printf("\n== the penalty's gradient against finite differences (float64)\n");
  Generator gen(3);
  const std::vector<Tensor> w = init_critic(4, DType::f64, gen);
  const Tensor real = randn({5, 2}, DType::f64, &gen), fake = randn({5, 2}, DType::f64, &gen);
  // gradcheck differentiates fn's output with respect to its inputs (the weights) twice over:
  // through backward() (which runs the second backward) and by central differences.
  const auto fn = [&](const std::vector<Tensor>& weights) {
    Generator same(11);  // the same interpolation points at every evaluation
    return gradient_penalty(weights, real, fake, same);
  };
  const GradcheckResult r = gradcheck(fn, w);
  std::printf("gradcheck: %lld entries, largest error %.3g\n", static_cast<long long>(r.entries), r.max_abs_error);
  checks.expect(r.entries == 4 * 2 + 4 + 4 * 4 + 4 + 4 + 1,
                "d(penalty)/d(weights) through double backward matches finite differences, every weight");
}

struct Critique {
  double estimate;   // E[D(real)] - E[D(fake)] on fresh samples
  double mean_norm;  // the mean of ||grad_x D|| between them
};

// Trains the critic between N(0, I) and N(distance e1, I) in 2-D and returns its estimate of W1.
Critique train_critic(double lambda, double distance, int steps, uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> w = init_critic(64, DType::f32, gen);
  optim::AdamOptions options;  // WGAN-GP's Adam has beta1 = 0 (paper) and 0.9 here, a faster start
  options.lr = 1e-2;
  options.beta1 = 0.5;
  options.beta2 = 0.9;
  optim::Adam adam(w, options);
  const Tensor shift = from_vector<float>({static_cast<float>(distance), 0.0f}, {2});
  const auto sample = [&](int64_t n) { return std::pair{randn({n, 2}, {}, &gen) + shift, randn({n, 2}, {}, &gen)}; };
  for (int step = 0; step < steps; ++step) {
    const auto [real, fake] = sample(256);
    adam.zero_grad();
    Tensor loss = mean(critic(w, fake)) - mean(critic(w, real));
    if (lambda > 0) loss = loss + gradient_penalty(w, real, fake, gen) * lambda;
    loss.backward();  // with the penalty: the second backward, through the recorded gradient
    adam.step();
  }
  const auto [real, fake] = sample(8192);
  const double estimate = (mean(critic(w, real)) - mean(critic(w, fake))).item<double>();
  return {estimate, mean(gradient_norms(w, real, fake, gen)).item<double>()};
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 300;
  double lambda = 10, distance = 2;
  uint64_t seed = 0;
  CLI::App app{"Step 8 of the example ladder: a WGAN-GP gradient penalty, trained through double backward.",
               "08_gradient_penalty"};
  app.add_option("--steps", steps, "critic steps")->check(CLI::Range(1, 1000000))->capture_default_str();
  app.add_option("--lambda", lambda, "weight of the penalty (the paper's 10)")->check(number_in(0.01, 1e6))
      ->capture_default_str();
  app.add_option("--distance", distance, "distance between the two Gaussians' means: their W1 distance")
      ->check(number_in(0.1, 100.0))->capture_default_str();
  app.add_option("--seed", seed, "seed of the weights and the samples")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  return run_checked("08_gradient_penalty", [&](Checks& checks) {
    check_against_finite_differences(checks);

    std::printf("\n== a critic between N(0, I) and N(%g e1, I): W1 = %g\n", distance, distance);
    const Critique with = train_critic(lambda, distance, steps, seed);
    std::printf("lambda %g: estimate %.4f, mean gradient norm %.4f\n", lambda, with.estimate, with.mean_norm);
    const Critique without = train_critic(0, distance, steps, seed);
    std::printf("lambda 0:  estimate %.4f, mean gradient norm %.4f\n", without.estimate, without.mean_norm);
    const double slope = 1 + distance / (2 * lambda);
    char what[200];
    std::snprintf(what, sizeof what, "with the penalty the critic's estimate %.3f is within 5%% of the penalised "
                  "optimum d (1 + d / 2 lambda) = %.3f", with.estimate, slope * distance);
    checks.expect(std::fabs(with.estimate - slope * distance) <= 0.05 * slope * distance, what);
    std::snprintf(what, sizeof what, "its mean gradient norm %.3f is within 10%% of that optimum's slope 1 + d / 2 lambda = "
                  "%.3f", with.mean_norm, slope);
    checks.expect(std::fabs(with.mean_norm - slope) <= 0.1 * slope, what);
    std::snprintf(what, sizeof what, "without it the estimate runs past W1: %.3f > 1.5 x %g", without.estimate,
                  distance);
    checks.expect(without.estimate > 1.5 * distance, what);
  });
}
