// The container ops (container_ops.hpp).
#include "container_ops.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

// The read and destroy phases of both map ops: every key looked up, the map iterated (each
// entry weighed by `weigh`, so nothing is optimised away), then every other key erased in the
// order the keys were inserted (not the map's order) and the rest destroyed with the map.
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
  benchmark::DoNotOptimize(sum);
  timer.end(phase::read);
  // The erases look their keys up through the same probe, grown already: a temporary key per
  // erase made 10,000 allocations and frees of the resource under test part of the destroy
  // (14.6% of the pooled Map op's allocations), interleaved with the frees it is meant to show.
  timer.begin(phase::destroy);
  for (std::size_t i = 0; i < map_entries; i += 2) {
    probe.assign(in.keys[i]);
    map->erase(probe);
  }
  map.reset();
  timer.end(phase::destroy);
}

}  // namespace

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

void prepare_container_inputs() { (void)map_inputs(); }

}  // namespace pmrkit::bench
