"""05_resnet: residual networks, as He et al. built them for CIFAR-10, from Python (examples/05_resnet.cpp's
twin; "Deep Residual Learning for Image Recognition", 2016, §4.2): a 3x3 convolution of 16 channels,
three stages of n BasicBlocks at 16, 32 and 64 channels on 32x32, 16x16 and 8x8 maps, global average
pooling and a Linear: 6n + 2 layers with weights (--blocks 3 is their ResNet-20). Each block adds its
input to what its two convolutions compute, relu(x + F(x)); with F's last batch-norm scale at zero a
block is the identity on non-negative inputs, which is why deep ResNets train (torchvision's
zero_init_residual). Trained with SGD, Nesterov momentum, weight decay and a cosine schedule on
synthetic 3x32x32 images, or on CIFAR-10 with --data.

The block is a Python nn.Module here, as torchvision writes it: ember.nn has no BasicBlock of its
own (the C++ nn::BasicBlock is reachable only inside nn.models.ResNet), so its forward runs in
Python and calls the C++ layers one by one.

Read next: python/ember/nn/modules.py (a Python Module whose children are C++ layers),
python/ember/optim/lr_scheduler.py (CosineAnnealingLR, one of ember's C++ schedulers),
python/ember/nn/models.py (nn.models.ResNet: torchvision's ResNet-18/34/50, built in C++), then the C++
they call: nn/models/resnet.cpp (BasicBlock::forward), optim/lr_scheduler.h (CosineAnnealingLR),
optim/sgd.cpp (weight decay and Nesterov in the step), nn/pooling.cpp (adaptive_avg_pool2d).

    PYTHONPATH=build/python python3 examples/python/05_resnet.py
    PYTHONPATH=build/python python3 examples/python/05_resnet.py --blocks 3 --steps 300       (ResNet-20)
    PYTHONPATH=build/python python3 examples/python/05_resnet.py --data ~/cifar-10-batches-bin  (first 4096 images)
"""

import argparse

import ember
import ember.nn.functional as F
from ember import nn
from ladder_checks import run_checked
from ladder_data import cifar10_or_synthetic
from ladder_fit import add_fit_options, expect_learned, fit
from ladder_flags import add_number


def conv3x3(in_planes, out_planes, stride):
    return nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    """relu(x + bn2(conv2(relu(bn1(conv1(x)))))), with `shortcut` in place of x where the shape changes."""

    def __init__(self, in_planes, planes, stride=1, shortcut=None):
        super().__init__()
        self.conv1 = conv3x3(in_planes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, 1)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = shortcut  # None registers nothing: the identity

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (self.shortcut(x) if self.shortcut is not None else x))


def stage(in_planes, planes, n, stride):
    """n blocks of `planes` channels; the first takes `stride` and, where the shape changes, its shortcut
    is a 1x1 convolution with batch norm (torchvision's; the paper pads with zeros instead)."""
    blocks = nn.Sequential()
    for i in range(n):
        shortcut = None
        if i == 0 and (stride != 1 or in_planes != planes):
            shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))
        blocks.append(BasicBlock(in_planes if i == 0 else planes, planes, stride if i == 0 else 1, shortcut))
    return blocks


class CifarResNet(nn.Module):
    def __init__(self, n, classes):
        super().__init__()
        self.conv1 = conv3x3(3, 16, 1)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = stage(16, 16, n, 1)  # (B, 16, 32, 32)
        self.layer2 = stage(16, 32, n, 2)  # (B, 32, 16, 16)
        self.layer3 = stage(32, 64, n, 2)  # (B, 64, 8, 8)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.layer3(self.layer2(self.layer1(y)))
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1))  # (B, 64, 1, 1) -> (B, 64) -> (B, classes)


def expect_identity_at_zero_scale(checks):
    """A block whose last batch norm scales by 0 adds nothing to its input: relu(x + 0) = relu(x)."""
    block = BasicBlock(16, 16)
    x = ember.randn(2, 16, 8, 8)
    with ember.no_grad():
        nn.init.zeros_(block.bn2.weight)
        checks.expect(ember.equal(block(x), F.relu(x)), "a BasicBlock whose bn2 scale is 0 computes relu(x): "
                      "residual learning starts from the identity")


def main():
    parser = argparse.ArgumentParser(description="Step 5 of the example ladder: a CIFAR-10 ResNet on synthetic "
                                     "3x32x32 images (or CIFAR-10).")
    add_fit_options(parser, steps=100, batch_size=32, lr=0.1)
    parser.add_argument("--data", metavar="DIR", help="CIFAR-10 binary directory (default: synthetic images)")
    add_number(parser, "--blocks", int, 1, 200, 1, "BasicBlocks per stage, n: ResNet-(6n + 2), 3 is ResNet-20")
    args = parser.parse_args()

    def body(checks):
        expect_identity_at_zero_scale(checks)
        data = cifar10_or_synthetic(args.data, 4096, 1000, args.seed)
        ember.manual_seed(args.seed)
        model = CifarResNet(args.blocks, data.shape.classes).to(args.device)
        print(f"ResNet-{6 * args.blocks + 2}: {sum(p.numel() for p in model.parameters())} parameters")

        sgd = ember.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
        schedule = ember.optim.lr_scheduler.CosineAnnealingLR(sgd, T_max=args.steps)

        def step(images, labels):
            sgd.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            sgd.step()
            schedule.step()  # once per optimizer step: lr = lr_max (1 + cos(pi t / T)) / 2
            return loss

        expect_learned(checks, fit(model, data, args, step), data.shape.classes)
        checks.expect(sgd.param_groups[0]["lr"] <= 1e-6 * args.lr,
                      "the cosine schedule brought the learning rate down to 0 over the run")

    run_checked("05_resnet", body)


if __name__ == "__main__":
    main()
