// Picks cpu/simd_math.h's kernels for the CPU the program runs on.
#include "cpu/simd_math.h"

#include <sys/platform/x86.h>

#include <cstdlib>
#include <string>

#include "tensor/deterministic.h"
#include "tensor/error.h"
#include "tensor/printable.h"

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

// glibc's view of the CPU, as cpu::best_gemm_isa() takes it: "active" features are those the OS saves
// the registers of, and GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,... lowers both choices at once.
bool cpu_supports(Isa isa) {
  switch (isa) {
    case Isa::avx2: return CPU_FEATURE_ACTIVE(AVX2) && CPU_FEATURE_ACTIVE(FMA) && CPU_FEATURE_ACTIVE(F16C);
    case Isa::avx512: return CPU_FEATURE_ACTIVE(AVX512F) && CPU_FEATURE_ACTIVE(F16C);
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
      throw ValueError("EMBER_CPU_ISA=" + printable(requested, 40) + ": this CPU does not support it (its widest is " +
                       isa_name(widest_supported()) + ")");
    return isa;
  }
  throw ValueError("EMBER_CPU_ISA=" + printable(requested, 40) + ": expected none, avx2 or avx512");
}

}  // namespace

Isa active_isa() {
  static const Isa isa = choose_isa();
  return isa;
}

const Kernels* active_kernels() { return is_deterministic() ? nullptr : kernels_for(active_isa()); }

}  // namespace ember::cpu::simd
