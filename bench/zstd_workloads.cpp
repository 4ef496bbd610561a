// zstd compression of a message (pmrkit::zstd), every strategy:
//   CompressPayload  compress a 16 KiB OP_MSG insert (realistic BSON documents) at level 3 into
//                    a destination buffer
//   fresh   what the driver did before its fix: a new compressor (its context from the
//           strategy) and a new destination buffer per op
//   pooled  the fix as review asked for it: contexts from a compressor_pool and destinations
//           from one shared buffer_pool, both on the strategy; the destination is passed in
//   limit   one compressor and one destination in static memory set up before the loop
#include <memory>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/zstd/compressor.hpp"

#if __has_include("pmrkit/bson/document.hpp")
#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/insert_message.hpp"
#define PMRKIT_BENCH_HAVE_BSON 1
#endif

namespace pmrkit::bench {
namespace {

constexpr std::size_t payload_target = 16 * 1024;
constexpr zstd::compressor_options options{.level = 3};

// An OP_MSG insert of customer documents, as close to 16 KiB as whole documents allow.
const std::vector<std::byte>& payload() {
  static const std::vector<std::byte> bytes = [] {
    std::vector<std::byte> out;
#ifdef PMRKIT_BENCH_HAVE_BSON
    buffer_pool pool;
    bson::insert_builder builder(pool);
    bson::insert_message message = builder.begin("shop", "customers");
    bson::document d;
    for (int i = 0;; ++i) {
      d.clear();
      d.append_object_id("_id", bson::object_id::generate())
          .append_utf8("name", "customer-" + std::to_string(100000 + i * 7919))
          .append_int32("age", 18 + (i * 13) % 60)
          .append_double("balance", 12.5 + i * 3.25)
          .append_bool("active", i % 3 != 0)
          .append_date_time("created", 1700000000000 + i * 86400000LL)
          .begin_document("address")
          .append_utf8("city", i % 2 ? "Oslo" : "Lisbon")
          .append_int32("floor", i % 7)
          .end()
          .begin_array("tags")
          .append_utf8("", i % 3 ? "silver" : "gold")
          .append_utf8("", "newsletter")
          .end();
      if (message.size() + d.bytes().size() > payload_target) break;
      message.add(d);
    }
    const byte_buffer m = message.finish();
    out.assign(m.data(), m.data() + m.size());
#else
    // Without the bson adapter: BSON-like text records of the same size.
    std::string text;
    for (int i = 0; text.size() < payload_target; ++i)
      text += "{\"_id\":" + std::to_string(i * 2654435761u) + ",\"name\":\"customer-" +
              std::to_string(100000 + i * 7919) + "\",\"active\":true}";
    text.resize(payload_target);
    for (char c : text) out.push_back(static_cast<std::byte>(c));
#endif
    return out;
  }();
  return bytes;
}

void compress_fresh(benchmark::State& state, const std::string& spec) {
  const auto& input = payload();
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test s(spec, pass);
    std::pmr::memory_resource* r = s.resource();
    pass.loop(st, [&] {
      {
        zstd::compressor c(r, options);
        byte_buffer out(r);
        c.compress(input, out);
        const std::byte* data = out.data();
        benchmark::DoNotOptimize(data);
      }
      s.recycle_if_needed();  // the context and the buffer are freed: a monotonic may reset
    });
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * input.size()));
}

void compress_pooled(benchmark::State& state, const std::string& spec) {
  const auto& input = payload();
  run_row(state, spec, [&](benchmark::State& st, row_pass& pass) {
    strategy_under_test s(spec, pass);
    std::pmr::memory_resource* r = s.resource();
    buffer_pool buffers(r);
    zstd::compressor_pool contexts(r, options);
    auto one_op = [&] {
      byte_buffer out = buffers.acquire(input.size() + input.size() / 64 + 64);
      contexts.compress(input, out);
      return out;
    };
    { one_op(); }  // warm both pools
    pass.loop(st, [&] {
      const byte_buffer out = one_op();
      const std::byte* data = out.data();
      benchmark::DoNotOptimize(data);
    });
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * input.size()));
}

// Static memory for the limit row: the compressor's workspace and the destination.
alignas(std::max_align_t) std::byte limit_arena[4 << 20];

void compress_limit(benchmark::State& state) {
  const auto& input = payload();
  run_row(state, "limit", [&](benchmark::State& st, row_pass& pass) {
    std::pmr::monotonic_buffer_resource arena(limit_arena, sizeof limit_arena,
                                              std::pmr::null_memory_resource());
    counting_resource carved(&arena);  // what the row uses of its static memory
    zstd::compressor c(&carved, options);
    byte_buffer out = byte_buffer::make_standalone(&carved, 2 * input.size() + 1024);
    pass.loop(st, [&] {
      out.clear();
      c.compress(input, out);
      const std::byte* data = out.data();
      benchmark::DoNotOptimize(data);
    });
    pass.hold_static(sizeof limit_arena, carved.stats().peak_bytes_in_use);
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * input.size()));
}

void register_zstd_workloads() {
  for (const std::string& spec : strategy_specs()) {
    benchmark::RegisterBenchmark(("CompressPayload/" + spec + "/fresh").c_str(), compress_fresh,
                                 spec);
    benchmark::RegisterBenchmark(("CompressPayload/" + spec + "/pooled").c_str(),
                                 compress_pooled, spec);
  }
  benchmark::RegisterBenchmark("CompressPayload/limit", compress_limit);
}

const bool registered = add_registrar(register_zstd_workloads);

}  // namespace
}  // namespace pmrkit::bench
