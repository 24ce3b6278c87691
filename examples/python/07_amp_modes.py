"""07_amp_modes: training precision modes side by side, from Python (examples/07_amp_modes.cpp's twin),
each training the same SmallCNN from the same initial weights on the same batches, with the loss, the
time per step and what each mode keeps in which dtype. The modes the Python package can express:
  fp32        everything in float32
  tf32        float32, with TF32 tensor cores for matmul and conv (ember.backends' switches; GPU only:
              on the CPU it is fp32, so the CPU leaves it out unless asked)
  amp_fp16    float32 weights; autocast runs matmul and conv in float16; GradScaler scales the loss so
              that small gradients survive float16, unscales them, skips a step that overflowed
  amp_bf16    the same in bfloat16, whose float32-sized exponent needs no loss scaling
  naive_fp16  a float16 model (batch norm kept float32), float32 master weights the optimizer steps,
              and a dynamic loss scale (Apex O2): ember.amp.TrainingPrecision, as the C++ program
  naive_bf16  the same in bfloat16, without loss scaling
  pure_bf16   the model and the optimizer state in bfloat16: no masters, no scaling
The modes PyTorch has are written as PyTorch writes them (autocast, GradScaler); the naive ones, which
autocast cannot express, run through ember.amp.TrainingPrecision, the C++ program's
train::TrainingPrecision. On the CPU the 16-bit modes store 16 bits but compute in float32, so they
save memory, not time; on a GPU (--device cuda) they run on tensor cores. The script checks that
every mode learns, stays near fp32's loss and stores the dtypes it promises. Under GradScaler the loss
scale must back off after exactly the steps whose gradients were not finite, the ones it skips (it
does not report a skip, as PyTorch's does not: the script counts those steps from the gradients);
the naive modes' dynamic scale tolerates an overflow before it backs off, so there it may back off
only after skipped steps, which TrainingPrecision reports.

Read next: python/ember/amp.py (autocast, GradScaler: thin wrappers of the C++ ones),
python/ember/nn/models.py (SmallCNN, built in C++), then the C++ they call: tensor/autocast.cpp (which
ops autocast runs in 16 bits: PyTorch's table), optim/amp/grad_scaler.h (GradScaler: the scale, the
overflow check and the skip, on the device), train/precision.cpp (all seven modes, for the C++ programs).

    PYTHONPATH=build/python python3 examples/python/07_amp_modes.py
    PYTHONPATH=build/python python3 examples/python/07_amp_modes.py --modes amp_bf16 pure_bf16 --steps 200
"""

import argparse
from dataclasses import dataclass

import ember
import ember.nn.functional as F
from ember import nn
from ladder_checks import run_checked
from ladder_data import add_fashion_mnist_flag, load_fashion_mnist
from ladder_fit import FitReport, add_fit_options, fit, loss_went_down


@dataclass(frozen=True)
class Mode:
    autocast: object  # the dtype autocast computes matmul and conv in, or None
    scaled: bool  # whether GradScaler scales the loss
    stored: object  # the dtype of the model, the optimizer state and the input
    tf32: bool = False  # float32 matmul and conv on TF32 tensor cores (a GPU's)
    naive: bool = False  # float32 masters and batch norm, through ember.amp.TrainingPrecision

    def promised_dtypes(self):
        """The dtypes the mode keeps the convolution's and batch norm's weights in."""
        return self.stored, ember.float32 if self.naive else self.stored


MODES = {
    "fp32": Mode(None, False, ember.float32),
    "tf32": Mode(None, False, ember.float32, tf32=True),
    "amp_fp16": Mode(ember.float16, True, ember.float32),
    "amp_bf16": Mode(ember.bfloat16, False, ember.float32),
    "naive_fp16": Mode(None, True, ember.float16, naive=True),
    "naive_bf16": Mode(None, False, ember.bfloat16, naive=True),
    "pure_bf16": Mode(None, False, ember.bfloat16),
}


@dataclass
class ModeResult:
    mode: str
    report: FitReport
    conv_dtype: object
    batch_norm_dtype: object
    loss_scale: float
    skipped_steps: int
    backoffs: int


