#include "train/log.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tensor/atomic_file.h"

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

MetricLog::MetricLog(std::ostream& console, const std::string& jsonl_path)
    : console_(console), jsonl_path_(jsonl_path) {
  if (jsonl_path.empty()) return;
  jsonl_.open(jsonl_path, std::ios::app);
  if (!jsonl_) throw IOError("cannot open the metrics file " + jsonl_path + " for appending");
}

void MetricLog::write(const LogHeader& header, int64_t step, const std::vector<LogField>& fields) {
  console_ << format_log_line(header, fields) << std::endl;
  if (!jsonl_.is_open()) return;
  nlohmann::ordered_json record = {{"mode", header.mode}, {"epoch", header.epoch}, {"iter", header.iter},
                                   {"step", step}};
  for (const LogField& f : fields) {
    if (f.format == FieldFormat::text) record[f.name] = f.text;
    else record[f.name] = f.value;
  }
  jsonl_ << record.dump() << '\n';
  jsonl_.flush();
  if (!jsonl_) throw IOError("cannot write to the metrics file " + jsonl_path_);
}

}  // namespace ember::train
