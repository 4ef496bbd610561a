// pmrkit_bench: Google Benchmark's main, plus pmrkit's own flags:
//   --strategy=SPEC            run only this strategy (also: PMRKIT_STRATEGY=SPEC)
//   --pmrkit_list_strategies[=text|json]
//                              print the registry's strategies and exit: one line each (text),
//                              or with capabilities and options as JSON (read by bench/report)
//   --pmrkit_probes            also run the design probes (sharded_pages_probe.hpp, every
//                              geometry) on the container workloads and the allocator
//                              patterns
#include <benchmark/benchmark.h>

#include <exception>
#include <iostream>

#include "bench_support.hpp"

int main(int argc, char** argv) {
  try {
    if (!pmrkit::bench::parse_pmrkit_flags(argc, argv)) return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  pmrkit::bench::add_held_method_context();
  pmrkit::bench::run_registrars();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
