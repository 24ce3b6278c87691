// Counters, case registration and the CPU baseline phase of bench/compare.h.
#include "bench/compare.h"

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

benchmark::internal::Benchmark* register_case(const std::string& name, std::function<void(benchmark::State&)> body) {
  return benchmark::RegisterBenchmark(name.c_str(), std::move(body))
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace bench