def train_in_mode(name, data, args):
    print(f"\n== {name}")
    mode = MODES[name]
    device = ember.device(args.device)
    ember.manual_seed(args.seed)  # every mode starts from the same weights
    model = nn.models.SmallCNN(data.shape.classes, data.shape.channels, data.shape.size).to(device)
    counts = {"skipped": 0, "backoffs": 0}
    if mode.naive:
        # Casts the model (batch norm stays float32) and builds SGD over float32 masters of its weights.
        precision = ember.amp.TrainingPrecision(model, name, ember.optim.SGD, lr=args.lr, momentum=0.9)

        def naive_step(images, labels):
            precision.zero_grad()
            loss = F.cross_entropy(model(images).float(), labels)
            scale = precision.loss_scale().item()
            # backward of the scaled loss, unscale into the masters, overflow check, step (skipped on an
            # overflow), copy back to the 16-bit weights, scale update: all in one call.
            _, skipped = precision.backward_and_step(loss)
            counts["skipped"] += int(skipped.item())
            counts["backoffs"] += precision.loss_scale().item() < scale
            return loss

        report = fit(model, data, args, naive_step, input_dtype=precision.input_dtype)
        return ModeResult(name, report, model.conv1.weight.dtype, model.bn1.weight.dtype,
                          precision.loss_scale().item(), counts["skipped"], counts["backoffs"])

    model.to(mode.stored)
    sgd = ember.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)  # its state in the parameters' dtype
    scaler = ember.amp.GradScaler(device.type, enabled=mode.scaled)  # disabled: scale() and step() pass through

    def step(images, labels):
        sgd.zero_grad()
        with ember.amp.autocast(device.type, dtype=mode.autocast, enabled=mode.autocast is not None):
            # float32 logits for the loss: a 16-bit loss would overflow once scaled.
            loss = F.cross_entropy(model(images).float(), labels)
        scale = scaler.get_scale()
        scaler.scale(loss).backward()  # backward of loss * scale
        scaler.step(sgd)  # unscale, then step unless a gradient is not finite
        # A step is skipped when a gradient is not finite; the scale backs off after exactly those.
        counts["skipped"] += not all(p.grad.isfinite_all() for p in model.parameters())
        scaler.update()
        counts["backoffs"] += scaler.get_scale() < scale
        return loss

    # Process-wide switches, as in PyTorch: on for this mode's run only.
    ember.backends.cuda.matmul.allow_tf32 = ember.backends.cudnn.allow_tf32 = mode.tf32
    try:
        report = fit(model, data, args, step, input_dtype=mode.stored)
    finally:
        ember.backends.cuda.matmul.allow_tf32 = ember.backends.cudnn.allow_tf32 = False
    return ModeResult(name, report, model.conv1.weight.dtype, model.bn1.weight.dtype, scaler.get_scale(),
                      counts["skipped"], counts["backoffs"])


def dtype_name(dtype):
    return repr(dtype).split(".")[-1]


def main():
    parser = argparse.ArgumentParser(description="Step 7 of the example ladder: the precision modes side by side on "
                                     "one model and one data set.")
    add_fit_options(parser, steps=40, batch_size=32, lr=0.02)
    add_fashion_mnist_flag(parser)
    parser.add_argument("--modes", nargs="+", choices=list(MODES),
                        help="the modes to compare, fp32 first (default: all; on the CPU all but tf32)")
    args = parser.parse_args()
    if args.modes is None:
        args.modes = [m for m in MODES if m != "tf32" or ember.device(args.device).type != "cpu"]
    modes = ["fp32"] + [m for m in dict.fromkeys(args.modes) if m != "fp32"]  # the reference first

    def body(checks):
        data = load_fashion_mnist(args.data, 8192, 1000, args.seed)
        results = [train_in_mode(m, data, args) for m in modes]

        print(f"\n{'mode':11} {'conv':8} {'bn':8} {'first loss':>11} {'last loss':>10} {'accuracy':>9} {'ms/step':>8} "
              f"{'loss scale':>11} {'skipped':>8}")
        for r in results:
            print(f"{r.mode:11} {dtype_name(r.conv_dtype):8} {dtype_name(r.batch_norm_dtype):8} "
                  f"{r.report.first_loss:11.4f} {r.report.last_loss:10.4f} {100 * r.report.test_accuracy:8.1f}% "
                  f"{r.report.ms_per_step:8.1f} {r.loss_scale:11g} {r.skipped_steps:8d}")
        print()
        reference = results[0].report.last_loss
        for r in results:
            conv, bn = MODES[r.mode].promised_dtypes()
            checks.expect(r.conv_dtype == conv and r.batch_norm_dtype == bn,
                          f"{r.mode} keeps conv weights in {dtype_name(conv)} and batch norm in {dtype_name(bn)}")
            checks.expect(loss_went_down(r.report), f"{r.mode}: the loss went down by 10% or more")
            if MODES[r.mode].naive:  # the dynamic loss scale tolerates an overflow before it backs off
                checks.expect(r.backoffs <= r.skipped_steps, f"{r.mode}: the loss scale backed off only after "
                              f"skipped steps ({r.skipped_steps} such steps, {r.backoffs} backoffs)")
            else:
                checks.expect(r.skipped_steps == r.backoffs, f"{r.mode}: the loss scale backed off after each step "
                              f"whose gradients were not finite, and after no other ({r.skipped_steps} such steps, "
                              f"{r.backoffs} backoffs)")
            if r.mode != "fp32":
                checks.expect(abs(r.report.last_loss - reference) <= 0.25, f"{r.mode} ends within 0.25 of fp32's loss "
                              f"({r.report.last_loss:.4f} vs {reference:.4f})")

    run_checked("07_amp_modes", body)


if __name__ == "__main__":
    main()
