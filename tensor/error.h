// Typed exceptions. Every error ember raises derives from ember::Error and says, with the
// offending values, what was wrong, so callers can catch by kind and users can read the cause.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ShapeError : public Error { using Error::Error; };           // incompatible shapes
class DTypeError : public Error { using Error::Error; };           // unsupported / mismatched dtypes
class DeviceError : public Error { using Error::Error; };          // mismatched or absent devices
class IndexError : public Error { using Error::Error; };           // dim or index out of range
class ValueError : public Error { using Error::Error; };           // a bad argument value
class AutogradError : public Error { using Error::Error; };        // misuse of the autograd graph
class NotImplementedError : public Error { using Error::Error; };  // a valid request not (yet) served
class StateError : public Error { using Error::Error; };           // a call out of order (unscale_ twice)

// A failed CUDA, cuBLAS, cuDNN or NCCL call: the message names the call, its file:line and the
// library's own message. Declared here so CPU-only builds can catch it too.
class CudaError : public Error { using Error::Error; };

// Device memory exhausted. Carries the request and the device pool's figures, in bytes:
// allocated (in use by tensors), reserved (held by the pool) and peak (most ever allocated).
class OutOfMemoryError : public CudaError {
 public:
  OutOfMemoryError(const std::string& what, size_t requested, size_t allocated, size_t reserved, size_t peak)
      : CudaError(what), requested_(requested), allocated_(allocated), reserved_(reserved), peak_(peak) {}
  size_t requested() const { return requested_; }
  size_t allocated() const { return allocated_; }
  size_t reserved() const { return reserved_; }
  size_t peak() const { return peak_; }

 private:
  size_t requested_, allocated_, reserved_, peak_;
};

}  // namespace ember
