// train/: the MMEngine log format, its TensorBoard event files, checkpoints, the Runner's loop, its
// files and bit-exact resume on synthetic data, and an end-to-end run on the real Fashion-MNIST
// (skipped, saying so, when Debian's dataset-fashion-mnist is not installed; `./ember deps` installs it).
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "data/transforms.h"
#include "dist/gloo_process_group.h"
#include "dist/tcp_store.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "tensor/atomic_file.h"
#include "tensor/cuda_settings.h"
#include "tensor/safetensors.h"
#include "tensor/host_sync.h"
#include "tensor/printable.h"
#include "tests/event_file_reader.h"
#include "tests/helpers.h"
#include "tests/train_program.h"
#include "train/checkpoint.h"
#include "train/deepspeed_config.h"
#include "train/log.h"
#include "train/model_zoo.h"
#include "train/runner.h"
#include "train/tensorboard.h"
#include "train/work_dir_lock.h"

using namespace ember;
using namespace ember::train;
using namespace ember_test;
namespace fs = std::filesystem;

namespace {

const std::string kFashionDir = "/usr/share/datasets/fashion-mnist";
bool has_fashion_mnist() { return fs::exists(kFashionDir + "/train-images-idx3-ubyte.gz"); }

// Four classes of 8x8 images: noise plus a class's rows lit (every 4th row from the class index),
// a pattern a small net learns and a horizontal flip keeps.
// One image may be poisoned with NaN (to make one step's gradient non-finite).
std::shared_ptr<data::TensorDataset> pattern_dataset(int64_t n, uint64_t seed, int64_t nan_at = -1) {
  Generator gen(seed);
  Tensor images = mul(randn({n, 1, 8, 8}, {}, &gen), 0.5);
  std::vector<int64_t> labels(n);
  std::vector<float> pixels = images.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = i % 4;
    for (int64_t p = 0; p < 64; ++p)
      if (p / 8 % 4 == labels[i]) pixels[i * 64 + p] += 1.0f;
  }
  if (nan_at >= 0) pixels[nan_at * 64] = std::nanf("");
  return std::make_shared<data::TensorDataset>(from_vector(pixels, {n, 1, 8, 8}), from_vector(labels, {n}));
}

// x * sqrt(gate) with gate = 0: a finite forward, and an infinite gradient for the gate (d sqrt(g)/dg
// at 0), made by the backward of its sqrt.
struct SqrtGate : nn::UnaryModule {
  Tensor gate = register_parameter("gate", zeros({}));
  std::string name() const override { return "SqrtGate"; }
  Tensor forward(const Tensor& x) override { return x * sqrt(gate); }
};

// A model, an optimizer with state (momentum), a scheduler and loaders: one training run's parts.
struct Run {
  std::shared_ptr<nn::Sequential> model;
  std::shared_ptr<optim::SGD> optimizer;
  std::shared_ptr<optim::LRScheduler> scheduler;
  std::shared_ptr<data::DataLoader> train_loader, val_loader;

  // `after_relu`, when given, goes between the ReLU and the Dropout (as module "3").
  Run(uint64_t init_seed, int num_workers, int64_t epochs, std::shared_ptr<data::TensorDataset> train_set = {},
      std::shared_ptr<nn::UnaryModule> after_relu = {}) {
    manual_seed(init_seed);
    model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Flatten>());
    model->push_back(std::make_shared<nn::Linear>(64, 32));
    model->push_back(std::make_shared<nn::ReLU>());
    if (after_relu) model->push_back(after_relu);
    model->push_back(std::make_shared<nn::Dropout>(0.2));  // draws from the default generator
    model->push_back(std::make_shared<nn::Linear>(32, 4));
    optim::SGDOptions o;
    o.lr = 0.05;
    o.momentum = 0.9;
    optimizer = std::make_shared<optim::SGD>(model->parameters(), o);
    if (!train_set) train_set = pattern_dataset(36, 7);
    scheduler = std::make_shared<optim::CosineAnnealingLR>(*optimizer, epochs * 5);
    data::DataLoaderOptions lo;
    lo.batch_size = 8;  // 36 images: 5 batches, the last of 4
    lo.shuffle = true;
    lo.seed = 3;
    lo.num_workers = num_workers;
    lo.transform = [](data::Batch& b, Generator& gen) { b.images = data::random_horizontal_flip(b.images, 0.5, gen); };
    train_loader = std::make_shared<data::DataLoader>(train_set, lo);
    val_loader = std::make_shared<data::DataLoader>(pattern_dataset(20, 11), data::DataLoaderOptions{.batch_size = 8});
  }

  Runner runner(RunnerOptions o) { return Runner(model, optimizer, scheduler, train_loader, val_loader, std::move(o)); }
};

RunnerOptions options(const std::string& work_dir, int64_t epochs, std::ostream& console) {
  RunnerOptions o;
  o.epochs = epochs;
  o.log_interval = 2;
  o.work_dir = work_dir;
  o.console = &console;
  return o;
}

void check_bit_equal(const StateDict& a, const StateDict& b, const std::string& what) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(what, ": ", name);
    REQUIRE(b.count(name) == 1);
    const Tensor& u = b.at(name);
    REQUIRE(t.shape() == u.shape());
    REQUIRE(t.dtype() == u.dtype());
    const Tensor x = t.contiguous(), y = u.contiguous();
    CHECK(std::memcmp(x.raw_data(), y.raw_data(), size_t(x.numel()) * dtype_size(x.dtype())) == 0);
  }
}

// The JSON lines of a work dir without the fields that measure time.
std::vector<nlohmann::json> logged_values(const std::string& work_dir) {
  std::ifstream in(work_dir + "/scalars.json");
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    for (const char* timed : {"eta", "time", "data_time"}) j.erase(timed);
    records.push_back(j);
  }
  return records;
}

// Reads every event file in <work_dir>/tensorboard (each to its end, without a CRC or framing error)
// and checks that, in the order the files were made, they hold scalars.json: each line one event at
// its step, with every numeric field as a "<mode>/<name>" scalar equal to the field in float32.
// Returns the number of event files.
size_t check_event_files_hold_scalars(const std::string& work_dir) {
  std::vector<EventFileContents> files;
  for (const auto& entry : fs::directory_iterator(work_dir + "/tensorboard")) {
    INFO(entry.path().string());
    CHECK(entry.path().filename().string().starts_with("events.out.tfevents."));
    files.push_back(read_event_file(entry.path().string()));
    CHECK(files.back().error == "");
    REQUIRE(!files.back().events.empty());
    CHECK(files.back().events.front().file_version == "brain.Event:2");
  }
  std::sort(files.begin(), files.end(), [](const EventFileContents& a, const EventFileContents& b) {
    return a.events.front().wall_time < b.events.front().wall_time;
  });
  std::vector<TensorBoardEvent> events;
  for (const EventFileContents& f : files) events.insert(events.end(), f.events.begin() + 1, f.events.end());

  std::ifstream in(work_dir + "/scalars.json");
  size_t line_count = 0;
  for (std::string line; std::getline(in, line); ++line_count) {
    INFO("scalars.json line ", line_count + 1, ": ", line);
    REQUIRE(line_count < events.size());
    const TensorBoardEvent& event = events[line_count];
    const auto record = nlohmann::ordered_json::parse(line);  // in the order of the fields
    CHECK(event.step == record["step"].get<int64_t>());
    std::vector<std::pair<std::string, float>> expected;
    for (const auto& [name, value] : record.items()) {
      if (name == "mode" || name == "epoch" || name == "iter" || name == "step" || value.is_string()) continue;
      // A NaN or an infinity is null in JSON.
      expected.emplace_back(record["mode"].get<std::string>() + "/" + name,
                            value.is_null() ? std::nanf("") : static_cast<float>(value.get<double>()));
    }
    REQUIRE(event.values.size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      CHECK(event.values[i].first == expected[i].first);
      if (std::isnan(expected[i].second)) CHECK(!std::isfinite(event.values[i].second));
      else CHECK(event.values[i].second == expected[i].second);
    }
  }
  CHECK(line_count > 0);
  CHECK(events.size() == line_count);
  return files.size();
}

// Whether this CPU has AVX-512 (then OpenBLAS can run its SkylakeX kernels).
bool cpu_has_avx512() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("flags")) return line.find(" avx512f") != std::string::npos;
  return false;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("log: MMEngine's line format, with grad_norm") {
  CHECK(format_duration(70) == "0:01:10");
  CHECK(format_duration(0.9) == "0:00:00");
  CHECK(format_duration(36000 + 59) == "10:00:59");
  CHECK(format_duration(90000) == "1 day, 1:00:00");
  CHECK(format_duration(2 * 86400 + 3723) == "2 days, 1:02:03");
  const std::vector<LogField> train_fields = {
      {"lr", 1e-3, FieldFormat::scientific}, {"eta", 70, FieldFormat::duration}, {"time", 0.0412},
      {"data_time", 0.0021}, {"memory", 0, FieldFormat::integer}, {"loss", 0.6134}, {"grad_norm", 1.2034}};
  CHECK(format_log_line({"train", 1, 50, 469}, train_fields) ==
        "Epoch(train)  [1][ 50/469]  lr: 1.0000e-03  eta: 0:01:10  time: 0.0412  data_time: 0.0021  memory: 0  "
        "loss: 0.6134  grad_norm: 1.2034");
  CHECK(format_log_line({"train", 12, 469, 469}, {{"loss", 0.61344}}) == "Epoch(train)  [12][469/469]  loss: 0.6134");
  CHECK(format_log_line({"val", 1, 79, 79}, {{"accuracy/top1", 88.41}, {"data_time", 0.004}, {"time", 0.0123}}) ==
        "Epoch(val) [1][79/79]  accuracy/top1: 88.4100  data_time: 0.0040  time: 0.0123");
}

TEST_CASE("log: MetricLog prints the line and appends the same fields as JSON") {
  TempDir dir;
  std::ostringstream console;
  {
    MetricLog log(console, dir / "scalars.json");
    log.write({"train", 2, 5, 10}, 15,
              {{"lr", 0.5, FieldFormat::scientific}, {"loss", 1.25}, {"nonfinite", "forward fc1 (linear)"}});
  }
  MetricLog(console, dir / "scalars.json").write({"val", 2, 3, 3}, 2, {{"accuracy/top1", 50.0}});
  CHECK(console.str() ==
        "Epoch(train)  [2][ 5/10]  lr: 5.0000e-01  loss: 1.2500  nonfinite: forward fc1 (linear)\n"
        "Epoch(val) [2][3/3]  accuracy/top1: 50.0000\n");
  std::ifstream in(dir / "scalars.json");
  std::string first, second;
  REQUIRE(std::getline(in, first));
  REQUIRE(std::getline(in, second));
  const auto a = nlohmann::json::parse(first), b = nlohmann::json::parse(second);
  CHECK(a["mode"] == "train");
  CHECK(a["epoch"] == 2);
  CHECK(a["iter"] == 5);
  CHECK(a["step"] == 15);
  CHECK(a["lr"] == 0.5);
  CHECK(a["loss"] == 1.25);
  CHECK(a["nonfinite"] == "forward fc1 (linear)");  // a string
  CHECK(b["accuracy/top1"] == 50.0);
  expect_error<IOError>("unwritable", [&] { MetricLog(console, dir / "no/such/dir/scalars.json"); }, {"no/such/dir"});
}

TEST_CASE("log: MetricLog cuts the unfinished last line that a process killed mid-append left") {
  TempDir dir;
  const std::string path = dir / "scalars.json";
  const std::string whole = "{\"mode\":\"train\",\"step\":1}\n";
  std::ofstream(path) << whole << "{\"mode\":\"train\",\"nonfinite\":\"" << std::string(10000, 'x');  // > one read
  std::ostringstream console;
  MetricLog(console, path).write({"val", 1, 3, 3}, 1, {{"accuracy/top1", 50.0}});
  CHECK(read_text(path) == whole + "{\"mode\":\"val\",\"epoch\":1,\"iter\":3,\"step\":1,\"accuracy/top1\":50.0}\n");
  std::ofstream(path) << "{\"mode\":";  // no whole line at all
  MetricLog(console, path);
  CHECK(read_text(path).empty());
}

