/// @file
/// TensorBoard event files of scalars, written without TensorFlow or a protobuf library: what
/// MMEngine's TensorboardVisBackend (through PyTorch's SummaryWriter) leaves for `tensorboard --logdir`.
///
/// A file is a sequence of TFRecords, each a serialized tensorflow.Event: first one with
/// file_version "brain.Event:2", then one per add_scalars() call (every value of one log line in one
/// record). Each record is framed in memory and handed to write(2) at once, nothing kept back in
/// the process; a failed write is taken back, so the file ends at a record's end. A process killed
/// in the middle of a write can leave a cut last record, at which readers (TensorBoard's among them)
/// stop, after reading every earlier one. That is why each writer starts a file of its own and never
/// appends to an earlier one: records written after a cut tail would be unreadable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ember::train {

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `size` bytes: "123456789" gives 0xE3069283.
uint32_t crc32c(const void* data, size_t size);
/// The CRC as TFRecords store it: rotated right by 15 bits plus 0xa282ead8, since a CRC computed over
/// bytes that hold CRCs of their own is prone to degenerate cases.
uint32_t masked_crc32c(const void* data, size_t size);

/// Writes one TensorBoard event file of scalars (see the file's description), as PyTorch's
/// SummaryWriter.add_scalar would.
class TensorBoardWriter {
 public:
  /// Makes `dir` when missing and a new file in it,
  /// "events.out.tfevents.<unix seconds, 10 digits>.<hostname>.<pid>.<n>" as PyTorch's SummaryWriter
  /// names them (n counts this process's files, so two writers never share one), and writes its
  /// file_version record. IOError naming the path and the reason when the directory cannot be made
  /// or the file cannot be created.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  /// One record of (tag, value) scalars at `step`, stored as float32 (TensorBoard's simple_value).
  /// IOError naming the file and the reason (a full disk) when the record cannot be written whole;
  /// the file then still ends at the previous record.
  void add_scalars(const std::vector<std::pair<std::string, double>>& scalars, int64_t step);

  const std::string& path() const { return path_; }  ///< The event file's path.

 private:
  // Frames `event` (a serialized tensorflow.Event) as a TFRecord and appends it.
  void write_record(const std::string& event);

  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;  // the file's whole records, in bytes
};

}  // namespace ember::train
