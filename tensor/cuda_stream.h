/// @file
/// User CUDA streams and events (torch.cuda.Stream / Event / torch.cuda.stream): ember's kernels on a
/// device run on that device's current stream; StreamGuard makes a user stream current for a scope,
/// and events order work between streams and time it. Without a GPU every constructor raises DeviceError.
#pragma once

#include <cstdint>

namespace ember::cuda {

class Event;

/// A CUDA stream of ember's own (torch.cuda.Stream), destroyed with the object.
class Stream {
 public:
  /// A new stream on `device` that does not synchronise with the legacy default stream.
  explicit Stream(int device = 0);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }    ///< The CUDA device the stream belongs to.
  void* handle() const { return stream_; }  ///< The cudaStream_t.
  /// Waits on the host until the stream's work is done (counted by host_sync_count()).
  void synchronize() const;
  /// Work queued on this stream after the call waits for `event` (on the device, not the host).
  void wait(const Event& event) const;

 private:
  int device_;
  void* stream_ = nullptr;
};

/// Makes cuda:`device` the current device of the calling thread (torch.cuda.set_device): where its
/// CUDA context opens and where work that names no device goes. DeviceError for a device no GPU
/// answers to.
void set_device(int device);
/// The current device of the calling thread (torch.cuda.current_device): set_device's, else 0.
/// DeviceError without CUDA.
int current_device();

/// A CUDA event (torch.cuda.Event): a point in a stream's work to wait for or time. The CUDA event
/// is created at the first record, on the recording stream's device (as PyTorch's CUDAEvent): an
/// event belongs to one device, and recording it on another device's stream fails.
class Event {
 public:
  explicit Event(bool enable_timing = false);  ///< An event; `enable_timing` lets elapsed_ms() measure from it.
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  /// Records the event on `stream`; DeviceError when an earlier record was on another device.
  void record(const Stream& stream);
  void record(int device = 0);  ///< Records the event on the current stream of `device`.
  /// Whether the work before the record has finished (never waits; true before any record).
  bool query() const;
  /// Waits on the host for it (counted by host_sync_count()); returns at once before any record.
  void synchronize() const;
  /// Work queued after the call on the current stream of `device` waits for the event (on the device,
  /// as torch.cuda.Event.wait); nothing before any record.
  void wait(int device = 0) const;
  /// Milliseconds from this event to `end`, both recorded and timed; ValueError otherwise.
  double elapsed_ms(const Event& end) const;
  void* handle() const { return event_; }  ///< the cudaEvent_t; null before the first record

 private:
  void create_on(int device);  // the CUDA event, at the first record, on `device`

  void* event_ = nullptr;
  int device_ = -1;
  bool timing_;
  bool recorded_ = false;
};

/// Makes `stream` the current stream of its device for this thread while alive; the previous one
/// returns at destruction.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);  ///< Makes `stream` current; DeviceError without a GPU.
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  void* previous_;
};

}  // namespace ember::cuda
