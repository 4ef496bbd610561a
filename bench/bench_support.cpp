#include "bench_support.hpp"

#include <algorithm>
#include <atomic>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "bare_list_resource.hpp"
#include "json_text.hpp"
#include "mimalloc_plain_resource.hpp"
#include "pmrkit/registry.hpp"
#include "sharded_pages_probe.hpp"

namespace pmrkit::bench {
namespace {

std::vector<std::string>& specs_storage() {
  static std::vector<std::string> specs;
  return specs;
}

std::vector<std::string>& probes_storage() {
  static std::vector<std::string> probes;
  return probes;
}

std::vector<registrar>& registrars() {
  static std::vector<registrar> list;
  return list;
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
        << ", \"reuses_memory\": " << boolean(s.reuses_memory)
        << ", \"bound_to_thread\": " << boolean(s.bound_to_thread) << ",\n   \"options\": [";
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

// What run_row gathers over a row's two passes. Only the row's first thread measures.
class row_memory {
 public:
  row_memory(held_method method, bool measuring, bool measures_timed_pass)
      : probe_(method), measuring_(measuring), measures_timed_pass_(measures_timed_pass) {
    if (measuring_) probe_.start();
  }
  held_method method() const noexcept { return probe_.method(); }
  // False for a row on several threads: its live bytes are counted on one thread (the counting
  // pass), so its held memory is that pass's alone. Held over the timed pass's threads would
  // stand against one thread's live bytes, and would count those threads for the strategies
  // measured from upstream but not for a probe that sees only the counting pass's blocks
  // (mimalloc's resident pages).
  bool measures_timed_pass() const noexcept { return measures_timed_pass_; }
  const process_held_probe& probe() const noexcept { return probe_; }
  void sample() {
    if (measuring_) uncounted([this] { probe_.sample(); });
  }
  // Runs a measurement with the heap counter paused: the probe's own allocations (reading
  // /proc) are the measurement's, not the workload's.
  template <class F>
  void uncounted(F&& f) {
    if (counting_heap_) set_heap_counting(false);
    f();
    if (counting_heap_) set_heap_counting(true);
  }
  void count_heap(bool on) {
    counting_heap_ = on;
    set_heap_counting(on);
  }
  void note_block(const void* p, std::size_t bytes) {
    if (measuring_) probe_.note_block(p, bytes);
  }
  void note_held(std::uint64_t bytes) { held_peak_ = std::max(held_peak_, bytes); }
  void note_live(std::uint64_t bytes) { live_peak_ = std::max(live_peak_, bytes); }
  void note_counts(double allocs_per_op, double bytes_per_op) {
    counted_ = true;
    allocs_per_op_ = allocs_per_op;
    bytes_per_op_ = bytes_per_op;
  }
  // The page faults the timed loop took on this thread.
  void note_timed_faults(std::uint64_t faults) {
    if (measuring_) timed_faults_ = faults;
  }
  void note_phase(const std::string& name, std::uint64_t held, std::uint64_t live) {
    for (auto& p : phases_)
      if (p.name == name) {
        p = {name, held, live};
        return;
      }
    phases_.push_back({name, held, live});
  }
  void report(benchmark::State& state) {
    sample();
    note_held(probe_.peak());
    if (counted_) {  // absent rather than 0 without the counter: 0 would read "allocates nothing"
      state.counters["allocs_per_op"] = benchmark::Counter(allocs_per_op_);
      state.counters["bytes_per_op"] = benchmark::Counter(bytes_per_op_);
    }
    if (timed_faults_) {
      const auto ops = std::max<benchmark::IterationCount>(state.iterations(), 1);
      state.counters["faults_per_op"] =
          benchmark::Counter(static_cast<double>(*timed_faults_) / static_cast<double>(ops));
    }
    state.counters["peak_held_bytes"] = benchmark::Counter(static_cast<double>(held_peak_));
    state.counters["peak_live_bytes"] = benchmark::Counter(static_cast<double>(live_peak_));
    for (const auto& p : phases_) {
      state.counters["phase_" + p.name + "_held_bytes"] =
          benchmark::Counter(static_cast<double>(p.held));
      state.counters["phase_" + p.name + "_live_bytes"] =
          benchmark::Counter(static_cast<double>(p.live));
    }
    state.SetLabel("held=" + std::string(held_method_name(probe_.method())));
  }

 private:
  struct phase {
    std::string name;
    std::uint64_t held;
    std::uint64_t live;
  };
  process_held_probe probe_;
  bool measuring_;
  bool measures_timed_pass_;
  bool counting_heap_ = false;
  std::uint64_t held_peak_ = 0;
  std::uint64_t live_peak_ = 0;
  bool counted_ = false;
  double allocs_per_op_ = 0;
  double bytes_per_op_ = 0;
  std::optional<std::uint64_t> timed_faults_;
  std::vector<phase> phases_;
};

// The counting pass's wrapper: bytes live at the pmr interface and their peak; a held-memory
// sample each time the live peak grows by a sixteenth (the moments a process allocator's
// holdings peak, sampled O(log) times); and, for mimalloc, which the preloaded heap counter
// cannot see, one heap allocation per allocate.
class live_meter final : public std::pmr::memory_resource {
 public:
  live_meter(std::pmr::memory_resource* inner, row_memory& memory, bool interposer_blind)
      : inner_(inner), memory_(memory), count_heap_(interposer_blind) {}
  std::uint64_t live() const noexcept { return live_.load(std::memory_order_relaxed); }
  std::uint64_t peak() const noexcept { return peak_.load(std::memory_order_relaxed); }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = inner_->allocate(bytes, alignment);
    if (count_heap_) count_heap_allocation(bytes);
    memory_.note_block(p, bytes);
    const std::uint64_t now = live_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::uint64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    if (now > next_sample_.load(std::memory_order_relaxed)) {
      next_sample_.store(now + now / 16 + 4096, std::memory_order_relaxed);
      memory_.sample();
    }
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    live_.fetch_sub(bytes, std::memory_order_relaxed);
    inner_->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::pmr::memory_resource* inner_;
  row_memory& memory_;
  bool count_heap_;
  std::atomic<std::uint64_t> live_{0};
  std::atomic<std::uint64_t> peak_{0};
  std::atomic<std::uint64_t> next_sample_{0};
};

void row_pass::begin_counting() {
  counted_from_ = heap_allocations();
  memory_.count_heap(true);
}

void row_pass::end_counting(double ops) {
  memory_.count_heap(false);
  const heap_snapshot end = heap_allocations();
  if (ops <= 0) return;
  if (heap_counter_present())
    memory_.note_counts(static_cast<double>(end.allocations - counted_from_.allocations) / ops,
                        static_cast<double>(end.bytes - counted_from_.bytes) / ops);
  memory_.sample();
}

void row_pass::before_timed_loop() {
  if (memory_.measures_timed_pass()) memory_.sample();
  faults_before_timed_loop_ = thread_page_faults();
}
void row_pass::after_timed_loop() {
  memory_.note_timed_faults(thread_page_faults() - faults_before_timed_loop_);
  if (memory_.measures_timed_pass()) memory_.sample();
}

void row_pass::mark_phase(const std::string& name) {
  if (!counting() || !subject_) return;
  memory_.sample();
  memory_.uncounted(
      [&] { memory_.note_phase(name, subject_->held_bytes_now(), subject_->live_bytes_now()); });
}

void row_pass::hold_static(std::uint64_t held, std::uint64_t live) {
  memory_.note_held(held);
  memory_.note_live(live);
}

shared_pool::shared_pool()
    : below_(std::pmr::new_delete_resource()),
      pool_(make_resource("size_class", &below_)) {}

std::unique_ptr<std::pmr::memory_resource> make_subject(const std::string& spec,
                                                        std::pmr::memory_resource* upstream) {
  if (spec == "bare_list") return std::make_unique<bare_list_resource>();
  if (spec == "mimalloc_plain") return std::make_unique<mimalloc_plain_resource>();
  if (spec == probe_names[0]) return std::make_unique<sharded_pages_probe>(upstream);
  if (spec == probe_names[1]) return std::make_unique<sharded_pages_probe_1m>(upstream);
  if (spec == probe_names[2]) return std::make_unique<sharded_pages_probe_grow>(upstream);
  if (spec == probe_names[3]) return std::make_unique<sharded_pages_probe_owned>(upstream);
  if (spec == probe_names[4]) return std::make_unique<sharded_pages_probe_chunks>(upstream);
  if (spec == probe_names[5]) return std::make_unique<sharded_pages_probe_owned_chunks>(upstream);
  if (spec == probe_names[6]) return std::make_unique<sharded_pages_probe_owned_lean>(upstream);
  if (spec == probe_names[7]) return std::make_unique<sharded_pages_probe_owned_spans>(upstream);
  return make_resource(spec, upstream);
}

strategy_under_test::strategy_under_test(const std::string& spec, row_pass& pass,
                                         shared_pool* pool)
    : spec_(spec),
      pass_(pass),
      pool_(pool),
      upstream_(pool ? pool->resource() : std::pmr::new_delete_resource()) {
  owned_ = make_subject(spec, &upstream_);
  monotonic_ = dynamic_cast<std::pmr::monotonic_buffer_resource*>(owned_.get());
  resource_ = owned_.get();
  if (pass.counting()) {
    // pmrkit's mimalloc strategies and mimalloc_plain call the private mimalloc, not malloc.
    const bool interposer_blind = spec.rfind("mimalloc", 0) == 0;
    // The harness's, not the strategy's: a fresh row makes one per op.
    pass.memory_.uncounted([&] {
      meter_ = std::make_unique<live_meter>(owned_.get(), pass.memory_, interposer_blind);
    });
    resource_ = meter_.get();
  }
  pass.subject_ = this;
}

strategy_under_test::~strategy_under_test() { report_and_detach(); }

void strategy_under_test::report_and_detach() {
  if (detached_) return;
  detached_ = true;
  if (pass_.counting() || pass_.memory_.measures_timed_pass())
    pass_.memory_.note_held(own_held_peak());
  if (meter_) pass_.memory_.note_live(meter_->peak());
  if (pass_.subject_ == this) pass_.subject_ = nullptr;
}

std::uint64_t strategy_under_test::own_held_peak() const {
  if (spec_ == "bare_list") return bare_list_resource::peak_held_bytes();
  if (pool_) return pool_->below().stats().peak_bytes_in_use;
  return upstream_.stats().peak_bytes_in_use;  // 0 for a strategy that ignores its upstream
}

std::uint64_t strategy_under_test::held_bytes_now() const {
  if (spec_ == "bare_list") return bare_list_resource::held_bytes();
  if (pass_.memory_.method() == held_method::upstream)
    return (pool_ ? pool_->below() : upstream_).stats().bytes_in_use;
  return pass_.memory_.probe().now();
}

std::uint64_t strategy_under_test::live_bytes_now() const { return meter_ ? meter_->live() : 0; }

void run_row(benchmark::State& state, const std::string& key,
             function_ref<void(benchmark::State&, row_pass&)> body) {
  const bool first_thread = state.thread_index() == 0;
  row_memory memory(held_method_for(key, malloc_is_preloaded()), first_thread,
                    state.threads() == 1);
  {
    row_pass timed(memory, 0);
    body(state, timed);
  }
  if (!first_thread) return;
  const benchmark::IterationCount iterations =
      std::max<benchmark::IterationCount>(state.iterations(), 1);
  {
    row_pass counting(memory,
                      std::max<benchmark::IterationCount>(
                          std::min<benchmark::IterationCount>(iterations, 4), iterations / 8));
    body(state, counting);
  }
  memory.report(state);
}

void add_held_method_context() {
  std::vector<std::string> keys = strategy_specs();
  keys.insert(keys.end(), reference_rows.begin(), reference_rows.end());
  keys.insert(keys.end(), probe_rows().begin(), probe_rows().end());
  keys.push_back("limit");
  const bool preloaded = malloc_is_preloaded();
  std::string json = "{";
  for (std::size_t i = 0; i < keys.size(); ++i)
    json += (i ? ", " : "") + json_string(keys[i]) + ": " +
            json_string(held_method_name(held_method_for(keys[i], preloaded)));
  benchmark::AddCustomContext("pmrkit_held_method", json + "}");
}

const std::vector<std::string>& strategy_specs() { return specs_storage(); }

const std::vector<std::string>& probe_rows() { return probes_storage(); }

bool is_probe(std::string_view key) {
  return std::find(probe_names.begin(), probe_names.end(), key) != probe_names.end();
}

bool is_thread_safe_probe(std::string_view key) {
  return is_probe(key) && key.find("_owned") != std::string_view::npos;
}

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
  // As install_default_from_env reads it: white space alone (an empty file's line break) is
  // unset.
  if (const char* env = std::getenv("PMRKIT_STRATEGY");
      env && std::string_view(env).find_first_not_of(" \t\n\r\v\f") != std::string_view::npos)
    only = env;
  std::string list;  // "", "text" or "json"
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    constexpr std::string_view list_flag = "--pmrkit_list_strategies";
    if (arg.rfind("--strategy=", 0) == 0) {
      only = std::string(arg.substr(std::strlen("--strategy=")));
    } else if (arg == "--pmrkit_probes") {
      probes_storage() = probe_names;
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