TEST_CASE("tensorboard: CRC-32C gives the published check values; masked, it undoes as TFRecord readers undo it") {
  const std::string check = "123456789";
  CHECK(crc32c(check.data(), check.size()) == 0xE3069283u);  // the CRC catalogue's check value for CRC-32C
  CHECK(crc32c("", 0) == 0u);
  // RFC 3720 (iSCSI), appendix B.4.
  std::vector<uint8_t> bytes(32, 0x00);
  CHECK(crc32c(bytes.data(), bytes.size()) == 0x8A9136AAu);
  std::fill(bytes.begin(), bytes.end(), 0xFF);
  CHECK(crc32c(bytes.data(), bytes.size()) == 0x62A8AB43u);
  std::iota(bytes.begin(), bytes.end(), 0);
  CHECK(crc32c(bytes.data(), bytes.size()) == 0x46DD794Eu);
  std::reverse(bytes.begin(), bytes.end());
  CHECK(crc32c(bytes.data(), bytes.size()) == 0x113FDB5Cu);
  // The writer's table against the test reader's bit-by-bit CRC, on odd lengths of random bytes.
  std::mt19937 gen(5);
  for (size_t n : {1, 7, 8, 9, 63, 1000}) {
    std::vector<uint8_t> data(n);
    for (auto& b : data) b = static_cast<uint8_t>(gen());
    CHECK(crc32c(data.data(), n) == crc32c_bitwise(data.data(), n));
    CHECK(unmask_crc(masked_crc32c(data.data(), n)) == crc32c(data.data(), n));
    CHECK(masked_crc32c(data.data(), n) != crc32c(data.data(), n));
  }
}

TEST_CASE("tensorboard: event files read back by an independent reader; a changed byte is a CRC mismatch, a cut tail keeps the records before it") {
  TempDir dir;
  const auto unix_seconds = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
  const double before = unix_seconds();
  std::string path;
  {
    TensorBoardWriter writer(dir / "tb");  // made when missing
    path = writer.path();
    writer.add_scalars({{"train/loss", 0.6134}, {"train/lr", 1e-3}, {"train/memory", 0}}, 50);
    writer.add_scalars({{"val/accuracy/top1", 88.41}}, 1);  // a step that goes back: validation at epochs
    writer.add_scalars({{"train/loss", -2.5}}, int64_t(1) << 40);
    writer.add_scalars({}, -3);  // a negative int64: a 10-byte varint
  }
  const double after = unix_seconds();
  const std::regex name("events\\.out\\.tfevents\\.[0-9]{10}\\..+\\." + std::to_string(::getpid()) + "\\.[0-9]+");
  CHECK_MESSAGE(std::regex_match(fs::path(path).filename().string(), name), path);
  const EventFileContents read = read_event_file(path);
  CHECK(read.error == "");
  REQUIRE(read.events.size() == 5);
  CHECK(read.events[0].file_version == "brain.Event:2");
  CHECK(read.events[0].values.empty());
  for (const TensorBoardEvent& e : read.events) {
    CHECK(e.wall_time >= std::floor(before));
    CHECK(e.wall_time <= after + 1);
  }
  CHECK(read.events[1].step == 50);
  CHECK(read.events[1].file_version == "");
  using Values = std::vector<std::pair<std::string, float>>;
  CHECK(read.events[1].values == Values{{"train/loss", 0.6134f}, {"train/lr", 1e-3f}, {"train/memory", 0.0f}});
  CHECK(read.events[2].step == 1);
  CHECK(read.events[2].values == Values{{"val/accuracy/top1", 88.41f}});
  CHECK(read.events[3].step == int64_t(1) << 40);
  CHECK(read.events[3].values == Values{{"train/loss", -2.5f}});
  CHECK(read.events[4].step == -3);
  CHECK(read.events[4].values.empty());

  // A second writer on the directory starts a file of its own.
  {
    TensorBoardWriter second(dir / "tb");
    CHECK(second.path() != path);
  }
  CHECK(read_event_file(path).events.size() == 5);

  const std::string bytes = read_binary(path);
  const size_t second_record = 12 + static_cast<size_t>(event_file_detail::little_endian_at(bytes, 0, 8)) + 4;
  // A byte of the second record's data: its data CRC no longer matches; the first record still reads.
  std::string changed = bytes;
  changed[second_record + 12 + 3] ^= 0x10;
  EventFileContents bad = parse_event_file(changed);
  CHECK(bad.events.size() == 1);
  CHECK(bad.error == "the record at byte " + std::to_string(second_record) + ": data CRC mismatch");
  // A byte of its length: the length CRC catches it before the length is used.
  changed = bytes;
  changed[second_record + 1] ^= 0x01;
  bad = parse_event_file(changed);
  CHECK(bad.events.size() == 1);
  CHECK(bad.error == "the record at byte " + std::to_string(second_record) + ": length CRC mismatch");
  // A stored CRC: a mismatch too.
  changed = bytes;
  changed[bytes.size() - 1] ^= 0x80;
  CHECK(parse_event_file(changed).error.ends_with(": data CRC mismatch"));
  // A tail cut mid-record (a process killed in a write): every earlier record reads.
  bad = parse_event_file(bytes.substr(0, bytes.size() - 5));
  CHECK(bad.events.size() == 4);
  CHECK(bad.error.ends_with(" is cut in its data"));
  CHECK(parse_event_file(bytes.substr(0, second_record + 6)).error.ends_with(" is cut in its header"));
}

// Lowers the process's file size limit for its lifetime, so that writes past `bytes` fail with
// EFBIG (a full disk as far as a writer can tell), SIGXFSZ ignored.
struct FileSizeLimit {
  rlimit saved{};
  struct sigaction saved_action{};
  explicit FileSizeLimit(rlim_t bytes) {
    struct sigaction ignore{};
    ignore.sa_handler = SIG_IGN;
    REQUIRE(::sigaction(SIGXFSZ, &ignore, &saved_action) == 0);
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    rlimit lowered = saved;
    lowered.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lowered) == 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved);
    ::sigaction(SIGXFSZ, &saved_action, nullptr);
  }
};

TEST_CASE("tensorboard: an unwritable directory and a full disk give an IOError naming the file and the reason; records stay whole") {
  TempDir dir;
  std::ofstream(dir / "file") << "not a directory";
  expect_error<IOError>("a file in the path", [&] { TensorBoardWriter writer(dir / "file/tb"); },
                        {("cannot make the TensorBoard directory " + dir / "file/tb").c_str(), "Not a directory"});
  expect_error<IOError>("a file in its place", [&] { TensorBoardWriter writer(dir / "file"); },
                        {("cannot make the TensorBoard directory " + dir / "file").c_str()});

  TensorBoardWriter writer(dir / "tb");
  writer.add_scalars({{"train/loss", 1.0}}, 1);
  const auto whole = static_cast<rlim_t>(fs::file_size(writer.path()));
  {
    // Room for 20 bytes of the next record: its first write is cut short there, the rest refused.
    FileSizeLimit limit(whole + 20);
    expect_error<IOError>("full", [&] { writer.add_scalars({{"train/loss", 2.0}, {"train/lr", 0.1}}, 2); },
                          {("cannot append to the TensorBoard event file " + writer.path() + ": ").c_str(),
                           std::strerror(EFBIG)});
    CHECK(fs::file_size(writer.path()) == whole);  // the part taken back
  }
  writer.add_scalars({{"train/loss", 3.0}}, 3);  // room again: the file goes on readable
  const EventFileContents read = read_event_file(writer.path());
  CHECK(read.error == "");
  REQUIRE(read.events.size() == 3);
  CHECK(read.events[1].step == 1);
  CHECK(read.events[2].step == 3);
  CHECK(read.events[2].values.front().second == 3.0f);
}

TEST_CASE("work dir lock: a second holder is refused, naming the dir and the holder's pid; released, the dir is free") {
  TempDir dir;
  const std::string pid = std::to_string(::getpid());
  {
    WorkDirLock held(dir.path.string());
    CHECK(read_text(dir / ".lock") == pid + "\n");
    expect_error<WorkDirInUse>("second lock", [&] { WorkDirLock again(dir.path.string()); },
                               {dir.path.string().c_str(), "is in use by another run", ("(pid " + pid + ")").c_str()});
    // A Runner on a work dir in use is refused before it writes anything.
    std::ostringstream console;
    Run run(1, 0, 1);
    CHECK_THROWS_AS(run.runner(options(dir.path.string(), 1, console)), WorkDirInUse);
    CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
  }
  CHECK_FALSE(fs::exists(dir / ".lock"));
  WorkDirLock again(dir.path.string());
}

TEST_CASE("checkpoint: round trip of every part, and errors that name the file") {
  TempDir dir;
  Checkpoint c;
  c.model["fc.weight"] = from_vector(std::vector<float>{1.5f, -2.0f, 3.25f}, {3});
  c.optimizer["state.0.step"] = optim::scalar_f64(7);
  c.scheduler["last_epoch"] = optim::scalar_f64(6);
  c.runner["best_top1"] = optim::scalar_f64(81.5);
  c.runner_text = {{"log_window.nonfinite", "backward layer1.0.conv2 (conv2d)"}};
  c.rng = {~uint64_t(0), uint64_t(1) << 63};  // u64 values past int64's range survive
  c.epoch = 3;
  c.iteration = 1407;
  c.loader = {3, 12};
  c.info = {{"model", "cnn"}};
  const std::string path = dir / "c.safetensors";
  save_checkpoint(path, c);
  const Checkpoint r = load_checkpoint(path);
  check_bit_equal(r.model, c.model, "model");
  check_bit_equal(r.optimizer, c.optimizer, "optimizer");
  check_bit_equal(r.scheduler, c.scheduler, "scheduler");
  check_bit_equal(r.runner, c.runner, "runner");
  CHECK(r.runner_text == c.runner_text);
  CHECK(r.rng.seed == c.rng.seed);
  CHECK(r.rng.offset == c.rng.offset);
  CHECK(r.epoch == 3);
  CHECK(r.iteration == 1407);
  CHECK(r.loader == data::LoaderPosition{3, 12});
  CHECK(r.info == c.info);

  const std::string plain = dir / "plain.safetensors";
  save_safetensors(plain, {{"w", zeros({2})}});
  expect_error<FormatError>("not a checkpoint", [&] { load_checkpoint(plain); }, {"plain.safetensors", "not an ember checkpoint"});
  auto with_meta = [&](std::map<std::string, std::string> meta, StateDict tensors) {
    tensors["rng.default"] = zeros({2}, TensorOptions(DType::i64));
    save_safetensors(plain, tensors, meta);
  };
  const std::map<std::string, std::string> good = {
      {"format", "ember-checkpoint/1"}, {"epoch", "1"}, {"iteration", "5"}, {"loader.epoch", "1"}, {"loader.batch", "0"}};
  with_meta(good, {{"model.w", zeros({1})}});
  CHECK(load_checkpoint(plain).iteration == 5);
  auto bad = good;
  bad.erase("iteration");
  with_meta(bad, {});
  expect_error<FormatError>("missing counter", [&] { load_checkpoint(plain); }, {"plain.safetensors", "lacks \"iteration\""});
  bad = good;
  bad["epoch"] = "3x";
  with_meta(bad, {});
  expect_error<FormatError>("malformed counter", [&] { load_checkpoint(plain); }, {"\"epoch\" is \"3x\""});
  // Counters that would wrap or lose their exactness as doubles are refused, not wrapped.
  for (const char* number : {"9223372036854775807", "99999999999999999999", "9007199254740993", "-1", "+3", " 3"}) {
    bad = good;
    bad["iteration"] = number;
    with_meta(bad, {});
    expect_error<FormatError>(number, [&] { load_checkpoint(plain); }, {"\"iteration\" is", "not a count from 0 to 2^53"});
  }
  with_meta(good, {{"weights.w", zeros({1})}});
  expect_error<FormatError>("stray tensor", [&] { load_checkpoint(plain); }, {"unexpected tensor \"weights.w\""});

  // Truncated: the safetensors reader refuses it, naming the file.
  fs::resize_file(path, fs::file_size(path) - 4);
  expect_error<FormatError>("truncated", [&] { load_checkpoint(path); }, {"c.safetensors"});
}

