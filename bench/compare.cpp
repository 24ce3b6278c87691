// Counters, case registration and the CPU baseline phase of bench/compare.h.
#include "bench/compare.h"

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

benchmark::internal::Benchmark* register_case(const std::string& name, std::function<void(benchmark::State&)> body) {
  // An ember error (a dtype an op lacks on a device, out of memory) fails this case, not the run.
  auto guarded = [body = std::move(body)](benchmark::State& state) {
    try {
      body(state);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
    }
  };
  return benchmark::RegisterBenchmark(name.c_str(), std::move(guarded))
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace bench
