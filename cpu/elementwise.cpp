// CPU kernels of the elementwise primitives, one template each, instantiated over the op lists.
#include <algorithm>
#include <cstdint>

#include "cpu/convert_into.h"
#include "cpu/loops.h"
#include "cpu/simd_math.h"
#include "tensor/convert.h"
#include "tensor/primitives/elementwise.h"

namespace ember {

namespace {

template <class T>
constexpr bool is_numeric_v = !std::is_same_v<T, bool>;

[[noreturn]] void unsupported(const char* op, DType dt) {
  throw DTypeError(std::string(op) + ": not supported for dtype " + dtype_name(dt));
}

// The cpu/simd_math.h kernel of each unary op that has one.
using VectorKernel = cpu::simd::Kernels::Map cpu::simd::Kernels::*;
template <class Op> constexpr VectorKernel kVectorKernel = nullptr;
template <> constexpr VectorKernel kVectorKernel<ew::Exp> = &cpu::simd::Kernels::exp;
template <> constexpr VectorKernel kVectorKernel<ew::Log> = &cpu::simd::Kernels::log;
template <> constexpr VectorKernel kVectorKernel<ew::Log1p> = &cpu::simd::Kernels::log1p;
template <> constexpr VectorKernel kVectorKernel<ew::Sin> = &cpu::simd::Kernels::sin;
template <> constexpr VectorKernel kVectorKernel<ew::Cos> = &cpu::simd::Kernels::cos;
template <> constexpr VectorKernel kVectorKernel<ew::Tanh> = &cpu::simd::Kernels::tanh;
template <> constexpr VectorKernel kVectorKernel<ew::Erf> = &cpu::simd::Kernels::erf;
template <> constexpr VectorKernel kVectorKernel<ew::Sigmoid> = &cpu::simd::Kernels::sigmoid;
template <> constexpr VectorKernel kVectorKernel<ew::Silu> = &cpu::simd::Kernels::silu;
template <> constexpr VectorKernel kVectorKernel<ew::GeluErf> = &cpu::simd::Kernels::gelu_erf;
template <> constexpr VectorKernel kVectorKernel<ew::GeluTanh> = &cpu::simd::Kernels::gelu_tanh;

// The same for the activations' backward: dx = kernel(g, x).
using VectorKernel2 = cpu::simd::Kernels::Map2 cpu::simd::Kernels::*;
template <class Op> constexpr VectorKernel2 kVectorKernel2 = nullptr;
template <> constexpr VectorKernel2 kVectorKernel2<ew::GeluBackward> = &cpu::simd::Kernels::gelu_erf_backward;
template <> constexpr VectorKernel2 kVectorKernel2<ew::GeluTanhBackward> = &cpu::simd::Kernels::gelu_tanh_backward;
template <> constexpr VectorKernel2 kVectorKernel2<ew::SiluBackward> = &cpu::simd::Kernels::silu_backward;

// out = kernel(inputs...) for f32, f16 or bf16 tensors of one dtype T: dense f32 runs go straight
// to the kernel, other runs (strided, or 16-bit) through small f32 blocks, dense f16 ones converted
// by F16C (the scalar conversion branches on every value: it was most of an f16 relu).
template <class T, int NI, class Kernel>
void map_vectorized(const Tensor& out, const std::array<const Tensor*, NI>& inputs, Kernel kernel,
                    const cpu::simd::Kernels& simd) {
  static constexpr int64_t kBlock = 512;
  constexpr int N = NI + 1;
  const auto ops = cpu::make_operands<N>(out, inputs);
  cpu::for_each_row<N>(out.shape(), ops, [&kernel, &simd](const std::array<char*, N>& p, int64_t n, const std::array<int64_t, N>& s) {
    const auto call = [&](const std::array<const float*, NI>& in, float* y, int64_t m) {
      if constexpr (NI == 1) kernel(in[0], y, m);
      else kernel(in[0], in[1], y, m);
    };
    bool dense = std::is_same_v<T, float>;
    for (int k = 0; k < N; ++k) dense = dense && s[k] == sizeof(float);
    if (dense) {
      std::array<const float*, NI> in;
      for (int k = 0; k < NI; ++k) in[k] = reinterpret_cast<const float*>(p[k + 1]);
      call(in, reinterpret_cast<float*>(p[0]), n);
      return;
    }
    float blocks[NI][kBlock];
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
      const int64_t m = std::min(kBlock, n - i0);
      std::array<const float*, NI> in;
      for (int k = 0; k < NI; ++k) {
        const char* src = p[k + 1] + i0 * s[k + 1];
        if (std::is_same_v<T, f16> && s[k + 1] == sizeof(f16))
          simd.f16_to_f32(reinterpret_cast<const uint16_t*>(src), blocks[k], m);
        else
          for (int64_t i = 0; i < m; ++i) blocks[k][i] = static_cast<float>(*reinterpret_cast<const T*>(src + i * s[k + 1]));
        in[k] = blocks[k];
      }
      call(in, blocks[0], m);
      char* dst = p[0] + i0 * s[0];
      if (std::is_same_v<T, f16> && s[0] == sizeof(f16))
        simd.f32_to_f16(blocks[0], reinterpret_cast<uint16_t*>(dst), m);
      else
        for (int64_t i = 0; i < m; ++i) *reinterpret_cast<T*>(dst + i * s[0]) = convert<T>(blocks[0][i]);
    }
  }, /*cost=*/4);
}

}  // namespace

