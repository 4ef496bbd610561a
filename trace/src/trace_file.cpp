// Files: zstd framing around pmrkit's stream, format detection, and the writers.
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

#include "pmrkit/trace/trace_file.hpp"
#include "trace_encoding.hpp"

namespace pmrkit::trace {
namespace {

namespace format = pmrkit::detail::trace_format;

constexpr unsigned char zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};

bool starts_with(std::span<const std::byte> bytes, const unsigned char* prefix, std::size_t n) {
  return bytes.size() >= n && std::memcmp(bytes.data(), prefix, n) == 0;
}

std::vector<std::byte> decompress(std::span<const std::byte> input, std::uint64_t limit) {
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> context(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!context) throw std::bad_alloc();
  std::vector<std::byte> out;
  std::vector<std::byte> block(ZSTD_DStreamOutSize());
  ZSTD_inBuffer in{input.data(), input.size(), 0};
  std::size_t frame_left = 0;  // 0 once the last frame is complete
  for (;;) {
    ZSTD_outBuffer piece{block.data(), block.size(), 0};
    frame_left = ZSTD_decompressStream(context.get(), &piece, &in);
    if (ZSTD_isError(frame_left))
      throw trace_format_error(std::string("zstd: ") + ZSTD_getErrorName(frame_left) +
                               " near compressed byte " + std::to_string(in.pos));
    if (piece.pos > limit - out.size())
      throw trace_format_error("zstd: the trace decompresses to more than " +
                               std::to_string(limit) +
                               " bytes (read_options::max_uncompressed_bytes)");
    out.insert(out.end(), block.begin(), block.begin() + static_cast<std::ptrdiff_t>(piece.pos));
    // All input taken and the output not full: the decoder has given all it can.
    if (in.pos == in.size && piece.pos < piece.size) break;
  }
  if (frame_left != 0)
    throw trace_format_error("zstd: truncated: the compressed data ends inside a frame after " +
                             std::to_string(input.size()) + " bytes");
  return out;
}

std::vector<std::byte> read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::system_error(errno, std::generic_category(), "cannot open " + path.string());
  std::vector<std::byte> bytes;
  std::vector<char> block(1 << 16);
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0) {
    const auto got = static_cast<std::size_t>(in.gcount());
    const auto* first = reinterpret_cast<const std::byte*>(block.data());
    bytes.insert(bytes.end(), first, first + got);
  }
  if (in.bad())
    throw std::system_error(errno, std::generic_category(), "cannot read " + path.string());
  return bytes;
}

std::FILE* create_file(const std::filesystem::path& path) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file)
    throw std::system_error(errno, std::generic_category(), "cannot create " + path.string());
  return file;
}

}  // namespace

recorded_trace read_trace(std::span<const std::byte> bytes, const read_options& options) {
  if (starts_with(bytes, zstd_magic, sizeof zstd_magic)) {
    const std::vector<std::byte> plain = decompress(bytes, options.max_uncompressed_bytes);
    if (starts_with(plain, format::magic, sizeof format::magic)) return parse_pmrkit_stream(plain);
    if (plain.size() >= 2 && plain[0] == std::byte{'v'} && plain[1] == std::byte{' '})
      return parse_heaptrack(plain);
    return parse_pmrkit_stream(plain);  // names the bad magic
  }
  if (bytes.size() >= 2 && bytes[0] == std::byte{'v'} && bytes[1] == std::byte{' '})
    return parse_heaptrack(bytes);  // heaptrack's text, decompressed already
  return parse_pmrkit_stream(bytes);
}

recorded_trace read_trace_file(const std::filesystem::path& path, const read_options& options) {
  try {
    return read_trace(read_whole_file(path), options);
  } catch (const trace_format_error& e) {
    throw trace_format_error(path.string() + ": " + e.what());
  }
}

// ---------------------------------------------------------------- writing

struct zstd_file_sink::state {
  std::FILE* file = nullptr;
  ZSTD_CCtx* context = nullptr;
  std::vector<std::byte> out = std::vector<std::byte>(ZSTD_CStreamOutSize());
  std::filesystem::path path;

