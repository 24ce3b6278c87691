// bench_data: images per second of the ImageNet input pipeline, the whole of it: read the file,
// decode the JPEG (at a DCT scale when the crop allows), crop, resize, flip, normalise, and batch
// 256 of them in bfloat16 channels-last, through the DataLoader with one worker per thread. Timed
// over --batches batches after the first (the workers running, as in a long training run).
//   data/<set>/<pipeline>/<threads>: img_per_s
//     set       a folder of class folders under --data (each an ImageFolder); without --data, a small
//               synthetic set made here ("synthetic": smooth patterns, faster to decode than photos)
//     pipeline  train: RandomResizedCrop(224) + flip; eval: Resize(256) + CenterCrop(224)
//     threads   loader workers: 1 and every core
// bench/torchvision_data.py runs the same cases in torchvision beside these (BENCHMARKS.md).
// Flags of its own (before Google Benchmark's): --data=DIR, --batches=N (batches timed per case, default
// 8), --batch=N (default 256), --dump=FILE: instead of timing, write to a safetensors file what
// bench/torchvision_data.py --check compares with PIL and torchvision, for each set: "<set>/decoded/<i>",
// the first 4 files decoded whole (u8 H x W x 3), and "<set>/eval", the evaluation pipeline's f32 NCHW
// output for the first 16 files (ImageFolder's order), "<set>/eval_whole_decode" the same without DCT scaling.
//   build/bench/bench_data --data=results/images --benchmark_filter=data/small/
#include <benchmark/benchmark.h>
#include <turbojpeg.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "bench/flags.h"
#include "data/dataloader.h"
#include "data/image_folder.h"
#include "data/rng.h"
#include "tensor/file_bytes.h"
#include "tensor/ops.h"
#include "tensor/safetensors.h"

namespace {

namespace fs = std::filesystem;
using namespace ember;

std::string data_dir;
int64_t batches = 8;
int64_t batch_size = 256;
std::string dump_path;

// 96 JPEGs of 300-500 pixels a side in 4 classes: smooth colour patterns with noise, quality 90.
fs::path make_synthetic_set() {
  const fs::path root = fs::temp_directory_path() / ("ember_bench_data_" + std::to_string(::getpid()));
  fs::remove_all(root);
  data::RandomStream rs(1, 0);
  tjhandle t = tjInitCompress();
  for (int i = 0; i < 96; ++i) {
    const int h = 300 + int(rs.below(201)), w = 300 + int(rs.below(201));
    std::vector<uint8_t> px(size_t(h) * size_t(w) * 3);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int c = 0; c < 3; ++c)
          px[(size_t(y) * size_t(w) + size_t(x)) * 3 + size_t(c)] =
              uint8_t(128 + 80 * std::sin(0.02 * (x + 40 * c + i)) * std::cos(0.03 * y) + 40 * (rs.uniform() - 0.5));
    unsigned char* buf = nullptr;
    unsigned long size = 0;
    tjCompress2(t, px.data(), w, 0, h, TJPF_RGB, &buf, &size, TJSAMP_420, 90, 0);
    const fs::path file = root / ("class" + std::to_string(i % 4)) / (std::to_string(i) + ".jpg");
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(buf), std::streamsize(size));
    tjFree(buf);
  }
  tjDestroy(t);
  return root;
}