template <class Op>
void Unary<Op>::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  visit(in[0].dtype(), [&]<class T>() {
    constexpr bool ok = UnaryTraits<Op>::kind == UnaryKind::Floating ? is_float_type_v<T> : is_numeric_v<T>;
    if constexpr (kVectorKernel<Op> != nullptr && ok && !std::is_same_v<T, double>) {
      if (const cpu::simd::Kernels* kernels = cpu::simd::active_kernels()) {
        map_vectorized<T, 1>(out[0], {&in[0]}, kernels->*kVectorKernel<Op>, *kernels);
        return;
      }
    } else if constexpr (std::is_same_v<T, f16>) {  // the functor on f32 blocks
      if (const cpu::simd::Kernels* kernels = cpu::simd::active_kernels()) {
        const Op op = op_;
        map_vectorized<T, 1>(out[0], {&in[0]}, [op](const float* x, float* y, int64_t n) {
          for (int64_t i = 0; i < n; ++i) y[i] = op(x[i]);
        }, *kernels);
        return;
      }
    }
    if constexpr (ok) {
      using C = compute_t<T>;
      const Op op = op_;
      cpu::map_elements<T, T, 1>(out[0], {&in[0]}, [op](T x) { return convert<T>(op(static_cast<C>(x))); });
    } else {
      unsupported(name(), in[0].dtype());
    }
  });
}

namespace {
// out = Op(x, s), or Op(s, x) when the scalar is the first operand, for a 16-bit x and an f32
// scalar s (the opmath operand of Binary::infer).
template <class Op>
void binary_with_scalar(const Tensor& x, float s, bool scalar_first, Tensor& out) {
  visit(x.dtype(), [&]<class T>() {
    if constexpr (is_reduced_float_v<T>) {
      using O = std::conditional_t<BinaryTraits<Op>::kind == BinaryKind::Compare, bool, T>;
      if (scalar_first)
        cpu::map_elements<O, T, 1>(out, {&x}, [s](T v) { return convert<O>(Op{}(s, static_cast<float>(v))); });
      else
        cpu::map_elements<O, T, 1>(out, {&x}, [s](T v) { return convert<O>(Op{}(static_cast<float>(v), s)); });
    } else {
      unsupported(BinaryTraits<Op>::name, x.dtype());
    }
  });
}
}  // namespace

template <class Op>
void Binary<Op>::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (in[0].dtype() != in[1].dtype()) [[unlikely]] {
    const bool scalar_first = in[0].dtype() == DType::f32;
    binary_with_scalar<Op>(in[scalar_first ? 1 : 0], *in[scalar_first ? 0 : 1].data<float>(), scalar_first, out[0]);
    return;
  }
  visit(in[0].dtype(), [&]<class T>() {
    using C = compute_t<T>;
    if constexpr (kVectorKernel2<Op> != nullptr && is_float_type_v<T> && !std::is_same_v<T, double>) {
      if (const cpu::simd::Kernels* kernels = cpu::simd::active_kernels()) {
        map_vectorized<T, 2>(out[0], {&in[0], &in[1]}, kernels->*kVectorKernel2<Op>, *kernels);
        return;
      }
    } else if constexpr (std::is_same_v<T, f16> && BinaryTraits<Op>::kind != BinaryKind::Compare) {
      if (const cpu::simd::Kernels* kernels = cpu::simd::active_kernels()) {  // the functor on f32 blocks
        map_vectorized<T, 2>(out[0], {&in[0], &in[1]}, [](const float* a, const float* b, float* y, int64_t n) {
          for (int64_t i = 0; i < n; ++i) y[i] = Op{}(a[i], b[i]);
        }, *kernels);
        return;
      }
    }
    if constexpr (BinaryTraits<Op>::kind == BinaryKind::Compare) {
      cpu::map_elements<bool, T, 2>(out[0], {&in[0], &in[1]},
                                    [](T a, T b) { return Op{}(static_cast<C>(a), static_cast<C>(b)); });
    } else if constexpr (BinaryTraits<Op>::kind == BinaryKind::Floating ? is_float_type_v<T> : is_numeric_v<T>) {
      cpu::map_elements<T, T, 2>(out[0], {&in[0], &in[1]}, [](T a, T b) {
        return convert<T>(Op{}(static_cast<C>(a), static_cast<C>(b)));
      });
    } else {
      unsupported(name(), in[0].dtype());
    }
  });
}

