// Real std::pmr containers on every strategy (issue 12): what a user does with a resource is pass
// it to containers, and pays for where the blocks land as much as for each call.
//   ContainerUnorderedMap  std::pmr::unordered_map<pmr::string, pmr::vector<int>>, 20,000
//                          entries, keys of 24-64 characters, vectors of 1-16 ints pushed one
//                          by one
//   ContainerMap           std::pmr::map<pmr::string, pmr::string>, 20,000 entries, keys of
//                          24-64 characters, values of 8-120
//   ContainerDocument      a tree of pmr::vector / pmr::string nodes shaped like a parsed JSON
//                          message: 2,000 records of 8 fields, a nested object and a tag array
// One op = build the container, read it (look every key up and iterate; the document: walk it),
// then destroy it (the maps: erase every other key in key order, then destroy the rest in the
// container's own order). Each phase is its own benchmark, timed by hand around that phase
// only, while every op runs all three:
//   Container<Name>/<phase>/<strategy>/<variant>, phase = build | read | destroy
//   fresh   a new resource per op (a request arena): its construction is in build, its
//           destruction, which returns its memory, in destroy
//   pooled  one resource reused by every op (a long-lived service), warmed by one op
//   shared  a new resource per op over one long-lived pool (bench_support.hpp's shared_pool),
//           warmed by one op: a request arena as a service runs it. Only for strategies that
//           take memory from upstream (the others would repeat their fresh row); held is what
//           the pool holds, what it keeps between ops included
// Rows mimalloc_plain: the plainest pmr wrapper over the privately loaded mimalloc (mi_malloc,
// mi_free), as the yardstick the strategies are held to.
// Counters: allocs_per_op and bytes_per_op (heap allocations per op, all phases),
// peak_held_bytes (what the strategy took from a counting upstream at its most; only for
// strategies that use upstream, label held=upstream) and peak_live_bytes (the most bytes the op
// has live at the pmr interface, the same for every strategy).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <memory_resource>
#include <new>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_support.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/registry.hpp"

namespace pmrkit::bench {
namespace {

constexpr std::size_t map_entries = 20'000;
constexpr std::size_t document_records = 2'000;

// ---------------------------------------------------------------- inputs

struct map_input {
  std::vector<std::string> keys;           // distinct, 24-64 characters
  std::vector<std::uint8_t> ints_per_key;  // 1-16
  std::vector<std::string> values;         // 8-120 characters (ContainerMap)
};

std::string random_text(std::mt19937& rng, std::size_t length) {
  static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789_-./";
  std::uniform_int_distribution<std::size_t> pick(0, sizeof alphabet - 2);
  std::string s(length, ' ');
  for (char& c : s) c = alphabet[pick(rng)];
  return s;
}

const map_input& map_inputs() {
  static const map_input input = [] {
    std::mt19937 rng(20240612);
    std::uniform_int_distribution<std::size_t> key_length(24, 64);
    std::uniform_int_distribution<std::size_t> value_length(8, 120);
    std::uniform_int_distribution<int> ints(1, 16);
    map_input in;
    while (in.keys.size() < map_entries) {
      // A distinct prefix keeps the keys unique.
      std::string key = std::to_string(in.keys.size()) + ":" + random_text(rng, 64);
      key.resize(key_length(rng));
      in.keys.push_back(std::move(key));
      in.ints_per_key.push_back(static_cast<std::uint8_t>(ints(rng)));
      in.values.push_back(random_text(rng, value_length(rng)));
    }
    return in;
  }();
  return input;
}

// ---------------------------------------------------------------- the three containers

using string_vector_map =
    std::pmr::unordered_map<std::pmr::string, std::pmr::vector<int>>;
using string_map = std::pmr::map<std::pmr::string, std::pmr::string>;

// One node of a parsed JSON message: a scalar (text), an array or an object (members, each
// with a key). Allocator-aware, so a pmr::vector of nodes gives every node its resource.
struct json_node {
  using allocator_type = std::pmr::polymorphic_allocator<>;
  enum class kind : std::uint8_t { text, number, array, object };

  explicit json_node(allocator_type a) : key(a), text(a), children(a) {}
  json_node(const json_node& other, allocator_type a)
      : type(other.type), key(other.key, a), text(other.text, a), children(other.children, a) {}
  json_node(json_node&& other, allocator_type a)
      : type(other.type),
        key(std::move(other.key), a),
        text(std::move(other.text), a),
        children(std::move(other.children), a) {}
  json_node(json_node&&) noexcept = default;
  json_node& operator=(json_node&&) noexcept = default;

