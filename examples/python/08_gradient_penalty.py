"""08_gradient_penalty: double backward, as research code uses it, from Python
(examples/08_gradient_penalty.cpp's twin). WGAN-GP (Gulrajani et al. 2017) keeps a critic D near
1-Lipschitz by penalising its input gradient on points x^ between real and fake samples:
    loss = E[D(fake)] - E[D(real)] + lambda E[(||grad_x D(x^)|| - 1)^2]
The penalty holds a gradient, so training it differentiates a gradient: ember.autograd.grad with
create_graph=True records the backward pass as a graph of its own, and backward() then runs through
it. ember's vjps are written with differentiable ops, so this needs nothing special.
Part 1 checks the penalty's gradient with respect to the critic's weights against finite differences
(gradcheck in float64). Part 2 trains a critic between two Gaussians N(0, I) and N(d e1, I): their
Wasserstein-1 distance is d, reached by the critic D(x) = x1 of slope 1. The penalty is soft, so the
trained critic trades a little penalty for a steeper slope: a critic of slope k scores
k d - lambda (k - 1)^2, best at k = 1 + d / (2 lambda), so its estimate E[D(real)] - E[D(fake)] should
land on d (1 + d / (2 lambda)), 2.2 for d = 2 and lambda = 10, and its input gradient's norm near k.
Without the penalty (lambda = 0) nothing bounds the slope and the estimate runs away.

Read next: python/ember/autograd.py (grad: create_graph, retain_graph; gradcheck),
python/ember/bind_autograd.cpp (_grad: the call into the engine, with the GIL released), then the
C++ it calls: autograd/engine.h (grad), autograd/engine.cpp (how the backward of a backward is
recorded), tensor/elementwise.cpp (the vjps of tanh and of its backward: each a differentiable op),
autograd/gradcheck.h (gradcheck and gradgradcheck).

    PYTHONPATH=build/python python3 examples/python/08_gradient_penalty.py
    PYTHONPATH=build/python python3 examples/python/08_gradient_penalty.py --distance 5 --steps 1000
"""

import argparse
import math

import ember
import ember.nn.functional as F
from ladder_checks import run_checked
from ladder_flags import add_number


def critic(w, x):
    """The critic D: R^2 -> R as a plain function of its weights [w1, b1, w2, b2, w3, b3]: two hidden layers
    of tanh, which is smooth, so finite differences of its derivatives are clean. (B, 2) -> (B)."""
    h = F.linear(F.linear(x, w[0], w[1]).tanh(), w[2], w[3]).tanh()
    return F.linear(h, w[4], w[5]).squeeze(1)


def init_critic(hidden, dtype, gen):
    """Weights of 2 -> hidden -> hidden -> 1 with PyTorch's Linear initialisation, U(-1/sqrt(in), 1/sqrt(in))."""
    w = []
    for n_in, n_out in ((2, hidden), (hidden, hidden), (hidden, 1)):
        bound = 1.0 / math.sqrt(n_in)
        for shape in ((n_out, n_in), (n_out,)):
            w.append(((ember.rand(*shape, dtype=dtype, generator=gen) * 2.0 - 1.0) * bound).requires_grad_())
    return w


def gradient_norms(w, real, fake, gen):
    """||grad_x D(x^)|| at x^ = e real + (1 - e) fake, e ~ U[0, 1) per sample: (B)."""
    # A gradient needs a graph even where the caller records none (gradcheck evaluates its finite
    # differences with grad mode off).
    with ember.enable_grad():
        e = ember.rand(real.shape[0], 1, dtype=real.dtype, generator=gen)
        x_hat = (e * real + (1.0 - e) * fake).detach().requires_grad_()
        # create_graph: the gradient is itself a recorded function of the weights, so the penalty can be
        # differentiated with respect to them (the second backward).
        (grad_x,) = ember.autograd.grad(critic(w, x_hat).sum(), [x_hat], create_graph=True)  # (B, 2)
        return grad_x.norm(2, dim=1)


def gradient_penalty(w, real, fake, gen):
    """WGAN-GP's penalty, E[(||grad_x D(x^)|| - 1)^2]."""
    return (gradient_norms(w, real, fake, gen) - 1.0).square().mean()