TEST_CASE("Runner: learns, logs every interval and each epoch's end, and writes its files") {
  TempDir dir;
  std::ostringstream console;
  Run run(1, 0, 4);
  RunnerOptions o = options(dir.path.string(), 4, console);
  o.keep_checkpoints = 2;
  const RunSummary s = run.runner(o).run();
  REQUIRE(s.epochs.size() == 4);
  CHECK(s.iterations == 20);
  CHECK_FALSE(s.stopped_early);
  CHECK(s.skipped_steps == 0);
  CHECK(s.epochs.back().mean_loss < 0.5 * s.epochs.front().mean_loss);
  CHECK(s.epochs.back().top1 >= 90.0);
  double best = 0;
  for (const auto& e : s.epochs) best = std::max(best, e.top1);
  CHECK(s.best_top1 == best);

  // Lines at batches 2 and 4 of 5 and at the epoch's end; then the validation line.
  const std::string text = console.str();
  // The lr of the step logged: 0.05 * (1 + cos(pi * 1 / 20)) / 2 at the second of 20 cosine steps.
  CHECK(text.find("Epoch(train)  [1][2/5]  lr: 4.9692e-02  eta: ") != std::string::npos);
  CHECK(text.find("Epoch(train)  [1][5/5]") != std::string::npos);
  CHECK(text.find("Epoch(train)  [1][3/5]") == std::string::npos);
  CHECK(text.find("Epoch(val) [4][3/3]  accuracy/top1: ") != std::string::npos);
  // memory: the peak MiB of tensors (host memory here) since the previous line, a whole number.
  CHECK(std::regex_search(text, std::regex("\\]  lr: [^\\n]*  memory: [0-9]+  loss: ")));
  CHECK(text.find("grad_norm: ") != std::string::npos);
  const auto records = logged_values(dir.path.string());
  CHECK(records.size() == 4 * 3 + 4);

  // Keep the newest 2 epoch files; last_checkpoint names the newest; best is the best epoch's state.
  CHECK_FALSE(fs::exists(dir / "epoch_1.safetensors"));
  CHECK_FALSE(fs::exists(dir / "epoch_2.safetensors"));
  CHECK(fs::exists(dir / "epoch_3.safetensors"));
  CHECK(read_text(dir / "last_checkpoint") == fs::absolute(dir / "epoch_4.safetensors").string() + "\n");
  const Checkpoint last = load_checkpoint(dir / "epoch_4.safetensors");
  CHECK(last.epoch == 4);
  CHECK(last.iteration == 20);
  CHECK(last.loader == data::LoaderPosition{4, 0});
  check_bit_equal(last.model, run.model->state_dict(), "final weights");
  const Checkpoint top = load_checkpoint(dir / "best_accuracy_top1.safetensors");
  CHECK(top.runner.at("best_top1").item<double>() == s.best_top1);
}

TEST_CASE("Runner: tensorboard writes scalars.json's numbers as scalars, a new event file for a resumed run") {
  TempDir dir;
  std::ostringstream console;
  {
    Run run(1, 0, 2);
    RunnerOptions o = options(dir.path.string(), 2, console);
    o.tensorboard = true;
    o.max_iters = 7;  // stops in epoch 2, after its first log line
    CHECK(run.runner(o).run().stopped_early);
  }
  {
    Run run(1, 0, 2);
    RunnerOptions o = options(dir.path.string(), 2, console);
    o.tensorboard = true;
    o.resume = "";
    CHECK_FALSE(run.runner(o).run().stopped_early);
  }
  CHECK(check_event_files_hold_scalars(dir.path.string()) == 2);
  // The fields of both kinds of line are there, under MMEngine's hierarchical names.
  std::set<std::string> tags;
  for (const auto& entry : fs::directory_iterator(dir / "tensorboard"))
    for (const TensorBoardEvent& e : read_event_file(entry.path().string()).events)
      for (const auto& [tag, value] : e.values) tags.insert(tag);
  for (const char* tag : {"train/lr", "train/eta", "train/time", "train/data_time", "train/memory", "train/loss",
                          "train/grad_norm", "train/skipped_steps", "val/accuracy/top1", "val/time", "val/data_time"})
    CHECK_MESSAGE(tags.count(tag) == 1, tag);

  // Off, no directory; on without a work dir, refused.
  TempDir plain;
  Run run(1, 0, 1);
  run.runner(options(plain.path.string(), 1, console)).run();
  CHECK_FALSE(fs::exists(plain / "tensorboard"));
  RunnerOptions no_dir = options("", 1, console);
  no_dir.tensorboard = true;
  expect_error<ValueError>("no work dir", [&] { run.runner(no_dir); }, {"tensorboard needs a work_dir"});
  // A file where the directory goes: the run fails before its first step, naming it.
  TempDir blocked;
  std::ofstream(blocked / "tensorboard") << "in the way";
  RunnerOptions o = options(blocked.path.string(), 1, console);
  o.tensorboard = true;
  expect_error<IOError>("blocked", [&] { run.runner(o).run(); },
                        {("cannot make the TensorBoard directory " + blocked / "tensorboard").c_str()});
  CHECK(read_text(blocked / "scalars.json").empty());
}

TEST_CASE("Runner: save_interval, and stopping on request or at max_iters leaves a checkpoint") {
  TempDir dir;
  std::ostringstream console;
  Run run(1, 0, 4);
  RunnerOptions o = options(dir.path.string(), 4, console);
  o.save_interval = 3;
  o.max_iters = 12;  // batch 2 of epoch 3
  RunSummary s = run.runner(o).run();
  CHECK(s.stopped_early);
  CHECK(s.iterations == 12);
  CHECK(s.epochs.size() == 3);
  CHECK_FALSE(fs::exists(dir / "epoch_1.safetensors"));
  CHECK_FALSE(fs::exists(dir / "epoch_2.safetensors"));
  REQUIRE(fs::exists(dir / "iter_12.safetensors"));
  CHECK(read_text(dir / "last_checkpoint") == fs::absolute(dir / "iter_12.safetensors").string() + "\n");
  CHECK(load_checkpoint(dir / "iter_12.safetensors").loader == data::LoaderPosition{2, 2});

  o.max_iters = 0;
  o.resume = "";
  {
    Runner resumed = run.runner(o);  // holds the work dir until the end of this block
    resumed.request_stop();  // as a signal handler would: stops after the next iteration
    s = resumed.run();
  }
  CHECK(s.stopped_early);
  CHECK(s.iterations == 13);
  CHECK(fs::exists(dir / "iter_13.safetensors"));
  o.resume = dir / "iter_13.safetensors";
  s = run.runner(o).run();
  CHECK_FALSE(s.stopped_early);
  CHECK(s.iterations == 20);
  CHECK(fs::exists(dir / "epoch_3.safetensors"));
  CHECK(fs::exists(dir / "epoch_4.safetensors"));  // the last epoch always
}

TEST_CASE("Runner: removes what killed writes left, and never prunes the checkpoint last_checkpoint names") {
  TempDir dir;
  fs::create_directories(dir / "epoch_7.shards");
  // write_file_atomic's temporaries, in the work dir and in a sharded checkpoint's directory; then
  // files of other names, and an epoch file of an earlier, longer run.
  const std::vector<std::string> stale = {"epoch_2.safetensors.tmp.4242", "last_checkpoint.tmp.17",
                                          "epoch_7.shards/rank0-of-2.5.safetensors.tmp.99"};
  const std::vector<std::string> others = {"notes.tmp.txt", "run.tmp.", "epoch_9.safetensors"};
  for (const auto& names : {stale, others})
    for (const auto& name : names) std::ofstream(dir / name) << "x";
  std::ostringstream console;
  Run run(1, 0, 2);
  RunnerOptions o = options(dir.path.string(), 2, console);
  o.keep_checkpoints = 1;
  {
    Runner runner = run.runner(o);
    for (const auto& name : stale) CHECK_MESSAGE(!fs::exists(dir / name), name);
    for (const auto& name : others) CHECK_MESSAGE(fs::exists(dir / name), name);
    runner.run();
  }
  // epoch_9 is the newest number, but last_checkpoint names epoch_2: both stay.
  CHECK(read_text(dir / "last_checkpoint") == fs::absolute(dir / "epoch_2.safetensors").string() + "\n");
  CHECK(load_checkpoint(dir / "epoch_2.safetensors").epoch == 2);
  CHECK(fs::exists(dir / "epoch_9.safetensors"));
  CHECK_FALSE(fs::exists(dir / "epoch_1.safetensors"));
}

TEST_CASE("Runner: N iterations straight equal N/2, a resume in a fresh process state, and N/2, bit for bit") {
  // Stopping mid-epoch between two log lines (8 = batch 3 of epoch 2), at an epoch's end (5), and,
  // with a NaN image (a skipped step each epoch), right after a skipped step that a log line after
  // the resume reports (stop_at 0: found in the straight run).
  struct Case {
    int64_t stop_at, nan_at;
  };
  for (Case c : {Case{8, -1}, Case{5, -1}, Case{0, 5}}) {
    CAPTURE(c.nan_at);
    const auto train_set = [&] { return pattern_dataset(36, 7, c.nan_at); };
    TempDir straight_dir, split_dir;
    std::ostringstream console;
    Run straight(1, 0, 4, train_set());
    const RunSummary full = straight.runner(options(straight_dir.path.string(), 4, console)).run();
    int64_t stop_at = c.stop_at;
    for (const auto& record : logged_values(straight_dir.path.string()))
      if (stop_at == 0 && record.contains("nonfinite_step") && record["nonfinite_step"] < record["step"])
        stop_at = record["nonfinite_step"];
    REQUIRE(stop_at > 0);
    CAPTURE(stop_at);

    RunnerOptions first_half = options(split_dir.path.string(), 4, console);
    first_half.max_iters = stop_at;
    Run before(1, 2, 4, train_set());  // two loader workers: the batches must not depend on them
    CHECK(before.runner(first_half).run().stopped_early);

    // Another initialisation and generator state: everything must come from the checkpoint.
    Run after(99, 1, 4, train_set());
    manual_seed(12345);
    RunnerOptions second_half = options(split_dir.path.string(), 4, console);
    second_half.resume = "";
    const RunSummary rest = after.runner(second_half).run();
    CHECK(rest.iterations == full.iterations);
    CHECK(rest.best_top1 == full.best_top1);
    CHECK(rest.skipped_steps == full.skipped_steps);

    check_bit_equal(after.model->state_dict(), straight.model->state_dict(), "weights");
    check_bit_equal(after.optimizer->state_dict(), straight.optimizer->state_dict(), "optimizer");
    check_bit_equal(after.scheduler->state_dict(), straight.scheduler->state_dict(), "scheduler");
    CHECK(default_generator().state().offset == [&] {
      Run again(1, 0, 4, train_set());
      TempDir d;
      again.runner(options(d.path.string(), 4, console)).run();
      return default_generator().state().offset;
    }());
    // The same log values (loss, grad_norm, lr, accuracy, the non-finite reports), line for line.
    const auto a = logged_values(straight_dir.path.string()), b = logged_values(split_dir.path.string());
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(a[i] == b[i], a[i].dump(), " vs ", b[i].dump());
  }
}

TEST_CASE("Runner: accumulate counts steps, logs the step's batch, and resumes between steps bit for bit") {
  // 36 images in batches of 8: 5 batches an epoch, 2 steps of 2 (the fifth batch is skipped).
  TempDir straight_dir, split_dir, other_dir;
  std::ostringstream console;
  RunnerOptions o = options(straight_dir.path.string(), 3, console);
  o.accumulate = 2;
  o.log_interval = 1;
  Run straight(1, 0, 3);
  const RunSummary full = straight.runner(o).run();
  CHECK(full.iterations == 6);
  CHECK(console.str().find("Epoch(train)  [3][2/2]") != std::string::npos);
  const auto logged = logged_values(straight_dir.path.string());
  REQUIRE(logged.size() >= 6);
  CHECK(logged.front()["global_batch"] == 16);

  // Stopped after step 3 (the first of epoch 2) and resumed in a fresh state.
  RunnerOptions first_half = o;
  first_half.work_dir = split_dir.path.string();
  first_half.max_iters = 3;
  Run before(1, 2, 3);
  CHECK(before.runner(first_half).run().stopped_early);
  Run after(99, 1, 3);
  manual_seed(12345);
  RunnerOptions second_half = o;
  second_half.work_dir = split_dir.path.string();
  second_half.resume = "";
  CHECK(after.runner(second_half).run().iterations == 6);
  check_bit_equal(after.model->state_dict(), straight.model->state_dict(), "weights");
  check_bit_equal(after.optimizer->state_dict(), straight.optimizer->state_dict(), "optimizer");
  const auto a = logged_values(straight_dir.path.string()), b = logged_values(split_dir.path.string());
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(a[i] == b[i], a[i].dump(), " vs ", b[i].dump());

  // A checkpoint after 3 batches of an epoch cannot go on in steps of 2.
  RunnerOptions single = options(other_dir.path.string(), 3, console);
  single.max_iters = 3;
  Run three(1, 0, 3);
  three.runner(single).run();
  RunnerOptions resumed = o;
  resumed.work_dir = other_dir.path.string();
  resumed.resume = "";
  Run refused(1, 0, 3);
  expect_error<ValueError>("mid-step", [&] { refused.runner(resumed).run(); },
                           {"after batch 3 of epoch 1", "not the end of a step of accumulate 2"});
  expect_error<ValueError>("too many", [&] {
    RunnerOptions big = options("", 1, console);
    big.accumulate = 6;
    Run r(1, 0, 1);
    r.runner(big);
  }, {"accumulate must be from 1 to the train loader's 5 batches", "got 6"});
}

