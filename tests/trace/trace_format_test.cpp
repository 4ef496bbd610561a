// The reader on good and bad input: every malformed trace is a trace_format_error naming what
// and where, never a crash; a written trace reads back to the same operations.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "pmrkit/recording_resource.hpp"
#include "pmrkit/trace/trace_file.hpp"
#include "trace_encoding.hpp"
#include "trace_test_support.hpp"

using pmrkit::trace::trace_format_error;
namespace format = pmrkit::detail::trace_format;

namespace {

std::vector<std::byte> small_stream() {
  trace_test::memory_sink sink;
  pmrkit::recording_resource recorder(std::pmr::new_delete_resource(), sink);
  void* a = recorder.allocate(100, 8);
  void* b = recorder.allocate(3000, 64);
  recorder.deallocate(a, 100, 8);
  recorder.deallocate(b, 3000, 64);
  recorder.finish();
  return sink.stream;
}

std::vector<std::byte> bytes(std::initializer_list<unsigned> values) {
  std::vector<std::byte> out;
  for (unsigned v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

std::vector<std::byte> header_then(std::initializer_list<unsigned> rest) {
  std::vector<std::byte> out(
      reinterpret_cast<const std::byte*>(format::magic),
      reinterpret_cast<const std::byte*>(format::magic) + sizeof format::magic);
  out.push_back(std::byte{1});
  for (unsigned v : rest) out.push_back(static_cast<std::byte>(v));
  return out;
}

std::string error_of(const std::vector<std::byte>& stream) {
  try {
    pmrkit::trace::read_trace(stream);
  } catch (const trace_format_error& e) {
    return e.what();
  }
  return "no error";
}

std::filesystem::path temp_file(const char* name) {
  return std::filesystem::temp_directory_path() / (std::string("pmrkit_trace_test_") + name);
}

}  // namespace

TEST_CASE("every truncation of a trace is an error, never a crash", "[trace]") {
  const auto stream = small_stream();
  REQUIRE(pmrkit::trace::read_trace(stream).operations.size() == 4);
  for (std::size_t cut = 0; cut < stream.size(); ++cut) {
    INFO("cut at " << cut << " of " << stream.size());
    const std::vector<std::byte> part(stream.begin(),
                                      stream.begin() + static_cast<std::ptrdiff_t>(cut));
    CHECK_THROWS_AS(pmrkit::trace::read_trace(part), trace_format_error);
  }
  CHECK_THAT(error_of({stream.begin(), stream.end() - 1}), Catch::Contains("truncated"));
}

TEST_CASE("malformed traces name what was wrong and where", "[trace]") {
  CHECK_THAT(error_of(bytes({'n', 'o', 't', ' ', 'a', ' ', 't', 'r', 'a', 'c', 'e'})),
             Catch::Contains("bad magic") && Catch::Contains("at byte 0"));
  CHECK_THAT(error_of(header_then({})), Catch::Contains("no end record"));
  auto future = header_then({0, 0});
  future[sizeof format::magic] = std::byte{2};
  CHECK_THAT(error_of(future),
             Catch::Contains("unsupported version 2") && Catch::Contains("version 1"));
  // A varint of eleven bytes (over 64 bits) as a chunk's thread.
  CHECK_THAT(error_of(header_then({1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})),
             Catch::Contains("bad varint") && Catch::Contains("at byte 10"));
  CHECK_THAT(error_of(header_then({7})),
             Catch::Contains("unknown record tag 7") && Catch::Contains("at byte 9"));
  CHECK_THAT(error_of(header_then({1, 0, 1, 50, 0, 0})), Catch::Contains("claims 50 bytes"));
  CHECK_THAT(error_of(header_then({1, 0, 1, 3, 3, 0, 0, 0, 0})),
             Catch::Contains("unknown event kind 3"));
  CHECK_THAT(error_of(header_then({1, 0, 9, 3, 0, 0, 0, 0, 0})),
             Catch::Contains("claims 9 events in 3 bytes"));
  CHECK_THAT(error_of(header_then({1, 0, 1, 5, 0, 0, 0, 8, 9, 0, 1})),
             Catch::Contains("1 bytes after its 1 events"));
  CHECK_THAT(error_of(header_then({0, 5})),
             Catch::Contains("counts 5 events but the chunks hold 0"));
  CHECK_THAT(error_of(header_then({0, 0, 0})), Catch::Contains("1 bytes after the end record"));
  CHECK_THAT(error_of(header_then({1, 0, 1, 3, 0xfc, 0, 0})),
             Catch::Contains("alignment 2^63 too large"));
  // Two frees whose time deltas (1, then 2^64 - 1) add up past 2^64: the time would wrap,
  // going back. The second event starts at byte 16.
  CHECK_THAT(error_of(header_then({1, 0, 2, 15, 1, 1, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0x01, 0, 0, 2})),
             Catch::Contains("passes 2^64 ns") && Catch::Contains("at byte 16"));
}

TEST_CASE("a truncated or corrupt compressed trace is an error", "[trace]") {
  const auto stream = small_stream();
  const auto path = temp_file("compressed.trace");
  {
    pmrkit::trace::zstd_file_sink sink(path);
    sink.write(stream);
    sink.close();
  }
  CHECK(pmrkit::trace::read_trace_file(path).operations.size() == 4);
  std::ifstream in(path, std::ios::binary);
  std::vector<char> file{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::byte> compressed(reinterpret_cast<std::byte*>(file.data()),
                                    reinterpret_cast<std::byte*>(file.data()) + file.size());
  CHECK_THAT(error_of({compressed.begin(), compressed.end() - 3}), Catch::Contains("zstd"));
  compressed[compressed.size() / 2] ^= std::byte{0x5a};
  CHECK_THROWS_AS(pmrkit::trace::read_trace(compressed), trace_format_error);
  CHECK_THAT(error_of(compressed), Catch::StartsWith("zstd") || Catch::StartsWith("pmrkit trace"));
  pmrkit::trace::read_options tiny;
  tiny.max_uncompressed_bytes = 10;
  try {
    pmrkit::trace::read_trace_file(path, tiny);
    FAIL("a bound of 10 bytes was not enforced");
  } catch (const trace_format_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("more than 10 bytes") && Catch::Contains(path.string()));
  }
  std::filesystem::remove(path);
}

TEST_CASE("a written trace reads back to the same operations", "[trace]") {
  const auto original =
      pmrkit::trace::read_trace_file(PMRKIT_TRACE_TEST_DATA "/python_threads.trace");
  const auto path = temp_file("roundtrip.trace");
  pmrkit::trace::write_trace_file(original, path);
  const auto back = pmrkit::trace::read_trace_file(path);
  std::filesystem::remove(path);
  REQUIRE(back.operations.size() == original.operations.size());
  CHECK(back.threads == original.threads);
  CHECK(back.objects == original.objects);
  CHECK(back.peak_live_bytes == original.peak_live_bytes);
  for (std::size_t i = 0; i < back.operations.size(); ++i) {
    const auto& a = original.operations[i];
    const auto& b = back.operations[i];
    if (a.kind != b.kind || a.size != b.size || a.object != b.object || a.thread != b.thread ||
        a.alignment_log2 != b.alignment_log2 || a.time_ns != b.time_ns)
      FAIL("operation " << i << " differs after writing and reading back");
  }
}

TEST_CASE("the small real trace kept in the tests reads whole", "[trace]") {
  // Recorded with pmrkit-record from /usr/bin/python3 building JSON on three threads (see
  // data/README.md).
  const auto trace = pmrkit::trace::read_trace_file(PMRKIT_TRACE_TEST_DATA "/python_threads.trace");
  CHECK(trace.format == "pmrkit trace v1");
  CHECK(trace.operations.size() > 10000);
  CHECK(trace.threads >= 4);
  CHECK(trace.unpaired_frees == 0);
  CHECK(trace.implicit_frees == 0);
}

TEST_CASE("heaptrack text: frees pair last-in first-out per call site, on one thread",
          "[trace][heaptrack]") {
  const std::string text =
      "v 10400 3\nX ./app\ns 4 main\n"
      "a 40 1\na 1000 2\n"   // info 0: 64 bytes, info 1: 4096 bytes
      "+ 0\n+ 0\n+ 1\nc 5\n- 0\n- 1\n- 1\n- 0\nR 3e7\n";
  const auto trace = pmrkit::trace::parse_heaptrack(
      {reinterpret_cast<const std::byte*>(text.data()), text.size()});
  CHECK(trace.format == "heaptrack");
  CHECK(trace.threads == 1);
  REQUIRE(trace.operations.size() == 6);
  CHECK(trace.operations[3].object == 1);  // the later 64-byte block goes first
  CHECK(trace.operations[3].time_ns == 5'000'000);
  CHECK(trace.operations[5].object == 0);
  CHECK(trace.unpaired_frees == 1);  // the second "- 1": only one 4096-byte block was live
  CHECK(trace.peak_live_bytes == 64 + 64 + 4096);
  CHECK(trace.operations[0].alignment() == 16);

  const auto error_of_text = [](const std::string& t) -> std::string {
    try {
      pmrkit::trace::parse_heaptrack({reinterpret_cast<const std::byte*>(t.data()), t.size()});
    } catch (const trace_format_error& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK_THAT(error_of_text("X ./app\n"), Catch::Contains("version line"));
  CHECK_THAT(error_of_text("v 10400 3\n+ 0\n"),
             Catch::Contains("info 0 used before its 'a' line") && Catch::Contains("line 2"));
  CHECK_THAT(error_of_text("v 10400 3\na 4x 1\n"),
             Catch::Contains("'x'") && Catch::Contains("line 2"));
  CHECK_THAT(error_of_text("v 10400 9\n"), Catch::Contains("unsupported file format version 9"));
  // Blocks no allocator gives, and live bytes past 2^64: refused, not wrapped around.
  CHECK_THAT(error_of_text("v 10400 3\na 8000000000000000 1\n+ 0\n"),
             Catch::Contains("an allocation of 9223372036854775808 bytes"));
  CHECK_THAT(error_of_text("v 10400 3\na 7fffffffffffffff 1\n+ 0\n+ 0\n+ 0\n"),
             Catch::Contains("the blocks live at once pass 2^64 bytes"));
  CHECK(error_of_text("v 10400 3\na 7fffffffffffffff 1\n+ 0\n- 0\n+ 0\n") == "no error");
}

TEST_CASE("an alignment the reader would refuse is never written", "[trace]") {
  // glibc serves memalign(2^31, n), and memalign(24, n) rounds 24 up to 32: the writers wrote
  // 2^31, which the reader refuses (at most 2^30), and 2^3 for 24.
  unsigned char events[4 * format::max_event_bytes];
  format::chunk_state state;
  unsigned char* end = events;
  end = format::put_event(end, state, format::event_kind::allocate, 1, 0x10000, 64,
                          std::size_t{1} << 31);
  end = format::put_event(end, state, format::event_kind::allocate, 2, 0x20000, 48, 24);
  end = format::put_event(end, state, format::event_kind::allocate, 3, 0x30000, 8, 1);
  unsigned char framing[format::header_bytes + format::max_chunk_header_bytes +
                        format::max_varint_bytes + 1];
  std::vector<std::byte> stream;
  const auto append = [&](const unsigned char* from, const unsigned char* to) {
    for (; from != to; ++from) stream.push_back(static_cast<std::byte>(*from));
  };
  append(framing, format::put_header(framing));
  append(framing, format::put_chunk_header(framing, 0, 3, static_cast<std::size_t>(end - events)));
  append(events, end);
  append(framing, format::put_end(framing, 3));
  const auto trace = pmrkit::trace::read_trace(stream);
  REQUIRE(trace.operations.size() == 3);
  CHECK(trace.operations[0].alignment_log2 == format::max_alignment_log2);
  CHECK(trace.operations[1].alignment_log2 == 5);  // 24 rounds up to 32
  CHECK(trace.operations[2].alignment_log2 == 0);
}

TEST_CASE("a thread whose only events are dropped frees is not a thread of the trace",
          "[trace]") {
  // It counted as one, and a strategy that is not thread-safe was then refused the replay.
  std::vector<std::byte> stream;
  const auto append = [&](const unsigned char* from, const unsigned char* to) {
    for (; from != to; ++from) stream.push_back(static_cast<std::byte>(*from));
  };
  unsigned char framing[format::header_bytes + format::max_chunk_header_bytes +
                        format::max_varint_bytes + 1];
  unsigned char events[2 * format::max_event_bytes];
  append(framing, format::put_header(framing));
  for (const auto& [thread, kind] : {std::pair{0u, format::event_kind::allocate},
                                     std::pair{1u, format::event_kind::deallocate}}) {
    format::chunk_state state;
    // Thread 1 frees an address nothing allocated (memory from before the recording).
    const std::uint64_t address = thread == 0 ? 0x1000 : 0x9000;
    unsigned char* end = format::put_event(events, state, kind, 1 + thread, address, 8, 8);
    append(framing,
           format::put_chunk_header(framing, thread, 1, static_cast<std::size_t>(end - events)));
    append(events, end);
  }
  append(framing, format::put_end(framing, 2));
  const auto trace = pmrkit::trace::read_trace(stream);
  CHECK(trace.unpaired_frees == 1);
  CHECK(trace.threads == 1);
}
