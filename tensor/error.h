/// @file
/// Typed exceptions. Every error ember raises derives from ember::Error and says, with the
/// offending values, what was wrong, so callers can catch by kind and users can read the cause.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "tensor/device.h"

namespace ember {

/// The base of every exception ember throws; what() is the message.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ShapeError : public Error { using Error::Error; };           ///< Incompatible shapes.
class DTypeError : public Error { using Error::Error; };           ///< An unsupported or mismatched dtype.
class DeviceError : public Error { using Error::Error; };          ///< Mismatched or absent devices.
class IndexError : public Error { using Error::Error; };           ///< A dim or an index out of range.
class ValueError : public Error { using Error::Error; };           ///< A bad argument value.
class AutogradError : public Error { using Error::Error; };        ///< A misuse of the autograd graph.
class NotImplementedError : public Error { using Error::Error; };  ///< A valid request not (yet) served.
class StateError : public Error { using Error::Error; };           ///< A call out of order (unscale_ twice).
/// A tensor read through an undefined handle (a default-constructed Tensor, grad() before any
/// backward, an optional argument left out): the message names the member called.
class UndefinedTensorError : public Error { using Error::Error; };
/// An op with no deterministic implementation, asked for while set_deterministic(true) is on.
class NotDeterministicError : public NotImplementedError { using NotImplementedError::NotImplementedError; };

/// Something a captured step (train::CompiledStep, a CUDA graph) cannot replay: a read of device
/// values on the host, a random op on a generator the capture does not own, a library search that
/// warm-up should have made. The message names the op.
class CaptureError : public Error { using Error::Error; };

/// A failed CUDA, cuBLAS, cuDNN or NCCL call: the message names the call, its file:line and the
/// library's own message. Declared here so CPU-only builds can catch it too.
class CudaError : public Error { using Error::Error; };

/// Memory exhausted on a device (CUDA or the host), after emptying its cache and trying once more.
/// Carries the device, the request and the device's figures in bytes (see backend::MemoryStats):
/// allocated (in use by tensors), reserved (held from the driver or the C library) and peak.
class OutOfMemoryError : public Error {
 public:
  /// The error of a request of `requested` bytes on `device`, with the device's figures at that time.
  OutOfMemoryError(const std::string& what, Device device, size_t requested, size_t allocated, size_t reserved,
                   size_t peak)
      : Error(what), device_(device), requested_(requested), allocated_(allocated), reserved_(reserved), peak_(peak) {}
  Device device() const { return device_; }        ///< The device that ran out.
  size_t requested() const { return requested_; }  ///< Bytes asked for.
  size_t allocated() const { return allocated_; }  ///< Bytes in use by tensors on the device.
  size_t reserved() const { return reserved_; }    ///< Bytes held from the driver or the C library.
  size_t peak() const { return peak_; }            ///< The largest `allocated` so far.

 private:
  Device device_;
  size_t requested_, allocated_, reserved_, peak_;
};

}  // namespace ember
