// CIFAR-10 binary reader.
#include "data/cifar10.h"
#include "tensor/printable.h"

#include <cstring>

namespace ember::data {

LabeledImages read_cifar10(const std::string& path) {
  constexpr size_t kPixels = 3 * 32 * 32, kRecord = 1 + kPixels;
  const std::vector<uint8_t> bytes = DataFile(path).read_rest();
  if (bytes.empty()) throw DataError(printable_path(path) + ": empty file, expected records of 3073 bytes");
  if (bytes.size() % kRecord != 0)
    throw DataError(printable_path(path) + ": truncated or corrupt: " + std::to_string(bytes.size()) +
                    " bytes is not a multiple of the 3073-byte record (" + std::to_string(bytes.size() / kRecord) +
                    " whole records and " + std::to_string(bytes.size() % kRecord) + " bytes left)");
  const int64_t n = int64_t(bytes.size() / kRecord);
  LabeledImages out{Tensor::empty({n, 3, 32, 32}, DType::u8), Tensor::empty({n}, DType::i64)};
  uint8_t* img = out.images.data<uint8_t>();
  int64_t* lab = out.labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* rec = bytes.data() + size_t(i) * kRecord;
    if (rec[0] >= 10)
      throw DataError(printable_path(path) + ": record " + std::to_string(i) + " has label " + std::to_string(rec[0]) +
                      ", expected 0..9");
    lab[i] = rec[0];
    std::memcpy(img + size_t(i) * kPixels, rec + 1, kPixels);
  }
  return out;
}

}  // namespace ember::data
