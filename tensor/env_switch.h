/// @file
/// ember's environment switches (EMBER_NVTX=1, EMBER_CPU_CONV=ember, EMBER_CPU_ISA=avx2, ...): a value
/// outside those a switch takes is an error naming the variable, never silently the default.
#pragma once

#include <string>
#include <vector>

namespace ember {

/// The value of environment variable `name`: one of `accepted`, or `unset` when the variable is unset
/// or empty. ValueError naming the variable, its value and the accepted ones otherwise.
std::string env_choice(const char* name, const std::vector<std::string>& accepted, const std::string& unset);

}  // namespace ember
