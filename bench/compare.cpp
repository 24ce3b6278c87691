// Counters, case registration and the CPU baseline phase of bench/compare.h.
#include "bench/compare.h"

#include <cstdio>
#include <exception>
#include <thread>

#include "bench/blas.h"

namespace bench {

void CpuLibraryPhase::operator()(const std::function<void()>& f) const {
  const auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(250)); };
  settle();
  with_blas_threads(threads, f);
  settle();
}

void set_rate_counters(benchmark::State& state, const std::string& unit, double work_per_run, const Timing& t) {
  state.counters[unit] = work_per_run / t.ember_s;
  state.counters["raw_" + unit] = work_per_run / t.raw_s;
  state.counters["ratio"] = t.raw_s / t.ember_s;
}

void report_flop_case(benchmark::State& state, double flop_per_run, const Timing& t, const std::string& source) {
  set_rate_counters(state, "TFLOPS", flop_per_run / 1e12, t);
  state.SetLabel(source);
}

namespace {
int g_failed_cases = 0;  // the cases run so far whose body threw
}  // namespace

benchmark::internal::Benchmark* register_case(const std::string& name, std::function<void(benchmark::State&)> body) {
  // An ember error (a dtype an op lacks on a device, out of memory) fails this case, not the run.
  auto guarded = [body = std::move(body)](benchmark::State& state) {
    try {
      body(state);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      ++g_failed_cases;
    }
  };
  return benchmark::RegisterBenchmark(name.c_str(), std::move(guarded))
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

int run_cases(const char* program) {
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (g_failed_cases == 0) return 0;
  std::fprintf(stderr, "%s: %d case(s) failed (their errors are in the report)\n", program, g_failed_cases);
  return 1;
}

}  // namespace bench
