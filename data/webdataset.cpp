#include "data/webdataset.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <memory>

#include "data/image_batch.h"
#include "tensor/printable.h"

namespace ember::data {

namespace {

constexpr size_t kMaxBraceNames = 1'000'000;
// A member larger than this is no image a pipeline would decode (the largest PIL accepts is ~540 MB).
constexpr int64_t kMaxMemberBytes = int64_t{1} << 30;

using Archive = std::unique_ptr<archive, decltype(&archive_read_free)>;

Archive open_shard(const std::string& path) {
  Archive a(archive_read_new(), &archive_read_free);
  if (!a) throw DataError(printable_path(path) + ": libarchive cannot make a reader");
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_all(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), size_t{1} << 16) != ARCHIVE_OK)
    throw DataError(printable_path(path) + ": cannot open the shard (" + std::string(archive_error_string(a.get())) + ")");
  return a;
}

[[noreturn]] void shard_error(archive* a, const std::string& shard, const std::string& after, const std::string& what) {
  const char* detail = archive_error_string(a);
  throw DataError(printable_path(shard) + ": " + what + (after.empty() ? "" : " after member '" + printable(after) + "'") + " (" +
                  (detail ? detail : "no detail") + ")");
}

// libarchive ends an uncompressed tar cut at a member boundary as if it were whole. Every tar writer
// ends the archive with two zero blocks of 512 bytes (POSIX ustar): a shard without them was cut.
void check_tar_end(archive* a, const std::string& shard, const std::string& previous) {
  if (archive_filter_code(a, 0) != ARCHIVE_FILTER_NONE) return;  // a compressed stream checks its own end
  std::ifstream in(shard, std::ios::binary | std::ios::ate);
  const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : -1;
  char tail[1024] = {};
  bool whole = size >= 1024 && size % 512 == 0;
  if (whole) {
    in.seekg(size - 1024);
    whole = static_cast<bool>(in.read(tail, sizeof tail)) &&
            std::all_of(std::begin(tail), std::end(tail), [](char c) { return c == 0; });
  }
  if (!whole)
    throw DataError(printable_path(shard) + ": ends " + (previous.empty() ? "" : "after member '" + printable(previous) + "' ") +
                    "without the tar's end-of-archive blocks (" + std::to_string(size) +
                    " bytes): the shard was cut short");
}

// The next member's header, or false at the end of the shard. A header libarchive could only read
// with a warning (a damaged pax header, a bad checksum it skipped) is an error: what follows may be
// misread.
bool next_member(archive* a, archive_entry** entry, const std::string& shard, const std::string& previous) {
  const int r = archive_read_next_header(a, entry);
  if (r == ARCHIVE_EOF) {
    check_tar_end(a, shard, previous);
    return false;
  }
  if (r != ARCHIVE_OK) shard_error(a, shard, previous, "a corrupt or truncated tar");
  return true;
}

std::vector<uint8_t> member_bytes(archive* a, archive_entry* e, const std::string& shard) {
  const std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "?";
  const int64_t size = archive_entry_size(e);
  if (size < 0 || size > kMaxMemberBytes)
    throw DataError(printable_path(shard) + ": member '" + printable(name) + "' claims " + std::to_string(size) + " bytes");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  size_t got = 0;
  while (got < bytes.size()) {
    const la_ssize_t n = archive_read_data(a, bytes.data() + got, bytes.size() - got);
    if (n < 0) shard_error(a, shard, "", "member '" + printable(name) + "' cannot be read");
    if (n == 0) throw DataError(printable_path(shard) + ": member '" + printable(name) + "' ends after " + std::to_string(got) + " of " +
                                std::to_string(size) + " bytes (the tar is cut)");
    got += static_cast<size_t>(n);
  }
  return bytes;
}

// WebDataset's split of a member path into the sample key and the extension: at the first dot of the
// file name ("a/b.c.jpg" -> "a/b", "c.jpg").
std::pair<std::string, std::string> split_key(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {path, ""};
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return {path.substr(0, dot), ext};
}

bool is_image_extension(const std::string& ext) { return ext == "jpg" || ext == "jpeg" || ext == "png"; }

// A non-negative decimal label, blanks around it allowed.
int64_t parse_label(const std::vector<uint8_t>& bytes, const std::string& where) {
  std::string text(bytes.begin(), bytes.end());
  const auto blank = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!text.empty() && blank(text.back())) text.pop_back();
  size_t start = 0;
  while (start < text.size() && blank(text[start])) ++start;
  int64_t value = -1;
  const auto [end, ec] = std::from_chars(text.data() + start, text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0 || start == text.size())
    throw DataError(where + ": the label is '" + printable(text, 40) + "', not a non-negative decimal integer");
  return value;
}