  kind type = kind::text;
  std::pmr::string key;  // set when the node is an object's member
  std::pmr::string text;
  std::pmr::vector<json_node> children;
};

// Adds a member to an object node and returns it, as a parser does: key first, then value.
json_node& add_member(json_node& object, std::string_view key, json_node::kind type,
                      std::string_view text = {}) {
  json_node& member = object.children.emplace_back();
  member.key = key;
  member.type = type;
  member.text = text;
  return member;
}

// The document: {"records": [{"id": "...", "name": "...", ...}, ...]} of document_records
// records, the strings drawn from the map inputs so every strategy builds the same tree.
void build_document(json_node& root) {
  const map_input& in = map_inputs();
  root.type = json_node::kind::object;
  json_node& records = add_member(root, "records", json_node::kind::array);
  for (std::size_t i = 0; i < document_records; ++i) {
    json_node& record = records.children.emplace_back();
    record.type = json_node::kind::object;
    add_member(record, "id", json_node::kind::text, in.keys[i]);
    add_member(record, "customer_name", json_node::kind::text, in.values[i]);
    add_member(record, "age", json_node::kind::number, "42");
    add_member(record, "balance", json_node::kind::number, "1234.5625");
    add_member(record, "created_at", json_node::kind::text, "2024-06-12T10:15:30.123456Z");
    add_member(record, "email_address", json_node::kind::text, in.keys[i + document_records]);
    add_member(record, "status", json_node::kind::text, "active");
    json_node& address = add_member(record, "address", json_node::kind::object);
    add_member(address, "street", json_node::kind::text, in.values[i + document_records]);
    add_member(address, "city", json_node::kind::text, "Lisbon");
    add_member(address, "postal_code", json_node::kind::text, "1100-148");
    json_node& tags = add_member(record, "tags", json_node::kind::array);
    for (std::size_t t = 0; t < 1u + in.ints_per_key[i] % 5u; ++t) {
      json_node& tag = tags.children.emplace_back();
      // Through a view: std::string::substr would make a heap temporary per tag (2,078 an
      // op), which every strategy's allocs/op and time would carry.
      tag.text = std::string_view(in.values[(i * 7 + t) % map_entries]).substr(0, 6 + t * 5);
    }
    add_member(record, "notes", json_node::kind::text, in.values[(i * 13) % map_entries]);
  }
}

std::size_t walk(const json_node& node) {
  std::size_t sum = node.key.size() + node.text.size();
  for (const json_node& child : node.children) sum += walk(child);
  return sum;
}

// ---------------------------------------------------------------- one op, phase by phase

enum class phase : std::uint8_t { build, read, destroy };
constexpr std::array phase_names = {"build", "read", "destroy"};

using clock_type = std::chrono::steady_clock;

// Times the phases of one op; the benchmark keeps the time of the one it reports.
class phase_timer {
 public:
  void begin(phase p) { started_[index(p)] = clock_type::now(); }
  void end(phase p) {
    const auto elapsed = clock_type::now() - started_[index(p)];
    seconds_[index(p)] += std::chrono::duration<double>(elapsed).count();
  }
  double seconds(phase p) const noexcept { return seconds_[index(p)]; }

