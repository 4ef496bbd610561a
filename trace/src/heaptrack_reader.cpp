// Reads a decompressed heaptrack recording (heaptrack 1.x, file format version 2 or 3): text
// lines of a letter and hexadecimal fields. Only these matter here:
//   a SIZE TRACE   defines allocation-info number 0, 1, 2, ... (a size at a call stack)
//   + INFO         an allocation of that info's size
//   - INFO         a free of a block of that info (heaptrack does not say which block)
//   c MILLISECONDS the time since the start
// What heaptrack lacks, and how it is filled in (docs/replay.md): every event is on thread 0;
// a free ends the most recently allocated live block of its info (last in, first out);
// alignment is 16 bytes; time has millisecond steps.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "byte_cursor.hpp"
#include "trace_builder.hpp"

namespace pmrkit::trace {
namespace {

constexpr std::uint8_t default_alignment_log2 = 4;

[[noreturn]] void fail(std::size_t line, const std::string& what) {
  throw trace_format_error("heaptrack file: " + what + " on line " + std::to_string(line));
}

// The next hexadecimal field of `rest`, which it advances past.
std::uint64_t hex_field(std::string_view& rest, std::size_t line, const char* what) {
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  std::uint64_t value = 0;
  std::size_t digits = 0;
  for (; digits < rest.size() && rest[digits] != ' '; ++digits) {
    const char c = rest[digits];
    unsigned digit;
    if (c >= '0' && c <= '9') digit = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f') digit = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') digit = static_cast<unsigned>(c - 'A' + 10);
    else fail(line, std::string("'") + c + "' in " + what + " (expected hexadecimal digits)");
    if (value >> 60) fail(line, std::string(what) + " over 64 bits");
    value = value << 4 | digit;
  }
  if (digits == 0) fail(line, std::string("missing ") + what);
  rest.remove_prefix(digits);
  return value;
}

}  // namespace

recorded_trace parse_heaptrack(std::span<const std::byte> bytes) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (!text.starts_with("v "))
    throw trace_format_error("heaptrack file: it does not start with a version line (\"v ...\")");

  detail::trace_builder builder("heaptrack");
  std::vector<std::uint64_t> info_sizes;
  // Per info, the made-up addresses of its live blocks, most recent last.
  std::vector<std::vector<std::uint64_t>> live_by_info;
  std::uint64_t next_address = 16;
  std::uint64_t time_ns = 0;
  std::size_t line_number = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_number;
    if (line.size() < 2 || line[1] != ' ') continue;  // '#' comments, blank lines
    const char letter = line[0];
    std::string_view rest = line.substr(2);
    switch (letter) {
      case 'v': {
        hex_field(rest, line_number, "the heaptrack version");
        const std::uint64_t file_version = hex_field(rest, line_number, "the file format version");
        if (file_version < 2 || file_version > 3)
          fail(line_number, "unsupported file format version " + std::to_string(file_version) +
                                " (this reader reads 2 and 3, heaptrack 1.1 to 1.5)");
        break;
      }
      case 'a':
        info_sizes.push_back(hex_field(rest, line_number, "an allocation info's size"));
        live_by_info.emplace_back();
        break;
      case '+':
      case '-': {
        const std::uint64_t info = hex_field(rest, line_number, "an allocation info number");
        if (info >= info_sizes.size())
          fail(line_number, "allocation info " + std::to_string(info) +
                                " used before its 'a' line (" + std::to_string(info_sizes.size()) +
                                " defined)");
        auto& live = live_by_info[info];
        if (letter == '+') {
          live.push_back(next_address);
          builder.allocate(time_ns, 0, next_address, info_sizes[info], default_alignment_log2);
          next_address += 16;
        } else if (live.empty()) {
          builder.deallocate(time_ns, 0, 0);  // counted as unpaired
        } else {
          builder.deallocate(time_ns, 0, live.back());
          live.pop_back();
        }
        break;
      }
      case 'c': {
        const std::uint64_t ms = hex_field(rest, line_number, "a timestamp");
        if (ms > UINT64_MAX / 1000000) fail(line_number, "a timestamp over 64 bits of nanoseconds");
        time_ns = std::max(time_ns, ms * 1000000);
        break;
      }
      default:
        break;  // strings, call stacks, RSS, system info: not needed to replay
    }
  }
  return std::move(builder).finish();
}

}  // namespace pmrkit::trace