// One thread's open shard, read on from where it stopped.
struct ShardReader {
  uint64_t owner = 0;  // the WebDataset's id
  int shard = -1;
  int64_t next = 0;    // the member the next header is
  std::string last_name;
  Archive archive{nullptr, &archive_read_free};
};
thread_local ShardReader reader;

std::atomic<uint64_t> next_id{1};

}  // namespace

std::vector<std::string> expand_braces(const std::string& pattern) {
  const size_t open = pattern.find('{');
  if (open == std::string::npos) {
    if (pattern.find('}') != std::string::npos) throw ValueError("shard pattern '" + pattern + "': a '}' without its '{'");
    return {pattern};
  }
  const size_t close = pattern.find('}', open);
  if (close == std::string::npos) throw ValueError("shard pattern '" + pattern + "': a '{' without its '}'");
  const std::string inside = pattern.substr(open + 1, close - open - 1);
  std::vector<std::string> choices;
  if (const size_t dots = inside.find(".."); dots != std::string::npos) {
    const std::string lo = inside.substr(0, dots), hi = inside.substr(dots + 2);
    int64_t a = -1, b = -1;
    const auto number = [](const std::string& s, int64_t& v) {
      return !s.empty() && std::from_chars(s.data(), s.data() + s.size(), v).ptr == s.data() + s.size() && v >= 0;
    };
    if (!number(lo, a) || !number(hi, b) || b < a)
      throw ValueError("shard pattern '" + pattern + "': {" + inside + "} is not a range {low..high} of numbers");
    if (static_cast<uint64_t>(b - a) >= kMaxBraceNames)
      throw ValueError("shard pattern '" + pattern + "' names more than " + std::to_string(kMaxBraceNames) + " shards");
    for (int64_t v = a; v <= b; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
      choices.push_back(digits);
    }
  } else {
    size_t start = 0;
    for (size_t comma; (comma = inside.find(',', start)) != std::string::npos; start = comma + 1)
      choices.push_back(inside.substr(start, comma - start));
    choices.push_back(inside.substr(start));
  }
  // The first brace varies slowest: "{a,b}-{0..1}" is a-0, a-1, b-0, b-1.
  const std::vector<std::string> rests = expand_braces(pattern.substr(close + 1));
  if (choices.size() * rests.size() > kMaxBraceNames)
    throw ValueError("shard pattern '" + pattern + "' names more than " + std::to_string(kMaxBraceNames) + " shards");
  std::vector<std::string> out;
  for (const std::string& c : choices)
    for (const std::string& rest : rests) out.push_back(pattern.substr(0, open) + c + rest);
  return out;
}

WebDataset::WebDataset(std::vector<std::string> shards, WebDatasetOptions options)
    : shards_(std::move(shards)), options_(std::move(options)), id_(next_id.fetch_add(1)) {
  check_image_transform(options_.transform);
  if (shards_.empty()) throw ValueError("WebDataset: no shards given");
  if (options_.num_classes < 0)
    throw ValueError("WebDataset: num_classes must be >= 0 (0: from the labels), got " + std::to_string(options_.num_classes));
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size)
    throw ValueError("WebDataset: rank " + std::to_string(options_.rank) + " is not in [0, " +
                     std::to_string(options_.world_size) + ")");
  if (shards_.size() < static_cast<size_t>(options_.world_size))
    throw ValueError("WebDataset: " + std::to_string(shards_.size()) + " shards for " +
                     std::to_string(options_.world_size) + " ranks; every rank reads whole shards, so it needs at least one");
  for (size_t s = 0; s < shards_.size(); ++s) {
    shard_begin_.push_back(static_cast<int64_t>(samples_.size()));
    const std::string& shard = shards_[s];
    Archive a = open_shard(shard);
    archive_entry* e = nullptr;
    Sample current{static_cast<int>(s), -1, "", -1};
    const auto finish = [&] {
      if (current.key.empty()) return;
      const std::string missing = current.member < 0 ? "no .jpg, .jpeg or .png image" : current.label < 0 ? "no .cls label" : "";
      if (missing.empty()) {
        num_classes_ = std::max(num_classes_, current.label + 1);
        samples_.push_back(current);
      } else if (options_.skip_bad_images) {
        ++bad_;
      } else {
        throw DataError(printable_path(shard) + ": sample '" + printable(current.key) + "' has " + missing);
      }
    };
    std::string name;
    for (int64_t m = 0; next_member(a.get(), &e, shard, name); ++m) {
      name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
      if (archive_entry_filetype(e) != AE_IFREG) continue;
      const auto [key, ext] = split_key(name);
      if (key.empty() || key.back() == '/')  // ".cls", "dir/.png": a sample without a name
        throw DataError(printable_path(shard) + ": member '" + printable(name) + "' names no sample before its extension");
      if (key != current.key) {
        finish();
        current = Sample{static_cast<int>(s), -1, key, -1};
      }
      if (ext == "cls") {
        try {
          const std::string where = printable_path(shard) + ": member '" + printable(name) + "'";
          if (current.label >= 0) throw DataError(where + ": sample '" + printable(key) + "' has a second .cls label");
          current.label = parse_label(member_bytes(a.get(), e, shard), where);
          if (options_.num_classes > 0 && current.label >= options_.num_classes)
            throw DataError(where + ": label " + std::to_string(current.label) + " is not below the " +
                            std::to_string(options_.num_classes) + " classes given");
          if (options_.num_classes == 0 && current.label >= kMaxInferredClasses)
            throw DataError(where + ": label " + std::to_string(current.label) + " would make " +
                            std::to_string(current.label + 1) + " classes; more than " +
                            std::to_string(kMaxInferredClasses) + " must be given as num_classes (train: --num-classes)");
        } catch (const DataError&) {
          if (!options_.skip_bad_images) throw;
          current.label = -1;
        }
        continue;
      }
      if (is_image_extension(ext) && current.member < 0) current.member = m;
      if (archive_read_data_skip(a.get()) != ARCHIVE_OK) shard_error(a.get(), shard, name, "a corrupt or truncated tar");
    }
    finish();
  }
  shard_begin_.push_back(static_cast<int64_t>(samples_.size()));
  if (samples_.empty()) throw DataError("WebDataset: the " + std::to_string(shards_.size()) + " shards hold no sample");
}

