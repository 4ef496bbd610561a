// Helpers for the zstd adapter's tests: payloads with a realistic mix of repetition and noise,
// and running the zstd command-line tool on a frame.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "shell_quote.hpp"

namespace pmrkit::zstd::test {

// BSON-like records: repeated keys and structure, varying values.
inline std::vector<std::byte> payload(std::size_t size, unsigned seed = 1) {
  std::vector<std::byte> out;
  out.reserve(size);
  std::mt19937 rng(seed);
  while (out.size() < size) {
    const std::string record = "{\"_id\":" + std::to_string(rng()) + ",\"name\":\"user" +
                               std::to_string(rng() % 1000) + "\",\"active\":true,\"score\":" +
                               std::to_string(rng() % 100) + "}";
    for (char c : record) {
      if (out.size() == size) break;
      out.push_back(static_cast<std::byte>(c));
    }
  }
  return out;
}

inline std::vector<std::byte> random_bytes(std::size_t size, unsigned seed = 7) {
  std::vector<std::byte> out(size);
  std::mt19937 rng(seed);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xFF);
  return out;
}

// Runs `zstd -d -c` on the bytes; returns its stdout, and sets ok to whether it exited 0.
inline std::vector<std::byte> zstd_cli_decompress(const char* zstd,
                                                  std::span<const std::byte> frame, bool& ok) {
  static int counter = 0;
  const auto path = std::filesystem::temp_directory_path() /
                    ("pmrkit_zstd_" + std::to_string(::getpid()) + "_" +
                     std::to_string(counter++) + ".zst");
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(frame.data()),
            static_cast<std::streamsize>(frame.size()));
  }
  const std::string command =
      pmrkit::test::shell_quoted(zstd) + " -q -d -c " + pmrkit::test::shell_quoted(path.string());
  std::vector<std::byte> output;
  ok = false;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char chunk[65536];
    std::size_t n;
    while ((n = std::fread(chunk, 1, sizeof chunk, p)) > 0) {
      for (std::size_t i = 0; i < n; ++i) output.push_back(static_cast<std::byte>(chunk[i]));
    }
    ok = ::pclose(p) == 0;
  }
  std::filesystem::remove(path);
  return output;
}

}  // namespace pmrkit::zstd::test
