// What the benchmark binaries share: one case times ember and then the raw library (or the device
// copy) for as many runs, in the same process, and reports both rates and their ratio as counters.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <cstdint>
#include <string>

namespace bench {

// Mean seconds per run of each side of a case.
struct Timing {
  double ember_s = 0;
  double raw_s = 0;
};

// Seconds one call of f takes on the CPU, by the wall clock.
struct WallTimer {
  template <class F>
  double operator()(F&& f) const {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

// Calls f directly: the phase wrapper of a baseline that needs no preparation.
struct PlainPhase {
  template <class F>
  void operator()(F&& f) const {
    f();
  }
};

// The baseline phase of a CPU case: idle threads of ember's pool and of the BLAS library spin for a
// while after their last work (OpenBLAS's up to about 0.1 s) and would slow the other side's first
// runs, so each phase starts after a pause; OpenBLAS gets its own threads for its phase only (ember
// keeps it on the calling thread and splits products over its OpenMP threads: cpu/gemm.cpp).
struct CpuLibraryPhase {
  int threads;
  void operator()(const std::function<void()>& f) const;
};

// The case body: one untimed run of each side (plans, algorithm search, first touch), then ember in
// the benchmark loop (manual time: the case's reported time is ember's), then the raw side for
// state.iterations() runs inside `phase`. `time` measures one call (WallTimer, or CUDA events).
template <class Time, class Phase, class Ember, class Raw>
Timing time_against(benchmark::State& state, const Time& time, const Phase& phase, Ember&& ember, Raw&& raw) {
  ember();
  double ember_total = 0;
  for (auto _ : state) {
    const double s = time(ember);
    state.SetIterationTime(s);
    ember_total += s;
  }
  const int64_t runs = state.iterations();
  double raw_total = 0;
  phase([&] {
    raw();
    for (int64_t i = 0; i < runs; ++i) raw_total += time(raw);
  });
  return {ember_total / static_cast<double>(runs), raw_total / static_cast<double>(runs)};
}

// Sets `<unit>` (ember's rate), `raw_<unit>` (the library's) and `ratio` (ember / raw) from the
// amount of work one run does, in the unit's own scale (e.g. 1e12 FLOP for TFLOPS).
void set_rate_counters(benchmark::State& state, const std::string& unit, double work_per_run, const Timing& t);

// The counters of a GEMM or conv case (TFLOPS, raw_TFLOPS, ratio) and its label (the layers it serves).
void report_flop_case(benchmark::State& state, double flop_per_run, const Timing& t, const std::string& source);

// Registers a case under `name`, timed manually (time_against), reporting ms; an exception it
// throws marks the case as an error and is counted. Google Benchmark appends "/manual_time" to the
// name it reports and filters on.
benchmark::internal::Benchmark* register_case(const std::string& name, std::function<void(benchmark::State&)> body);

// Runs the cases the flags select, then shuts Google Benchmark down. The process's exit status: 1
// when a case registered by register_case failed (Google Benchmark itself exits 0 after a case's
// error, so a script would take a failed run for a good one), else 0.
int run_cases(const char* program);

}  // namespace bench
