// The buffers a backend hands its library: a tensor's bytes, contiguous and in the dtype on the
// wire. Shared by the Gloo and NCCL backends.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/ops.h"

namespace ember::dist {

// t itself when contiguous and already of dtype `wire`, else a contiguous copy in `wire` (the
// caller copies the result back with write_back).
inline Tensor staged(const Tensor& t, DType wire) { return contiguous(to(t, wire)); }
inline Tensor staged(const Tensor& t) { return contiguous(t); }

// Copies staging's values into t when staging is a copy (a no-op when it is t itself).
inline void write_back(const Tensor& t, const Tensor& staging) {
  if (staging.is_same(t)) return;
  Tensor target = t;
  copy_(target, staging.view(t.shape()));
}

inline uint8_t* bytes_of(const Tensor& t) { return static_cast<uint8_t*>(t.raw_data()); }
inline size_t nbytes(const Tensor& t) { return static_cast<size_t>(t.numel() * dtype_size(t.dtype())); }

}  // namespace ember::dist
