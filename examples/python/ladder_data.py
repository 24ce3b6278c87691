"""The images the ladder's classifiers learn from (examples 03 to 07; examples/image_data.h's twin): a
real data set when its files are there (Fashion-MNIST from Debian's dataset-fashion-mnist, CIFAR-10's
binary version from --data), else a synthetic stand-in of the same shape, so that every example runs
anywhere, a CI machine without the data included, and says which one it used."""

import os
from dataclasses import dataclass

import ember
from ember.datasets import CIFAR10, FashionMNIST
from ember.utils.data import Dataset, TensorDataset

# Where Debian's dataset-fashion-mnist puts the files (examples/train looks there too).
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"


@dataclass(frozen=True)
class ImageShape:
    channels: int
    size: int
    classes: int


@dataclass
class ImageData:
    train: Dataset
    test: Dataset
    shape: ImageShape
    source: str  # what was loaded, for the log


def synthetic_images(shape, train_n, test_n, seed, noise_std=0.5):
    """Images of `shape` in shape.classes classes: image = 0.5 + 0.25 pattern[label] + noise_std N(0, 1).

    Each class has one fixed random pattern, coarse (blocks of 4x4 pixels) as real images are smooth;
    the noise hides it in any one pixel, so a model must pool evidence over the image. The same seed
    draws the same images as the C++ examples (one Philox generator, the same draws in the same order)."""
    gen = ember.Generator(seed)
    c, s, coarse = shape.channels, shape.size, (shape.size + 3) // 4
    # (classes, c, coarse, 1, coarse, 1) stretched to 4x4 blocks: (classes, c, 4 coarse, 4 coarse), cut to s x s.
    patterns = (ember.randn(shape.classes, c, coarse, 1, coarse, 1, generator=gen)
                .expand(shape.classes, c, coarse, 4, coarse, 4)
                .reshape(shape.classes, c, coarse * 4, coarse * 4)[:, :, :s, :s])

    def make(n):
        labels = ember.randint(0, shape.classes, (n,), generator=gen)
        images = patterns.index_select(0, labels) * 0.25 + 0.5 + ember.randn(n, c, s, s, generator=gen) * noise_std
        return TensorDataset(images, labels)

    train, test = make(train_n), make(test_n)
    return ImageData(train, test, shape, f"synthetic {c}x{s}x{s} images, {shape.classes} classes ({train_n} train, "
                                         f"{test_n} test, seed {seed})")


def first_images(dataset_class, root, shape, train_n, test_n, name):
    """The first train_n and test_n images of one of ember.datasets' data sets (FashionMNIST, CIFAR10)."""
    train = dataset_class(root, train=True).truncate(train_n)
    test = dataset_class(root, train=False).truncate(test_n)
    return ImageData(train, test, shape, f"{name} from {root}")


def add_fashion_mnist_flag(parser):
    """--data for the examples on Fashion-MNIST: Debian's directory by default, synthetic 1x28x28
    images where that is absent; a directory named on the command line must hold the data set."""
    parser.add_argument("--data", metavar="DIR", help=f"Fashion-MNIST directory (default: {FASHION_MNIST_DIR}, "
                        "synthetic images when it is absent)")


def load_fashion_mnist(data_dir, train_n, test_n, seed):
    """The first train_n and test_n images of --data's data set; ember.DataError says what a named
    directory lacks."""
    shape = ImageShape(1, 28, 10)
    if data_dir is None:
        if not os.path.isdir(FASHION_MNIST_DIR):
            return synthetic_images(shape, train_n, test_n, seed)
        data_dir = FASHION_MNIST_DIR
    return first_images(FashionMNIST, data_dir, shape, train_n, test_n, "Fashion-MNIST")


def cifar10_or_synthetic(data_dir, train_n, test_n, seed):
    """CIFAR-10's binary version from data_dir when one is given, else synthetic 3x32x32."""
    shape = ImageShape(3, 32, 10)
    if data_dir is None:
        return synthetic_images(shape, train_n, test_n, seed)
    return first_images(CIFAR10, data_dir, shape, train_n, test_n, "CIFAR-10")
