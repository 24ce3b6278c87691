// Typed exceptions. Every error ember raises derives from ember::Error and says, with the
// offending values, what was wrong, so callers can catch by kind and users can read the cause.
#pragma once

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

}  // namespace ember
