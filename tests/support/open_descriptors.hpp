// For tests that a failure leaves no file descriptor open: how many this process has now.
#pragma once

#include <cstddef>
#include <filesystem>

namespace pmrkit::test {

inline std::size_t open_descriptors() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++count;
  return count;
}

}  // namespace pmrkit::test