TEST_CASE("Runner: amp_fp16 and naive_fp16 resume bit for bit, loss scale, skips and masters included") {
  for (const Precision precision : {Precision::amp_fp16, Precision::naive_fp16}) {
    CAPTURE(precision_name(precision));
    // A scale of 2^24 overflows float16 at first: the run backs off, skips steps, then grows again.
    struct Mixed {
      Run base;
      std::shared_ptr<TrainingPrecision> mode;
      std::shared_ptr<optim::LRScheduler> scheduler;
      Mixed(uint64_t seed, Precision p) : base(seed, 0, 3) {
        PrecisionOptions po;
        po.precision = p;
        po.grad_scaler = {.init_scale = 16777216.0, .growth_interval = 3};
        po.loss_scaler = {.initial_scale_power = 24, .loss_scale_window = 3};
        mode = std::make_shared<TrainingPrecision>(po, *base.model, [](std::vector<Tensor> params) {
          return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
        });
        scheduler = std::make_shared<optim::CosineAnnealingLR>(mode->optimizer(), 15);
      }
      Runner runner(RunnerOptions o) {
        return Runner(base.model, mode, scheduler, base.train_loader, base.val_loader, std::move(o));
      }
    };
    TempDir straight_dir, split_dir;
    std::ostringstream console;
    Mixed straight(1, precision);
    const RunSummary full = straight.runner(options(straight_dir.path.string(), 3, console)).run();
    CHECK(full.skipped_steps > 0);

    RunnerOptions first_half = options(split_dir.path.string(), 3, console);
    first_half.max_iters = 8;
    CHECK(Mixed(1, precision).runner(first_half).run().stopped_early);
    Mixed after(99, precision);
    RunnerOptions second_half = options(split_dir.path.string(), 3, console);
    second_half.resume = "";
    const RunSummary rest = after.runner(second_half).run();
    CHECK(rest.skipped_steps == full.skipped_steps);

    check_bit_equal(after.base.model->state_dict(), straight.base.model->state_dict(), "weights");
    check_bit_equal(after.mode->optimizer().state_dict(), straight.mode->optimizer().state_dict(), "optimizer");
    check_bit_equal(after.mode->state_dict(), straight.mode->state_dict(), "scaler and masters");
    check_bit_equal(after.scheduler->state_dict(), straight.scheduler->state_dict(), "scheduler");
    const auto a = logged_values(straight_dir.path.string()), b = logged_values(split_dir.path.string());
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(a[i] == b[i], a[i].dump(), " vs ", b[i].dump());
    CHECK(a.front().contains("loss_scale"));
  }
}

TEST_CASE("Runner: an iteration queues its work without waiting; the host reads once per log line") {
  // Host syncs of one epoch with its single log line (and the validation read), for 5 and for 10
  // iterations: equal counts mean the iterations themselves read nothing on the host, whether the
  // non-finite check runs or not, and whether a step was bad (a NaN image) or not.
  auto syncs_of_epoch = [](int64_t images, bool locate, int64_t nan_at) {
    std::ostringstream console;
    Run run(1, 0, 1, pattern_dataset(images, 7, nan_at));
    RunnerOptions o = options("", 1, console);
    o.log_interval = 1000;
    o.locate_nonfinite = locate;
    Runner runner = run.runner(o);
    const int64_t before = host_sync_count();
    const RunSummary s = runner.run();
    CHECK(s.iterations == (images + 7) / 8);
    CHECK(s.skipped_steps == (nan_at >= 0 ? 1 : 0));
    CHECK((console.str().find("nonfinite: ") != std::string::npos) == (nan_at >= 0));
    return host_sync_count() - before;
  };
  for (const bool locate : {true, false})
    for (const int64_t nan_at : {int64_t(-1), int64_t(3)}) {
      CAPTURE(locate);
      CAPTURE(nan_at);
      const int64_t five = syncs_of_epoch(40, locate, nan_at), ten = syncs_of_epoch(80, locate, nan_at);
      CHECK(five == ten);
      CHECK(five <= 3);  // the log line's read, the validation accuracy, and nothing per step
    }
}

TEST_CASE("Runner: compile (whole-step capture) logs and trains as the eager run, bit for bit") {
  // 3 epochs of 4 full batches and a partial one: with 2 warm-up steps per shape, the full batches
  // replay from their second epoch on and the partial one in its third. Dropout draws, the cosine
  // schedule and momentum all cross the replays.
  std::ostringstream console;
  TempDir eager_dir, compiled_dir;
  Run eager(1, 0, 3);
  eager.runner(options(eager_dir.path.string(), 3, console)).run();
  Run compiled(1, 0, 3);
  RunnerOptions o = options(compiled_dir.path.string(), 3, console);
  o.compile = true;
  o.compile_options.warmup_steps = 2;
  compiled.runner(o).run();
  check_bit_equal(compiled.model->state_dict(), eager.model->state_dict(), "weights");
  check_bit_equal(compiled.optimizer->state_dict(), eager.optimizer->state_dict(), "optimizer");
  const auto a = logged_values(eager_dir.path.string()), b = logged_values(compiled_dir.path.string());
  REQUIRE(a.size() == b.size());
  REQUIRE(a.size() > 3);
  for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(a[i] == b[i], a[i].dump(), " vs ", b[i].dump());
}

TEST_CASE("Bad inputs name their source: values from files shown escaped and cut, sizes checked before allocating") {
  // printable(): what a message shows of a value from a file, a flag or the environment.
  CHECK(printable("ok: a/b") == "ok: a/b");
  CHECK(printable(std::string("\x1b[31mred\n\0\\", 11)) == "\\x1b[31mred\\n\\x00\\\\");
  CHECK(printable(std::string(500, 'a'), 10) == "aaaaaaaaaa... (500 bytes)");
  CHECK(printable("\xc3\xa9") == "\\xc3\\xa9");  // bytes beyond ASCII, escaped one by one

  // A model/state mismatch says it all on its first line.
  nn::Linear small(2, 3), large(2, 4);
  const std::string mismatch = message_of<ValueError>([&] { small.load_state_dict(large.state_dict()); });
  const std::string first_line = mismatch.substr(0, mismatch.find('\n'));
  CHECK_MESSAGE(first_line.find("the state does not fit Linear (2 size mismatch; the first: size mismatch weight") !=
                    std::string::npos,
                mismatch);
  StateDict odd = small.state_dict();
  odd["evil\x1b]0;title\x07"] = zeros({1});
  const std::string unexpected = message_of<ValueError>([&] { small.load_state_dict(odd); });
  CHECK_MESSAGE(unexpected.find("evil\\x1b]0;title\\x07") != std::string::npos, unexpected);
  CHECK(unexpected.find('\x1b') == std::string::npos);

  TempDir dir;
  // A last_checkpoint pointer with terminal escapes in it: refused, shown escaped.
  {
    std::ostringstream console;
    Run run(1, 0, 1);
    RunnerOptions o = options(dir.path.string(), 1, console);
    o.resume = "";
    std::ofstream(dir / "last_checkpoint") << "/tmp/\x1b[2Jx.safetensors\n";
    const std::string e = message_of<IOError>([&] { run.runner(o).run(); });
    CHECK_MESSAGE(e.find("last_checkpoint does not name a checkpoint by an absolute path of printable characters") !=
                      std::string::npos, e);
    CHECK_MESSAGE(e.find("/tmp/\\x1b[2Jx.safetensors") != std::string::npos, e);
    CHECK(e.find('\x1b') == std::string::npos);
  }
}

TEST_CASE("A sharded checkpoint whose metadata claims a huge shape is refused naming the file, before allocating" *
          doctest::skip(!dist::has_gloo())) {
  auto store = std::make_shared<dist::TCPStore>("127.0.0.1", 0, dist::TCPStoreOptions{true, std::chrono::milliseconds(5000)});
  dist::GlooOptions gloo;
  gloo.master_addr = "127.0.0.1";
  const auto group = dist::make_gloo_process_group(store, 0, 1, gloo);
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  Checkpoint c;
  c.pieces.push_back({"model.w", Shape{4}, 0, arange(0, 4, 1, DType::f32)});
  save_checkpoint(path, c, *group);
  REQUIRE(load_checkpoint(path).model.at("w").numel() == 4);
  // The shard's metadata now says the tensor has 2^60 elements; its piece still holds 4.
  const auto shards = std::filesystem::directory_iterator(dir / "c.shards");
  const std::string shard = shards->path().string();
  SafetensorsFile file = load_safetensors(shard);
  file.metadata.at("shape.model.w") = std::to_string(int64_t(1) << 60);
  save_safetensors(shard, file.tensors, file.metadata);
  const std::string e = message_of<FormatError>([&] { load_checkpoint(path); });
  CHECK_MESSAGE(e.find("the shards leave out elements [4, 1152921504606846976) of \"model.w\"") != std::string::npos, e);
  CHECK_MESSAGE(e.find("\"shape.model.w\" in " + shard) != std::string::npos, e);
}

TEST_CASE("Runner: compile with a process group is refused, naming both" * doctest::skip(!dist::has_gloo())) {
  auto store = std::make_shared<dist::TCPStore>("127.0.0.1", 0, dist::TCPStoreOptions{true, std::chrono::milliseconds(5000)});
  dist::GlooOptions gloo;
  gloo.master_addr = "127.0.0.1";
  std::ostringstream console;
  TempDir dir;
  Run run(1, 0, 1);
  RunnerOptions o = options(dir.path.string(), 1, console);
  o.compile = true;
  o.group = dist::make_gloo_process_group(store, 0, 1, gloo);
  expect_error<ValueError>("compile with a group", [&] { (void)run.runner(o); },
                           {"compile", "process group (gloo, 1 rank(s))", "collectives are not captured"});
}

TEST_CASE("Runner: no precision mode waits on the host within a step, clipping and loss scaling included") {
  // What whole-step capture into a CUDA graph needs: iterations that only queue work. As above,
  // an epoch of 10 iterations must read the host no more than one of 5, in every mode (scalers'
  // overflow checks and updates, master weights, clipping to a norm).
  for (const std::string& name : precision_names()) {
    CAPTURE(name);
    auto syncs_of_epoch = [&](int64_t images) {
      std::ostringstream console;
      Run base(1, 0, 1, pattern_dataset(images, 7));
      PrecisionOptions po;
      po.precision = parse_precision(name);
      const auto mode = std::make_shared<TrainingPrecision>(po, *base.model, [](std::vector<Tensor> params) {
        return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
      });
      RunnerOptions o = options("", 1, console);
      o.log_interval = 1000;
      o.clip_grad_norm = 0.5;
      Runner runner(base.model, mode, base.scheduler, base.train_loader, base.val_loader, o);
      const int64_t before = host_sync_count();
      CHECK(runner.run().iterations == (images + 7) / 8);
      return host_sync_count() - before;
    };
    const int64_t five = syncs_of_epoch(40), ten = syncs_of_epoch(80);
    CHECK(five == ten);
  }
}

// The first log record that reports a non-finite step, and the first console line that does.
std::pair<nlohmann::json, std::string> first_nonfinite_report(const std::string& work_dir, const std::string& console) {
  std::pair<nlohmann::json, std::string> report;
  for (const auto& record : logged_values(work_dir))
    if (record.contains("nonfinite")) {
      report.first = record;
      break;
    }
  std::istringstream lines(console);
  for (std::string line; std::getline(lines, line);)
    if (line.find("nonfinite: ") != std::string::npos) {
      report.second = line;
      break;
    }
  REQUIRE_MESSAGE(!report.first.is_null(), "no log record reports a non-finite step");
  return report;
}

TEST_CASE("Runner: a NaN made in one layer's forward is named on the log line and in scalars.json, module and op") {
  TempDir dir;
  std::ostringstream console;
  Run run(1, 0, 1);
  // From its 3rd training call on, layer 1 (a Linear) has a NaN weight: its output and everything
  // after it are NaN; the first is named.
  int calls = 0;
  const auto fc1 = std::static_pointer_cast<nn::Linear>((*run.model)[1]);
  fc1->register_forward_pre_hook([&](nn::Module& m, const Tensor&) {
    if (!m.is_training() || ++calls != 3) return;
    NoGradGuard no_grad;
    Tensor w = fc1->weight;
    fill_(w, std::nanf(""));
  });
  const RunSummary s = run.runner(options(dir.path.string(), 1, console)).run();
  CHECK(s.skipped_steps == 3);
  const auto [record, line] = first_nonfinite_report(dir.path.string(), console.str());
  CHECK(record["step"] == 4);  // the line after iteration 3
  CHECK(record["nonfinite_step"] == 3);
  CHECK(record["nonfinite"] == "forward 1 (linear)");
  CHECK(record["skipped_steps"] == 2);  // iterations 3 and 4
  CHECK(line.ends_with("skipped_steps: 2  nonfinite_step: 3  nonfinite: forward 1 (linear)"));
  CHECK_FALSE(logged_values(dir.path.string()).front().contains("nonfinite"));  // iterations 1-2 were fine
}

