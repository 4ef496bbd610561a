// Fuzz target: the protobuf adapter's span_parser, as a metrics daemon runs it on every UDP
// datagram it receives. A datagram that is not a span must be counted and skipped (parse()
// returns false), never thrown or crashed on; what parses must read back consistently:
//  - the view's fields, tags and metrics can all be read, and to_span() copies them;
//  - that copy, encoded with span_encoder and parsed again, gives the same span (floats
//    compared bit for bit, so NaNs round-trip too);
//  - parsed + parse_errors counts every call; the pool's memory all comes back;
//  - libprotobuf never logs while the parser runs (its wire check refuses text that is not
//    UTF-8 first), and the wire check refuses exactly what libprotobuf's own parser refuses;
//  - the copy without unknown fields that the parser makes is valid, has none, and parses.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/protobuf/span_codec.hpp"
#include "pmrkit/ssf/span.pb.h"
#include "span_wire_check.hpp"
#include "../adapters/protobuf/deterministic_bytes.hpp"

namespace {

int libprotobuf_log_lines = 0;

void count_log_line(::google::protobuf::LogLevel, const char*, int, const std::string&) {
  ++libprotobuf_log_lines;
}

// The target's own handler, for the whole run (a fuzzer is one thread).
const bool log_handler_installed = [] {
  ::google::protobuf::SetLogHandler(&count_log_line);
  return true;
}();

using pmrkit::fuzz::broken;
namespace pb = pmrkit::protobuf;

using pmrkit::test::deterministic_bytes;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same(const pb::span& a, const pb::span& b) {
  if (a.version != b.version || a.trace_id != b.trace_id || a.id != b.id ||
      a.parent_id != b.parent_id || a.start_timestamp != b.start_timestamp ||
      a.end_timestamp != b.end_timestamp || a.error != b.error || a.service != b.service ||
      a.name != b.name || a.tags != b.tags || a.indicator != b.indicator ||
      a.metrics.size() != b.metrics.size())
    return false;
  for (std::size_t i = 0; i < a.metrics.size(); ++i) {
    const auto& x = a.metrics[i];
    const auto& y = b.metrics[i];
    if (x.metric != y.metric || x.name != y.name || !same_bits(x.value, y.value) ||
        x.timestamp != y.timestamp || x.message != y.message || x.status != y.status ||
        !same_bits(x.sample_rate, y.sample_rate) || x.tags != y.tags || x.unit != y.unit)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> datagram(reinterpret_cast<const std::byte*>(data), size);
  (void)log_handler_installed;
  libprotobuf_log_lines = 0;
  pmrkit::fuzz::bounded_upstream upstream;
  {
    pmrkit::buffer_pool pool(&upstream);
    pb::span_parser parser(pool, {.initial_arena_block = 1024, .max_arena_block = 64 * 1024});
    std::optional<pb::span> copy;
    const bool parsed = parser.parse(datagram, [&](const pb::span_view& view) {
      std::size_t tags = 0;
      view.for_each_tag([&](std::string_view, std::string_view) { ++tags; });
      if (tags != view.tag_count()) broken("for_each_tag disagrees with tag_count");
      for (std::size_t i = 0; i < view.metric_count(); ++i) {
        const auto m = view.metric(i);
        std::size_t metric_tags = 0;
        m.for_each_tag([&](std::string_view key, std::string_view) {
          ++metric_tags;
          if (!m.tag(key)) broken("a metric tag cannot be found by its key");
        });
        if (metric_tags != m.tag_count()) broken("sample tag count disagrees");
      }
      copy = view.to_span();
    });
    if (parsed != copy.has_value()) broken("parse() result disagrees with the callback");
    if (libprotobuf_log_lines != 0) broken("libprotobuf logged while span_parser parsed");
    const pb::detail::span_wire verdict = pb::detail::check_span_wire(datagram);
    pmrkit::ssf::SSFSpan message;
    const bool libprotobuf_parsed = message.ParseFromArray(data, static_cast<int>(size));
    if (verdict == pb::detail::span_wire::refused && libprotobuf_parsed)
      broken("the wire check refused a datagram that libprotobuf accepts");
    if (verdict != pb::detail::span_wire::refused && !libprotobuf_parsed)
      broken("the wire check let through a datagram that libprotobuf refuses");
    if (verdict == pb::detail::span_wire::valid_with_unknown_fields && libprotobuf_parsed) {
      // The copy without unknown fields parses into the same span.
      std::vector<std::byte> known(size);
      known.resize(pb::detail::copy_without_unknown_fields(datagram, known.data()));
      if (pb::detail::check_span_wire(known) != pb::detail::span_wire::valid)
        broken("the copy without unknown fields still has some");
      pmrkit::ssf::SSFSpan stripped;
      if (!stripped.ParseFromArray(known.data(), static_cast<int>(known.size())))
        broken("libprotobuf refuses the copy without unknown fields");
      message.DiscardUnknownFields();
      if (deterministic_bytes(message) != deterministic_bytes(stripped))
        broken("the copy without unknown fields parses into another span");
    }
    const auto stats = parser.stats();
    if (stats.parsed + stats.parse_errors != 1) broken("a parse was not counted exactly once");

    if (copy) {
      pb::span_encoder encoder(pool);
      const pmrkit::byte_buffer encoded = encoder.encode(*copy);
      const std::optional<pb::span> again = parser.parse_copy(encoded.span());
      if (!again) broken("a span the adapter encoded does not parse");
      if (!same(*copy, *again)) broken("a parsed span does not survive encode and parse");
    }
  }
  if (upstream.blocks_in_use() != 0) broken("the pool kept memory after it was destroyed");
  return 0;
}
