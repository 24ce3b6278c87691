#include "train/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "tensor/atomic_file.h"
#include "train/append_whole.h"
#include "train/tensorboard.h"

namespace ember::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  const auto total = static_cast<int64_t>(seconds);  // whole seconds, as int(eta) in MMEngine
  const int64_t days = total / 86400, rest = total % 86400;
  char hms[32];
  std::snprintf(hms, sizeof(hms), "%d:%02d:%02d", int(rest / 3600), int(rest / 60 % 60), int(rest % 60));
  if (days == 0) return hms;
  return std::to_string(days) + (days == 1 ? " day, " : " days, ") + hms;
}

std::string format_field(const LogField& field) {
  char buf[64];
  switch (field.format) {
    case FieldFormat::scientific: std::snprintf(buf, sizeof(buf), "%.4e", field.value); break;
    case FieldFormat::fixed4: std::snprintf(buf, sizeof(buf), "%.4f", field.value); break;
    case FieldFormat::integer: std::snprintf(buf, sizeof(buf), "%.0f", field.value); break;
    case FieldFormat::duration: return field.name + ": " + format_duration(field.value);
    case FieldFormat::text: return field.name + ": " + field.text;
  }
  return field.name + ": " + buf;
}

std::string format_log_line(const LogHeader& header, const std::vector<LogField>& fields) {
  const std::string iters = std::to_string(header.iters);
  std::string line;
  if (header.mode == "train") {
    std::string iter = std::to_string(header.iter);
    if (iter.size() < iters.size()) iter.insert(0, iters.size() - iter.size(), ' ');
    line = "Epoch(train)  [" + std::to_string(header.epoch) + "][" + iter + "/" + iters + "]";
  } else {
    line = "Epoch(" + header.mode + ") [" + std::to_string(header.epoch) + "][" + std::to_string(header.iter) + "/" +
           iters + "]";
  }
  for (const LogField& f : fields) line += "  " + format_field(f);
  return line;
}

namespace {

// The size of the file's first `end` bytes without a last line that lacks its newline; -1 when they
// cannot be read.
int64_t whole_lines_size(int fd, int64_t end) {
  char buf[4096];
  while (end > 0) {
    const int64_t from = std::max<int64_t>(0, end - static_cast<int64_t>(sizeof(buf)));
    const ssize_t n = ::pread(fd, buf, static_cast<size_t>(end - from), from);
    if (n != end - from) return -1;
    for (int64_t i = n - 1; i >= 0; --i)
      if (buf[i] == '\n') return from + i + 1;
    end = from;
  }
  return end;
}

}  // namespace

MetricLog::MetricLog(std::ostream& console, const std::string& jsonl_path, const std::string& tensorboard_dir)
    : console_(console), jsonl_path_(jsonl_path) {
  if (!jsonl_path.empty()) open_jsonl();
  if (tensorboard_dir.empty()) return;
  try {
    tensorboard_ = std::make_unique<TensorBoardWriter>(tensorboard_dir);
  } catch (...) {
    if (jsonl_fd_ >= 0) ::close(jsonl_fd_);
    throw;
  }
}

void MetricLog::open_jsonl() {
  jsonl_fd_ = ::open(jsonl_path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (jsonl_fd_ < 0)
    throw IOError("cannot open the metrics file " + jsonl_path_ + " for appending: " + std::strerror(errno));
  const int64_t end = ::lseek(jsonl_fd_, 0, SEEK_END);
  jsonl_size_ = end < 0 ? -1 : whole_lines_size(jsonl_fd_, end);
  if (jsonl_size_ < 0 || (jsonl_size_ < end && ::ftruncate(jsonl_fd_, jsonl_size_) != 0)) {
    const std::string why = std::strerror(errno);
    ::close(jsonl_fd_);
    throw IOError("cannot cut the unfinished last line of the metrics file " + jsonl_path_ + ": " + why);
  }
}

MetricLog::~MetricLog() {
  if (jsonl_fd_ >= 0) ::close(jsonl_fd_);
}

void MetricLog::write(const LogHeader& header, int64_t step, const std::vector<LogField>& fields) {
  console_ << format_log_line(header, fields) << std::endl;
  if (jsonl_fd_ >= 0) append_json_line(header, step, fields);
  if (!tensorboard_) return;
  std::vector<std::pair<std::string, double>> scalars;
  for (const LogField& f : fields)
    if (f.format != FieldFormat::text) scalars.emplace_back(header.mode + "/" + f.name, f.value);
  tensorboard_->add_scalars(scalars, step);
}

void MetricLog::append_json_line(const LogHeader& header, int64_t step, const std::vector<LogField>& fields) {
  nlohmann::ordered_json record = {{"mode", header.mode}, {"epoch", header.epoch}, {"iter", header.iter},
                                   {"step", step}};
  for (const LogField& f : fields) {
    if (f.format == FieldFormat::text) record[f.name] = f.text;
    else record[f.name] = f.value;
  }
  // Should taking back a failed line fail too, the next open cuts the part.
  append_whole(jsonl_fd_, record.dump() + '\n', jsonl_size_, "metrics file", jsonl_path_);
}

}  // namespace ember::train
