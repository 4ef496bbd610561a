// The datagrams of the UDP load test, shared by the sender process and the receiving test:
// each starts with its sequence number and size, and the rest is a pattern derived from the
// sequence number, so the receiver can tell a corrupt, cut or duplicated datagram.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace pmrkit::test::udp_load {

struct header {
  std::uint64_t seq;
  std::uint32_t size;
  std::uint32_t magic;
};
inline constexpr std::uint32_t magic = 0x706d726b;  // "pmrk"
inline constexpr std::size_t max_udp_payload = 65507;  // IPv4

inline std::byte pattern_byte(std::uint64_t seq, std::size_t i) noexcept {
  return static_cast<std::byte>((seq * 131 + i * 7) >> 1);
}

// Sizes: mostly small, some up to `max_ok`, and one in twenty above it (up to the largest
// UDP payload), which the receiver must count as truncated.
inline std::size_t size_of(std::uint64_t seq, std::size_t max_ok) noexcept {
  std::uint64_t x = seq * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  const unsigned roll = static_cast<unsigned>(x % 100);
  const std::size_t low = sizeof(header);
  if (roll < 80) return low + (x >> 8) % 1024;
  if (roll < 95) return low + (x >> 8) % (max_ok - low + 1);
  return max_ok + 1 + (x >> 8) % (max_udp_payload - max_ok);
}

inline void fill(std::span<std::byte> out, std::uint64_t seq) noexcept {
  const header h{seq, static_cast<std::uint32_t>(out.size()), magic};
  std::memcpy(out.data(), &h, sizeof h);
  for (std::size_t i = sizeof h; i < out.size(); ++i) out[i] = pattern_byte(seq, i);
}

// True if `in` is an intact datagram; its sequence number goes to `seq`.
inline bool check(std::span<const std::byte> in, std::uint64_t& seq) noexcept {
  header h;
  if (in.size() < sizeof h) return false;
  std::memcpy(&h, in.data(), sizeof h);
  if (h.magic != magic || h.size != in.size()) return false;
  seq = h.seq;
  for (std::size_t i = sizeof h; i < in.size(); ++i)
    if (in[i] != pattern_byte(h.seq, i)) return false;
  return true;
}

}  // namespace pmrkit::test::udp_load
