// Reads pmrkit's uncompressed trace stream (docs/replay.md, "The trace format"): header,
// chunks of one thread's delta-encoded events, end record.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "byte_cursor.hpp"
#include "trace_builder.hpp"
#include "trace_encoding.hpp"

namespace pmrkit::trace {
namespace {

namespace format = pmrkit::detail::trace_format;

using format::max_alignment_log2;
// The fewest bytes an event takes (tag, time, address), to reject impossible counts early.
constexpr std::uint64_t min_event_bytes = 3;

struct raw_event {
  std::uint64_t time_ns;
  std::uint64_t thread;
  std::uint64_t address;
  std::uint64_t size;
  format::event_kind kind;
  std::uint8_t alignment_log2;
};

void read_chunk(detail::byte_cursor& stream, std::vector<raw_event>& events) {
  const std::size_t chunk_at = stream.offset() - 1;
  const std::uint64_t thread = stream.varint("a chunk's thread");
  const std::uint64_t count = stream.varint("a chunk's event count");
  const std::uint64_t length = stream.varint("a chunk's byte length");
  if (length > stream.remaining())
    stream.fail("truncated: the chunk at byte " + std::to_string(chunk_at) + " claims " +
                std::to_string(length) + " bytes but " + std::to_string(stream.remaining()) +
                " remain");
  if (count > length / min_event_bytes)
    stream.fail("the chunk at byte " + std::to_string(chunk_at) + " claims " +
                std::to_string(count) + " events in " + std::to_string(length) + " bytes");
  detail::byte_cursor chunk = stream.take(static_cast<std::size_t>(length), "a chunk");
  format::chunk_state state;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::size_t event_at = chunk.offset();
    const std::uint8_t tag = chunk.byte("an event's tag");
    const auto kind = static_cast<format::event_kind>(tag & format::kind_mask);
    const auto alignment_log2 = static_cast<std::uint8_t>(tag >> format::kind_bits);
    if (kind != format::event_kind::allocate && kind != format::event_kind::deallocate)
      chunk.fail_at(event_at, "unknown event kind " + std::to_string(tag & format::kind_mask) +
                                  " (allowed: 0 allocate, 1 deallocate)");
    if (alignment_log2 > max_alignment_log2)
      chunk.fail_at(event_at, "alignment 2^" + std::to_string(alignment_log2) +
                                  " too large (at most 2^" + std::to_string(max_alignment_log2) +
                                  ")");
    raw_event e{};
    e.kind = kind;
    e.alignment_log2 = alignment_log2;
    e.thread = thread;
    const std::uint64_t time_delta = chunk.varint("an event's time");
    if (time_delta > UINT64_MAX - state.time_ns)
      chunk.fail_at(event_at, "the event's time passes 2^64 ns (times never go back within a "
                              "thread)");
    state.time_ns += time_delta;
    e.time_ns = state.time_ns;
    state.address += format::unzigzag(chunk.varint("an event's address"));
    e.address = state.address;
    if (kind == format::event_kind::allocate) e.size = chunk.varint("an event's size");
    else if (alignment_log2 != 0)
      chunk.fail_at(event_at, "a deallocate with alignment bits set (they must be 0)");
    events.push_back(e);
  }
  if (!chunk.empty())
    chunk.fail("the chunk at byte " + std::to_string(chunk_at) + " has " +
               std::to_string(chunk.remaining()) + " bytes after its " + std::to_string(count) +
               " events");
}

void read_header(detail::byte_cursor& stream, std::span<const std::byte> bytes) {
  if (bytes.size() < sizeof format::magic ||
      std::memcmp(bytes.data(), format::magic, sizeof format::magic) != 0)
    stream.fail("bad magic: not a pmrkit trace (it starts with \"pmrktrc\\n\")");
  stream.take(sizeof format::magic, "the magic");
  const std::uint64_t version = stream.varint("the version");
  if (version != format::version)
    stream.fail("unsupported version " + std::to_string(version) + " (this reader reads version " +
                std::to_string(format::version) + ")");
}

}  // namespace

recorded_trace parse_pmrkit_stream(std::span<const std::byte> bytes) {
  detail::byte_cursor stream(bytes);
  read_header(stream, bytes);

  std::vector<raw_event> events;
  for (;;) {
    if (stream.empty())
      stream.fail("truncated: no end record (the recording did not finish; a FILE.stream left "
                  "behind is made readable by pmrkit-record -o FILE --finish FILE.stream)");
    const std::size_t record_at = stream.offset();
    const std::uint8_t tag = stream.byte("a record's tag");
    if (tag == format::chunk_record) {
      read_chunk(stream, events);
      continue;
    }
    if (tag != format::end_record)
      detail::byte_cursor::fail_at(record_at, "unknown record tag " + std::to_string(tag) +
                                                  " (allowed: 0 end, 1 chunk)");
    const std::uint64_t total = stream.varint("the end record's event count");
    if (total != events.size())
      stream.fail("the end record counts " + std::to_string(total) +
                  " events but the chunks hold " + std::to_string(events.size()));
    if (!stream.empty())
      stream.fail(std::to_string(stream.remaining()) + " bytes after the end record");
    break;
  }

  // Chunks arrive in the order buffers filled; the clock orders the threads' events. A stable
  // sort keeps each thread's own order, and a free before any reuse of its address: the
  // recorders read the clock before forwarding a free and after an allocation returns.
  std::stable_sort(events.begin(), events.end(),
                   [](const raw_event& a, const raw_event& b) { return a.time_ns < b.time_ns; });
  detail::trace_builder builder("pmrkit trace v1");
  for (const raw_event& e : events) {
    if (e.kind == format::event_kind::allocate)
      builder.allocate(e.time_ns, e.thread, e.address, e.size, e.alignment_log2);
    else
      builder.deallocate(e.time_ns, e.thread, e.address);
  }
  return std::move(builder).finish();
}


stream_repair finish_interrupted_stream(const std::filesystem::path& path) {
  std::vector<std::byte> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw trace_format_error("cannot open " + path.string());
    const std::vector<char> raw{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
    bytes.resize(raw.size());
    std::memcpy(bytes.data(), raw.data(), raw.size());
  }
  detail::byte_cursor stream(bytes);
  read_header(stream, bytes);
  stream_repair repair;
  std::size_t whole = stream.offset();  // the end of the last whole chunk
  for (;;) {
    if (stream.empty()) break;
    const std::uint8_t tag = stream.byte("a record's tag");
    if (tag == format::end_record) {
      repair.was_complete = true;
      return repair;
    }
    if (tag != format::chunk_record)
      detail::byte_cursor::fail_at(
          whole, "unknown record tag " + std::to_string(tag) + " (allowed: 0 end, 1 chunk)");
    try {
      stream.varint("a chunk's thread");
      const std::uint64_t events = stream.varint("a chunk's event count");
      const std::uint64_t length = stream.varint("a chunk's byte length");
      stream.take(static_cast<std::size_t>(std::min<std::uint64_t>(length, SIZE_MAX)), "a chunk");
      repair.events_kept += events;
      whole = stream.offset();
    } catch (const trace_format_error&) {
      break;  // this chunk was being written when the writer stopped
    }
  }
  repair.bytes_cut = bytes.size() - whole;
  std::filesystem::resize_file(path, whole);
  unsigned char end[1 + format::max_varint_bytes];
  const auto* end_of_end = format::put_end(end, repair.events_kept);
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(reinterpret_cast<const char*>(end), end_of_end - end);
  if (!out) throw trace_format_error("cannot write " + path.string());
  return repair;
}

}  // namespace pmrkit::trace
