// pmrkit_interleaved: the container ops (container_ops.hpp) on several subjects in one process,
// every subject once per round, in a new random order each round, each phase reported as the
// median of its per-round ratios to the first subject (paired_stats.hpp).
//
//   pmrkit_interleaved [--rounds N] [--seed S] [--warm] [--workload NAME]... [--json FILE]
//                      [SUBJECT]...
//
// SUBJECT is a strategy spec ("size_class", "size_class:thread_cache=0", ...), "mimalloc_plain",
// "bare_list" or a probe (sharded_pages_probe.hpp: "sharded_pages_probe", "..._1m", "..._grow",
// "..._owned", "..._chunks", "..._owned_chunks", "..._owned_lean", "..._owned_spans"),
// optionally followed by "/fresh": a new resource per op over new_delete, made in build and
// destroyed in destroy (a request arena), or "/shared": the same over one pool that outlives
// the ops (bench_support.hpp's shared_pool, a default size_class, warmed by one op); without
// either, one resource reused by every op and warmed by one op (a long-lived service). The
// first subject is the reference; default: mimalloc_plain size_class size_class/fresh. --warm
// runs each subject's op twice in a row and times the second, so an op starts with its own
// memory in the caches; without it, an op starts after the other subjects' ops. The heap is
// warm as in pmrkit_bench (heap_state.hpp). --json FILE also writes what the tables show, for
// the main job's report (bench/report/run.py): per workload, each subject's median time per
// phase and, past the reference, its median ratio, rounds faster and slower, p, and every
// round's ratio (so that two runs can be compared round by round: compare.py).
//
// Where pmrkit_bench's rows each run in a process of their own, which the report repeats and
// interleaves (bench/report/run.py), here the subjects share one process: the round-to-round
// drift of a shared machine divides out of each ratio, and 41 rounds of the three ops take
// seconds, not the twenty minutes that as many processes a row do. What the subjects share is
// the process: its heap, and the caches each op finds after the others (docs/benchmarks.md,
// "Interleaved in one process").
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <memory_resource>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bench_support.hpp"
#include "container_ops.hpp"
#include "heap_state.hpp"
#include "json_text.hpp"
#include "paired_stats.hpp"

namespace pmrkit::bench {
namespace {

constexpr std::string_view fresh_suffix = "/fresh";
constexpr std::string_view shared_suffix = "/shared";

struct options {
  std::size_t rounds = 41;
  std::uint64_t seed = 1;
  bool warm = false;
  std::vector<std::string> workloads;  // empty: all
  std::string json_path;               // empty: none
  std::vector<std::string> subjects;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "pmrkit_interleaved: " << message
            << "\nusage: pmrkit_interleaved [--rounds N] [--seed S] [--warm] [--workload NAME]... "
               "[--json FILE] [SUBJECT[/fresh|/shared]]...\n";
  std::exit(2);
}

std::uint64_t parse_count(std::string_view flag, const std::string& text, std::uint64_t least) {
  std::size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || text[0] == '-' || value < least)
    usage_error(std::string(flag) + " takes a whole number of at least " + std::to_string(least) +
                ", not '" + text + "'");
  return value;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](std::string_view flag) -> std::string {
      if (i + 1 >= argc) usage_error(std::string(flag) + " needs a value");
      return argv[++i];
    };
    if (arg == "--rounds") {
      o.rounds = parse_count(arg, value(arg), 1);
    } else if (arg == "--seed") {
      o.seed = parse_count(arg, value(arg), 0);
    } else if (arg == "--warm") {
      o.warm = true;
    } else if (arg == "--json") {
      o.json_path = value(arg);
    } else if (arg == "--workload") {
      std::string name = value(arg);
      const bool known = std::any_of(container_workloads.begin(), container_workloads.end(),
                                     [&](const container_workload& w) { return w.name == name; });
      if (!known)
        usage_error("unknown workload '" + name + "'; allowed: UnorderedMap, Map, Document");
      o.workloads.push_back(std::move(name));
    } else if (arg.rfind("--", 0) == 0) {
      usage_error("unknown flag '" + arg + "'");
    } else {
      o.subjects.push_back(arg);
    }
  }
  if (o.subjects.empty()) o.subjects = {"mimalloc_plain", "size_class", "size_class/fresh"};
  if (o.subjects.size() < 2)
    usage_error("name at least two subjects: a reference and one to compare");
  return o;
}