void run_pipeline(benchmark::State& state, const std::string& root, bool train, int threads) {
  data::ImageFolderOptions o;
  o.transform.train = train;
  o.transform.dtype = DType::bf16;
  o.transform.channels_last = true;
  auto folder = std::make_shared<data::ImageFolder>(root, o);
  data::DataLoaderOptions lo;
  lo.batch_size = batch_size;
  lo.shuffle = true;
  lo.num_workers = threads;
  int64_t images = 0;
  int64_t epoch = 0;
  for (auto _ : state) {
    // Steady state: timed from the first batch on, so that starting the workers is left out (as
    // bench/torchvision_data.py leaves out starting its worker processes).
    data::DataLoader loader(folder, lo);
    loader.set_epoch(epoch++);
    std::chrono::steady_clock::time_point start;
    for (int64_t b = 0; b <= batches;) {
      auto batch = loader.next();
      if (!batch) {
        loader.set_epoch(epoch++);
        continue;
      }
      benchmark::DoNotOptimize(batch->images.raw_data());
      if (b++ == 0) {
        start = std::chrono::steady_clock::now();
        continue;
      }
      images += batch->labels.numel();
    }
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.counters["img_per_s"] = benchmark::Counter(double(images), benchmark::Counter::kIsRate);
}

// The image sets: the folders under --data, or the synthetic one.
std::vector<std::pair<std::string, std::string>> image_sets() {
  std::vector<std::pair<std::string, std::string>> sets;  // name, folder
  if (data_dir.empty()) {
    sets.emplace_back("synthetic", make_synthetic_set().string());
  } else {
    for (const auto& e : fs::directory_iterator(data_dir))
      if (e.is_directory()) sets.emplace_back(e.path().filename().string(), e.path().string());
    std::sort(sets.begin(), sets.end());
  }
  return sets;
}

void dump(const std::string& path) {
  StateDict out;
  for (const auto& [name, folder] : image_sets()) {
    data::ImageFolderOptions o;
    o.transform.train = false;
    const data::ImageFolder set(folder, o);
    for (int64_t i = 0; i < std::min<int64_t>(4, set.size()); ++i) {
      const std::string& file = set.samples()[size_t(i)].path;
      const data::RgbImage img = data::decode_image(read_regular_file(file), file);
      out[name + "/decoded/" + std::to_string(i)] =
          from_vector(std::vector<uint8_t>(img.pixels.begin(), img.pixels.end()), {img.height, img.width, 3});
    }
    std::vector<int64_t> first(size_t(std::min<int64_t>(16, set.size())));
    std::iota(first.begin(), first.end(), int64_t{0});
    out[name + "/eval"] = set.get_batch(first).images;
    o.transform.dct_scaling = false;
    out[name + "/eval_whole_decode"] = data::ImageFolder(folder, o).get_batch(first).images;
  }
  save_safetensors(path, out);
}

void register_cases() {
  const auto sets = image_sets();
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> thread_counts = {1};
  if (cores > 1) thread_counts.push_back(cores);
  for (const auto& [name, folder] : sets)
    for (const bool train : {true, false})
      for (int threads : thread_counts)
        benchmark::RegisterBenchmark(("data/" + name + "/" + (train ? "train" : "eval") + "/" + std::to_string(threads)).c_str(),
                                     [folder = folder, train, threads](benchmark::State& s) {
                                       run_pipeline(s, folder, train, threads);
                                     })
            ->Unit(benchmark::kMillisecond)
            ->UseManualTime()
            ->Iterations(1);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.starts_with("--batches=") || a.starts_with("--batch=")) {
      const std::optional<long long> n = ember::bench::positive_flag("bench_data", a);
      if (!n) return 2;
      (a.starts_with("--batches=") ? batches : batch_size) = *n;
    } else if (a.starts_with("--data=")) {
      data_dir = a.substr(7);
      if (!fs::is_directory(data_dir)) {
        std::fprintf(stderr, "bench_data: --data=%s is not a directory\n", data_dir.c_str());
        return 2;
      }
    } else if (a.starts_with("--dump=")) {
      dump_path = a.substr(7);
    } else {
      rest.push_back(argv[i]);
    }
  }
  try {
    if (!dump_path.empty()) {
      dump(dump_path);
      return 0;
    }
    int n = int(rest.size());
    benchmark::Initialize(&n, rest.data());
    if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 2;
    register_cases();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {  // an unreadable image set, a failed write: one line, not an abort
    std::fprintf(stderr, "bench_data: %s\n", e.what());
    return 1;
  }
  if (data_dir.empty()) fs::remove_all(fs::temp_directory_path() / ("ember_bench_data_" + std::to_string(::getpid())));
  return 0;
}
