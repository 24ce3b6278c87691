/// @file
/// The training log in MMEngine's line format (`docs/reference.md#the-log-line`), with the same fields written as
/// JSON lines for plotting and, when asked, as TensorBoard scalars:
///   Epoch(train)  [1][ 50/469]  lr: 1.0000e-03  eta: 0:01:10  time: 0.0412  data_time: 0.0021  memory: 0  loss: 0.6134
///   Epoch(val) [1][79/79]  accuracy/top1: 88.4100  data_time: 0.0040  time: 0.0123
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace ember::train {

class TensorBoardWriter;  // train/tensorboard.h

/// How a field's value is printed: lr as 1.0000e-03, most values with four decimals, memory as an
/// integer, eta as H:MM:SS (Python's str(timedelta), which MMEngine prints); a text field prints its
/// text (a string in the JSON line).
enum class FieldFormat { scientific, fixed4, integer, duration, text };

/// One `name: value` field of a log line.
struct LogField {
  /// A numeric field.
  LogField(std::string name, double value, FieldFormat format = FieldFormat::fixed4)
      : name(std::move(name)), value(value), format(format) {}
  /// A text field.
  LogField(std::string name, std::string text) : name(std::move(name)), format(FieldFormat::text), text(std::move(text)) {}

  std::string name;    ///< as printed and as the JSON key ("loss", "accuracy/top1")
  double value = 0;    ///< a numeric field's value
  FieldFormat format;  ///< how the value prints
  std::string text;    ///< a text field's value
};

/// "Epoch(train)  [epoch][ iter/iters]" or "Epoch(val) [epoch][iter/iters]": the iteration is padded
/// to the width of the total, as MMEngine does for training lines.
struct LogHeader {
  std::string mode;  ///< "train" or "val"
  int64_t epoch;     ///< 1-based
  int64_t iter;      ///< 1-based within the epoch
  int64_t iters;     ///< per epoch
};

/// A duration as MMEngine prints eta: 70 s -> "0:01:10"; 90000 s -> "1 day, 1:00:00".
std::string format_duration(double seconds);
std::string format_field(const LogField& field);  ///< "name: value" as the line prints it.
/// The whole line: the header, then the fields separated by two spaces.
std::string format_log_line(const LogHeader& header, const std::vector<LogField>& fields);

/// Writes each line to a stream (the console) and, when a path is given, appends the fields as one
/// JSON object per line ({"mode": "train", "epoch": 1, "iter": 50, "step": 50, "lr": ..., ...}).
/// The file holds whole lines only: a line that could not be written in full is taken back, and a
/// last line without its newline (a process killed while appending it) is cut when the file is opened.
/// When a TensorBoard directory is given, every numeric field of a line also goes to a new event file
/// there (train/tensorboard.h) as a scalar tagged "<mode>/<name>" at the line's step: train/loss,
/// train/lr, val/accuracy/top1, as MMEngine's LogProcessor names them with log_with_hierarchy=True
/// (its flat names would give train and val lines' time and data_time the same tags).
class MetricLog {
 public:
  /// Prints to `console`; appends JSON lines to `jsonl_path` and writes an event file in
  /// `tensorboard_dir` when they are not empty. IOError when the JSON-lines file cannot be opened for
  /// appending, or the event file not created.
  MetricLog(std::ostream& console, const std::string& jsonl_path = "", const std::string& tensorboard_dir = "");
  ~MetricLog();
  MetricLog(const MetricLog&) = delete;
  MetricLog& operator=(const MetricLog&) = delete;
  /// Writes one line. `step` is the global iteration for training lines and the epoch for validation
  /// lines. IOError, naming the file and the reason, when the JSON line or the TensorBoard record
  /// cannot be appended (a full disk).
  void write(const LogHeader& header, int64_t step, const std::vector<LogField>& fields);

 private:
  // Opens jsonl_path_ for appending and cuts an unfinished last line.
  void open_jsonl();
  void append_json_line(const LogHeader& header, int64_t step, const std::vector<LogField>& fields);

  std::ostream& console_;
  std::string jsonl_path_;
  int jsonl_fd_ = -1;       // -1: no file
  int64_t jsonl_size_ = 0;  // the file's whole lines, in bytes
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // null: no event file
};

}  // namespace ember::train