TEST_CASE("Runner: a non-finite gradient made in one layer's backward is named, module and op") {
  TempDir dir;
  std::ostringstream console;
  Run run(1, 0, 1, {}, std::make_shared<SqrtGate>());  // module 3
  RunnerOptions o = options(dir.path.string(), 1, console);
  CHECK(run.runner(o).run().skipped_steps == 5);
  const auto [record, line] = first_nonfinite_report(dir.path.string(), console.str());
  CHECK(record["nonfinite_step"] == 1);
  CHECK(record["nonfinite"] == "backward 3 (sqrt)");
  CHECK(line.ends_with("nonfinite_step: 1  nonfinite: backward 3 (sqrt)"));

  // Without the check the line still gives the step.
  TempDir unchecked_dir;
  Run unchecked(1, 0, 1, {}, std::make_shared<SqrtGate>());
  o = options(unchecked_dir.path.string(), 1, console);
  o.locate_nonfinite = false;
  unchecked.runner(o).run();
  const auto records = logged_values(unchecked_dir.path.string());
  CHECK(records.front()["nonfinite_step"] == 1);
  CHECK(records.front()["nonfinite"] == "not checked");
}

TEST_CASE("Runner: every precision mode logs the unscaled gradient norm and the skipped steps") {
  // The first step's norm in each mode against fp32's: the scaling modes (scale 2^10 here) must
  // divide it out; the 16-bit forwards round it by a percent or so.
  double fp32_norm = 0;
  for (const std::string& name : precision_names()) {
    CAPTURE(name);
    TempDir dir;
    std::ostringstream console;
    Run base(1, 0, 1);
    PrecisionOptions po;
    po.precision = parse_precision(name);
    po.grad_scaler.init_scale = 1024;
    po.loss_scaler.initial_scale_power = 10;
    const auto mode = std::make_shared<TrainingPrecision>(po, *base.model, [](std::vector<Tensor> params) {
      return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions{.lr = 0.05});
    });
    RunnerOptions o = options(dir.path.string(), 1, console);
    o.log_interval = 1;
    Runner(base.model, mode, nullptr, base.train_loader, nullptr, o).run();
    const auto first = logged_values(dir.path.string()).front();
    CHECK(first["skipped_steps"] == 0);
    CHECK(first.contains("loss_scale") == mode->scales_loss());
    const double norm = first["grad_norm"];
    if (name == "fp32") fp32_norm = norm;
    CHECK(norm == doctest::Approx(fp32_norm).epsilon(0.03));
  }
}

TEST_CASE("Runner: a non-finite gradient skips the step and the schedule; weights stay finite") {
  std::ostringstream console;
  Run run(1, 0, 1, pattern_dataset(36, 7, /*nan_at=*/5));
  const RunSummary s = run.runner(options("", 1, console)).run();
  CHECK(s.skipped_steps == 1);
  CHECK(s.iterations == 5);
  CHECK(run.scheduler->last_epoch() == 4);  // 4 steps taken
  for (const Tensor& p : run.model->parameters())
    for (float v : p.to_vector<float>()) REQUIRE(std::isfinite(v));
}

TEST_CASE("Runner: bad options and checkpoints that do not fit raise, changing nothing") {
  TempDir dir;
  std::ostringstream console;
  Run run(1, 0, 2);
  RunnerOptions o = options(dir.path.string(), 2, console);
  o.epochs = 0;
  expect_error<ValueError>("epochs", [&] { run.runner(o); }, {"epochs must be >= 1, got 0"});
  o = options(dir.path.string(), 2, console);
  o.log_interval = 0;
  expect_error<ValueError>("log interval", [&] { run.runner(o); }, {"log_interval"});

  o = options(dir.path.string(), 2, console);
  o.resume = "";
  expect_error<IOError>("nothing to resume", [&] { run.runner(o).run(); }, {"last_checkpoint", "missing"});
  o.resume = dir / "absent.safetensors";
  expect_error<IOError>("no file", [&] { run.runner(o).run(); }, {"absent.safetensors"});

  // A checkpoint of another model: nothing is loaded.
  const StateDict before = run.model->state_dict();
  StateDict copy;
  for (const auto& [k, v] : before) copy[k] = v.clone();
  Runner runner = run.runner(options(dir.path.string(), 2, console));
  Checkpoint other = runner.checkpoint();
  other.model["1.weight"] = zeros({3, 3});
  expect_error<ValueError>("shape", [&] { runner.restore(other); }, {"1.weight"});
  Checkpoint far = runner.checkpoint();
  far.loader = {0, 5};
  expect_error<ValueError>("position", [&] { runner.restore(far); }, {"batch 5", "5 batches"});
  Checkpoint untold = runner.checkpoint();
  untold.runner["log_window.nonfinite_step"] = optim::scalar_f64(3);
  expect_error<ValueError>("report", [&] { runner.restore(untold); }, {"nonfinite_step but no text"});
  // Values a file holds as doubles are checked before they become counts or positions.
  for (const double v : {std::nan(""), -1.0, 1e300, 2.5}) {
    Checkpoint odd = runner.checkpoint();
    odd.runner["global_batch"] = optim::scalar_f64(v);
    expect_error<ValueError>("global_batch " + std::to_string(v), [&] { runner.restore(odd); },
                             {"runner.global_batch", "not a whole number"});
    odd = runner.checkpoint();
    odd.runner["skipped_steps"] = optim::scalar_f64(v);
    expect_error<ValueError>("skipped_steps " + std::to_string(v), [&] { runner.restore(odd); }, {"runner.skipped_steps"});
  }
  for (const double v : {std::nan(""), -1.0, std::numeric_limits<double>::infinity()}) {
    Checkpoint odd = runner.checkpoint();
    odd.runner["log_window.count"] = optim::scalar_f64(v);
    expect_error<ValueError>("count " + std::to_string(v), [&] { runner.restore(odd); }, {"runner.log_window.count"});
  }
  Checkpoint far_batch = runner.checkpoint();
  far_batch.loader = {0, int64_t(1) << 53};
  far_batch.runner["global_batch"] = optim::scalar_f64(double(int64_t(1) << 53));
  expect_error<ValueError>("position beyond any epoch", [&] { runner.restore(far_batch); }, {"beyond any epoch"});
  Checkpoint best = runner.checkpoint();
  best.runner["best_top1"] = optim::scalar_f64(250);
  expect_error<ValueError>("accuracy", [&] { runner.restore(best); }, {"best_top1", "250"});
  Checkpoint fraction = runner.checkpoint();
  fraction.runner["log_window.count"] = optim::scalar_f64(0.5);  // would double the logged mean
  expect_error<ValueError>("fractional count", [&] { runner.restore(fraction); }, {"log_window.count", "0.5, not a count"});
  // The optimizer runs at the scheduler's last lr: a file where they differ was damaged.
  for (const double lr : {std::nan(""), 1e300}) {
    Checkpoint odd = runner.checkpoint();
    odd.optimizer["param_groups.0.lr"] = optim::scalar_f64(lr);
    expect_error<ValueError>("lr", [&] { runner.restore(odd); }, {"param group 0 at lr", "the file is inconsistent"});
  }
  check_bit_equal(run.model->state_dict(), copy, "untouched weights");
}

TEST_CASE("TrainingPrecision: a mode that fails to build leaves the model and the TF32 switches as they were") {
  // Process-wide switches, which earlier tf32 runs in this process leave on: off here, as they were after.
  const bool matmul_tf32 = cuda::matmul_allow_tf32(), conv_tf32 = cuda::conv_allow_tf32();
  cuda::set_matmul_allow_tf32(false);
  cuda::set_conv_allow_tf32(false);
  for (const Precision p : {Precision::naive_fp16, Precision::pure_bf16, Precision::tf32}) {
    INFO(precision_name(p));
    manual_seed(3);
    nn::SmallCNN model(10, 1, 28);
    const std::vector<Tensor> parameters = model.parameters();
    StateDict copies;
    for (const auto& [name, t] : model.state_dict()) copies[name] = t.clone();
    PrecisionOptions po;
    po.precision = p;
    // The optimizer is built after the cast: a bad learning rate is found there.
    expect_error<ValueError>("bad lr", [&] {
      TrainingPrecision(po, model, [](std::vector<Tensor> params) {
        return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions{.lr = -1.0});
      });
    }, {"lr"});
    for (const auto& [name, t] : model.state_dict()) {
      INFO(name);
      CHECK(t.dtype() == copies.at(name).dtype());
      CHECK(equal(t, copies.at(name)));
    }
    const std::vector<Tensor> after = model.parameters();  // the module's own tensors, given their data back
    for (size_t i = 0; i < parameters.size(); ++i) CHECK(after[i].is_same(parameters[i]));
    CHECK_FALSE(cuda::matmul_allow_tf32());
    CHECK_FALSE(cuda::conv_allow_tf32());
  }
  cuda::set_matmul_allow_tf32(matmul_tf32);
  cuda::set_conv_allow_tf32(conv_tf32);
}

TEST_CASE("Runner: a checkpoint of one optimizer does not resume into another") {
  std::ostringstream console;
  Run run(1, 0, 2);
  Runner sgd_runner = run.runner(options("", 2, console));
  const Checkpoint sgd = sgd_runner.checkpoint();
  CHECK(sgd.runner_text.at("optimizer") == "SGD");

  auto adamw = std::make_shared<optim::AdamW>(run.model->parameters());
  Runner adamw_runner(run.model, adamw, nullptr, run.train_loader, run.val_loader, options("", 2, console));
  Checkpoint c = sgd;
  c.scheduler.clear();
  expect_error<ValueError>("runner", [&] { adamw_runner.restore(c); }, {"written by a run with SGD", "AdamW"});
  // The optimizer itself refuses another's options, whoever hands it the dict.
  expect_error<ValueError>("optimizer", [&] { adamw->load_state_dict(sgd.optimizer); },
                           {"AdamW.load_state_dict", "'param_groups.0.dampening' is not an option of AdamW", "another optimizer"});
  StateDict wrapped = sgd.optimizer;
  wrapped["state.99999999999999999999.momentum_buffer"] = zeros({1});
  expect_error<ValueError>("20-digit index", [&] { run.optimizer->load_state_dict(wrapped); }, {"bad index '99999999999999999999'"});
}

TEST_CASE("Runner: a work dir with files of its own is pruned without a fault") {
  TempDir dir;
  std::ostringstream console;
  Run run(1, 0, 2);
  // Names that look like an epoch checkpoint but whose number fits no counter are not the run's.
  for (const char* name : {"epoch_99999999999999999999.safetensors", "epoch_.safetensors", "epoch_-1.safetensors"})
    std::ofstream(dir / name) << "not ours";
  RunnerOptions o = options(dir.path.string(), 2, console);
  o.keep_checkpoints = 1;
  run.runner(o).run();
  CHECK(fs::exists(dir / "epoch_99999999999999999999.safetensors"));
  CHECK(fs::exists(dir / "epoch_2.safetensors"));
  CHECK(!fs::exists(dir / "epoch_1.safetensors"));

  // last_checkpoint that holds no one-line path: a sentence, however long the file.
  RunnerOptions resume = options(dir.path.string(), 2, console);
  resume.resume = "";
  std::ofstream(dir / "last_checkpoint", std::ios::trunc) << std::string(1 << 20, 'x');
  expect_error<IOError>("long", [&] { run.runner(resume).run(); }, {"last_checkpoint does not hold one line naming a checkpoint"});
  std::ofstream(dir / "last_checkpoint", std::ios::trunc) << "";
  expect_error<IOError>("empty", [&] { run.runner(resume).run(); }, {"last_checkpoint does not hold one line", "it is empty"});
  std::ofstream(dir / "last_checkpoint", std::ios::trunc) << "a\nb\n";
  expect_error<IOError>("two lines", [&] { run.runner(resume).run(); }, {"does not hold one line"});
}

