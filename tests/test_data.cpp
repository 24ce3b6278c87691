// data/: IDX and CIFAR-10 readers on synthetic files written here (plain and gzip), their errors on
// truncated or corrupt files, the DataLoader's order, workers and resume, and the transforms.
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "data/cifar10.h"
#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/idx.h"
#include "data/transforms.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember::data;
using namespace ember_test;
namespace fs = std::filesystem;

namespace {

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip = false) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    if (!bytes.empty()) REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
}

void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(uint8_t(v >> s));
}

// An IDX file of u8: magic 0x0000080<ndim>, dims, then data.
std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0, 0, 0x08, uint8_t(dims.size())};
  for (uint32_t d : dims) put_be32(out, d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> ramp(size_t n, int mul = 7) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * mul % 251);
  return v;
}

// n images 28x28 and n labels (i % 10) under the Fashion-MNIST names for `prefix`.
void write_fashion(const TempDir& dir, const std::string& prefix, uint32_t n, bool gzip) {
  const std::string ext = gzip ? ".gz" : "";
  write_bytes(dir / (prefix + "-images-idx3-ubyte" + ext), idx_bytes({n, 28, 28}, ramp(n * 784)), gzip);
  std::vector<uint8_t> labels(n);
  for (uint32_t i = 0; i < n; ++i) labels[i] = uint8_t(i % 10);
  write_bytes(dir / (prefix + "-labels-idx1-ubyte" + ext), idx_bytes({n}, labels), gzip);
}

std::vector<uint8_t> cifar_bytes(int n, int bad_label_at = -1) {
  std::vector<uint8_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(i == bad_label_at ? 10 : uint8_t(i % 10));
    for (int j = 0; j < 3072; ++j) out.push_back(uint8_t((i * 3 + j) % 256));
  }
  return out;
}

// A dataset of n examples whose single pixel holds its index (scaled by 1/255 when read).
std::shared_ptr<TensorDataset> index_dataset(int64_t n) {
  std::vector<uint8_t> px(n);
  std::vector<int64_t> lab(n);
  for (int64_t i = 0; i < n; ++i) px[i] = uint8_t(i), lab[i] = i;
  return std::make_shared<TensorDataset>(from_vector(px, {n, 1, 1, 1}), from_vector(lab, {n}));
}

