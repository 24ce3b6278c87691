// CPU kernels of the joining and indexing primitives, for every dtype and any strides. Index values
// are checked before any element moves, so a bad one raises IndexError instead of reading astray.
// Two loops serve all four index ops: index_select is a gather, index_add a scatter_add, each with
// its 1-D index laid over the whole iteration shape through zero strides.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "cpu/loops.h"
#include "tensor/convert.h"
#include "tensor/stored_add.h"
#include "tensor/primitives/index.h"

namespace ember {

namespace {

// A tensor's first element and its strides in bytes.
struct ByteView {
  char* base;
  Strides strides;
};

ByteView byte_view(const Tensor& t) {
  ByteView v{static_cast<char*>(t.raw_data()), t.strides()};
  for (auto& s : v.strides) s *= dtype_size(t.dtype());
  return v;
}

// A 1-D (or 0-dim) index read as a tensor of `rank` dims that varies only along `dim`.
ByteView index_along(const Tensor& index, int rank, int dim) {
  ByteView v{static_cast<char*>(index.raw_data()), Strides::filled(rank, 0)};
  if (index.dim() == 1) v.strides[dim] = index.strides()[0] * dtype_size(index.dtype());
  return v;
}

Strides without(const Strides& s, int dim) {
  Strides out = s;
  out.erase(dim);
  return out;
}

// The front ends admit int32 and int64 indices only.
template <class F>
void visit_index(DType dtype, F&& f) {
  if (dtype == DType::i32)
    f.template operator()<int32_t>();
  else
    f.template operator()<int64_t>();
}

// Raises IndexError with an index found outside [0, size). Rows run in parallel, so the loop only
// records what it finds and the throw happens after it.
void check_indices(const char* op, const Tensor& index, int dim, int64_t size) {
  std::atomic<bool> bad{false};
  std::atomic<int64_t> value{0};
  visit_index(index.dtype(), [&]<class I>() {
    const auto ops = cpu::make_operands<1>(index, {});
    cpu::for_each_row<1>(index.shape(), ops, [&](const std::array<char*, 1>& p, int64_t n, const std::array<int64_t, 1>& s) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = *reinterpret_cast<const I*>(p[0] + i * s[0]);
        if (v < 0 || v >= size) {
          value = v;
          bad = true;
          return;
        }
      }
    });
  });
  if (bad)
    throw IndexError(std::string(op) + ": index " + std::to_string(value.load()) + " out of range for dim " +
                     std::to_string(dim) + " of size " + std::to_string(size));
}

