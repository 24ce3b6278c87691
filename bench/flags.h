// The bench binaries' own flags (before Google Benchmark's): their values checked as the training
// program checks its flags, so that a typo is an error naming it rather than an abort or a default.
#pragma once

#include <optional>
#include <string>

namespace ember::bench {

/// The positive whole number of a "--name=N" argument, or nullopt after saying on stderr what is wrong
/// with it ("bench_data: --batches must be a positive whole number, got \"3x\"").
std::optional<long long> positive_flag(const char* program, const std::string& argument);

}  // namespace ember::bench
