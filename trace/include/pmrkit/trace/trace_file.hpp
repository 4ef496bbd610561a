// pmrkit/trace/trace_file.hpp — read and write allocation traces: pmrkit's own format
// (zstd-compressed or not) and heaptrack's recordings (docs/replay.md).
//
// Reading checks everything: a truncated or malformed trace throws trace_format_error naming
// what was wrong and where, never reads out of bounds. Functions are thread-safe (no shared
// state); a zstd_file_sink belongs to one recording_resource (which never calls it
// concurrently).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>

#include "pmrkit/recording_resource.hpp"
#include "pmrkit/trace/recorded_trace.hpp"

namespace pmrkit::trace {

class trace_format_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct read_options {
  // Refuse a trace that decompresses to more than this (a bound against zstd bombs).
  std::uint64_t max_uncompressed_bytes = std::uint64_t{64} << 30;
};

// Reads a trace file, whichever it is: pmrkit's (zstd-compressed or raw) or heaptrack's
// (heaptrack -o x writes x.zst). Throws trace_format_error, or std::system_error if the file
// cannot be read.
recorded_trace read_trace_file(const std::filesystem::path& path, const read_options& = {});
// The same for bytes already in memory.
recorded_trace read_trace(std::span<const std::byte> bytes, const read_options& = {});
// The uncompressed pmrkit stream only (what a recording_resource's sink receives).
recorded_trace parse_pmrkit_stream(std::span<const std::byte> stream);
// A decompressed heaptrack file only (its text lines).
recorded_trace parse_heaptrack(std::span<const std::byte> text);

// Writes a trace in pmrkit's format, zstd-compressed. Objects get made-up addresses (their
// number times 16), so the file reads back to the same operations.
void write_trace_file(const recorded_trace& trace, const std::filesystem::path& path);
// What finish_interrupted_stream found and did.
struct stream_repair {
  bool was_complete = false;      // it had its end record: nothing changed
  std::uint64_t events_kept = 0;  // in the whole chunks kept
  std::uint64_t bytes_cut = 0;    // of a chunk cut short
};
// Makes an uncompressed pmrkit stream whose writer was stopped early (a recorded program killed
// by a signal, or one that called _exit, or a FILE.stream left by a killed pmrkit-record: its
// --finish) readable: cuts it after its last whole chunk and appends the end record. Throws
// trace_format_error if it is not a pmrkit stream or is damaged before its end.
stream_repair finish_interrupted_stream(const std::filesystem::path& stream);
// Compresses an uncompressed pmrkit stream file (what the preloaded recorder writes) into a
// trace file.
void compress_stream_file(const std::filesystem::path& stream, const std::filesystem::path& trace);

// A recording_resource sink that writes a zstd-compressed trace file as the events come.
class zstd_file_sink final : public trace_sink {
 public:
  // Throws std::system_error if the file cannot be created.
  explicit zstd_file_sink(const std::filesystem::path& path, int compression_level = 3);
  ~zstd_file_sink() override;  // ends the zstd frame (close() first to see its errors)
  zstd_file_sink(const zstd_file_sink&) = delete;
  zstd_file_sink& operator=(const zstd_file_sink&) = delete;

  void write(std::span<const std::byte> bytes) override;
  // Ends the zstd frame and closes the file; throws std::system_error on a write error.
  void close();

 private:
  struct state;
  state* state_;
};

}  // namespace pmrkit::trace
