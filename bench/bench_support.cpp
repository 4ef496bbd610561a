#include "bench_support.hpp"

#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "pmrkit/registry.hpp"

namespace pmrkit::bench {
namespace {

std::vector<std::string>& specs_storage() {
  static std::vector<std::string> specs;
  return specs;
}

std::vector<registrar>& registrars() {
  static std::vector<registrar> list;
  return list;
}

// mimalloc strategies take memory from mimalloc directly, which the malloc interposer cannot
// see. Each of their allocations is one general-purpose heap allocation, so this thin
// forwarder counts it as one; every other strategy reaches the heap through operator new,
// which the interposer counts itself. (It adds one indirect call, under a nanosecond, to those
// strategies only.)
class heap_counted_resource final : public std::pmr::memory_resource {
 public:
  explicit heap_counted_resource(std::pmr::memory_resource* inner) : inner_(inner) {}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = inner_->allocate(bytes, alignment);
    count_heap_allocation(bytes);
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    inner_->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
  std::pmr::memory_resource* inner_;
};

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + '"';
}

std::string_view kind_name(option_kind kind) {
  switch (kind) {
    case option_kind::size: return "size";
    case option_kind::power_of_two: return "power_of_two";
    case option_kind::choice: return "choice";
  }
  return "unknown";
}

}  // namespace

std::string strategies_json(const std::vector<strategy_info>& all) {
  std::ostringstream out;
  const auto boolean = [](bool b) { return b ? "true" : "false"; };
  out << "[\n";
  for (std::size_t i = 0; i < all.size(); ++i) {
    const strategy_info& s = all[i];
    out << "  {\"name\": " << json_string(s.name) << ", \"summary\": " << json_string(s.summary)
        << ",\n   \"thread_safe\": " << boolean(s.thread_safe)
        << ", \"uses_upstream\": " << boolean(s.uses_upstream)
        << ", \"reuses_memory\": " << boolean(s.reuses_memory) << ",\n   \"options\": [";
    for (std::size_t j = 0; j < s.options.size(); ++j) {
      const option_info& o = s.options[j];
      out << (j ? ",\n" : "\n") << "     {\"name\": " << json_string(o.name)
          << ", \"kind\": " << json_string(kind_name(o.kind))
          << ", \"default\": " << json_string(o.default_value);
      if (o.kind == option_kind::choice) {
        out << ", \"allowed\": [";
        for (std::size_t k = 0; k < o.allowed.size(); ++k)
          out << (k ? ", " : "") << json_string(o.allowed[k]);
        out << "]";
      } else {
        out << ", \"min\": " << o.min << ", \"max\": " << o.max;
      }
      out << ", \"description\": " << json_string(o.description) << "}";
    }
    out << "]}" << (i + 1 < all.size() ? ",\n" : "\n");
  }
  out << "]\n";
  return out.str();
}

strategy_under_test::strategy_under_test(const std::string& spec)
    : spec_(spec), upstream_(std::pmr::new_delete_resource()) {
  owned_ = make_resource(spec, &upstream_);
  resource_ = owned_.get();
  monotonic_ = dynamic_cast<std::pmr::monotonic_buffer_resource*>(owned_.get());
  const strategy_info info = describe_strategy(spec);
  if (!info.uses_upstream && info.name != "new_delete") {
    heap_counted_ = std::make_unique<heap_counted_resource>(owned_.get());
    resource_ = heap_counted_.get();
  }
}

strategy_under_test::~strategy_under_test() = default;

void alloc_meter::report(benchmark::State& state, double ops) const {
  const heap_snapshot end = heap_allocations();
  if (ops <= 0) ops = static_cast<double>(state.iterations()) * state.threads();
  if (ops <= 0) return;
  // Only one thread reports, so the process-wide delta is not summed once per thread.
  if (state.thread_index() != 0) return;
  state.counters["allocs_per_op"] =
      benchmark::Counter(static_cast<double>(end.allocations - begin_.allocations) / ops);
  state.counters["bytes_per_op"] =
      benchmark::Counter(static_cast<double>(end.bytes - begin_.bytes) / ops);
}

const std::vector<std::string>& strategy_specs() { return specs_storage(); }

bool is_thread_safe(const std::string& spec) { return describe_strategy(spec).thread_safe; }

bool reuses_memory(const std::string& spec) { return describe_strategy(spec).reuses_memory; }

bool add_registrar(registrar r) {
  registrars().push_back(r);
  return true;
}

void run_registrars() {
  for (registrar r : registrars()) r();
}

bool parse_pmrkit_flags(int& argc, char** argv) {
  std::string only;
  if (const char* env = std::getenv("PMRKIT_STRATEGY"); env && *env) only = env;
  std::string list;  // "", "text" or "json"
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    constexpr std::string_view list_flag = "--pmrkit_list_strategies";
    if (arg.rfind("--strategy=", 0) == 0) {
      only = std::string(arg.substr(std::strlen("--strategy=")));
    } else if (arg == list_flag || arg == std::string(list_flag) + "=text") {
      list = "text";
    } else if (arg == std::string(list_flag) + "=json") {
      list = "json";
    } else if (arg.rfind(list_flag, 0) == 0) {
      throw std::invalid_argument("pmrkit_bench: " + std::string(arg) +
                                  ": allowed: --pmrkit_list_strategies[=text|json]");
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  auto& specs = specs_storage();
  specs.clear();
  if (!only.empty()) {
    (void)make_resource(only);  // a bad spec fails here, with the registry's message
    specs.push_back(only);
  } else {
    for (const auto& info : strategies()) specs.push_back(info.name);
  }
  if (list == "json") {
    std::cout << strategies_json(strategies());
    return false;
  }
  if (list == "text") {
    for (const auto& info : strategies())
      std::cout << info.name << (info.thread_safe ? "\tthread-safe\t" : "\tsingle-thread\t")
                << info.summary << '\n';
    return false;
  }
  return true;
}

}  // namespace pmrkit::bench