std::vector<std::vector<int64_t>> epoch_labels(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (Batch& b : loader) out.push_back(b.labels.to_vector<int64_t>());
  return out;
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("idx: round trip, plain and gzip") {
  TempDir dir;
  for (bool gzip : {false, true}) {
    INFO("gzip ", gzip);
    const std::string ip = dir / (gzip ? "im.gz" : "im"), lp = dir / (gzip ? "lab.gz" : "lab");
    write_bytes(ip, idx_bytes({3, 4, 5}, ramp(60)), gzip);
    write_bytes(lp, idx_bytes({3}, {9, 0, 4}), gzip);
    Tensor im = read_idx_images(ip);
    CHECK(im.dtype() == DType::u8);
    CHECK(im.shape() == Shape{3, 4, 5});
    CHECK(im.to_vector<uint8_t>() == ramp(60));
    Tensor lab = read_idx_labels(lp);
    CHECK(lab.dtype() == DType::i64);
    CHECK(lab.to_vector<int64_t>() == std::vector<int64_t>{9, 0, 4});
  }
}

TEST_CASE("idx: truncated, corrupt, wrong magic and dims raise DataError naming the file") {
  TempDir dir;
  const std::string p = dir / "train-images-idx3-ubyte";
  auto full = idx_bytes({10, 28, 28}, ramp(7840));

  write_bytes(p, std::vector<uint8_t>(full.begin(), full.begin() + 16 + 1000));
  expect_error<DataError>("truncated data", [&] { read_idx_images(p); },
                          {"train-images-idx3-ubyte", "truncated", "7840 bytes of data, found 1000"});
  write_bytes(p + ".gz", std::vector<uint8_t>(full.begin(), full.begin() + 16 + 1000), true);
  expect_error<DataError>("truncated data, gzip", [&] { read_idx_images(p + ".gz"); },
                          {"idx3-ubyte.gz", "truncated", "found 1000"});
  write_bytes(p, std::vector<uint8_t>(full.begin(), full.begin() + 10));
  expect_error<DataError>("truncated header", [&] { read_idx_images(p); }, {p.c_str(), "truncated", "header"});
  write_bytes(p, {0, 0});
  expect_error<DataError>("no magic", [&] { read_idx_images(p); }, {"truncated"});
  write_bytes(p, {});
  expect_error<DataError>("empty", [&] { read_idx_images(p); }, {"truncated"});

  auto extra = full;
  extra.push_back(1);
  write_bytes(p, extra);
  expect_error<DataError>("trailing bytes", [&] { read_idx_images(p); }, {"1 trailing bytes"});

  write_bytes(p, idx_bytes({10}, ramp(10)));  // a labels file where images are expected
  expect_error<DataError>("wrong magic", [&] { read_idx_images(p); }, {"bad magic number 0x00000801", "0x00000803"});
  auto bad = full;
  bad[2] = 0x0D;  // float data
  write_bytes(p, bad);
  expect_error<DataError>("wrong type", [&] { read_idx_images(p); }, {"bad magic number 0x00000d03"});
  write_bytes(p, idx_bytes({10, 0, 28}, {}));
  expect_error<DataError>("zero dim", [&] { read_idx_images(p); }, {"bad dims"});
  write_bytes(p, idx_bytes({0xFFFFFFFF, 0xFFFFFFFF, 28}, {}));
  expect_error<DataError>("huge dims", [&] { read_idx_images(p); }, {"bad dims"});
  // Found by tools/fuzz.sh: no images, but dims whose strides overflow 64 bits.
  write_bytes(p, idx_bytes({0, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {}));
  expect_error<DataError>("zero images, huge dims", [&] { read_idx(p); }, {"bad dims"});

  // A gzip file with its compressed body damaged.
  write_bytes(p + ".gz", full, true);
  std::vector<uint8_t> gz;
  {
    std::ifstream in(p + ".gz", std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<uint8_t> cut(gz.begin(), gz.begin() + gz.size() / 2);
  write_bytes(p + ".gz", cut);
  expect_error<DataError>("gzip cut short", [&] { read_idx_images(p + ".gz"); }, {".gz"});
  for (size_t i = 12; i < gz.size() - 8; ++i) gz[i] ^= 0x5A;
  write_bytes(p + ".gz", gz);
  expect_error<DataError>("gzip body corrupt", [&] { read_idx_images(p + ".gz"); }, {".gz", "corrupt"});
  expect_error<DataError>("missing", [&] { read_idx_images(dir / "nope"); }, {"nope", "No such file"});
}

// The bytes of a file.
std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST_CASE("gzip data files are read to their end: trailer CRC and length, members, trailing bytes, capacity") {
  TempDir dir;
  const std::string p = dir / "data_batch_1.bin.gz";
  const auto records = cifar_bytes(2);
  write_bytes(p, records, true);
  const std::vector<uint8_t> gz = file_bytes(p);
  CHECK(read_cifar10(p).labels.numel() == 2);

  // Cut anywhere, even inside the 8-byte trailer after every record's bytes: never taken as good data.
  for (const size_t keep : {gz.size() - 1, gz.size() - 4, gz.size() - 8, gz.size() / 2, size_t(10)}) {
    write_bytes(p, std::vector<uint8_t>(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(keep)));
    const std::string ends = "the file ends at byte " + std::to_string(keep);
    expect_error<DataError>("cut at " + std::to_string(keep), [&] { read_cifar10(p); },
                            {"data_batch_1.bin.gz", "truncated gzip data", ends.c_str()});
  }
  // The trailer's CRC-32 and length are checked.
  auto bad_crc = gz;
  bad_crc[gz.size() - 8] ^= 1;
  write_bytes(p, bad_crc);
  expect_error<DataError>("CRC", [&] { read_cifar10(p); }, {"corrupt gzip data", "incorrect data check"});
  auto bad_length = gz;
  bad_length[gz.size() - 4] ^= 1;
  write_bytes(p, bad_length);
  expect_error<DataError>("length", [&] { read_cifar10(p); }, {"corrupt gzip data", "incorrect length check"});
  // Bytes after the stream that are not another member.
  auto trailing = gz;
  trailing.insert(trailing.end(), {'j', 'u', 'n', 'k'});
  write_bytes(p, trailing);
  const std::string after = "4 bytes after the end of the gzip stream at byte " + std::to_string(gz.size());
  expect_error<DataError>("trailing", [&] { read_cifar10(p); }, {after.c_str()});
  // Two members (`cat a.gz b.gz`) are one content.
  auto two = gz;
  two.insert(two.end(), gz.begin(), gz.end());
  write_bytes(p, two);
  CHECK(read_cifar10(p).labels.numel() == 4);

  // A header that promises more than the file can hold is refused before anything is allocated:
  // 16 GB of images from a 40-byte gzip file (deflate expands 1032 times at most).
  const std::string ip = dir / "train-images-idx3-ubyte.gz";
  write_bytes(ip, idx_bytes({65536, 512, 512}, {}), true);
  expect_error<DataError>("more than it holds", [&] { read_idx_images(ip); },
                          {"header promises 17179869184 bytes of data, more than the compressed file can hold"});
  write_bytes(dir / "plain", idx_bytes({65536, 512, 512}, {}));
  expect_error<DataError>("plain, more than it holds", [&] { read_idx_images(dir / "plain"); },
                          {"header promises 17179869184 bytes of data, found 0"});
}

TEST_CASE("data files that are not regular files are named as such, never read forever") {
  TempDir dir;
  expect_error<DataError>("device", [&] { read_idx_images("/dev/zero"); }, {"/dev/zero: not a regular file"});
  expect_error<DataError>("directory", [&] { read_cifar10(dir.path.string()); }, {"not a regular file"});
  write_bytes(dir / "a_file", {1, 2, 3});
  expect_error<DataError>("file as the data directory", [&] { FashionMNIST(dir / "a_file", true); },
                          {"a_file is not a directory"});
}

TEST_CASE("cifar10: records, size and label checks") {
  TempDir dir;
  write_bytes(dir / "test_batch.bin", cifar_bytes(3));
  LabeledImages r = read_cifar10(dir / "test_batch.bin");
  CHECK(r.images.shape() == Shape{3, 3, 32, 32});
  CHECK(r.labels.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2});
  auto px = r.images.to_vector<uint8_t>();
  CHECK(int(px[3072 + 5]) == (3 + 5) % 256);  // record 1, pixel 5

  auto cut = cifar_bytes(3);
  cut.pop_back();
  write_bytes(dir / "b.bin", cut);
  expect_error<DataError>("size", [&] { read_cifar10(dir / "b.bin"); }, {"b.bin", "multiple of the 3073-byte record"});
  write_bytes(dir / "b.bin", cifar_bytes(3, 2));
  expect_error<DataError>("label", [&] { read_cifar10(dir / "b.bin"); }, {"b.bin", "record 2 has label 10"});
  write_bytes(dir / "b.bin", {});
  expect_error<DataError>("empty", [&] { read_cifar10(dir / "b.bin"); }, {"empty"});

  expect_error<DataError>("missing files", [&] { CIFAR10(dir.path.string(), true); },
                          {"data_batch_1.bin not found", "cifar-10-batches-bin"});
  CIFAR10 test(dir.path.string(), false);
  CHECK(test.size() == 3);
  for (int i = 1; i <= 5; ++i) write_bytes(dir / ("data_batch_" + std::to_string(i) + ".bin"), cifar_bytes(2));
  CIFAR10 train(dir.path.string(), true);
  CHECK(train.size() == 10);
  Batch b = train.get_batch({1});
  CHECK(b.images.shape() == Shape{1, 3, 32, 32});
  CHECK(b.images.to_vector<float>()[0] == doctest::Approx(3 / 255.0));
}

TEST_CASE("FashionMNIST: finds the standard names, gzip or not, and says what is missing") {
  TempDir dir;
  expect_error<DataError>("no dir", [&] { FashionMNIST(dir / "absent", true); }, {"absent", "does not exist"});
  expect_error<DataError>("no files", [&] { FashionMNIST(dir.path.string(), true); },
                          {"train-images-idx3-ubyte not found", "train-images-idx3-ubyte.gz", "raw"});
  write_fashion(dir, "train", 12, true);
  write_fashion(dir, "t10k", 5, false);
  FashionMNIST train(dir.path.string(), true), test(dir.path.string(), false);
  CHECK(train.size() == 12);
  CHECK(test.size() == 5);
  CHECK(train.images().shape() == Shape{12, 1, 28, 28});
  Batch b = test.get_batch({4, 1});
  CHECK(b.images.dtype() == DType::f32);
  CHECK(b.images.shape() == Shape{2, 1, 28, 28});
  CHECK(b.labels.to_vector<int64_t>() == std::vector<int64_t>{4, 1});
  CHECK(b.images.to_vector<float>()[1] == doctest::Approx(float((4 * 784 + 1) * 7 % 251) / 255.0f));

  // Label count disagreeing with the images.
  write_bytes(dir / "t10k-labels-idx1-ubyte", idx_bytes({4}, {0, 1, 2, 3}));
  expect_error<DataError>("count", [&] { FashionMNIST(dir.path.string(), false); }, {"holds 4 labels", "5 images"});
  write_bytes(dir / "t10k-labels-idx1-ubyte", idx_bytes({5}, {0, 1, 2, 3, 11}));
  expect_error<DataError>("label range", [&] { FashionMNIST(dir.path.string(), false); }, {"is 11", "0..9"});
  write_bytes(dir / "t10k-images-idx3-ubyte", idx_bytes({5, 28, 27}, ramp(5 * 28 * 27)));
  expect_error<DataError>("28x28", [&] { FashionMNIST(dir.path.string(), false); }, {"28x27"});
}

TEST_CASE("distributed_sampler: disjoint equal shares of one order per epoch, padding or drop_last") {
  const auto shares = [](int world, int64_t size, int64_t epoch, bool shuffle, bool drop_last) {
    std::vector<std::vector<int64_t>> out;
    for (int r = 0; r < world; ++r)
      out.push_back(data::distributed_sampler({.rank = r, .world_size = world, .shuffle = shuffle, .seed = 9,
                                               .drop_last = drop_last})(size, epoch));
    return out;
  };
  // 10 examples on 3 ranks: 12 indices, the first two of the order repeated; each share 4 long.
  const auto padded = shares(3, 10, 0, true, false);
  std::vector<int64_t> all;
  for (const auto& s : padded) {
    CHECK(s.size() == 4);
    all.insert(all.end(), s.begin(), s.end());
  }
  std::multiset<int64_t> counts(all.begin(), all.end());
  for (int64_t i = 0; i < 10; ++i) CHECK(counts.count(i) >= 1);
  CHECK(all.size() == 12);
  // Interleaved from one permutation, as every rank draws the same one: rank r holds order[r::3].
  const auto order = data::permutation(10, 9, 0);
  CHECK(padded[1][0] == order[1]);
  CHECK(padded[2][2] == order[8]);
  CHECK(padded[1][3] == order[0]);  // position 10 of the padded order: the order's first again
  CHECK(padded[2][3] == order[1]);
  // drop_last: 9 of the 10, 3 each, disjoint.
  const auto dropped = shares(3, 10, 0, true, true);
  std::set<int64_t> distinct;
  for (const auto& s : dropped) {
    CHECK(s.size() == 3);
    distinct.insert(s.begin(), s.end());
  }
  CHECK(distinct.size() == 9);
  // Another epoch, another order; no shuffle, 0..n-1 interleaved.
  CHECK(shares(3, 10, 1, true, false)[0] != padded[0]);
  CHECK(shares(2, 5, 0, false, false)[1] == std::vector<int64_t>{1, 3, 0});
  // Fewer examples than ranks: padded by repetition.
  CHECK(shares(4, 2, 0, false, false)[3] == std::vector<int64_t>{1});
  expect_error<ValueError>("rank", [] { data::distributed_sampler({.rank = 2, .world_size = 2}); }, {"rank 2", "[0, 2)"});
  expect_error<ValueError>("world", [] { data::distributed_sampler({.rank = 0, .world_size = 0}); }, {"world_size", "0"});
  // Through a DataLoader: rank 1 of 2 over 7 examples gets 1, 3, 5 and the padding 0, in batches of 2.
  DataLoaderOptions loader_options;
  loader_options.batch_size = 2;
  loader_options.sampler = data::distributed_sampler({.rank = 1, .world_size = 2, .shuffle = false});
  DataLoader loader(index_dataset(7), loader_options);
  CHECK(epoch_labels(loader) == std::vector<std::vector<int64_t>>{{1, 3}, {5, 0}});
}

TEST_CASE("DataLoader: batch count, drop_last and sizes") {
  auto ds = index_dataset(10);
  DataLoader keep(ds, {.batch_size = 4});
  CHECK(keep.size() == 3);
  auto b = epoch_labels(keep);
  REQUIRE(b.size() == 3);
  CHECK(b[2] == std::vector<int64_t>{8, 9});
  CHECK(b[0] == std::vector<int64_t>{0, 1, 2, 3});
  CHECK_FALSE(keep.next().has_value());
  DataLoader drop(ds, {.batch_size = 4, .drop_last = true});
  CHECK(drop.size() == 2);
  CHECK(epoch_labels(drop).size() == 2);
  Batch first = *DataLoader(ds, {.batch_size = 4}).next();
  CHECK(first.images.shape() == Shape{4, 1, 1, 1});
  CHECK(first.images.to_vector<float>()[3] == doctest::Approx(3 / 255.0));
  expect_error<ValueError>("batch size", [&] { DataLoader(ds, {.batch_size = 0}); }, {"batch_size 0"});
}

TEST_CASE("DataLoader: seeded shuffle per epoch, every sample once, same for any num_workers") {
  auto ds = index_dataset(37);
  auto run = [&](int workers, uint64_t seed, int64_t epoch) {
    DataLoader l(ds, {.batch_size = 5, .shuffle = true, .seed = seed, .num_workers = workers});
    l.set_epoch(epoch);
    return epoch_labels(l);
  };
  auto e0 = run(0, 7, 0);
  CHECK(e0 == run(0, 7, 0));
  CHECK(e0 != run(0, 7, 1));
  CHECK(e0 != run(0, 8, 0));
  std::multiset<int64_t> seen;
  for (auto& b : e0) seen.insert(b.begin(), b.end());
  CHECK(seen.size() == 37);
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 37);
  for (int workers : {1, 2, 3}) {
    INFO("workers ", workers);
    CHECK(run(workers, 7, 0) == e0);
    CHECK(run(workers, 7, 3) == run(0, 7, 3));
  }
  // Images follow their labels through the workers.
  DataLoader l(ds, {.batch_size = 5, .shuffle = true, .seed = 7, .num_workers = 2});
  for (Batch& b : l) {
    auto px = b.images.to_vector<float>();
    auto lab = b.labels.to_vector<int64_t>();
    for (size_t i = 0; i < lab.size(); ++i) CHECK(px[i] == doctest::Approx(lab[i] / 255.0));
  }
  // Consecutive epochs through one loader.
  DataLoader multi(ds, {.batch_size = 5, .shuffle = true, .seed = 7, .num_workers = 2});
  CHECK(epoch_labels(multi) == e0);
  multi.set_epoch(3);
  CHECK(epoch_labels(multi) == run(0, 7, 3));
}

TEST_CASE("DataLoader: resume from a recorded position gives the same following batches") {
  auto ds = index_dataset(40);
  auto flip = [](Batch& b, Generator& g) { b.images = random_horizontal_flip(b.images, 0.5, g); };
  for (int workers : {0, 2}) {
    INFO("workers ", workers);
    DataLoaderOptions opts{.batch_size = 3, .shuffle = true, .seed = 11, .num_workers = workers, .transform = flip};
    DataLoader a(ds, opts);
    a.set_epoch(2);
    for (int i = 0; i < 4; ++i) a.next();
    const LoaderPosition pos = a.position();
    CHECK(pos == LoaderPosition{2, 4});
    auto rest = epoch_labels(a);
    CHECK(rest.size() == 14 - 4);
    DataLoader b(ds, opts);
    b.set_position(pos);
    CHECK(epoch_labels(b) == rest);
    // Stopping early and restarting mid-epoch with workers in flight.
    DataLoader c(ds, opts);
    c.set_epoch(2);
    c.next();
    c.set_position(pos);
    CHECK(epoch_labels(c) == rest);
  }
}

TEST_CASE("DataLoader: sampler hook and errors from workers") {
  auto ds = index_dataset(10);
  Sampler evens = [](int64_t n, int64_t epoch) {
    std::vector<int64_t> v;
    for (int64_t i = epoch % 2; i < n; i += 2) v.push_back(i);
    return v;
  };
  DataLoader l(ds, {.batch_size = 2, .num_workers = 2, .sampler = evens});
  CHECK(l.size() == 3);
  CHECK(epoch_labels(l) == std::vector<std::vector<int64_t>>{{0, 2}, {4, 6}, {8}});
  l.set_epoch(1);
  CHECK(epoch_labels(l) == std::vector<std::vector<int64_t>>{{1, 3}, {5, 7}, {9}});
  auto boom = [](Batch&, Generator&) { throw ValueError("boom"); };
  DataLoader bad(ds, {.batch_size = 2, .num_workers = 2, .transform = boom});
  expect_error<ValueError>("worker error", [&] { bad.next(); }, {"boom"});
  CHECK(bad.position() == LoaderPosition{0, 0});
  auto small = index_dataset(10);
  small->truncate(4);
  CHECK(small->size() == 4);
  CHECK(DataLoader(small, {.batch_size = 3}).size() == 2);
  DataLoader out(ds, {.batch_size = 2, .sampler = [](int64_t, int64_t) { return std::vector<int64_t>{99}; }});
  expect_error<IndexError>("sampler range", [&] { out.next(); }, {"99"});
}

TEST_CASE("DataLoader: pin_memory gives the same batches, pinned only where a GPU is visible") {
  auto ds = index_dataset(10);
  DataLoader unpinned(ds, {.batch_size = 4});
  const auto plain = epoch_labels(unpinned);
  for (int workers : {0, 2}) {
    INFO("workers ", workers);
    DataLoader l(ds, {.batch_size = 4, .num_workers = workers, .pin_memory = true});
    CHECK(l.options().pin_memory == has_cuda());  // without a GPU the option turns itself off
    std::vector<std::vector<int64_t>> labels;
    for (Batch& b : l) {
      CHECK(b.images.is_pinned() == has_cuda());
      CHECK(b.labels.is_pinned() == has_cuda());
      auto px = b.images.to_vector<float>();
      labels.push_back(b.labels.to_vector<int64_t>());
      for (size_t i = 0; i < px.size(); ++i) CHECK(px[i] == doctest::Approx(labels.back()[i] / 255.0));
    }
    CHECK(labels == plain);
  }
}

TEST_CASE("transforms: normalize, crop and flip by hand; reproducible from the generator") {
  // Two images, 2 channels, 2x3.
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = float(i);
  Tensor x = from_vector(v, {2, 2, 2, 3});
  auto n = normalize(x, {1, 2}, {2, 4}).to_vector<float>();
  CHECK(n[0] == doctest::Approx(-0.5));           // (0-1)/2
  CHECK(n[6] == doctest::Approx((6 - 2) / 4.0));  // channel 1
  CHECK(n[12] == doctest::Approx((12 - 1) / 2.0));
  expect_error<ValueError>("normalize channels", [&] { normalize(x, {1, 2, 3}, {1}); }, {"3 means"});

  // p = 1 flips every row; p = 0 none.
  Generator g(5);
  auto f = random_horizontal_flip(x, 1.0, g).to_vector<float>();
  CHECK(std::vector<float>(f.begin(), f.begin() + 6) == std::vector<float>{2, 1, 0, 5, 4, 3});
  CHECK(random_horizontal_flip(x, 0.0, g).to_vector<float>() == v);

  // Crop with padding covering the whole padded image: size H + 2p is the padded image itself.
  Tensor one = from_vector(std::vector<float>{1, 2, 3, 4}, {1, 1, 2, 2});
  auto padded = random_crop(one, 4, 1, g).to_vector<float>();
  CHECK(padded == std::vector<float>{0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0});
  // A 1x1 crop without padding picks one of the pixels; every pixel appears over many draws.
  Tensor many = from_vector(std::vector<float>(400, 0), {100, 1, 2, 2}) + one;
  auto picks = random_crop(many, 1, 0, g).to_vector<float>();
  CHECK(std::set<float>(picks.begin(), picks.end()) == std::set<float>{1, 2, 3, 4});
  // A 2x2 crop of padding 1 from a 2x2 image is one of 9 shifted windows, each sum known.
  auto shifted = random_crop(many, 2, 1, g).to_vector<float>();
  std::set<float> sums;
  for (int b = 0; b < 100; ++b) sums.insert(shifted[b * 4] + shifted[b * 4 + 1] + shifted[b * 4 + 2] + shifted[b * 4 + 3]);
  CHECK(sums == std::set<float>{1, 2, 3, 4, 3 + 4, 1 + 2, 1 + 3, 2 + 4, 10});

  // Same generator state, same output; a different seed, a different one.
  Tensor big = rand({64, 3, 8, 8});
  Generator a(42), b(42), c(43);
  Tensor ra = random_horizontal_flip(random_crop(big, 8, 2, a), 0.5, a);
  Tensor rb = random_horizontal_flip(random_crop(big, 8, 2, b), 0.5, b);
  Tensor rc = random_horizontal_flip(random_crop(big, 8, 2, c), 0.5, c);
  CHECK(equal(ra, rb));
  CHECK_FALSE(equal(ra, rc));
  CHECK(a.state().offset == 2);
  // About half the images flipped.
  Tensor ones_row = from_vector(std::vector<float>{0, 1}, {1, 1, 1, 2}).expand({1000, 1, 1, 2}).contiguous();
  auto fl = random_horizontal_flip(ones_row, 0.5, a).to_vector<float>();
  int flipped = 0;
  for (int i = 0; i < 1000; ++i) flipped += fl[2 * i] == 1.0f;
  CHECK(flipped > 420);
  CHECK(flipped < 580);
}

}  // TEST_SUITE
