// Picks cpu/simd_math.h's kernels for the CPU the program runs on.
#include "cpu/simd_math.h"

#include <sys/platform/x86.h>

#include <string>

#include "tensor/deterministic.h"
#include "tensor/env_switch.h"
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
  const std::string requested = env_choice("EMBER_CPU_ISA", {"none", "avx2", "avx512"}, "");
  if (requested.empty()) return widest_supported();
  const Isa isa = requested == "none" ? Isa::none : requested == "avx2" ? Isa::avx2 : Isa::avx512;
  if (!cpu_supports(isa))
    throw ValueError("EMBER_CPU_ISA=" + requested + ": this CPU does not support it (its widest is " +
                     isa_name(widest_supported()) + ")");
  return isa;
}

}  // namespace

Isa active_isa() {
  static const Isa isa = choose_isa();
  return isa;
}

const Kernels* active_kernels() { return is_deterministic() ? nullptr : kernels_for(active_isa()); }

}  // namespace ember::cpu::simd