std::vector<uint8_t> WebDataset::read_image(const Sample& s) const {
  const std::string& shard = shards_[static_cast<size_t>(s.shard)];
  ShardReader& r = reader;
  if (r.owner != id_ || r.shard != s.shard || r.next > s.member || !r.archive) {
    r.archive = open_shard(shard);
    r.owner = id_;
    r.shard = s.shard;
    r.next = 0;
    r.last_name.clear();
  }
  archive_entry* e = nullptr;
  try {
    for (;;) {
      if (!next_member(r.archive.get(), &e, shard, r.last_name))
        throw DataError(printable_path(shard) + ": ends before member " + std::to_string(s.member) + " (it changed since it was listed)");
      r.last_name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
      if (r.next++ == s.member) return member_bytes(r.archive.get(), e, shard);
      if (archive_read_data_skip(r.archive.get()) != ARCHIVE_OK)
        shard_error(r.archive.get(), shard, r.last_name, "a corrupt or truncated tar");
    }
  } catch (...) {
    r.archive.reset();  // start the shard afresh next time
    throw;
  }
}

Batch WebDataset::get_batch(const std::vector<int64_t>& indices) const { return get_epoch_batch(indices, 0, 0); }

Batch WebDataset::get_epoch_batch(const std::vector<int64_t>& indices, uint64_t seed, int64_t epoch) const {
  const ImageExamples examples{
      size(),
      [this](int64_t i) {
        const Sample& s = samples_[static_cast<size_t>(i)];
        return EncodedImage{read_image(s), shards_[static_cast<size_t>(s.shard)] + ": sample '" + printable(s.key) + "'"};
      },
      [this](int64_t i) { return samples_[static_cast<size_t>(i)].label; },
      "WebDataset"};
  return make_image_batch(examples, indices, seed, epoch, options_.transform, options_.skip_bad_images, bad_);
}

std::vector<int64_t> WebDataset::order(uint64_t seed, int64_t epoch) const {
  const int64_t shards = static_cast<int64_t>(shards_.size());
  std::vector<int64_t> shard_order(static_cast<size_t>(shards));
  if (options_.shuffle_shards) {
    shard_order = permutation(shards, seed, epoch);
  } else {
    for (int64_t s = 0; s < shards; ++s) shard_order[static_cast<size_t>(s)] = s;
  }
  // Every rank's count, so that all are cut to the smallest.
  const int world = options_.world_size;
  std::vector<int64_t> counts(static_cast<size_t>(world), 0);
  std::vector<int64_t> mine;
  for (int64_t k = 0; k < shards; ++k) {
    const int64_t s = shard_order[static_cast<size_t>(k)];
    const int rank = static_cast<int>(k % world);
    counts[static_cast<size_t>(rank)] += shard_begin_[static_cast<size_t>(s + 1)] - shard_begin_[static_cast<size_t>(s)];
    if (rank == options_.rank)
      for (int64_t i = shard_begin_[static_cast<size_t>(s)]; i < shard_begin_[static_cast<size_t>(s + 1)]; ++i) mine.push_back(i);
  }
  mine.resize(static_cast<size_t>(*std::min_element(counts.begin(), counts.end())));
  return mine;
}

Sampler WebDataset::sampler(uint64_t seed) const {
  return [this, seed](int64_t, int64_t epoch) { return order(seed, epoch); };
}

}  // namespace ember::data
