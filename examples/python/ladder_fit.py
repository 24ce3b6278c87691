"""fit(): the loop the ladder's classifiers (examples 03 to 07) share around the training step each of
them writes itself (examples/fit.h's twin): shuffled batches from a seeded DataLoader, epoch after
epoch, the loss and the time per step every tenth of the run, then top-1 accuracy on the test images.
expect_learned() makes the claims every such example checks on the result."""

import time
from dataclasses import dataclass

import ember
from ember.utils.data import DataLoader

from ladder_flags import add_number


def add_fit_options(parser, steps, batch_size, lr):
    """--steps, --batch-size, --lr, --seed and --device, with the example's defaults."""
    add_number(parser, "--steps", int, 2, 1_000_000, steps, "optimizer steps")
    add_number(parser, "--batch-size", int, 1, 65536, batch_size, "images per step")
    add_number(parser, "--lr", float, 0.0, 10.0, lr, "learning rate, the peak under a schedule")
    add_number(parser, "--seed", int, 0, 2**64 - 1, 0,
               "seed of the initial weights, the batch order and the synthetic images")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (%(default)s)")


@dataclass
class FitReport:
    first_loss: float = 0.0  # mean loss of the first tenth of the steps
    last_loss: float = 0.0  # mean loss of the last tenth
    ms_per_step: float = 0.0  # wall time of a step, loading its batch included
    test_accuracy: float = 0.0


def accuracy(model, dataset, device, input_dtype, batch_size):
    """Top-1 accuracy of model on dataset, in eval mode (batch norm's running statistics, no dropout)."""
    model.eval()
    correct = 0
    with ember.no_grad():
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            predicted = model(images.to(device).to(input_dtype)).argmax(1)
            correct += (predicted == labels.to(device)).sum().item()
    model.train()
    return correct / len(dataset)


def endless(loader):
    """The loader's batches, epoch after epoch: each pass over a DataLoader is its next epoch, with
    the order that (seed, epoch) gives."""
    while True:
        yield from loader


def fit(model, data, opts, step, input_dtype=ember.float32):
    """Runs opts.steps calls of step(images, labels), which returns the loss (0-dim); images reach it on
    opts.device in input_dtype (16 bits for a model stored in 16 bits, 07_amp_modes.py)."""
    device = ember.device(opts.device)
    loader = DataLoader(data.train, batch_size=opts.batch_size, shuffle=True, seed=opts.seed, drop_last=True)
    if len(loader) == 0:
        raise ember.ValueError(f"--batch-size {opts.batch_size} is more than the {len(data.train)} training images")
    print(f"data: {data.source}")
    window = max(1, opts.steps // 10)
    report = FitReport()
    window_loss = 0.0
    batches = endless(loader)
    start = time.perf_counter()
    for s in range(1, opts.steps + 1):
        images, labels = next(batches)
        window_loss += step(images.to(device).to(input_dtype), labels.to(device)).item()
        if s % window == 0 or s == opts.steps:
            n = window if s % window == 0 else s % window
            print(f"step {s:5d}/{opts.steps}  loss {window_loss / n:.4f}  "
                  f"{1e3 * (time.perf_counter() - start) / s:.1f} ms/step", flush=True)
            if s == window:
                report.first_loss = window_loss / n
            report.last_loss = window_loss / n
            window_loss = 0.0
    report.ms_per_step = 1e3 * (time.perf_counter() - start) / opts.steps
    report.test_accuracy = accuracy(model, data.test, device, input_dtype, opts.batch_size)
    print(f"test accuracy {100 * report.test_accuracy:.2f}% on {len(data.test)} images")
    return report


def loss_went_down(report):
    """The loss of the last tenth of the run is at least 10% below the first tenth's: more than the
    noise of a few batches."""
    return report.last_loss <= 0.9 * report.first_loss


def expect_learned(checks, report, classes):
    """The loss went down and the test accuracy is well above the 1/classes of guessing."""
    checks.expect(loss_went_down(report), f"the loss went down by 10% or more: {report.first_loss:.4f} over the first "
                  f"tenth of the steps, {report.last_loss:.4f} over the last")
    checks.expect(report.test_accuracy >= 2.0 / classes, f"test accuracy {100 * report.test_accuracy:.1f}% is at least "
                  f"twice chance ({100.0 / classes:.1f}%)")