// One subject: the resource every op reuses (pooled), or the spec each op makes one from, over
// new_delete (fresh) or over a pool that outlives the ops (shared).
class subject {
 public:
  explicit subject(std::string name) : name_(std::move(name)) {
    const auto ends_with = [&](std::string_view suffix) {
      return name_.size() > suffix.size() &&
             name_.compare(name_.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    spec_ = name_;
    for (const auto& [suffix, variant] : {std::pair{fresh_suffix, kind::fresh},
                                          std::pair{shared_suffix, kind::shared}}) {
      if (ends_with(suffix)) {
        kind_ = variant;
        spec_ = name_.substr(0, name_.size() - suffix.size());
      }
    }
    // Made now in every case, so that a spec the registry refuses stops the run before any op.
    pooled_ = make_subject(spec_, std::pmr::new_delete_resource());
    if (kind_ != kind::pooled) pooled_.reset();
  }

  // A monotonic resource never reuses what is freed; reused by every op it would only grow, so
  // it starts over after each (untimed), as pmrkit_bench's pooled rows do above a bound.
  void recycle() {
    if (auto* monotonic = dynamic_cast<std::pmr::monotonic_buffer_resource*>(pooled_.get()))
      monotonic->release();
  }

  const std::string& name() const noexcept { return name_; }

  // Starts a workload: a pooled subject gets a new resource, a shared one a new pool, each
  // warmed by one op.
  void begin(container_op op) {
    phase_timer warm_up;
    switch (kind_) {
      case kind::fresh:
        return;
      case kind::shared:
        pool_ = std::make_unique<shared_pool>();
        op_on_own_resource(op, pool_->resource(), warm_up);
        return;
      case kind::pooled:
        pooled_ = make_subject(spec_, std::pmr::new_delete_resource());
        op(pooled_.get(), warm_up);
        recycle();
        return;
    }
  }

  phase_timer run(container_op op) {
    phase_timer timer;
    if (kind_ == kind::pooled) {
      op(pooled_.get(), timer);
      recycle();
    } else {
      op_on_own_resource(op, kind_ == kind::shared ? pool_->resource()
                                                   : std::pmr::new_delete_resource(),
                         timer);
    }
    return timer;
  }

  void end() {
    pooled_.reset();
    pool_.reset();
  }

 private:
  enum class kind { pooled, fresh, shared };

  // A resource of its own for one op: made in build, destroyed (its memory returned) in
  // destroy.
  void op_on_own_resource(container_op op, std::pmr::memory_resource* upstream,
                          phase_timer& timer) {
    timer.begin(phase::build);
    auto own = make_subject(spec_, upstream);
    timer.end(phase::build);
    op(own.get(), timer);
    timer.begin(phase::destroy);
    own.reset();
    timer.end(phase::destroy);
  }

  std::string name_;
  std::string spec_;
  kind kind_ = kind::pooled;
  std::unique_ptr<std::pmr::memory_resource> pooled_;
  std::unique_ptr<shared_pool> pool_;
};

void print_workload(std::string_view name, const std::vector<subject>& subjects,
                    const std::vector<std::vector<std::vector<double>>>& seconds) {
  // Wide enough for the longest subject's name, so that a row always splits on spaces.
  int width = 26;
  for (const subject& s : subjects) width = std::max(width, static_cast<int>(s.name().size()) + 2);
  std::printf("\n%-*s", width + 2, std::string(name).c_str());
  for (std::string_view p : phase_names) std::printf("%-26s", std::string(p).c_str());
  std::printf("\n  %-*s", width, subjects[0].name().c_str());
  for (std::size_t p = 0; p < phase_names.size(); ++p) {
    char cell[32];
    std::snprintf(cell, sizeof cell, "%.1f us", median(seconds[0][p]) * 1e6);
    std::printf("%-26s", cell);
  }
  std::printf("\n");
  for (std::size_t s = 1; s < subjects.size(); ++s) {
    std::printf("  %-*s", width, subjects[s].name().c_str());
    for (std::size_t p = 0; p < phase_names.size(); ++p) {
      const paired_summary sum = summarize_pairs(seconds[s][p], seconds[0][p]);
      char cell[64];
      std::snprintf(cell, sizeof cell, "%.3f (%zu/%zu) p=%.3f", sum.median_ratio, sum.faster,
                    seconds[s][p].size(), sum.p);
      std::printf("%-26s", cell);
    }
    std::printf("\n");
  }
}

// One workload's rounds: seconds[subject][phase][round].
struct workload_rounds {
  std::string_view name;
  std::vector<std::vector<std::vector<double>>> seconds;
};

// What print_workload shows, as JSON (the top of this file says what it holds).
void write_json(std::FILE* file, const options& o, std::uint64_t background,
                const std::vector<subject>& subjects, const std::vector<workload_rounds>& done) {
  const auto list = [&](auto value_of) {
    std::string text = "[";
    for (std::size_t p = 0; p < phase_names.size(); ++p) {
      char number[32];
      std::snprintf(number, sizeof number, "%.9g", static_cast<double>(value_of(p)));
      text += (p ? ", " : "") + std::string(number);
    }
    return text + "]";
  };
  std::fprintf(file,
               "{\"tool\": \"pmrkit_interleaved\", \"rounds\": %zu, \"seed\": %llu, \"warm\": %s, "
               "\"background_bytes\": %llu,\n \"reference\": %s, \"phases\": [",
               o.rounds, static_cast<unsigned long long>(o.seed), o.warm ? "true" : "false",
               static_cast<unsigned long long>(background),
               json_string(subjects[0].name()).c_str());
  for (std::size_t p = 0; p < phase_names.size(); ++p)
    std::fprintf(file, "%s%s", p ? ", " : "", json_string(phase_names[p]).c_str());
  std::fprintf(file, "],\n \"workloads\": [");
  for (std::size_t w = 0; w < done.size(); ++w) {
    const auto& seconds = done[w].seconds;
    std::fprintf(file, "%s\n  {\"name\": %s, \"subjects\": [", w ? "," : "",
                 json_string(done[w].name).c_str());
    for (std::size_t s = 0; s < subjects.size(); ++s) {
      std::fprintf(file, "%s\n   {\"name\": %s, \"median_seconds\": %s", s ? "," : "",
                   json_string(subjects[s].name()).c_str(),
                   list([&](std::size_t p) { return median(seconds[s][p]); }).c_str());
      if (s > 0) {
        std::vector<paired_summary> sums;
        for (std::size_t p = 0; p < phase_names.size(); ++p)
          sums.push_back(summarize_pairs(seconds[s][p], seconds[0][p]));
        std::fprintf(file, ", \"median_ratio\": %s, \"faster\": %s, \"slower\": %s, \"p\": %s",
                     list([&](std::size_t p) { return sums[p].median_ratio; }).c_str(),
                     list([&](std::size_t p) { return sums[p].faster; }).c_str(),
                     list([&](std::size_t p) { return sums[p].slower; }).c_str(),
                     list([&](std::size_t p) { return sums[p].p; }).c_str());
        std::fprintf(file, ",\n    \"ratios\": [");
        for (std::size_t p = 0; p < phase_names.size(); ++p) {
          std::fprintf(file, "%s[", p ? ", " : "");
          for (std::size_t r = 0; r < seconds[s][p].size(); ++r)
            std::fprintf(file, "%s%.6g", r ? ", " : "", seconds[s][p][r] / seconds[0][p][r]);
          std::fprintf(file, "]");
        }
        std::fprintf(file, "]");
      }
      std::fprintf(file, "}");
    }
    std::fprintf(file, "]}");
  }
  std::fprintf(file, "]}\n");
}

int run(const options& o) {
  std::vector<subject> subjects;
  try {
    for (const std::string& name : o.subjects) subjects.emplace_back(name);
  } catch (const std::invalid_argument& e) {
    std::string besides = "mimalloc_plain, bare_list";
    for (const std::string& probe : probe_names) besides += ", " + probe;
    usage_error(std::string(e.what()) + "; besides the strategies: " + besides +
                "; any of them followed by /fresh for a new resource per op, or by /shared for "
                "one per op over a long-lived pool");
  }
  // Opened before any op runs, so that a path it cannot write stops the run at once.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> json(nullptr, &std::fclose);
  if (!o.json_path.empty()) {
    json.reset(std::fopen(o.json_path.c_str(), "w"));
    if (!json) {
      std::cerr << "pmrkit_interleaved: cannot write " << o.json_path << ": "
                << std::strerror(errno) << '\n';
      return 1;
    }
  }
  const std::uint64_t background = prepare_heap_state(heap_state::warm);
  prepare_container_inputs();
  std::mt19937_64 rng(o.seed);
  std::printf("pmrkit_interleaved: %zu rounds, the subjects in a new random order each round%s; "
              "heap warm (%llu MiB background)\n",
              o.rounds, o.warm ? ", each op right after an untimed one of its own" : "",
              static_cast<unsigned long long>(background >> 20));
  std::printf("first row: its median time; below: time / its time, median of the rounds "
              "(rounds faster / rounds), two-sided sign test p\n");
  std::vector<workload_rounds> done;
  for (const container_workload& w : container_workloads) {
    if (!o.workloads.empty() &&
        std::find(o.workloads.begin(), o.workloads.end(), w.name) == o.workloads.end())
      continue;
    // seconds[subject][phase][round]
    std::vector<std::vector<std::vector<double>>> seconds(
        subjects.size(), std::vector<std::vector<double>>(phase_names.size()));
    for (subject& s : subjects) s.begin(w.op);
    std::vector<std::size_t> order(subjects.size());
    for (std::size_t round = 0; round < o.rounds; ++round) {
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      for (std::size_t s : order) {
        if (o.warm) (void)subjects[s].run(w.op);
        const phase_timer timer = subjects[s].run(w.op);
        for (std::size_t p = 0; p < phase_names.size(); ++p)
          seconds[s][p].push_back(timer.seconds(static_cast<phase>(p)));
      }
    }
    for (subject& s : subjects) s.end();
    print_workload(w.name, subjects, seconds);
    done.push_back({w.name, std::move(seconds)});
  }
  if (json) {
    write_json(json.get(), o, background, subjects, done);
    if (std::fflush(json.get()) != 0 || std::ferror(json.get())) {
      std::cerr << "pmrkit_interleaved: writing " << o.json_path << " failed\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace pmrkit::bench

int main(int argc, char** argv) {
  try {
    return pmrkit::bench::run(pmrkit::bench::parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "pmrkit_interleaved: " << e.what() << '\n';
    return 1;
  }
}