 private:
  static std::size_t index(phase p) noexcept { return static_cast<std::size_t>(p); }
  std::array<clock_type::time_point, phase_names.size()> started_{};
  std::array<double, phase_names.size()> seconds_{};
};

// Builds, reads and destroys one container on `r`, timing the phase `timer` asks for.
using container_op = void (*)(std::pmr::memory_resource* r, phase_timer& timer);

// The read and destroy phases of both map ops: every key looked up, the map iterated (each
// entry weighed by `weigh`, so nothing is optimised away), then every other key erased in key
// order and the rest destroyed with the map.
template <class Map, class Weigh>
void read_then_destroy(std::optional<Map>& map, std::pmr::memory_resource* r, phase_timer& timer,
                       Weigh weigh) {
  const map_input& in = map_inputs();
  timer.begin(phase::read);
  std::size_t sum = 0;
  std::pmr::string probe(r);
  for (const std::string& key : in.keys) {
    probe.assign(key);
    sum += map->find(probe)->second.size();
  }
  for (const auto& [key, value] : *map) sum += key.size() + weigh(value);
  probe = std::pmr::string(r);
  benchmark::DoNotOptimize(sum);
  timer.end(phase::read);
  timer.begin(phase::destroy);
  for (std::size_t i = 0; i < map_entries; i += 2) map->erase(std::pmr::string(in.keys[i], r));
  map.reset();
  timer.end(phase::destroy);
}

void unordered_map_op(std::pmr::memory_resource* r, phase_timer& timer) {
  const map_input& in = map_inputs();
  timer.begin(phase::build);
  std::optional<string_vector_map> map(std::in_place, r);
  for (std::size_t i = 0; i < map_entries; ++i) {
    auto& ints = map->try_emplace(std::pmr::string(in.keys[i], r)).first->second;
    for (int v = 0; v < in.ints_per_key[i]; ++v) ints.push_back(v);
  }
  timer.end(phase::build);
  read_then_destroy(map, r, timer, [](const std::pmr::vector<int>& ints) {
    return static_cast<std::size_t>(ints.back());
  });
}

void map_op(std::pmr::memory_resource* r, phase_timer& timer) {
  const map_input& in = map_inputs();
  timer.begin(phase::build);
  std::optional<string_map> map(std::in_place, r);
  for (std::size_t i = 0; i < map_entries; ++i)
    map->try_emplace(std::pmr::string(in.keys[i], r), in.values[i]);
  timer.end(phase::build);
  read_then_destroy(map, r, timer, [](const std::pmr::string& value) { return value.size(); });
}

void document_op(std::pmr::memory_resource* r, phase_timer& timer) {
  timer.begin(phase::build);
  std::optional<json_node> root(std::in_place, json_node::allocator_type(r));
  build_document(*root);
  timer.end(phase::build);
  timer.begin(phase::read);
  std::size_t sum = walk(*root);
  benchmark::DoNotOptimize(sum);
  timer.end(phase::read);
  timer.begin(phase::destroy);
  root.reset();
  timer.end(phase::destroy);
}

// ---------------------------------------------------------------- the benchmarks

struct workload {
  const char* name;
  container_op op;
};
constexpr std::array workloads = {workload{"ContainerUnorderedMap", unordered_map_op},
                                  workload{"ContainerMap", map_op},
                                  workload{"ContainerDocument", document_op}};

// One resource reused by every op, warmed by one op first. Both passes of the row run the same
// ops (bench_support.hpp); only the timed pass reports the phase's time.
void run_pooled(benchmark::State& state, const std::string& spec, container_op op, phase timed) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test subject(spec, pass);
    std::pmr::memory_resource* r = subject.resource();
    phase_timer warm;
    op(r, warm);
    pass.loop(st, [&] {
      phase_timer timer;
      op(r, timer);
      if (!pass.counting()) st.SetIterationTime(timer.seconds(timed));
      subject.recycle_if_needed();  // a monotonic resource starts over between ops
    });
  });
}

// One op on a resource of its own, made over `pool` (null: over new_delete): its construction
// counts in build, its destruction (which returns its memory) in destroy.
void op_on_own_resource(const std::string& spec, row_pass& pass, shared_pool* pool,
                        container_op op, phase_timer& timer) {
  timer.begin(phase::build);
  auto subject = std::make_unique<strategy_under_test>(spec, pass, pool);
  timer.end(phase::build);
  op(subject->resource(), timer);
  timer.begin(phase::destroy);
  subject.reset();
  timer.end(phase::destroy);
}

// A resource of its own per op (a request arena) over new_delete.
void run_fresh(benchmark::State& state, const std::string& spec, container_op op, phase timed) {
  // The inputs are made once per process (tens of milliseconds): here, not inside the first
  // timed op, which a short run may consist of (a fresh row has no warm-up op).
  (void)map_inputs();
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    pass.loop(st, [&] {
      phase_timer timer;
      op_on_own_resource(spec, pass, nullptr, op, timer);
      if (!pass.counting()) st.SetIterationTime(timer.seconds(timed));
    });
  });
}

// A resource of its own per op over one pool that outlives them all, warmed by one op.
void run_shared(benchmark::State& state, const std::string& spec, container_op op, phase timed) {
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    shared_pool pool;
    phase_timer warm;
    op_on_own_resource(spec, pass, &pool, op, warm);
    pass.loop(st, [&] {
      phase_timer timer;
      op_on_own_resource(spec, pass, &pool, op, timer);
      if (!pass.counting()) st.SetIterationTime(timer.seconds(timed));
    });
  });
}

void register_container_workloads() {
  std::vector<std::string> subjects = strategy_specs();
  subjects.push_back("mimalloc_plain");  // the yardstick: the plainest wrapper over mimalloc
  subjects.insert(subjects.end(), probe_rows().begin(), probe_rows().end());
  for (const workload& w : workloads) {
    for (std::size_t p = 0; p < phase_names.size(); ++p) {
      const auto timed = static_cast<phase>(p);
      for (const std::string& spec : subjects) {
        const std::string base = std::string(w.name) + "/" + phase_names[p] + "/" + spec;
        benchmark::RegisterBenchmark((base + "/fresh").c_str(), run_fresh, spec, w.op, timed)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark((base + "/pooled").c_str(), run_pooled, spec, w.op, timed)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
        if (spec == "mimalloc_plain" || spec == probe_row ||
            !describe_strategy(spec).uses_upstream)
          continue;
        benchmark::RegisterBenchmark((base + "/shared").c_str(), run_shared, spec, w.op, timed)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

const bool registered = add_registrar(register_container_workloads);

}  // namespace
}  // namespace pmrkit::bench
