"""ember.utils.data: the DataLoader over Python data sets (batching, seeded shuffle, drop_last, samplers,
collation) and over ember's built-in data sets (the C++ loader), and the distributed sampler."""

import os

import numpy as np
import pytest

import ember
from ember.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler, TensorDataset, default_collate
from conftest import to_numpy

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


class Squares(Dataset):
    """Example i: (a 1-element float tensor i, the int i * i)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return ember.tensor([float(i)]), i * i


def order_of(loader):
    return [int(v) for x, _ in loader for v in x.reshape(-1).tolist()]


def test_batching_and_drop_last():
    loader = DataLoader(Squares(10), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    x, y = batches[0]
    assert x.shape == (4, 1) and x.dtype is ember.float32
    assert y.dtype is ember.int64 and y.tolist() == [0, 1, 4, 9]
    assert batches[-1][0].shape == (2, 1)  # the short last batch
    dropped = DataLoader(Squares(10), batch_size=4, drop_last=True)
    assert len(dropped) == 2 and [b[0].shape[0] for b in dropped] == [4, 4]
    assert order_of(DataLoader(Squares(10), batch_size=3)) == list(range(10))


def test_shuffle_is_seeded_and_changes_per_epoch():
    a = DataLoader(Squares(20), batch_size=5, shuffle=True, seed=123)
    b = DataLoader(Squares(20), batch_size=5, shuffle=True, seed=123)
    first, second = order_of(a), order_of(a)
    assert sorted(first) == list(range(20)) and first != list(range(20))
    assert first != second  # the next pass is the next epoch
    assert order_of(b) == first and order_of(b) == second
    assert order_of(DataLoader(Squares(20), batch_size=5, shuffle=True, seed=124)) != first
    # The order is ember's seeded permutation, as the C++ loader's.
    assert first == list(ember._ember._permutation(20, 123, 0))
    # Without a seed, ember.manual_seed decides it.
    ember.manual_seed(5)
    c = order_of(DataLoader(Squares(20), batch_size=5, shuffle=True))
    ember.manual_seed(5)
    assert order_of(DataLoader(Squares(20), batch_size=5, shuffle=True)) == c
    g = ember.Generator(77)
    assert order_of(DataLoader(Squares(20), batch_size=5, shuffle=True, generator=g)) == list(ember._ember._permutation(20, 77, 0))


def test_tensor_dataset_and_collation():
    x = ember.randn(10, 3)
    y = ember.arange(10)
    ds = TensorDataset(x, y)
    assert len(ds) == 10 and ds[2][0].equal(x[2]) and ds[2][1].item() == 2
    xb, yb = next(iter(DataLoader(ds, batch_size=4, shuffle=True, seed=0)))
    idx = yb.tolist()
    np.testing.assert_array_equal(to_numpy(xb), to_numpy(x)[idx])
    with pytest.raises(ember.ShapeError):
        TensorDataset(ember.ones(3), ember.ones(4))
    batch = default_collate([{"a": ember.ones(2), "b": 1.5, "c": "x"}, {"a": ember.zeros(2), "b": 2.5, "c": "y"}])
    assert batch["a"].shape == (2, 2) and batch["b"].dtype is ember.float64 and batch["c"] == ["x", "y"]
    pairs = default_collate([(np.ones(3, dtype=np.float32), True), (np.zeros(3, dtype=np.float32), False)])
    assert pairs[0].shape == (2, 3) and pairs[1].dtype is ember.bool


def test_custom_collate_sampler_and_batch_sampler():
    loader = DataLoader(Squares(6), batch_size=2, collate_fn=lambda items: [y for _, y in items])
    assert list(loader) == [[0, 1], [4, 9], [16, 25]]
    loader = DataLoader(Squares(6), batch_size=2, sampler=[5, 4, 3, 2, 1, 0])
    assert order_of(loader) == [5, 4, 3, 2, 1, 0]
    loader = DataLoader(Squares(6), batch_sampler=[[0, 5], [1]])
    assert [b[1].tolist() for b in loader] == [[0, 25], [1]]
    with pytest.raises(ValueError):
        DataLoader(Squares(6), sampler=[0], shuffle=True)
    with pytest.raises(ValueError):
        DataLoader(Squares(6), batch_size=0)


def test_distributed_sampler_shares():
    ds = Squares(11)
    shares = []
    for rank in range(2):
        sampler = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=3)
        sampler.set_epoch(1)
        shares.append(list(sampler))
        assert len(sampler) == 6
    assert sorted(set(shares[0]) | set(shares[1])) == list(range(11))
    assert len(set(shares[0]) & set(shares[1])) == 1  # one index repeated to even the shares out
    dropped = DistributedSampler(ds, num_replicas=2, rank=0, shuffle=False, drop_last=True)
    assert list(dropped) == [0, 2, 4, 6, 8] and len(dropped) == 5
    loader = DataLoader(ds, batch_size=3, sampler=DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False))
    assert order_of(loader) == [1, 3, 5, 7, 9, 0]
    with pytest.raises(ValueError):
        DistributedSampler(ds, num_replicas=2, rank=2)


def test_missing_data_set_raises_data_error(tmp_path):
    with pytest.raises(ember.DataError) as info:
        ember.datasets.CIFAR10(tmp_path / "none")
    assert "none" in str(info.value)


@pytest.mark.skipif(not os.path.isdir(FASHION_MNIST), reason="Fashion-MNIST is not installed")
def test_fashion_mnist_through_the_cpp_loader():
    test = ember.datasets.FashionMNIST(FASHION_MNIST, train=False)
    assert len(test) == 10000
    image, label = test[0]
    assert image.shape == (1, 28, 28) and 0 <= label < 10
    loader = DataLoader(test, batch_size=1000, shuffle=True, num_workers=2, seed=9)
    assert len(loader) == 10
    seen = 0
    labels = []
    for images, y in loader:
        assert images.shape == (1000, 1, 28, 28) and images.dtype is ember.float32
        assert 0.0 <= images.min().item() and images.max().item() <= 1.0
        labels += y.tolist()
        seen += images.shape[0]
    assert seen == 10000 and sorted(set(labels)) == list(range(10))
    # The order depends on the seed and epoch only, not on the threads.
    one = DataLoader(test, batch_size=1000, shuffle=True, num_workers=0, seed=9)
    x0, y0 = next(iter(one))
    x1, y1 = next(iter(DataLoader(test, batch_size=1000, shuffle=True, num_workers=2, seed=9)))
    assert x0.equal(x1) and y0.equal(y1)
    # A normalising transform runs on the loader's threads; a distributed share too.
    norm = ember.datasets.FashionMNIST(FASHION_MNIST, train=False, transform=ember.datasets.Normalize(0.5, 0.5))
    sampler = DistributedSampler(norm, num_replicas=2, rank=1, shuffle=False)
    xs, ys = next(iter(DataLoader(norm, batch_size=4, sampler=sampler)))
    assert ys.tolist() == [test[i][1] for i in (1, 3, 5, 7)]
    np.testing.assert_allclose(to_numpy(xs[0]), (to_numpy(test[1][0]) - 0.5) / 0.5, atol=1e-6)
    assert len(DataLoader(norm, batch_size=4, sampler=sampler, drop_last=True)) == 1250


def test_an_empty_data_set_gives_no_batches():
    empty = TensorDataset(ember.zeros(0, 2))
    for shuffle in (False, True):
        assert list(DataLoader(empty, batch_size=4, shuffle=shuffle)) == []
    assert list(RandomSampler(empty)) == [] and list(RandomSampler(empty, replacement=True, num_samples=0)) == []


def test_loader_options_pytorch_refuses():
    class Counting(ember.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(4))

    for options in ({"shuffle": True}, {"sampler": [0, 1]}, {"batch_sampler": [[0]]}):
        with pytest.raises(ValueError, match="IterableDataset"):
            DataLoader(Counting(), **options)
    with pytest.raises(ValueError, match="timeout"):
        DataLoader(TensorDataset(ember.zeros(2)), timeout=float("nan"))


def _tiny_png(side=8):
    """A side x side black RGB PNG, written by hand (zlib and the chunk layout of the PNG spec)."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\0" + bytes(3 * side) for _ in range(side))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def test_image_folder_class_names_that_are_not_utf8(tmp_path):
    # os.listdir's rule: bytes that are not UTF-8 come back as surrogates, not a UnicodeDecodeError.
    root = os.fsencode(tmp_path)
    for name in (b"cat", b"d\xffg"):
        os.makedirs(os.path.join(root, name))
        with open(os.path.join(root, name, b"x.png"), "wb") as f:
            f.write(_tiny_png())
    data = ember.datasets.ImageFolder(tmp_path, size=8, resize=8)
    assert [os.fsencode(c) for c in data.classes] == [b"cat", b"d\xffg"]
    assert os.fsencode(data.samples[1][0]).endswith(b"d\xffg/x.png") and data.samples[1][1] == 1
    assert data[1][0].shape == (3, 8, 8)
