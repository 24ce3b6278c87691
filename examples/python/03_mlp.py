"""03_mlp: the first trained model, from Python (examples/03_mlp.cpp's twin). A module of two Linear
layers written by hand (an nn.Module subclass: attributes register themselves, forward, parameters),
the training step every later example repeats (zero_grad, forward, loss, backward, step) with SGD and
momentum, batches from a seeded DataLoader, and evaluation under ember.no_grad(). On Fashion-MNIST
when Debian's dataset-fashion-mnist is installed, else on synthetic images of its shape; it checks
that the loss went down and the test accuracy is far above chance.

Read next: python/ember/nn/modules.py (Module: registration, parameters(), train/eval, to; and
_CppModule, how nn.Linear wraps ember's C++ layer), python/ember/optim/__init__.py (SGD over the C++
optimizer), python/ember/utils/data.py (DataLoader: over Fashion-MNIST it runs ember's C++ loader, over
a TensorDataset it batches in Python), then the C++ they call: nn/layers/linear.cpp (Linear: one `linear`
primitive, PyTorch's initialisation), nn/loss.cpp (cross_entropy), optim/sgd.cpp (SGD::step_group: one
multi-tensor step), data/dataloader.h (the order of the batches depends only on the seed), and
examples/python/ladder_fit.py (the loop around the step).

    PYTHONPATH=build/python python3 examples/python/03_mlp.py
    PYTHONPATH=build/python python3 examples/python/03_mlp.py --steps 2000 --hidden 256
"""

import argparse

import ember
import ember.nn.functional as F
from ember import nn
from ladder_checks import run_checked
from ladder_data import add_fashion_mnist_flag, load_fashion_mnist
from ladder_fit import add_fit_options, expect_learned, fit
from ladder_flags import add_number


class TwoLayerMLP(nn.Module):
    """784 -> hidden -> 10 with a ReLU between. nn.models.MLP builds the same stack in C++."""

    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)  # a module assigned to an attribute registers itself
        self.fc2 = nn.Linear(hidden, out_features)

    def forward(self, x):
        # (B, 1, 28, 28) -> (B, 784) -> (B, hidden) -> (B, 10): logits, one score per class. Callers
        # write model(x), which runs the module's hooks around this.
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def main():
    parser = argparse.ArgumentParser(description="Step 3 of the example ladder: an MLP trained on Fashion-MNIST "
                                     "(or synthetic images).")
    add_fit_options(parser, steps=300, batch_size=64, lr=0.05)
    add_fashion_mnist_flag(parser)
    add_number(parser, "--hidden", int, 1, 1 << 16, 128, "hidden units")
    args = parser.parse_args()

    def body(checks):
        data = load_fashion_mnist(args.data, 8192, 2000, args.seed)
        ember.manual_seed(args.seed)  # the weights' initialisation
        model = TwoLayerMLP(28 * 28, args.hidden, data.shape.classes).to(args.device)
        n_parameters = sum(p.numel() for p in model.parameters())
        print(f"{model}\n{n_parameters} parameters")
        checks.expect(n_parameters == 784 * args.hidden + args.hidden + args.hidden * 10 + 10,
                      "parameters() finds the weight and bias of both Linear children")

        sgd = ember.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

        def step(images, labels):
            sgd.zero_grad()  # every parameter's .grad back to None
            loss = F.cross_entropy(model(images), labels)  # forward: records the graph
            loss.backward()  # fills each parameter's .grad
            sgd.step()  # p -= lr * (momentum buffer)
            return loss

        expect_learned(checks, fit(model, data, args, step), data.shape.classes)

    run_checked("03_mlp", body)


if __name__ == "__main__":
    main()
