"""04_cnn: a convolutional network as a Sequential of layers, from Python (examples/04_cnn.cpp's twin):
conv-BN-ReLU-pool twice, then a Linear classifier. It shows how a convolution's output size follows
from kernel, stride and padding (out = (in + 2 padding - kernel) / stride + 1), watched with forward
hooks, and what batch norm does differently in training and in eval mode: in training it normalises
with the batch's own statistics and updates its running ones, in eval it uses the running ones, so an
image's logits no longer depend on the rest of its batch. Trains on Fashion-MNIST or synthetic 28x28
images as step 3 does, and checks each of these facts.

Read next: python/ember/nn/layers.py (Conv2d, BatchNorm2d, MaxPool2d: Python wrappers of ember's C++
layers), python/ember/nn/modules.py (Sequential, register_forward_hook; a C++ layer's hooks run in
C++), python/ember/bind_nn.cpp (the layers' bindings), then the C++ they call: nn/layers/conv.h
(Conv2d, MaxPool2d), nn/conv.cpp (conv2d's argument checks and output size), cpu/conv_dnnl.cpp and
cpu/conv.cpp (its CPU kernels), nn/normalization.cpp (batch_norm in both modes), nn/models/mlp.cpp
(SmallCNN, the wider CNN nn.models.SmallCNN builds).

    PYTHONPATH=build/python python3 examples/python/04_cnn.py
    PYTHONPATH=build/python python3 examples/python/04_cnn.py --steps 1000 --width 32
"""

import argparse

import ember
import ember.nn.functional as F
from ember import nn
from ladder_checks import run_checked
from ladder_data import add_fashion_mnist_flag, load_fashion_mnist
from ladder_fit import add_fit_options, expect_learned, fit
from ladder_flags import add_number


def make_cnn(width, classes):
    """(B, 1, 28, 28) -> conv 3x3 pad 1: (B, w, 28, 28) -> pool 2: (B, w, 14, 14)
                      -> conv 3x3 pad 1: (B, 2w, 14, 14) -> pool 2: (B, 2w, 7, 7) -> flatten -> Linear: (B, 10).
    The convolutions have no bias: the batch norm after each subtracts the mean, and a bias with it."""
    return nn.Sequential(
        nn.Conv2d(1, width, 3, stride=1, padding=1, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, stride=1, padding=1, bias=False),
        nn.BatchNorm2d(2 * width),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(2 * width * 7 * 7, classes),
    )


def expect_shapes(checks, model, images, width):
    """Runs one batch through the model with a forward hook on each layer that prints its output shape,
    and checks the shapes against the formula (hooks run when a module is called as m(x))."""
    shapes = []

    def print_shape(name):
        def hook(module, args, output):
            print(f"  {name:2} {type(module).__name__:12} -> {tuple(output.shape)}")
            shapes.append(tuple(output.shape))

        return hook

    hooks = [child.register_forward_hook(print_shape(name)) for name, child in model.named_children()]
    with ember.no_grad():
        model.eval()  # in training mode this forward would move batch norm's running statistics
        model(images)
        model.train()
    for h in hooks:
        h.remove()
    b = images.shape[0]
    checks.expect(len(shapes) == 10 and shapes[0] == (b, width, 28, 28) and shapes[3] == (b, width, 14, 14)
                  and shapes[7] == (b, 2 * width, 7, 7) and shapes[9] == (b, 10),
                  "a 3x3 convolution with padding 1 keeps 28x28 ((28 + 2 - 3) / 1 + 1), each 2x2 pool halves it")


def expect_batch_norm_modes(checks, model, images):
    """In eval mode an image's logits are the same alone as in a batch; in training mode they are not."""
    first = images[:1]
    with ember.no_grad():
        model.eval()
        eval_alike = ember.allclose(model(first), model(images)[:1], 1e-4, 1e-5)
        model.train()
        train_alike = ember.allclose(model(first), model(images)[:1], 1e-4, 1e-5)
    checks.expect(eval_alike and not train_alike, "batch norm: eval mode uses the running statistics (an image alone "
                  "gives its logits in the batch), training mode the batch's own")


def main():
    parser = argparse.ArgumentParser(description="Step 4 of the example ladder: a CNN trained on Fashion-MNIST "
                                     "(or synthetic images).")
    add_fit_options(parser, steps=200, batch_size=64, lr=0.05)
    add_fashion_mnist_flag(parser)
    add_number(parser, "--width", int, 1, 1024, 16, "channels of the first convolution; the second has twice as many")
    args = parser.parse_args()

    def body(checks):
        data = load_fashion_mnist(args.data, 8192, 2000, args.seed)
        ember.manual_seed(args.seed)
        model = make_cnn(args.width, data.shape.classes).to(args.device)
        print(f"{model}\n{sum(p.numel() for p in model.parameters())} parameters; output shape of each layer:")
        some_images = ember.stack([data.test[i][0] for i in range(8)]).to(args.device)
        expect_shapes(checks, model, some_images, args.width)

        bn = model[1]
        running_mean_before = bn.running_mean.clone()
        sgd = ember.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

        def step(images, labels):
            sgd.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            sgd.step()
            return loss

        expect_learned(checks, fit(model, data, args, step), data.shape.classes)
        checks.expect(not ember.equal(bn.running_mean, running_mean_before)
                      and bn.num_batches_tracked.item() == args.steps,
                      "training updated batch norm's running statistics (buffers, not parameters) once per step")
        expect_batch_norm_modes(checks, model, some_images)

    run_checked("04_cnn", body)


if __name__ == "__main__":
    main()
