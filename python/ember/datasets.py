"""ember's built-in data sets, read and batched by its C++ (data/*.h): Fashion-MNIST (and MNIST),
CIFAR-10 and ImageFolder. Each is an ``ember.utils.data.Dataset`` (``len``, ``dataset[i]`` gives
``(image, label)``), and a ``DataLoader`` over one runs ember's C++ loader, whose threads gather, decode
and augment whole batches: ``(images, labels)``, images float32 (B, C, H, W) in [0, 1] (normalised by
``transform``), labels int64 (B).

``transform`` is a batch transform run on the loader's threads: ``Compose([RandomCrop(32, 4),
RandomHorizontalFlip(), Normalize(mean, std)])``, seeded per batch from (seed, epoch, batch), so a
batch is the same whatever the number of workers. Data errors raise ``ember.DataError`` naming the file.
"""

import os

from . import _ember
from .utils.data import Dataset

__all__ = ["CIFAR10", "Compose", "FashionMNIST", "ImageFolder", "MNIST", "Normalize", "RandomCrop",
           "RandomHorizontalFlip"]


# ---- batch transforms (steps of the C++ loader's data::BatchTransform)


class Normalize:
    """(x - mean[c]) / std[c] per channel."""

    def __init__(self, mean, std):
        self.mean = [float(m) for m in (mean if isinstance(mean, (list, tuple)) else [mean])]
        self.std = [float(s) for s in (std if isinstance(std, (list, tuple)) else [std])]

    def _steps(self):
        return [("normalize", self.mean, self.std)]


class RandomCrop:
    """Pads each image by ``padding`` zeros, then crops a random size x size window."""

    def __init__(self, size, padding=0):
        self.size = int(size)
        self.padding = int(padding)

    def _steps(self):
        return [("random_crop", self.size, self.padding)]


class RandomHorizontalFlip:
    """Mirrors each image left-right with probability p."""

    def __init__(self, p=0.5):
        self.p = float(p)

    def _steps(self):
        return [("random_horizontal_flip", self.p)]


class Compose:
    """The transforms in order."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def _steps(self):
        return [s for t in self.transforms for s in t._steps()]


def _steps_of(transform):
    if transform is None:
        return None
    if not hasattr(transform, "_steps"):
        raise TypeError("transform must be ember.datasets' Normalize, RandomCrop, RandomHorizontalFlip or a Compose "
                        f"of them (batch transforms run in C++), got {type(transform).__name__}")
    return transform._steps()


class _BuiltinDataset(Dataset):
    """A data set held by ember's C++ (see the module's description)."""

    def __init__(self, cpp, transform=None):
        self._cpp_dataset = cpp
        self.batch_transform = _steps_of(transform)

    def __len__(self):
        return len(self._cpp_dataset)

    def __getitem__(self, index):
        n = len(self)
        if isinstance(index, slice):
            raise TypeError(f"{type(self).__name__} indices must be ints")
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"index {index} out of range for {type(self).__name__} of {n} examples")
        images, labels = self._cpp_dataset.get_batch([index])
        return images[0], int(labels[0].item())

    def _get_batch(self, indices):
        # A Python loader (a custom sampler) still gathers in C++, a batch at a time.
        return self._cpp_dataset.get_batch(list(indices))

    def truncate(self, n):
        """Keeps the first n examples (in-memory data sets)."""
        _ember._truncate(self._cpp_dataset, int(n))
        return self


class FashionMNIST(_BuiltinDataset):
    """Fashion-MNIST from ``root`` ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz], looked for in
    root, root/raw and root/FashionMNIST/raw): 60,000 training or 10,000 test images (1, 28, 28)."""

    def __init__(self, root, train=True, transform=None, download=False):
        if download:
            raise NotImplementedError("FashionMNIST: ember does not download data sets")
        super().__init__(_ember._fashion_mnist(os.fspath(root), bool(train)), transform)
        self.root, self.train = os.fspath(root), train


MNIST = FashionMNIST  # the same file format


class CIFAR10(_BuiltinDataset):
    """CIFAR-10's binary version from ``root`` (or root/cifar-10-batches-bin): 50,000 training or 10,000
    test images (3, 32, 32)."""

    def __init__(self, root, train=True, transform=None, download=False):
        if download:
            raise NotImplementedError("CIFAR10: ember does not download data sets")
        super().__init__(_ember._cifar10(os.fspath(root), bool(train)), transform)
        self.root, self.train = os.fspath(root), train


class ImageFolder(_BuiltinDataset):
    """Image files (.jpg, .jpeg, .png) in one folder per class, with torchvision's semantics, decoded and
    transformed per example on the loader's threads: for training RandomResizedCrop(size, scale,
    ratio) and a flip with probability flip_p, for evaluation Resize(resize) and CenterCrop(size);
    then Normalize(mean, std), into ``dtype`` (float32, float16, bfloat16)."""

    def __init__(self, root, train=True, size=224, resize=256, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 flip_p=0.5, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), dtype=None, channels_last=False,
                 skip_bad_images=False, transform=None):
        cpp = _ember._image_folder(os.fspath(root), bool(train), int(size), int(resize), tuple(scale), tuple(ratio),
                                   float(flip_p), tuple(mean), tuple(std), dtype or _ember.float32, bool(channels_last),
                                   bool(skip_bad_images))
        super().__init__(cpp, transform)
        self.root = os.fspath(root)
        self.classes = list(cpp.classes())
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = [tuple(s) for s in cpp.samples()]
        self.targets = [label for _, label in self.samples]
