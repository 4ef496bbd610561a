// MongoDB insert messages (pmrkit::bson), every strategy:
//   InsertSingle    one realistic small document per OP_MSG insert
//   InsertMultiple  1000 such documents in one OP_MSG (a driver's insert_many)
// One op = encode the document(s) with libbson and write the complete wire message.
//   fresh   what drivers did before the fix: each document marshalled into a new buffer (a new
//           pmrkit::bson::document), copied into a new message buffer that grows from empty,
//           everything from the strategy and freed after the op
//   pooled  the message buffer comes from a buffer_pool on the strategy (sized by the previous
//           message, as a driver's pool settles) and one document encoder is reused
//   limit   the same encoding and copying into a message buffer and encoder that live in
//           static memory set up before the loop: no allocator at all
// Documents are encoded on every op in all three (a driver encodes what the application hands
// it); only where their bytes live differs. _id values are generated before the loop, so each
// op does the same work.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/insert_message.hpp"
#include "pmrkit/buffer_pool.hpp"

namespace pmrkit::bench {
namespace {

constexpr std::size_t multiple_count = 1000;
constexpr std::string_view database = "shop";
constexpr std::string_view collection = "customers";

struct sample {
  bson::object_id id;
  std::string name;
  std::string city;
  std::string tier;
  std::int32_t age;
  double balance;
  bool active;
  std::int64_t created_ms;
};

const std::vector<sample>& samples() {
  static const std::vector<sample> all = [] {
    static constexpr std::array cities = {"Oslo", "Lisbon", "Nairobi", "Osaka", "Lima"};
    static constexpr std::array tiers = {"bronze", "silver", "gold"};
    std::vector<sample> v;
    for (std::size_t i = 0; i < multiple_count; ++i) {
      v.push_back({bson::object_id::generate(), "customer-" + std::to_string(100000 + i * 37),
                   cities[i % cities.size()], tiers[i % tiers.size()],
                   static_cast<std::int32_t>(18 + i % 60), 12.5 + static_cast<double>(i) * 3.25,
                   i % 3 != 0, 1700000000000 + static_cast<std::int64_t>(i) * 86400000});
    }
    return v;
  }();
  return all;
}

// About 190 bytes: an ObjectId, strings, numbers, a bool, a date, a nested document, an array.
void encode(bson::document& d, const sample& s) {
  d.append_object_id("_id", s.id)
      .append_utf8("name", s.name)
      .append_int32("age", s.age)
      .append_double("balance", s.balance)
      .append_bool("active", s.active)
      .append_date_time("created", s.created_ms)
      .begin_document("address")
      .append_utf8("city", s.city)
      .append_int32("floor", s.age % 7)
      .end()
      .begin_array("tags")
      .append_utf8("", s.tier)
      .append_utf8("", "newsletter")
      .end();
}

void insert_fresh(benchmark::State& state, const std::string& spec, std::size_t count) {
  const auto& docs = samples();
  std::int32_t request_id = 1;
  std::size_t message_bytes = 0;
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test s(spec, pass);
    std::pmr::memory_resource* r = s.resource();
    pass.loop(st, [&] {
      {
        bson::insert_message message(byte_buffer(r), database, collection, request_id++);
        for (std::size_t i = 0; i < count; ++i) {
          bson::document d(r);
          encode(d, docs[i]);
          message.add(d);
        }
        const byte_buffer out = message.finish();
        const std::byte* data = out.data();
        benchmark::DoNotOptimize(data);
        message_bytes = out.size();
      }
      s.recycle_if_needed();  // every block of the op is freed: a monotonic strategy may reset
    });
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * message_bytes));
}

void insert_pooled(benchmark::State& state, const std::string& spec, std::size_t count) {
  const auto& docs = samples();
  std::size_t expected = 0;
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test s(spec, pass);
    std::pmr::memory_resource* r = s.resource();
    buffer_pool pool(r);
    bson::insert_builder builder(pool);
    bson::document d(r);
    expected = 0;
    auto one_op = [&] {
      bson::insert_message message = builder.begin(database, collection, expected);
      for (std::size_t i = 0; i < count; ++i) {
        d.clear();
        encode(d, docs[i]);
        message.add(d);
      }
      byte_buffer out = message.finish();
      expected = out.size();
      return out;
    };
    { one_op(); }  // warm the pool and the encoder: steady state from the first timed op
    pass.loop(st, [&] {
      const byte_buffer out = one_op();
      const std::byte* data = out.data();
      benchmark::DoNotOptimize(data);
    });
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * expected));
}

// Static memory for the limit rows: the message buffer and the encoder are carved out of it
// once, before the loop.
alignas(std::max_align_t) std::byte limit_arena[1 << 20];

void insert_limit(benchmark::State& state, std::size_t count) {
  const auto& docs = samples();
  std::int32_t request_id = 1;
  std::size_t message_bytes = 0;
  run_row(state, "limit", [&](benchmark::State& st, row_pass& pass) {
    std::pmr::monotonic_buffer_resource arena(limit_arena, sizeof limit_arena,
                                              std::pmr::null_memory_resource());
    counting_resource carved(&arena);  // what the row uses of its static memory
    byte_buffer buffer = byte_buffer::make_standalone(&carved, 512 * 1024);
    bson::document d(&carved, 4096);
    auto one_op = [&] {
      bson::insert_message message(std::move(buffer), database, collection, request_id++);
      for (std::size_t i = 0; i < count; ++i) {
        d.clear();
        encode(d, docs[i]);
        message.add(d);
      }
      buffer = message.finish();
      message_bytes = buffer.size();
    };
    one_op();  // the encoder's nested-document storage is set up on first use
    pass.loop(st, [&] {
      one_op();
      const std::byte* data = buffer.data();
      benchmark::DoNotOptimize(data);
    });
    pass.hold_static(sizeof limit_arena, carved.stats().peak_bytes_in_use);
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * message_bytes));
}

void register_bson_workloads() {
  const std::pair<const char*, std::size_t> workloads[] = {{"InsertSingle", 1},
                                                           {"InsertMultiple", multiple_count}};
  for (const auto& [name, count] : workloads) {
    for (const std::string& spec : strategy_specs()) {
      benchmark::RegisterBenchmark((std::string(name) + "/" + spec + "/fresh").c_str(),
                                   insert_fresh, spec, count);
      benchmark::RegisterBenchmark((std::string(name) + "/" + spec + "/pooled").c_str(),
                                   insert_pooled, spec, count);
    }
    benchmark::RegisterBenchmark((std::string(name) + "/limit").c_str(), insert_limit, count);
  }
}

const bool registered = add_registrar(register_bson_workloads);

}  // namespace
}  // namespace pmrkit::bench
