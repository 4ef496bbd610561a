// Small helpers shared by the adapter failure sweeps: byte snapshots, for checking the strong
// guarantee ("on a throw the buffer is unchanged"), and deterministic test payloads.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace pmrkit::test {

inline std::vector<std::byte> snapshot(std::span<const std::byte> s) {
  return {s.begin(), s.end()};
}

inline bool same_bytes(std::span<const std::byte> a, const std::vector<std::byte>& b) {
  return a.size() == b.size() && (b.empty() || std::memcmp(a.data(), b.data(), b.size()) == 0);
}

// Throws (failing the sweep with `what`) unless `condition` holds.
inline void require(bool condition, const std::string& what) {
  if (!condition) throw std::logic_error(what);
}

// Compressible but not trivial: text with a slowly changing twist.
inline std::vector<std::byte> payload(std::size_t n, unsigned seed) {
  static constexpr char text[] = "pmrkit reliability payload ";
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<std::byte>(text[(i + seed) % (sizeof text - 1)] ^ ((i / 251 + seed) & 7));
  return out;
}

}  // namespace pmrkit::test
