// Internal: the byte layout of pmrkit's allocation trace (docs/replay.md, "The trace format"),
// as the writers need it: the header, chunk and end records and one event's encoding. It
// allocates nothing and calls nothing but memcpy, so the preloaded recorder
// (trace/tools/record_preload.cpp) can use it from inside malloc. The reader lives in
// trace/src/trace_reader.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pmrkit::detail::trace_format {

inline constexpr unsigned char magic[8] = {'p', 'm', 'r', 'k', 't', 'r', 'c', '\n'};
inline constexpr std::uint64_t version = 1;

// The record that follows the header, any number of times, then once the end record.
inline constexpr unsigned char chunk_record = 0x01;
inline constexpr unsigned char end_record = 0x00;

// An event's tag byte: the kind in the low two bits, log2 of the alignment above them.
enum class event_kind : unsigned char { allocate = 0, deallocate = 1 };
inline constexpr unsigned kind_bits = 2;
inline constexpr unsigned kind_mask = (1u << kind_bits) - 1;

inline constexpr std::size_t max_varint_bytes = 10;
// The longest event: tag, time delta, address delta, size.
inline constexpr std::size_t max_event_bytes = 1 + 3 * max_varint_bytes;
// The longest header or chunk record before its events: tag, thread, count, byte length.
inline constexpr std::size_t max_chunk_header_bytes = 1 + 3 * max_varint_bytes;
inline constexpr std::size_t header_bytes = sizeof magic + 1;

inline unsigned char* put_varint(unsigned char* out, std::uint64_t value) noexcept {
  while (value >= 0x80) {
    *out++ = static_cast<unsigned char>(value | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<unsigned char>(value);
  return out;
}

// Addresses are written as the signed difference from the previous one, zigzagged so that
// small negative steps stay short.
inline std::uint64_t zigzag(std::uint64_t difference) noexcept {
  const auto signed_difference = static_cast<std::int64_t>(difference);
  return (difference << 1) ^ static_cast<std::uint64_t>(signed_difference >> 63);
}
inline std::uint64_t unzigzag(std::uint64_t value) noexcept {
  return (value >> 1) ^ (~(value & 1) + 1);
}

// The largest alignment a trace holds; beyond it no resource could serve the replay.
inline constexpr unsigned max_alignment_log2 = 30;

// The alignment written for a request aligned to `alignment`: the power of two it rounds up to
// (the C library rounds memalign(24, n) up to 32), at most 2^max_alignment_log2 (glibc serves
// memalign(2^31, n); the trace then asks the replay for 2^30).
inline unsigned log2_of(std::size_t alignment) noexcept {
  if (alignment <= 1) return 0;
  const auto ceiling = static_cast<unsigned>(64 - __builtin_clzll(alignment - 1));
  return ceiling < max_alignment_log2 ? ceiling : max_alignment_log2;
}

inline unsigned char* put_header(unsigned char* out) noexcept {
  std::memcpy(out, magic, sizeof magic);
  return put_varint(out + sizeof magic, version);
}

inline unsigned char* put_chunk_header(unsigned char* out, std::uint64_t thread,
                                       std::uint64_t events, std::uint64_t bytes) noexcept {
  *out++ = chunk_record;
  out = put_varint(out, thread);
  out = put_varint(out, events);
  return put_varint(out, bytes);
}

inline unsigned char* put_end(unsigned char* out, std::uint64_t total_events) noexcept {
  *out++ = end_record;
  return put_varint(out, total_events);
}

// The delta state of one chunk's events; a chunk starts from zero, so chunks decode alone.
struct chunk_state {
  std::uint64_t time_ns = 0;
  std::uint64_t address = 0;
};

// Appends one event. `time_ns` must not go back within a chunk (one thread's clock readings).
// For deallocate, `size` and `alignment` are not written (the allocation has them).
inline unsigned char* put_event(unsigned char* out, chunk_state& state, event_kind kind,
                                std::uint64_t time_ns, std::uint64_t address, std::uint64_t size,
                                std::size_t alignment) noexcept {
  const unsigned alignment_bits = kind == event_kind::deallocate ? 0u : log2_of(alignment);
  *out++ = static_cast<unsigned char>(static_cast<unsigned>(kind) | (alignment_bits << kind_bits));
  out = put_varint(out, time_ns - state.time_ns);
  state.time_ns = time_ns;
  out = put_varint(out, zigzag(address - state.address));
  state.address = address;
  if (kind == event_kind::allocate) out = put_varint(out, size);
  return out;
}

}  // namespace pmrkit::detail::trace_format
