#include "pmrkit/bson/wire_format.hpp"

#include <array>
#include <string>

#include "byte_order.hpp"

namespace pmrkit::bson {
namespace {

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> crc32c_table = make_crc32c_table();

}  // namespace

message_header read_message_header(std::span<const std::byte> prefix,
                                   std::size_t max_message_bytes) {
  if (prefix.size() < header_size) {
    throw wire_format_error("MongoDB message header: " + std::to_string(prefix.size()) +
                            " bytes given, a header needs 16");
  }
  message_header h;
  h.message_length = detail::load_i32(prefix.data());
  h.request_id = detail::load_i32(prefix.data() + 4);
  h.response_to = detail::load_i32(prefix.data() + 8);
  h.op_code = detail::load_i32(prefix.data() + 12);
  if (h.message_length < static_cast<std::int32_t>(header_size) ||
      static_cast<std::size_t>(h.message_length) > max_message_bytes) {
    throw wire_format_error("MongoDB message header: messageLength " +
                            std::to_string(h.message_length) + " is out of range: allowed " +
                            std::to_string(header_size) + ".." +
                            std::to_string(max_message_bytes) + " bytes");
  }
  return h;
}

void write_message_header(std::span<std::byte> out, const message_header& header) {
  if (out.size() < header_size) {
    throw std::invalid_argument("write_message_header: " + std::to_string(out.size()) +
                                " bytes of room, a header needs 16");
  }
  detail::store_i32(out.data(), header.message_length);
  detail::store_i32(out.data() + 4, header.request_id);
  detail::store_i32(out.data() + 8, header.response_to);
  detail::store_i32(out.data() + 12, header.op_code);
}

std::uint32_t crc32c(std::span<const std::byte> bytes) noexcept {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::byte b : bytes)
    crc = crc32c_table[(crc ^ static_cast<std::uint32_t>(b)) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

}  // namespace pmrkit::bson