// Both values are loaded and one selected, not branched to: the condition is often a coin toss (a
// ReLU mask). Dense rows get a loop on typed pointers, which the compiler vectorizes.
void Where::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  visit(out[0].dtype(), [&]<class T>() {
    const auto ops = cpu::make_operands<4>(out[0], {&in[0], &in[1], &in[2]});
    cpu::for_each_row<4>(out[0].shape(), ops, [](const std::array<char*, 4>& p, int64_t n, const std::array<int64_t, 4>& s) {
      constexpr int64_t size = sizeof(T);
      if (s[0] == size && s[1] == 1 && s[2] == size && s[3] == size) {
        T* o = reinterpret_cast<T*>(p[0]);
        const auto* c = reinterpret_cast<const uint8_t*>(p[1]);  // bools as bytes: this vectorizes, bool doesn't
        const T* a = reinterpret_cast<const T*>(p[2]);
        const T* b = reinterpret_cast<const T*>(p[3]);
        for (int64_t i = 0; i < n; ++i) {
          const T av = a[i], bv = b[i];
          o[i] = c[i] ? av : bv;
        }
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        const T a = *reinterpret_cast<const T*>(p[2] + i * s[2]), b = *reinterpret_cast<const T*>(p[3] + i * s[3]);
        *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const bool*>(p[1] + i * s[1]) ? a : b;
      }
    });
  });
}

namespace {
// Dense runs between f32 and f16 go through the F16C conversion kernels.
template <class O, class I>
bool convert_half_runs(const Tensor& dst, const Tensor& src) {
  const cpu::simd::Kernels* k = cpu::simd::active_kernels();
  if (k == nullptr) return false;
  const auto ops = cpu::make_operands<2>(dst, {&src});
  cpu::for_each_row<2>(dst.shape(), ops, [k](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
    if (s[0] == sizeof(O) && s[1] == sizeof(I)) {
      if constexpr (std::is_same_v<O, f16>) k->f32_to_f16(reinterpret_cast<const float*>(p[1]), reinterpret_cast<uint16_t*>(p[0]), n);
      else k->f16_to_f32(reinterpret_cast<const uint16_t*>(p[1]), reinterpret_cast<float*>(p[0]), n);
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<O*>(p[0] + i * s[0]) = convert<O>(*reinterpret_cast<const I*>(p[1] + i * s[1]));
  });
  return true;
}

}  // namespace

void cpu::convert_into(const Tensor& dst, const Tensor& src) {
  visit(dst.dtype(), [&]<class O>() {
    visit(src.dtype(), [&]<class I>() {
      if constexpr ((std::is_same_v<O, f16> && std::is_same_v<I, float>) || (std::is_same_v<O, float> && std::is_same_v<I, f16>))
        if (convert_half_runs<O, I>(dst, src)) return;
      cpu::map_elements<O, I, 1>(dst, {&src}, [](I x) { return convert<O>(x); });
    });
  });
}

void Cast::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) { cpu::convert_into(out[0], in[0]); }

void CopyInto::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) { cpu::convert_into(out[0], in[1]); }

void Fill::eval_cpu(const std::vector<Tensor>&, std::vector<Tensor>& out) {
  visit(out[0].dtype(), [&]<class T>() {
    const T v = value_.is_floating() ? convert<T>(value_.to_double()) : convert<T>(value_.to_int());
    const auto ops = cpu::make_operands<1>(out[0], {});
    cpu::for_each_row<1>(out[0].shape(), ops, [v](const std::array<char*, 1>& p, int64_t n, const std::array<int64_t, 1>& s) {
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
    });
  });
}

#define EMBER_INSTANTIATE_UNARY(F, ...) template void Unary<ew::F>::eval_cpu(const std::vector<Tensor>&, std::vector<Tensor>&);
EMBER_UNARY_OPS(EMBER_INSTANTIATE_UNARY)
#undef EMBER_INSTANTIATE_UNARY
#define EMBER_INSTANTIATE_BINARY(F, ...) template void Binary<ew::F>::eval_cpu(const std::vector<Tensor>&, std::vector<Tensor>&);
EMBER_BINARY_OPS(EMBER_INSTANTIATE_BINARY)
#undef EMBER_INSTANTIATE_BINARY

}  // namespace ember
