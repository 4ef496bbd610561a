#include "bench_support.hpp"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "pmrkit/registry.hpp"
#include "strategy_table.hpp"

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

std::string name_of(const std::string& spec) { return spec.substr(0, spec.find(':')); }

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

}  // namespace

strategy_under_test::strategy_under_test(const std::string& spec)
    : spec_(spec), upstream_(std::pmr::new_delete_resource()) {
  owned_ = make_resource(spec, &upstream_);
  resource_ = owned_.get();
  monotonic_ = dynamic_cast<std::pmr::monotonic_buffer_resource*>(owned_.get());
  const detail::strategy_entry* entry = detail::find_strategy(name_of(spec));
  if (entry && !entry->uses_upstream && name_of(spec) != "new_delete") {
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

bool is_thread_safe(const std::string& spec) {
  const detail::strategy_entry* entry = detail::find_strategy(name_of(spec));
  return entry && entry->thread_safe;
}

bool reuses_memory(const std::string& spec) {
  const detail::strategy_entry* entry = detail::find_strategy(name_of(spec));
  return entry && entry->reuses_memory;
}

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
  bool list = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.rfind("--strategy=", 0) == 0) {
      only = std::string(arg.substr(std::strlen("--strategy=")));
    } else if (arg == "--pmrkit_list_strategies") {
      list = true;
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
  if (list) {
    for (const auto& info : strategies())
      std::cout << info.name << (info.thread_safe ? "\tthread-safe\t" : "\tsingle-thread\t")
                << info.summary << '\n';
    return false;
  }
  return true;
}

}  // namespace pmrkit::bench