TEST_CASE("model zoo: every name builds a model that maps images to class scores") {
  const ImageShape fashion{1, 28, 10};
  for (const std::string name : {"mlp", "cnn", "resnet18"}) {
    CAPTURE(name);
    auto model = make_model(name, fashion);
    model->eval();
    NoGradGuard no_grad;
    CHECK((*model)(zeros({2, 1, 28, 28})).shape() == Shape{2, 10});
  }
  CHECK(make_model("vit_tiny", {3, 32, 10})->num_parameters() > 5'000'000);
  // From 64 pixels, ImageNet's layout: ResNet's 7x7 stride-2 stem with max pool, ViT's 16x16 patches.
  {
    auto resnet = make_model("resnet18", {3, 64, 7});
    resnet->eval();
    NoGradGuard no_grad;
    CHECK((*resnet)(zeros({1, 3, 64, 64})).shape() == Shape{1, 7});
    CHECK(resnet->state_dict().at("conv1.weight").shape() == Shape{64, 3, 7, 7});
    CHECK(make_model("resnet18", {3, 32, 7})->state_dict().at("conv1.weight").shape() == Shape{64, 3, 3, 3});
  }
  // ViT-B/16 at 224: 768 wide, 196 patches + the class token, 86.6 M parameters with a 1000-class head.
  auto vit_b = make_model("vit_base", {3, 224, 1000});
  CHECK(vit_b->state_dict().at("pos_embed").shape() == Shape{1, 197, 768});
  CHECK(vit_b->num_parameters() == 86'567'656);
  expect_error<ValueError>("unknown", [] { make_model("lenet", {1, 28, 10}); }, {"unknown model \"lenet\"", "mlp"});
  expect_error<ValueError>("patch", [] { make_model("vit_small", {1, 30, 10}); }, {"divisible by 4", "30"});
  expect_error<ValueError>("patch 16", [] { make_model("vit_base", {3, 100, 10}); }, {"divisible by 16", "100"});
}

TEST_CASE("Fashion-MNIST from Debian's package: the real files, and truncated and corrupt copies" *
          doctest::skip(!has_fashion_mnist())) {
  const data::FashionMNIST train_set(kFashionDir, true), test_set(kFashionDir, false);
  CHECK(train_set.size() == 60000);
  CHECK(test_set.size() == 10000);
  CHECK(train_set.images().shape() == Shape{60000, 1, 28, 28});
  // 6,000 training and 1,000 test images per class (the data set's README).
  const auto per_class = [](const Tensor& labels) {
    std::vector<int64_t> counts(10);
    for (int64_t l : labels.to_vector<int64_t>()) ++counts.at(size_t(l));
    return counts;
  };
  CHECK(per_class(train_set.labels()) == std::vector<int64_t>(10, 6000));
  CHECK(per_class(test_set.labels()) == std::vector<int64_t>(10, 1000));
  CHECK(train_set.labels().to_vector<int64_t>()[0] == 9);  // the first image is an ankle boot

  TempDir dir;
  for (const char* f : {"train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    fs::copy_file(kFashionDir + "/" + f, dir / f);
  const std::string images = dir / "train-images-idx3-ubyte.gz";
  fs::copy_file(kFashionDir + "/train-images-idx3-ubyte.gz", images);
  fs::resize_file(images, fs::file_size(images) / 2);
  expect_error<data::DataError>("truncated gzip", [&] { data::FashionMNIST(dir.path.string(), true); },
                                {"train-images-idx3-ubyte.gz", "truncated"});
  {
    std::fstream f(dir / "t10k-labels-idx1-ubyte.gz", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x5a');  // inside the deflate stream: a CRC or structure error
  }
  expect_error<data::DataError>("corrupt gzip", [&] { data::FashionMNIST(dir.path.string(), false); },
                                {"t10k-labels-idx1-ubyte.gz"});
}

TEST_CASE("end to end: the MLP learns a 2,000-image Fashion-MNIST subset on the CPU" *
          doctest::skip(!has_fashion_mnist())) {
  auto train_set = std::make_shared<data::FashionMNIST>(kFashionDir, true);
  auto test_set = std::make_shared<data::FashionMNIST>(kFashionDir, false);
  train_set->truncate(2000);
  test_set->truncate(1000);
  const auto normalize = [](data::Batch& b, Generator&) { b.images = data::normalize(b.images, {0.2860f}, {0.3530f}); };
  auto train_loader = std::make_shared<data::DataLoader>(
      train_set, data::DataLoaderOptions{.batch_size = 64, .shuffle = true, .seed = 1, .num_workers = 1, .transform = normalize});
  auto val_loader = std::make_shared<data::DataLoader>(test_set, data::DataLoaderOptions{.batch_size = 250, .transform = normalize});
  manual_seed(0);
  auto model = make_model("mlp", {1, 28, 10});
  optim::SGDOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), o);
  auto scheduler = std::make_shared<optim::CosineAnnealingLR>(*optimizer, 3 * train_loader->size());
  std::ostringstream console;
  RunnerOptions ro;
  ro.epochs = 3;
  ro.console = &console;
  const RunSummary s = Runner(model, optimizer, scheduler, train_loader, val_loader, ro).run();
  MESSAGE(console.str());
  REQUIRE(s.epochs.size() == 3);
  CHECK(s.epochs[2].mean_loss < 0.6 * s.epochs[0].mean_loss);
  CHECK(s.epochs[2].top1 >= 75.0);  // chance is 10%
}

// One run of this test's setting (3 epochs on 6,000 images, 282 steps) ends anywhere within about
// +-2 points of its mean: its top-1 has a standard deviation of about 1 point over seeds (measured
// over 6 seeds on an AMD EPYC: fp32 1.1, amp_bf16 1.0, naive_fp16 0.7), and a change of CPU moves it
// as much as a change of seed does (OpenBLAS's kernels for another core type round differently, and
// the run diverges from there). So a mode is compared with fp32 on the mean over kSeeds seeds:
// the difference of two such means has a standard deviation of about 1 * sqrt(2 / 4) = 0.7 points,
// and kTolerance is 3.5 times that. A mode that does not learn as fp32 does (a lost update, a
// wrong loss scale) falls further behind.
TEST_CASE("end to end: the CNN in amp_bf16 and naive_fp16 learns as fp32 does, over 4 seeds" *
          doctest::skip(!has_fashion_mnist())) {
  constexpr int kSeeds = 4;
  constexpr double kTolerance = 2.5;  // points of top-1 between means over kSeeds seeds
  auto train_set = std::make_shared<data::FashionMNIST>(kFashionDir, true);
  auto test_set = std::make_shared<data::FashionMNIST>(kFashionDir, false);
  train_set->truncate(6000);
  const auto normalize = [](data::Batch& b, Generator&) { b.images = data::normalize(b.images, {0.2860f}, {0.3530f}); };
  std::string log;
  auto top1_in = [&](Precision precision, uint64_t seed) {
    auto train_loader = std::make_shared<data::DataLoader>(
        train_set, data::DataLoaderOptions{.batch_size = 64, .shuffle = true, .seed = seed + 1, .transform = normalize});
    auto val_loader = std::make_shared<data::DataLoader>(test_set, data::DataLoaderOptions{.batch_size = 500, .transform = normalize});
    manual_seed(seed);
    std::shared_ptr<nn::UnaryModule> model = make_model("cnn", {1, 28, 10});
    PrecisionOptions po;
    po.precision = precision;
    auto mode = std::make_shared<TrainingPrecision>(po, *model, [](std::vector<Tensor> params) {
      optim::SGDOptions o;
      o.lr = 0.05;
      o.momentum = 0.9;
      return std::make_unique<optim::SGD>(std::move(params), o);
    });
    auto scheduler = std::make_shared<optim::CosineAnnealingLR>(mode->optimizer(), 3 * train_loader->size());
    std::ostringstream console;
    RunnerOptions ro;
    ro.epochs = 3;
    ro.log_interval = 100;
    ro.console = &console;
    const RunSummary s = Runner(model, mode, scheduler, train_loader, val_loader, ro).run();
    log += console.str();
    return s.epochs.back().top1;
  };
  std::map<Precision, std::vector<double>> top1;
  for (uint64_t seed = 0; seed < kSeeds; ++seed)
    for (const Precision p : {Precision::fp32, Precision::amp_bf16, Precision::naive_fp16})
      top1[p].push_back(top1_in(p, seed));
  const auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); };
  const double fp32 = mean(top1[Precision::fp32]), amp_bf16 = mean(top1[Precision::amp_bf16]),
               naive_fp16 = mean(top1[Precision::naive_fp16]);
  INFO(log);
  MESSAGE("mean top-1 over ", kSeeds, " seeds: fp32 ", fp32, ", amp_bf16 ", amp_bf16, ", naive_fp16 ", naive_fp16);
  for (const auto& [p, runs] : top1) CHECK(*std::min_element(runs.begin(), runs.end()) >= 75.0);  // each learned (chance: 10%)
  CHECK(std::abs(amp_bf16 - fp32) <= kTolerance);
  CHECK(std::abs(naive_fp16 - fp32) <= kTolerance);
  CHECK(log.find("loss_scale: ") != std::string::npos);  // naive_fp16 logs its scale
}

TEST_CASE("train program: --help lists every flag; bad input gives one line and a non-zero exit" *
          doctest::skip(train_program().empty())) {
  const CommandResult help = run_train("--help");
  CHECK(help.exit_code == 0);
  for (const char* flag : {"--model", "--dataset", "--data", "--epochs", "--batch-size", "--lr", "--optimizer",
                           "--weight-decay", "--scheduler", "--warmup-iters", "--device", "--threads", "--num-workers",
                           "--seed", "--work-dir", "--resume", "--log-interval", "--save-interval", "--train-samples",
                           "--val-samples", "--precision", "--init-scale", "--growth-factor", "--backoff-factor",
                           "--growth-interval", "--loss-scale-window", "--hysteresis", "--min-loss-scale",
                           "--deterministic", "--no-locate-nonfinite", "--tensorboard", "--activation-checkpointing", "--accumulate"})
    CHECK_MESSAGE(help.output.find(std::string(flag) + " ") != std::string::npos, flag);
  CHECK(help.output.find("--epochs INT:>=1=3") != std::string::npos);  // the default beside the flag

  const auto one_line_error = [](const CommandResult& r, int code, const std::string& text) {
    CHECK(r.exit_code == code);
    CHECK_MESSAGE(r.output.find(text) != std::string::npos, r.output);
    CHECK_MESSAGE(std::count(r.output.begin(), r.output.end(), '\n') == 1, r.output);
  };
  one_line_error(run_train("--epochs 0"), 2, "train: error: --epochs: must be at least 1, got 0");
  one_line_error(run_train("--model lenet"), 2, "--model");
  one_line_error(run_train("--precision fp8"), 2, "--precision");
  one_line_error(run_train("--no-such-flag"), 2, "--no-such-flag");
  // A flag's value is quoted escaped: a terminal escape in it reaches the terminal as text.
  const CommandResult escaped = run_train("--model '\x1b[2Jlenet'");
  one_line_error(escaped, 2, "\\x1b[2Jlenet");
  CHECK(escaped.output.find('\x1b') == std::string::npos);
  // Numbers: finite and in range, or refused naming the flag and the value.
  one_line_error(run_train("--lr inf"), 2, "train: error: --lr: must be at least 0, got inf (not a finite number)");
  one_line_error(run_train("--lr nan"), 2, "--lr: must be at least 0, got nan (not a finite number)");
  one_line_error(run_train("--lr 1e999"), 2, "--lr: must be at least 0, got 1e999 (not a finite number)");
  one_line_error(run_train("--momentum nan"), 2, "--momentum: must be from 0 to 1, got nan");
  one_line_error(run_train("--init-scale inf"), 2, "--init-scale: must be from");
  one_line_error(run_train("--min-loss-scale 1e-300"), 2, "--min-loss-scale: must be from");
  one_line_error(run_train("--growth-factor nan"), 2, "--growth-factor: must be from");
  one_line_error(run_train("--dist-timeout nan"), 2, "--dist-timeout: must be from 0.1 to 86400, got nan");
  one_line_error(run_train("--epochs 99999999999999999999"), 2,
                 "--epochs: must be at least 1, got 99999999999999999999 (too large to count)");
  one_line_error(run_train("--threads 99999999999"), 2, "--threads: must be at least 0, got 99999999999 (too large to count)");
  one_line_error(run_train("--epochs 1.5"), 2, "--epochs: \"1.5\" is not a whole number");
  one_line_error(run_train("--seed -1"), 2, "--seed: \"-1\" is not a whole number");
  one_line_error(run_train("--seed 18446744073709551616"), 2, "--seed: must be at least 0, got 18446744073709551616 (too large");
  one_line_error(run_train("--reduce-bucket-size 0 --strategy zero1"), 2, "--reduce-bucket-size: must be from 1 to 1099511627776, got 0");
  one_line_error(run_train("--compile-warmup 0"), 2, "--compile-warmup: must be at least 1, got 0");
  // CLI11 reads any integer as a bool, and an empty path as "not given" (the default place).
  one_line_error(run_train("--strategy zero1 --contiguous-gradients 2"), 2, "--contiguous-gradients: \"2\" is not true or false");
  one_line_error(run_train("--work-dir ''"), 2, "--work-dir: an empty path");
  one_line_error(run_train("--data ''"), 2, "--data: an empty path");
  // ember's environment switches take their own values only.
  one_line_error(run_train("--epochs 1", "EMBER_NVTX=yes"), 1, "EMBER_NVTX=yes: expected 0 or 1 (or unset)");
  one_line_error(run_train("--strategy ddp", "RANK=1"), 1, "RANK=1 is set but no world size is");
  TempDir dir;
  one_line_error(run_train("--dataset imagefolder --data " + dir.path.string() + " --image-size 15 --resize 8"), 1,
                 "--resize 8 is less than --image-size 15");
  one_line_error(run_train("--data " + (dir / "absent")), 1, "absent does not exist");
  one_line_error(run_train("--data /etc/passwd"), 1, "data directory /etc/passwd is not a directory");
  one_line_error(run_train("--data '/tmp/\x1b[2Jnope'"), 1, "data directory /tmp/\\x1b[2Jnope does not exist");
  if (has_fashion_mnist()) {
    // A checkpoint of another model: the first line names the checkpoint and the mismatch.
    const std::string wd = dir / "resume";
    REQUIRE(run_train("--model mlp --train-samples 64 --val-samples 64 --epochs 1 --work-dir " + wd).exit_code == 0);
    const CommandResult other = run_train("--model cnn --train-samples 64 --val-samples 64 --epochs 2 --resume --work-dir " + wd);
    CHECK(other.exit_code == 1);
    const size_t at = other.output.find("train: error: ");
    REQUIRE_MESSAGE(at != std::string::npos, other.output);
    const std::string line = other.output.substr(at, other.output.find('\n', at) - at);
    CHECK_MESSAGE(line.find("cannot resume from " + wd + "/epoch_1.safetensors") != std::string::npos, other.output);
    CHECK_MESSAGE(line.find("the state does not fit") != std::string::npos, other.output);
    // Settings the saved state would override are refused, not announced and then ignored.
    for (const auto& [flag, says] : {std::pair<std::string, std::string>{"--lr 0.5", "has lr 0.1, this run 0.5"},
                                     {"--precision naive_fp16", "has precision fp32, this run naive_fp16"},
                                     {"--warmup-iters 3", "has warmup_iters 0, this run 3"}}) {
      const CommandResult changed =
          run_train("--model mlp --train-samples 64 --val-samples 64 --epochs 2 --resume --work-dir " + wd + " " + flag);
      CHECK(changed.exit_code == 1);
      CHECK_MESSAGE(changed.output.find("the checkpoint's run " + says) != std::string::npos, changed.output);
    }
  }
  if (has_fashion_mnist()) {
    one_line_error(run_train("--work-dir /etc/passwd --epochs 1"), 1,
                   "work dir /etc/passwd cannot be made: Not a directory");
    one_line_error(run_train("--work-dir /etc/passwd/sub --epochs 1"), 1, "work dir /etc/passwd/sub cannot be made: Not a directory");
  }
  if (!has_cuda()) one_line_error(run_train("--device cuda"), 1, "--device cuda: no CUDA device is available");
}