def check_against_finite_differences(checks):
    print("\n== the penalty's gradient against finite differences (float64)")
    gen = ember.Generator(3)
    w = init_critic(4, ember.float64, gen)
    real, fake = ember.randn(5, 2, dtype=ember.float64, generator=gen), ember.randn(5, 2, dtype=ember.float64,
                                                                                    generator=gen)

    # gradcheck differentiates fn's output with respect to its inputs (the weights) twice over: through
    # backward() (which runs the second backward) and by central differences.
    def fn(*weights):
        return gradient_penalty(weights, real, fake, ember.Generator(11))  # the same points at every evaluation

    checks.expect(ember.autograd.gradcheck(fn, w, raise_exception=False), "d(penalty)/d(weights) through double "
                  f"backward matches finite differences, all {sum(t.numel() for t in w)} weights")


def train_critic(lam, distance, steps, seed):
    """Trains the critic between N(0, I) and N(distance e1, I) in 2-D; returns its estimate of W1 and the
    mean of ||grad_x D|| between the two."""
    gen = ember.Generator(seed)
    w = init_critic(64, ember.float32, gen)
    # WGAN-GP's Adam has beta1 = 0 (paper) and 0.9 here, a faster start
    adam = ember.optim.Adam(w, lr=1e-2, betas=(0.5, 0.9))
    shift = ember.tensor([distance, 0.0])

    def sample(n):
        return ember.randn(n, 2, generator=gen) + shift, ember.randn(n, 2, generator=gen)

    for _ in range(steps):
        real, fake = sample(256)
        adam.zero_grad()
        loss = critic(w, fake).mean() - critic(w, real).mean()
        if lam > 0:
            loss = loss + gradient_penalty(w, real, fake, gen) * lam
        loss.backward()  # with the penalty: the second backward, through the recorded gradient
        adam.step()
    real, fake = sample(8192)
    estimate = (critic(w, real).mean() - critic(w, fake).mean()).item()
    return estimate, gradient_norms(w, real, fake, gen).mean().item()


def main():
    parser = argparse.ArgumentParser(description="Step 8 of the example ladder: a WGAN-GP gradient penalty, trained "
                                     "through double backward.")
    add_number(parser, "--steps", int, 1, 1_000_000, 300, "critic steps")
    add_number(parser, "--lambda", float, 0.01, 1e6, 10.0, "weight of the penalty, the paper's 10", dest="lam")
    add_number(parser, "--distance", float, 0.1, 100.0, 2.0,
               "distance between the two Gaussians' means: their W1 distance")
    add_number(parser, "--seed", int, 0, 2**64 - 1, 0, "seed of the weights and the samples")
    args = parser.parse_args()

    def body(checks):
        check_against_finite_differences(checks)

        d, lam = args.distance, args.lam
        print(f"\n== a critic between N(0, I) and N({d:g} e1, I): W1 = {d:g}")
        estimate, mean_norm = train_critic(lam, d, args.steps, args.seed)
        print(f"lambda {lam:g}: estimate {estimate:.4f}, mean gradient norm {mean_norm:.4f}")
        estimate_free, mean_norm_free = train_critic(0, d, args.steps, args.seed)
        print(f"lambda 0:  estimate {estimate_free:.4f}, mean gradient norm {mean_norm_free:.4f}")
        slope = 1 + d / (2 * lam)
        checks.expect(abs(estimate - slope * d) <= 0.05 * slope * d, f"with the penalty the critic's estimate "
                      f"{estimate:.3f} is within 5% of the penalised optimum d (1 + d / 2 lambda) = {slope * d:.3f}")
        checks.expect(abs(mean_norm - slope) <= 0.1 * slope, f"its mean gradient norm {mean_norm:.3f} is within 10% of "
                      f"that optimum's slope 1 + d / 2 lambda = {slope:.3f}")
        checks.expect(estimate_free > 1.5 * d,
                      f"without it the estimate runs past W1: {estimate_free:.3f} > 1.5 x {d:g}")

    run_checked("08_gradient_penalty", body)


if __name__ == "__main__":
    main()