// n elements from src to dst (byte strides), with memcpy where both are dense.
template <class T>
void copy_row(char* dst, int64_t dst_stride, const char* src, int64_t src_stride, int64_t n) {
  constexpr int64_t size = sizeof(T);
  if (dst_stride == size && src_stride == size) {
    std::memcpy(dst, src, static_cast<size_t>(n * size));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<T*>(dst + i * dst_stride) = *reinterpret_cast<const T*>(src + i * src_stride);
}

// dst = src over `shape`, any strides.
template <class T>
void copy_elements(const Shape& shape, const ByteView& dst, const ByteView& src) {
  const cpu::Operands<2> ops{{dst.base, src.base}, {dst.strides, src.strides}};
  cpu::for_each_row<2>(shape, ops, [](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
    copy_row<T>(p[0], s[0], p[1], s[1], n);
  });
}

// dst[i] += src[i] for n elements (byte strides); the dense case is a loop the compiler vectorizes.
template <class T>
void add_row(char* dst, int64_t dst_stride, const char* src, int64_t src_stride, int64_t n) {
  constexpr int64_t size = sizeof(T);
  if (dst_stride == size && src_stride == size) {
    T* d = reinterpret_cast<T*>(dst);
    const T* s = reinterpret_cast<const T*>(src);
    for (int64_t i = 0; i < n; ++i) d[i] = add_stored(d[i], s[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    T* d = reinterpret_cast<T*>(dst + i * dst_stride);
    *d = add_stored(*d, *reinterpret_cast<const T*>(src + i * src_stride));
  }
}

// out[p] = x[p with p[dim] replaced by index[p]] for every p of out's shape. x and index are read
// through views laid over that shape.
template <class T, class I>
void gather_elements(const Tensor& out, int dim, ByteView x, const ByteView& index) {
  const int64_t x_dim_stride = x.strides[dim];
  x.strides[dim] = 0;  // the coordinate along dim comes from the index
  const ByteView o = byte_view(out);
  const cpu::Operands<3> ops{{o.base, x.base, index.base}, {o.strides, x.strides, index.strides}};
  cpu::for_each_row<3>(out.shape(), ops, [x_dim_stride](const std::array<char*, 3>& p, int64_t n,
                                                        const std::array<int64_t, 3>& s) {
    if (s[2] == 0) {  // one index for the whole row (index_select): a plain row copy
      const int64_t j = *reinterpret_cast<const I*>(p[2]);
      copy_row<T>(p[0], s[0], p[1] + j * x_dim_stride, s[1], n);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = *reinterpret_cast<const I*>(p[2] + i * s[2]);
      *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(p[1] + i * s[1] + j * x_dim_stride);
    }
  });
}

// out = self, then out[p with p[dim] replaced by index[p]] += src[p] for every p of `shape`. The
// positions off dim are split across threads, each taking in its fibers along dim in order: repeated
// indices never race, and every output takes its additions in the order of dim. A fiber lying closer
// in memory than the next position is walked whole before the next (max-pool's backward scatters
// each plane's window maxima so); otherwise the walk goes step by step along dim across the row.
template <class T, class I>
void scatter_add_elements(const Tensor& out, const Tensor& self, const Shape& shape, int dim, const ByteView& src,
                          const ByteView& index) {
  const ByteView o = byte_view(out);
  copy_elements<T>(out.shape(), o, byte_view(self));
  const int64_t K = shape[dim], ods = o.strides[dim], sds = src.strides[dim], ids = index.strides[dim];
  Shape slice = shape;
  slice.erase(dim);
  const cpu::Operands<3> ops{{o.base, src.base, index.base},
                             {without(o.strides, dim), without(src.strides, dim), without(index.strides, dim)}};
  auto row = [&](const std::array<char*, 3>& p, int64_t n, const std::array<int64_t, 3>& s) {
    if (s[2] == 0) {  // one index for the whole row at each step (index_add): row by row
      for (int64_t k = 0; k < K; ++k)
        add_row<T>(p[0] + *reinterpret_cast<const I*>(p[2] + k * ids) * ods, s[0], p[1] + k * sds, s[1], n);
      return;
    }
    auto add = [&](int64_t i, int64_t k) {
      const int64_t j = *reinterpret_cast<const I*>(p[2] + i * s[2] + k * ids);
      T* dst = reinterpret_cast<T*>(p[0] + i * s[0] + j * ods);
      *dst = add_stored(*dst, *reinterpret_cast<const T*>(p[1] + i * s[1] + k * sds));
    };
    if (std::abs(sds) <= std::abs(s[1]))
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < K; ++k) add(i, k);
    else
      for (int64_t k = 0; k < K; ++k)
        for (int64_t i = 0; i < n; ++i) add(i, k);
  };
  cpu::for_each_row<3>(slice, ops, row, K);
}

}  // namespace

void Cat::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  visit(out[0].dtype(), [&]<class T>() {
    ByteView dst = byte_view(out[0]);
    for (const Tensor& part : in) {
      copy_elements<T>(part.shape(), dst, byte_view(part));
      dst.base += part.shape()[dim_] * dst.strides[dim_];
    }
  });
}

void IndexSelect::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor &x = in[0], &index = in[1];
  check_indices(name(), index, dim_, x.shape()[dim_]);
  visit(x.dtype(), [&]<class T>() {
    visit_index(index.dtype(), [&]<class I>() {
      gather_elements<T, I>(out[0], dim_, byte_view(x), index_along(index, x.dim(), dim_));
    });
  });
}

void IndexAdd::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor &self = in[0], &index = in[1], &src = in[2];
  check_indices(name(), index, dim_, self.shape()[dim_]);
  visit(self.dtype(), [&]<class T>() {
    visit_index(index.dtype(), [&]<class I>() {
      scatter_add_elements<T, I>(out[0], self, src.shape(), dim_, byte_view(src), index_along(index, src.dim(), dim_));
    });
  });
}

void Gather::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor &x = in[0], &index = in[1];
  check_indices(name(), index, dim_, x.shape()[dim_]);
  visit(x.dtype(), [&]<class T>() {
    visit_index(index.dtype(), [&]<class I>() { gather_elements<T, I>(out[0], dim_, byte_view(x), byte_view(index)); });
  });
}

void ScatterAdd::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor &self = in[0], &index = in[1], &src = in[2];
  check_indices(name(), index, dim_, self.shape()[dim_]);
  visit(self.dtype(), [&]<class T>() {
    visit_index(index.dtype(), [&]<class I>() {
      scatter_add_elements<T, I>(out[0], self, index.shape(), dim_, byte_view(src), byte_view(index));
    });
  });
}

}  // namespace ember
