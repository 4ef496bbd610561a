#include "replay_json.hpp"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "json_text.hpp"
#include "pmrkit/registry.hpp"

namespace pmrkit::trace_tools {
namespace {

using bench::json_string;

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace

std::string trace_label(const std::string& path) {
  std::string stem = std::filesystem::path(path).filename().string();
  for (const char* suffix : {".zst", ".trace", ".gz"})
    if (stem.size() > std::strlen(suffix) && stem.ends_with(suffix))
      stem.resize(stem.size() - std::strlen(suffix));
  // The report splits names at '/' and reads ':' as a spec's options: keep to a plain word.
  for (char& c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  return stem.empty() ? "trace" : stem;
}

void write_benchmark_json(std::ostream& out, const std::string& trace_path,
                          const trace::recorded_trace& trace, const trace::replay_plan& plan,
                          const std::vector<replay_row>& rows) {
  const std::string workload = "Replay_" + trace_label(trace_path);
  out << "{\n \"context\": {\n"
      << "  \"executable\": \"pmrkit-replay\",\n"
      << "  \"pmrkit_trace\": " << json_string(trace_path) << ",\n"
      << "  \"pmrkit_trace_format\": " << json_string(trace.format) << ",\n"
      << "  \"pmrkit_trace_operations\": " << plan.operations() << ",\n"
      << "  \"pmrkit_trace_threads\": " << plan.threads().size() << ",\n"
      << "  \"pmrkit_trace_cross_thread_frees\": " << plan.cross_thread_frees() << ",\n"
      << "  \"pmrkit_trace_peak_live_bytes\": " << plan.peak_live_bytes() << ",\n"
      << "  \"pmrkit_one_thread_strategies\": [";
  // Those install_default_from_env() takes only for a program that allocates from one thread
  // (not thread-safe, or bound to their thread): the recommendation says so when it names one.
  const char* comma = "";
  for (const strategy_info& s : strategies())
    if (!s.thread_safe || s.bound_to_thread) {
      out << comma << json_string(s.name);
      comma = ", ";
    }
  out << "]\n },\n"
      << " \"benchmarks\": [";
  const char* separator = "\n";
  for (const replay_row& row : rows) {
    const std::string name = workload + "/" + row.name;
    for (std::size_t i = 0; i < row.runs.size(); ++i) {
      const trace::replay_result& r = row.runs[i];
      out << separator << "  {\"name\": " << json_string(name)
          << ", \"run_name\": " << json_string(name)
          << ", \"run_type\": \"iteration\", \"repetitions\": " << row.runs.size()
          << ", \"repetition_index\": " << i << ", \"threads\": 1"
          << ", \"iterations\": " << r.operations << ", \"real_time\": "
          << number(r.ns_per_operation()) << ", \"cpu_time\": " << number(r.ns_per_operation())
          << ", \"time_unit\": \"ns\", \"peak_live_bytes\": " << r.peak_live_bytes;
      if (r.peak_held_bytes) out << ", \"peak_held_bytes\": " << *r.peak_held_bytes;
      if (!row.held_method.empty())
        out << ", \"label\": " << json_string("held=" + row.held_method);
      out << "}";
      separator = ",\n";
    }
  }
  out << "\n ]\n}\n";
}

}  // namespace pmrkit::trace_tools