TEST_CASE("train program: thread counts beyond the machine's are capped; iteration counts that cannot be counted are named" *
          doctest::skip(train_program().empty() || !has_fashion_mnist())) {
  TempDir dir;
  const std::string common = "--model mlp --val-samples 64 --batch-size 64 --save-interval 0 --log-interval 1 --work-dir " +
                             dir.path.string();
  // A huge --epochs is legal beside --max-iters, which ends the run long before.
  const CommandResult capped =
      run_train(common + " --train-samples 256 --threads 100000 --num-workers 100000 --epochs 9223372036854775807 --max-iters 2");
  REQUIRE_MESSAGE(capped.exit_code == 0, capped.output);
  CHECK_MESSAGE(capped.output.find("train: warning: --threads 100000 is more than this machine's") != std::string::npos,
                capped.output);
  CHECK(capped.output.find("train: warning: --num-workers 100000 is more than this machine's") != std::string::npos);
  // Stopped mid-epoch, before any validation: the summary has no accuracy to name.
  CHECK(capped.output.find("train: stopped after 2 iterations; no validation yet;") != std::string::npos);
  const CommandResult endless = run_train(common + " --train-samples 128 --epochs 9223372036854775807");
  CHECK(endless.exit_code == 1);
  CHECK_MESSAGE(endless.output.find("--epochs 9223372036854775807 x 2 iterations per epoch is more than 2^53 iterations") !=
                    std::string::npos,
                endless.output);
  // OpenMP's own count (OMP_NUM_THREADS) too; past what ember allows (a crash inside OpenMP) the library
  // itself takes one thread per core when it loads.
  const CommandResult from_env = run_train(common + " --train-samples 128 --epochs 1", "OMP_NUM_THREADS=100000");
  REQUIRE_MESSAGE(from_env.exit_code == 0, from_env.output);
  CHECK_MESSAGE(from_env.output.find("ember: warning: OMP_NUM_THREADS asks for 100000 threads, more than the 4096 ember "
                                     "allows") != std::string::npos,
                from_env.output);
  // --save-interval 0 writes no epoch_N, but keeps the best epoch's checkpoint unless --no-save-best.
  CHECK(fs::exists(dir / "best_accuracy_top1.safetensors"));
  CHECK(!fs::exists(dir / "epoch_1.safetensors"));
  TempDir no_best;
  const CommandResult without_best = run_train("--model mlp --train-samples 128 --val-samples 64 --epochs 1 --batch-size 64 "
                                               "--save-interval 0 --no-save-best --work-dir " + no_best.path.string());
  REQUIRE_MESSAGE(without_best.exit_code == 0, without_best.output);
  CHECK(!fs::exists(no_best / "best_accuracy_top1.safetensors"));
  const CommandResult beyond = run_train(common + " --epochs 1 --train-samples 100000");
  CHECK(beyond.exit_code == 1);
  CHECK_MESSAGE(beyond.output.find("--train-samples 100000 is more than the 60000 images of fashion-mnist's training set") !=
                    std::string::npos,
                beyond.output);
}

TEST_CASE("train program: a diverging run names where its first NaN or inf came from" *
          doctest::skip(train_program().empty() || !has_fashion_mnist())) {
  // With lr 1e30 the first step blows the weights up; the second step's forward overflows.
  TempDir dir;
  const std::string common = "--model mlp --lr 1e30 --train-samples 256 --val-samples 100 --epochs 1 --batch-size 64 "
                             "--num-workers 0 --log-interval 2 --save-interval 0 --work-dir " + dir.path.string();
  const CommandResult located = run_train(common);
  REQUIRE_MESSAGE(located.exit_code == 0, located.output);
  CHECK_MESSAGE(std::regex_search(located.output, std::regex("Epoch\\(train\\)  \\[1\\]\\[2/4\\]  .*  skipped_steps: 1  "
                                                             "nonfinite_step: 2  nonfinite: forward [0-9.]+ \\(linear\\)\n")),
                located.output);
  const CommandResult unchecked = run_train(common + " --no-locate-nonfinite");
  REQUIRE_MESSAGE(unchecked.exit_code == 0, unchecked.output);
  CHECK_MESSAGE(unchecked.output.find("skipped_steps: 1  nonfinite_step: 2  nonfinite: not checked\n") != std::string::npos,
                unchecked.output);
}

TEST_CASE("train program: a short run, stopped at --max-iters and resumed, ends with the uninterrupted weights" *
          doctest::skip(train_program().empty() || !has_fashion_mnist())) {
  TempDir straight, split;
  const std::string common =
      "--model mlp --train-samples 640 --val-samples 200 --epochs 2 --batch-size 64 --num-workers 0 --log-interval 4 ";
  const CommandResult full = run_train(common + "--work-dir " + straight.path.string());
  REQUIRE_MESSAGE(full.exit_code == 0, full.output);
  CHECK(full.output.find("Epoch(train)  [1][ 4/10]  lr: ") != std::string::npos);
  CHECK(full.output.find("Epoch(val) [2][4/4]  accuracy/top1: ") != std::string::npos);
  CHECK(fs::exists(straight / "epoch_2.safetensors"));

  const CommandResult first = run_train(common + "--max-iters 13 --work-dir " + split.path.string());
  REQUIRE_MESSAGE(first.exit_code == 0, first.output);
  CHECK(first.output.find("stopped after 13 iterations") != std::string::npos);
  const CommandResult rest = run_train(common + "--resume --work-dir " + split.path.string());
  REQUIRE_MESSAGE(rest.exit_code == 0, rest.output);
  CHECK(rest.output.find("Resumed from ") != std::string::npos);
  check_bit_equal(load_checkpoint(split / "epoch_2.safetensors").model,
                  load_checkpoint(straight / "epoch_2.safetensors").model, "weights");
  const CommandResult bad = run_train(common + "--resume " + (split / "absent.safetensors") + " --work-dir " +
                                      split.path.string());
  CHECK(bad.exit_code == 1);
  CHECK(bad.output.find("absent.safetensors") != std::string::npos);
  // Nothing left: no step past the epochs or a --max-iters already reached, and no new checkpoint.
  const CommandResult done = run_train(common + "--resume --max-iters 5 --work-dir " + split.path.string());
  REQUIRE_MESSAGE(done.exit_code == 0, done.output);
  CHECK_MESSAGE(done.output.find("Nothing left to train: the run is at iteration 20, max_iters is 5") != std::string::npos,
                done.output);
  CHECK(!fs::exists(split / "iter_21.safetensors"));
  // last_checkpoint naming a file that is gone, or not a file at all.
  { std::ofstream(split / "last_checkpoint") << (split / "epoch_9.safetensors") << "\n"; }
  const CommandResult gone = run_train(common + "--resume --work-dir " + split.path.string());
  CHECK(gone.exit_code == 1);
  CHECK_MESSAGE(gone.output.find("last_checkpoint names " + (split / "epoch_9.safetensors") + ", which does not exist") !=
                    std::string::npos,
                gone.output);
  fs::remove(split / "last_checkpoint");
  fs::create_directory(split / "last_checkpoint");
  const CommandResult dir = run_train(common + "--resume --work-dir " + split.path.string());
  CHECK(dir.exit_code == 1);
  CHECK_MESSAGE(dir.output.find("last_checkpoint is not a file") != std::string::npos, dir.output);
}

TEST_CASE("train program: --activation-checkpointing logs the same losses and ends with the same weights, in less memory" *
          doctest::skip(train_program().empty() || !has_fashion_mnist())) {
  TempDir plain_dir, checkpointed_dir;
  const std::string common = "--model resnet18 --train-samples 48 --val-samples 16 --epochs 1 --batch-size 16 "
                             "--num-workers 0 --log-interval 1 --work-dir ";
  const CommandResult plain = run_train(common + plain_dir.path.string());
  const CommandResult checkpointed = run_train(common + checkpointed_dir.path.string() + " --activation-checkpointing");
  REQUIRE_MESSAGE(plain.exit_code == 0, plain.output);
  REQUIRE_MESSAGE(checkpointed.exit_code == 0, checkpointed.output);
  CHECK(checkpointed.output.find("activation checkpointing of 8 BasicBlock modules") != std::string::npos);
  // Each train line's loss and gradient norm, and its memory figure.
  const auto fields = [](const std::string& out, const std::string& key) {
    std::vector<std::string> found;
    for (size_t at = out.find("Epoch(train)"); at != std::string::npos; at = out.find("Epoch(train)", at + 1)) {
      const size_t line_end = out.find('\n', at);
      const size_t k = out.find(key + ": ", at);
      if (k < line_end) found.push_back(out.substr(k, out.find(' ', k + key.size() + 2) - k));
    }
    return found;
  };
  for (const char* key : {"loss", "grad_norm"}) {
    CHECK(fields(plain.output, key).size() == 3);
    CHECK(fields(checkpointed.output, key) == fields(plain.output, key));
  }
  const auto memory = [&](const std::string& out) { return std::stod(fields(out, "memory").back().substr(8)); };
  CHECK(memory(checkpointed.output) < memory(plain.output));
  check_bit_equal(load_checkpoint(checkpointed_dir / "epoch_1.safetensors").model,
                  load_checkpoint(plain_dir / "epoch_1.safetensors").model, "weights");

  const auto fails = [](const CommandResult& r, const std::string& text) {
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find(text) != std::string::npos, r.output);
  };
  fails(run_train(common + plain_dir.path.string() + " --activation-checkpointing Blok"),
        "ResNet has no module of type \"Blok\" (its module types: AdaptiveAvgPool2d, BasicBlock,");
  fails(run_train("--model mlp --activation-checkpointing"), "no default module types for a Sequential");
  fails(run_train("--activation-checkpointing --compile"), "--activation-checkpointing with --compile");
}

