// pmrkit/protobuf/span_codec.hpp — serialize spans into pooled buffers, parse them on an arena.
//
// The metrics daemon's fix, made reusable: serializing a span per datagram allocated a fresh
// byte slice each time, and a pool brought it to 0 B/op. span_encoder keeps one protobuf
// message that it refills for every span (its strings, maps and repeated fields keep their
// storage, so a span shaped like the last one costs no allocation) and writes the bytes
// straight into a buffer from a buffer_pool: ByteSizeLong() to size it, then
// SerializeWithCachedSizesToArray() into it, never a temporary std::string.
// span_parser parses a datagram on a google::protobuf::Arena whose block comes from a
// buffer_pool, and hands the result to your callback as a span_view, which reads the parsed
// message in place (strings as string_views) and is valid only during the callback.
//
// Thread-safety: an encoder or a parser is used by one thread at a time (give each thread its
// own; they may share a buffer_pool, which is thread-safe); a parser's stats() may be read
// from any thread. serialize() is a free function, safe from any thread. Ownership: the pool must
// outlive the encoder/parser and every buffer they return.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <optional>
#include <span>
#include <string_view>

#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/function_ref.hpp"
#include "pmrkit/protobuf/span.hpp"
#include "pmrkit/single_writer_counter.hpp"

// The generated message types, declared only: their header stays private to the adapter.
namespace pmrkit::ssf {
class SSFSpan;
class SSFSample;
}  // namespace pmrkit::ssf

namespace pmrkit::protobuf {

// The largest payload of one UDP datagram over IPv4: a span that serializes to more cannot
// be sent (span_sender counts and drops it).
inline constexpr std::size_t max_datagram_payload = 65507;

// Serializes one span into a new buffer whose storage comes from `resource`, through a
// message built on an arena whose first block (8 KiB) also comes from `resource`: everything
// per call, as code without reuse does. (A span that needs more arena than that, one with
// many metrics, takes the rest from the heap, as a parser's overflow does.) Prefer
// span_encoder on a hot path. Like every encoder below, throws std::invalid_argument, naming
// the field, for text that is not UTF-8 (SSF's strings are protobuf strings, which every
// parser refuses otherwise).
byte_buffer serialize(const span& s, std::pmr::memory_resource* resource);

class span_encoder {
 public:
  // encode() takes its buffers from `pool`; encode_into() and encode_to() never use it.
  explicit span_encoder(buffer_pool& pool);
  ~span_encoder();
  span_encoder(const span_encoder&) = delete;
  span_encoder& operator=(const span_encoder&) = delete;

  // A pooled buffer holding exactly the serialized span. Throws what the pool throws.
  byte_buffer encode(const span& s);
  // Appends the serialized span to `out` (from anywhere) and returns its size.
  std::size_t encode_into(const span& s, byte_buffer& out);
  // Serializes into memory you manage (a static array, a ring) and returns the size written.
  // Throws std::length_error, writing nothing, if `out` is too small.
  std::size_t encode_to(const span& s, std::span<std::byte> out);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

class sample_view {
 public:
  metric_type metric() const noexcept;
  std::string_view name() const noexcept;
  float value() const noexcept;
  std::int64_t timestamp() const noexcept;
  std::string_view message() const noexcept;
  sample_status status() const noexcept;
  float sample_rate() const noexcept;
  std::string_view unit() const noexcept;
  std::size_t tag_count() const noexcept;
  std::optional<std::string_view> tag(std::string_view key) const;
  template <class Visitor>  // Visitor(std::string_view key, std::string_view value)
  void for_each_tag(Visitor&& visit) const {
    visit_tags(function_ref<void(std::string_view, std::string_view)>(visit));
  }
  sample to_sample() const;

