// embedding as a composite: index_select of the flattened indices (its vjp is index_add).
#include "nn/embedding.h"

#include <string>

#include "tensor/autocast.h"

namespace ember {

Tensor embedding(const Tensor& weight_in, const Tensor& indices_in, std::optional<int64_t> padding_idx) {
  const auto [weight, indices] = amp::autocast_args("embedding", weight_in, indices_in);
  if (weight.dim() != 2)
    throw ShapeError("embedding: expected weight of shape (V, D), got " + to_string(weight.shape()));
  if (indices.dtype() != DType::i64 && indices.dtype() != DType::i32)
    throw DTypeError(std::string("embedding: expected integer indices (i64 or i32), got ") +
                     dtype_name(indices.dtype()));
  const int64_t V = weight.size(0);
  const Tensor flat = indices.reshape({indices.numel()});
  Tensor rows = index_select(weight, 0, flat);  // (n, D)
  if (padding_idx) {
    int64_t pad = *padding_idx;
    if (pad < -V || pad >= V)
      throw IndexError("embedding: padding_idx " + std::to_string(pad) + " is out of range for " + std::to_string(V) +
                       " embeddings");
    if (pad < 0) pad += V;
    rows = where(ne(flat, Scalar(pad)).unsqueeze(1), rows, rows.detach());  // no gradient to the padding row
  }
  Shape out = indices.shape();
  out.push_back(weight.size(1));
  return rows.reshape(out);
}

}  // namespace ember