TEST_CASE("train program: --accumulate steps once per K batches and logs the step's global batch" *
          doctest::skip(train_program().empty() || !has_fashion_mnist())) {
  TempDir dir;
  const CommandResult r = run_train("--model mlp --train-samples 320 --val-samples 64 --epochs 1 --batch-size 32 "
                                    "--accumulate 4 --num-workers 0 --log-interval 1 --work-dir " + dir.path.string());
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(r.output.find("1 epochs of 2 iterations (steps of 4 batches)") != std::string::npos);
  CHECK(r.output.find("Epoch(train)  [1][2/2]") != std::string::npos);
  CHECK(r.output.find("global_batch: 128") != std::string::npos);
  const CommandResult bad = run_train("--model mlp --train-samples 64 --batch-size 32 --accumulate 3 --epochs 1");
  CHECK(bad.exit_code == 1);
  CHECK_MESSAGE(bad.output.find("--accumulate 3 is more than the 2 batches of --batch-size 32 that the 64 training images "
                                "(--train-samples) give a rank per epoch") != std::string::npos,
                bad.output);
}

TEST_CASE("train program: --tensorboard writes the log's scalars as event files, a resumed run its own" *
          doctest::skip(train_program().empty() || !has_fashion_mnist())) {
  TempDir dir;
  const std::string common = "--model mlp --train-samples 256 --val-samples 64 --epochs 2 --batch-size 64 --num-workers 0 "
                             "--log-interval 2 --tensorboard --work-dir " + dir.path.string() + " ";
  const CommandResult first = run_train(common + "--max-iters 5");
  REQUIRE_MESSAGE(first.exit_code == 0, first.output);
  const CommandResult rest = run_train(common + "--resume");
  REQUIRE_MESSAGE(rest.exit_code == 0, rest.output);
  CHECK(check_event_files_hold_scalars(dir.path.string()) == 2);
}

TEST_CASE("train program: --deterministic gives the same checkpoint at 1 and 2 threads and under other CPU kernels" *
          doctest::skip(train_program().empty() || !has_fashion_mnist())) {
  // Other CPUs, emulated: OpenBLAS's kernels of another core type (OPENBLAS_CORETYPE, read when the
  // library loads; Haswell's are also Zen's), and a CPU without AVX-512, AVX2 and FMA as glibc sees
  // it (its libm variants, and the deterministic GEMM's SSE2 kernel).
  const std::string other_core = cpu_has_avx512() ? "SkylakeX" : "Sandybridge";
  const std::string common =
      "--model cnn --epochs 1 --train-samples 640 --val-samples 128 --batch-size 64 --num-workers 2 --log-interval 5 ";
  struct Trained {
    Checkpoint checkpoint;
    std::string output;
  };
  auto train = [&](const std::string& env, const std::string& flags) {
    INFO(env, " ", flags);
    TempDir dir;
    const CommandResult r = run_train(common + flags + " --work-dir " + dir.path.string(), env);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return Trained{load_checkpoint(dir / "epoch_1.safetensors"), r.output};
  };
  auto same = [](const Trained& a, const Trained& b, const std::string& what) {
    check_bit_equal(a.checkpoint.model, b.checkpoint.model, what + ", weights");
    check_bit_equal(a.checkpoint.optimizer, b.checkpoint.optimizer, what + ", optimizer state");
  };
  const Trained reference = train("OPENBLAS_CORETYPE=Haswell", "--deterministic --threads 2");
  CHECK(reference.output.find("2 threads, deterministic, CPU GEMM ember deterministic (") != std::string::npos);
  CHECK(reference.checkpoint.info.at("deterministic") == "true");
  same(reference, train("OPENBLAS_CORETYPE=Haswell", "--deterministic --threads 1"), "1 thread");
  same(reference, train("OPENBLAS_CORETYPE=" + other_core, "--deterministic --threads 2"), other_core + " kernels");
  const Trained old_cpu = train("OPENBLAS_CORETYPE=Sandybridge GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,-AVX2,-FMA",
                                "--deterministic --threads 2");
  CHECK(old_cpu.output.find("CPU GEMM ember deterministic (sse2)") != std::string::npos);
  same(reference, old_cpu, "no AVX-512, AVX2 or FMA");

  // The same two core types without the mode: OpenBLAS really ran each (its name is logged), and
  // the weights differ, which is what the mode takes away.
  const Trained haswell = train("OPENBLAS_CORETYPE=Haswell", "--threads 2");
  if (haswell.output.find("CPU GEMM OpenBLAS (") == std::string::npos) {
    MESSAGE("not built with OpenBLAS: its core types are not compared without --deterministic");
    return;
  }
  const Trained other = train("OPENBLAS_CORETYPE=" + other_core, "--threads 2");
  CHECK(haswell.output.find("CPU GEMM OpenBLAS (Haswell)") != std::string::npos);
  CHECK_MESSAGE(other.output.find("CPU GEMM OpenBLAS (" + other_core + ")") != std::string::npos, other.output);
  CHECK(haswell.checkpoint.info.at("deterministic") == "false");
  bool all_equal = true;
  for (const auto& [name, t] : haswell.checkpoint.model) {
    const Tensor u = other.checkpoint.model.at(name).contiguous(), v = t.contiguous();
    all_equal = all_equal && std::memcmp(u.raw_data(), v.raw_data(), size_t(v.numel()) * dtype_size(v.dtype())) == 0;
  }
  CHECK_FALSE(all_equal);
}

TEST_CASE("DeepSpeed config: the committed example maps onto ZeRO-2, naive_fp16 and its scaler, clipping, batch, AdamW") {
  const train::DeepSpeedConfig c = train::read_deepspeed_config(std::string(EMBER_SOURCE_DIR) + "/examples/ds_config.json");
  CHECK(c.warnings.empty());
  REQUIRE(c.zero_stage);
  CHECK(*c.zero_stage == 2);
  CHECK(c.zero.reduce_bucket_size == 500000000);
  CHECK(c.zero.overlap_comm);
  CHECK(c.zero_knobs.count("reduce_scatter"));
  REQUIRE(c.precision);
  CHECK(*c.precision == train::Precision::naive_fp16);
  CHECK(c.loss_scaler.initial_scale_power == 16);
  CHECK(c.loss_scaler.hysteresis == 2);
  CHECK(c.gradient_clipping.value_or(0) == 1.0);
  CHECK(c.micro_batch_size.value_or(0) == 64);
  CHECK(c.gradient_accumulation_steps.value_or(0) == 1);
  CHECK(c.optimizer.value_or("") == "adamw");
  CHECK(c.lr.value_or(0) == 0.001);
  CHECK(c.weight_decay.value_or(0) == 0.01);
}

TEST_CASE("DeepSpeed config: unknown keys and \"auto\" are warnings; what ember cannot honour is an error naming it") {
  const auto parse = [](const std::string& text) { return train::parse_deepspeed_config(text, "ds.json"); };
  auto c = parse(R"({"steps_per_print": 10, "zero_optimization": {"stage": 3, "sub_group_size": 1e9}, "bf16": {"enabled": true},
                    "train_micro_batch_size_per_gpu": "auto"})");
  REQUIRE(c.warnings.size() == 3);
  std::string all;
  for (const auto& w : c.warnings) all += w + "\n";
  CHECK(all.find("\"train_micro_batch_size_per_gpu\" is \"auto\"") != std::string::npos);
  CHECK(all.find("\"zero_optimization.sub_group_size\" is not a setting ember knows") != std::string::npos);
  CHECK(all.find("\"steps_per_print\" is not a setting ember knows") != std::string::npos);
  CHECK(c.precision.value() == train::Precision::naive_bf16);
  CHECK_FALSE(c.micro_batch_size);
  const auto refused = [&](const std::string& text, const std::string& expected) {
    INFO(text);
    const std::string m = message_of<ValueError>([&] { parse(text); });
    CHECK_MESSAGE(m.find(expected) != std::string::npos, m);
  };
  CHECK(parse(R"({"gradient_accumulation_steps": 4})").gradient_accumulation_steps.value_or(0) == 4);
  refused(R"({"gradient_accumulation_steps": 0})", "\"gradient_accumulation_steps\" is 0");
  refused(R"({"zero_optimization": {"stage": 5}})", "\"zero_optimization.stage\" is 5; expected a whole number in [0, 3]");
  refused(R"({"zero_optimization": {"reduce_bucket_size": 2.5}})", "\"zero_optimization.reduce_bucket_size\" is 2.5");
  refused(R"({"zero_optimization": {"offload_optimizer": {"device": "nvme"}}})", "zero_optimization.offload_optimizer");
  refused(R"({"zero_optimization": {"offload_param": {"device": "nvme"}}})", "zero_optimization.offload_param\" is {\"device\":\"nvme\"}: ember offloads the parameters");
  CHECK(parse(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "pin_memory": true}}})").zero.offload_param);
  // The file's values and keys are shown escaped and cut: a long array, a key with a terminal escape.
  std::string long_array = "[0";
  for (int i = 1; i < 2000; ++i) long_array += "," + std::to_string(i);
  refused(R"({"zero_optimization": {"offload_param": )" + long_array + "]}}", "\"zero_optimization.offload_param\" is [0,1,2,");
  const std::string cut = message_of<ValueError>([&] { parse(R"({"zero_optimization": {"offload_param": )" + long_array + "]}}"); });
  CHECK_MESSAGE(cut.find("... (") != std::string::npos, cut);
  CHECK(cut.size() < 400);
  const auto escaped = parse(R"({"zero_optimization": {"stage": 1, "\u001b[2J": 1}})");
  REQUIRE(escaped.warnings.size() == 1);
  CHECK_MESSAGE(escaped.warnings[0].find("\"zero_optimization.\\x1b[2J\" is not a setting ember knows") != std::string::npos,
                escaped.warnings[0]);
  CHECK(parse(R"({"zero_optimization": {"offload_optimizer": {"device": "cpu", "pin_memory": true}}})").zero.offload_optimizer);
  refused(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})", "fp16 and bf16 are both enabled");
  refused(R"({"optimizer": {"type": "Adagrad"}})", "optimizer type \"Adagrad\"");
  refused(R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.8, 0.99]}}})", "\"optimizer.params.betas\" is [0.8,0.99]");
  const auto malformed = [&](const std::string& text, const std::string& expected) {
    INFO(text);
    const std::string m = message_of<FormatError>([&] { parse(text); });
    CHECK_MESSAGE(m.find(expected) != std::string::npos, m);
  };
  malformed(R"({"fp16": {"enabled": "yes"}})", "\"fp16.enabled\" must be true or false");
  malformed(R"({"fp16": [1]})", "\"fp16\" is not a JSON object");
  malformed(R"({"fp16": )", "ds.json: not JSON (at byte");
  malformed(std::string(100, '[') + std::string(100, ']'), "nested deeper than 32 levels");
  malformed("[]", "ds.json: the top level is not a JSON object");
  malformed(R"({"zero_optimization": {"stage": 1}, "zero_optimization": {"stage": 3}})",
            "the key \"zero_optimization\" is given twice in one object");
  malformed(R"({"zero_optimization": {"reduce_bucket_size": 1e400}})", "ds.json: holds a number too large for a double");
  malformed(std::string("{\"fp16\": {}}\0{\"fp16\": 1}", 24), "ds.json: not JSON (at byte 12)");  // not cut at the NUL
  refused(R"({"fp16": {"enabled": true, "loss_scale": 1e308}})", "\"fp16.loss_scale\" is 1e+308; expected 0 (dynamic)");
  // 100,000 small objects parse in time linear in the text (a callback parse took over a minute).
  std::string many = "{\"zero_optimization\": {\"stage\": 1}";
  for (int i = 0; i < 100'000; ++i) many += ",\"k" + std::to_string(i) + "\": {}";
  const auto start = std::chrono::steady_clock::now();
  CHECK(parse(many + "}").warnings.size() == 100'000);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 15.0);
  CHECK(message_of<IOError>([] { train::read_deepspeed_config("/nonexistent/ds.json"); }).find("does not exist") !=
        std::string::npos);
  CHECK(message_of<IOError>([] { train::read_deepspeed_config("/etc"); }).find("is not a regular file") != std::string::npos);
}

}  // TEST_SUITE