  void drain(ZSTD_inBuffer& in, ZSTD_EndDirective mode) {
    for (;;) {
      ZSTD_outBuffer piece{out.data(), out.size(), 0};
      const std::size_t left = ZSTD_compressStream2(context, &piece, &in, mode);
      if (ZSTD_isError(left))
        throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(left));
      if (piece.pos && std::fwrite(out.data(), 1, piece.pos, file) != piece.pos)
        throw std::system_error(errno, std::generic_category(), "cannot write " + path.string());
      if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) return;
    }
  }
};

zstd_file_sink::zstd_file_sink(const std::filesystem::path& path, int compression_level)
    : state_(new state) {
  state_->path = path;
  state_->context = ZSTD_createCCtx();
  if (!state_->context) {
    delete state_;
    throw std::bad_alloc();
  }
  ZSTD_CCtx_setParameter(state_->context, ZSTD_c_compressionLevel, compression_level);
  ZSTD_CCtx_setParameter(state_->context, ZSTD_c_checksumFlag, 1);  // a damaged file is an error
  try {
    state_->file = create_file(path);
  } catch (...) {
    ZSTD_freeCCtx(state_->context);
    delete state_;
    throw;
  }
}

zstd_file_sink::~zstd_file_sink() {
  try {
    close();
  } catch (...) {  // close() first to see the error
  }
  ZSTD_freeCCtx(state_->context);
  delete state_;
}

void zstd_file_sink::write(std::span<const std::byte> bytes) {
  if (!state_->file) throw std::logic_error("zstd_file_sink: write after close");
  ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
  state_->drain(in, ZSTD_e_continue);
}

void zstd_file_sink::close() {
  if (!state_->file) return;
  std::FILE* file = state_->file;
  try {
    ZSTD_inBuffer none{nullptr, 0, 0};
    state_->drain(none, ZSTD_e_end);
  } catch (...) {
    state_->file = nullptr;
    std::fclose(file);
    throw;
  }
  state_->file = nullptr;
  if (std::fclose(file) != 0)
    throw std::system_error(errno, std::generic_category(),
                            "cannot write " + state_->path.string());
}

void compress_stream_file(const std::filesystem::path& stream, const std::filesystem::path& trace) {
  std::ifstream in(stream, std::ios::binary);
  if (!in)
    throw std::system_error(errno, std::generic_category(), "cannot open " + stream.string());
  zstd_file_sink sink(trace);
  std::vector<char> block(1 << 20);
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0)
    sink.write(
        {reinterpret_cast<const std::byte*>(block.data()), static_cast<std::size_t>(in.gcount())});
  sink.close();
}

void write_trace_file(const recorded_trace& trace, const std::filesystem::path& path) {
  // A chunk per run of one thread's operations, so the file's order is the trace's order even
  // where threads' clocks tie; objects at made-up, never reused addresses.
  constexpr std::size_t max_chunk_events = 4096;
  zstd_file_sink sink(path);
  const auto put = [&sink](const unsigned char* begin, const unsigned char* end) {
    sink.write({reinterpret_cast<const std::byte*>(begin), static_cast<std::size_t>(end - begin)});
  };
  unsigned char header[format::header_bytes + format::max_varint_bytes];
  put(header, format::put_header(header));
  std::vector<unsigned char> events;
  std::uint64_t total = 0;
  std::size_t i = 0;
  while (i < trace.operations.size()) {
    const std::uint32_t thread = trace.operations[i].thread;
    events.clear();
    format::chunk_state state;
    std::size_t count = 0;
    for (; i < trace.operations.size() && trace.operations[i].thread == thread &&
           count < max_chunk_events;
         ++i, ++count) {
      const operation& op = trace.operations[i];
      unsigned char event[format::max_event_bytes];
      const auto kind = op.kind == operation_kind::allocate ? format::event_kind::allocate
                                                            : format::event_kind::deallocate;
      unsigned char* end = format::put_event(event, state, kind, op.time_ns,
                                                   (op.object + 1) * 16, op.size, op.alignment());
      events.insert(events.end(), &event[0], end);
    }
    unsigned char chunk[format::max_chunk_header_bytes];
    put(chunk, format::put_chunk_header(chunk, thread, count, events.size()));
    put(events.data(), events.data() + events.size());
    total += count;
  }
  unsigned char end[1 + format::max_varint_bytes];
  put(end, format::put_end(end, total));
  sink.close();
}

}  // namespace pmrkit::trace
