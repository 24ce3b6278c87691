// Picks cpu/simd_math.h's kernels for the CPU the program runs on.
#include "cpu/simd_math.h"

#include <cstdlib>
#include <string>

#include "tensor/deterministic.h"
#include "tensor/error.h"

namespace ember::cpu::simd {

extern const Kernels kAvx2Kernels;    // cpu/simd_math_avx2.cpp
extern const Kernels kAvx512Kernels;  // cpu/simd_math_avx512.cpp

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    default: return "none";
  }
}

// GCC's feature test also checks that the OS saves the AVX and AVX-512 registers (XGETBV).
bool cpu_supports(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::avx512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("f16c");
    default: return true;
  }
}

const Kernels* kernels_for(Isa isa) {
  switch (isa) {
    case Isa::avx2: return &kAvx2Kernels;
    case Isa::avx512: return &kAvx512Kernels;
    default: return nullptr;
  }
}

namespace {

Isa widest_supported() {
  for (Isa isa : {Isa::avx512, Isa::avx2})
    if (cpu_supports(isa)) return isa;
  return Isa::none;
}

Isa choose_isa() {
  const char* requested = std::getenv("EMBER_CPU_ISA");
  if (requested == nullptr || *requested == '\0') return widest_supported();
  for (Isa isa : {Isa::none, Isa::avx2, Isa::avx512}) {
    if (std::string(requested) != isa_name(isa)) continue;
    if (!cpu_supports(isa))
      throw ValueError(std::string("EMBER_CPU_ISA=") + requested + ": this CPU does not support it (its widest is " +
                       isa_name(widest_supported()) + ")");
    return isa;
  }
  throw ValueError(std::string("EMBER_CPU_ISA=") + requested + ": expected none, avx2 or avx512");
}

}  // namespace

Isa active_isa() {
  static const Isa isa = choose_isa();
  return isa;
}

const Kernels* active_kernels() { return is_deterministic() ? nullptr : kernels_for(active_isa()); }

}  // namespace ember::cpu::simd