 private:
  friend class span_view;
  explicit sample_view(const ssf::SSFSample* message) noexcept : message_(message) {}
  void visit_tags(function_ref<void(std::string_view, std::string_view)> visit) const;
  const ssf::SSFSample* message_;
};

// A parsed span, read in place. Valid only during the callback it was passed to.
class span_view {
 public:
  std::int32_t version() const noexcept;
  std::int64_t trace_id() const noexcept;
  std::int64_t id() const noexcept;
  std::int64_t parent_id() const noexcept;
  std::int64_t start_timestamp() const noexcept;
  std::int64_t end_timestamp() const noexcept;
  bool error() const noexcept;
  bool indicator() const noexcept;
  std::string_view service() const noexcept;
  std::string_view name() const noexcept;
  std::size_t tag_count() const noexcept;
  std::optional<std::string_view> tag(std::string_view key) const;
  template <class Visitor>  // Visitor(std::string_view key, std::string_view value)
  void for_each_tag(Visitor&& visit) const {
    visit_tags(function_ref<void(std::string_view, std::string_view)>(visit));
  }
  std::size_t metric_count() const noexcept;
  sample_view metric(std::size_t index) const;  // throws std::out_of_range past the end
  span to_span() const;  // an owning copy, to keep beyond the callback

 private:
  friend class span_parser;
  explicit span_view(const ssf::SSFSpan* message) noexcept : message_(message) {}
  void visit_tags(function_ref<void(std::string_view, std::string_view)> visit) const;
  const ssf::SSFSpan* message_;
};

struct span_parser_options {
  // The arena's first block, taken from the pool per parse. A span that needs more arena
  // memory overflows to the heap for that parse (counted in arena_overflows) and the parser
  // uses a block big enough for it from then on, up to max_arena_block and the pool's
  // max_capacity; after 1,024 parses in a row that use at most half the block, it halves again
  // (not below initial_arena_block).
  std::size_t initial_arena_block = 16 * 1024;
  std::size_t max_arena_block = 4 * 1024 * 1024;
};

struct span_parser_stats {
  std::uint64_t parsed = 0;           // spans handed to the callback
  std::uint64_t parse_errors = 0;     // datagrams that are not a valid span: counted, skipped
  // Datagrams not parsed because memory ran out (the arena block or the copy without unknown
  // fields from the pool, or the heap that libprotobuf takes long strings and arena growth
  // from); the std::bad_alloc reached the caller. parsed + parse_errors + allocation_failures =
  // datagrams offered.
  std::uint64_t allocation_failures = 0;
  // Spans parsed with fields this schema does not have (a newer sender's), which the parser
  // drops before libprotobuf keeps them on the heap: they cost a copy of the datagram into a
  // pooled buffer instead. Each is also counted in parsed, or in allocation_failures if the
  // parse then ran out of memory.
  std::uint64_t with_unknown_fields = 0;
  std::uint64_t arena_overflows = 0;  // parses that needed arena memory beyond the block
  std::size_t arena_block = 0;        // the block size the next parse will use
};

class span_parser {
 public:
  // Throws std::invalid_argument if initial_arena_block is below 1 KiB or above
  // max_arena_block, or max_arena_block above 1 GiB.
  explicit span_parser(buffer_pool& pool, const span_parser_options& options = {});

  // Parses one datagram and calls on_span with the span, unless the bytes are not a valid
  // span: then returns false and counts a parse error (a bad datagram is never fatal, and
  // nothing is logged: text that is not UTF-8 is refused before libprotobuf would log it).
  // Exceptions from on_span propagate; the arena memory is released either way.
  bool parse(std::span<const std::byte> bytes, function_ref<void(const span_view&)> on_span);
  // Parses into an owning span, or nothing (counted) if the bytes are not a valid span.
  std::optional<span> parse_copy(std::span<const std::byte> bytes);

  // Any thread may read the statistics.
  span_parser_stats stats() const noexcept;

 private:
  buffer_pool* pool_;
  span_parser_options options_;
  void learn_arena_block(std::uint64_t allocated, std::uint64_t used,
                         std::size_t block_capacity) noexcept;

  static constexpr std::uint32_t arena_block_decay = 1024;
  std::size_t arena_block_;
  std::uint32_t small_parses_ = 0;  // in a row, using at most half the block
  // Written only by the parsing thread.
  single_writer_counter<std::uint64_t> parsed_;
  single_writer_counter<std::uint64_t> parse_errors_;
  single_writer_counter<std::uint64_t> allocation_failures_;
  single_writer_counter<std::uint64_t> with_unknown_fields_;
  single_writer_counter<std::uint64_t> arena_overflows_;
  single_writer_counter<std::size_t> arena_block_published_;
};

}  // namespace pmrkit::protobuf
