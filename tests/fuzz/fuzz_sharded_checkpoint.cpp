// libFuzzer target: a sharded checkpoint (an index and its shards, train/checkpoint.h) loaded and
// restored into the one-process small run (tests/fuzz/small_run.h), as `--resume` of a ZeRO run's
// checkpoint in one process does. The input is an archive of files, each a name length (1 byte),
// the name, a size (4 bytes, big-endian) and the bytes: the first is the index, the others are
// written into its shards directory under their names (characters outside [A-Za-z0-9._-] made
// '_'). So the fuzzer reaches what one file cannot: the shard count, each shard's path, the pieces'
// `<key>@<offset>` names and shapes, gaps and overlaps between ranks.
// `fuzz_sharded_checkpoint --write-seed FILE` trains the small run under ZeRO stage 2 on a Gloo
// group of one and writes its checkpoint, packed as above: the corpus's seed.
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "dist/gloo_process_group.h"
#include "dist/tcp_store.h"
#include "tests/fuzz/fuzz_file.h"
#include "tests/fuzz/small_run.h"
#include "train/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using namespace ember;

// A directory of this process's own (in memory where /dev/shm is), emptied before each input and
// removed at exit.
const fs::path& work_dir() {
  static const struct Dir {
    fs::path path;
    Dir() {
      std::string pattern = (fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path()) / "ember-fuzz-XXXXXX";
      if (!::mkdtemp(pattern.data())) {
        std::perror("mkdtemp");
        std::abort();
      }
      path = pattern;
    }
    ~Dir() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } dir;
  return dir.path;
}

const fs::path kIndex = "c.safetensors";
const fs::path kShards = "c.shards";

std::string safe_name(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  if (name.empty() || name == "." || name == "..") name = "_";
  return name;
}

void write_file(const fs::path& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) {
    std::perror(path.c_str());
    std::abort();
  }
}

// Writes the archive's files; a truncated entry ends the archive.
void unpack(const uint8_t* data, size_t size) {
  std::error_code ignored;
  fs::remove_all(work_dir() / kShards, ignored);
  fs::remove(work_dir() / kIndex, ignored);
  fs::create_directories(work_dir() / kShards);
  size_t at = 0;
  for (int file = 0; at < size; ++file) {
    const size_t name_length = data[at++];
    if (at + name_length + 4 > size) break;
    const std::string name(reinterpret_cast<const char*>(data + at), name_length);
    at += name_length;
    size_t length = 0;
    for (int i = 0; i < 4; ++i) length = length << 8 | data[at++];
    length = std::min(length, size - at);
    write_file(file == 0 ? work_dir() / kIndex : work_dir() / kShards / safe_name(name), data + at, length);
    at += length;
  }
}

void append(std::string& archive, const std::string& name, const std::string& bytes) {
  archive += static_cast<char>(name.size());
  archive += name;
  for (int shift = 24; shift >= 0; shift -= 8) archive += static_cast<char>((bytes.size() >> shift) & 0xff);
  archive += bytes;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_seed(const char* out) {
  auto store = std::make_shared<dist::TCPStore>("127.0.0.1", 0, dist::TCPStoreOptions{true, std::chrono::milliseconds(5000)});
  dist::GlooOptions gloo;
  gloo.master_addr = "127.0.0.1";
  auto group = dist::make_gloo_process_group(store, 0, 1, gloo);
  train::StrategyOptions zero2;
  zero2.name = "zero2";
  const auto run = fuzz::make_small_run(train::make_strategy(zero2, group));
  run->run();
  const fs::path index = work_dir() / kIndex;
  train::save_checkpoint(index.string(), run->checkpoint(), *group);
  std::string archive;
  append(archive, kIndex.string(), read_all(index));
  for (const auto& entry : fs::directory_iterator(work_dir() / kShards))
    append(archive, entry.path().filename().string(), read_all(entry.path()));
  std::ofstream(out, std::ios::binary) << archive;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  for (int i = 1; i + 1 < *argc; ++i)
    if (std::strcmp((*argv)[i], "--write-seed") == 0) {
      write_seed((*argv)[i + 1]);
      std::exit(0);
    }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  unpack(data, size);
  ember::fuzz::expect_clean([&] { fuzz::small_run().restore(train::load_checkpoint((work_dir() / kIndex).string())); });
  return 0;
}
