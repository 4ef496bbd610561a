// How long the load and churn tests run: a fixed amount of work by default (so CI stays
// bounded and the tests are deterministic in what they do), or, with PMRKIT_LOAD_SECONDS=N
// in the environment, for about N seconds (a longer soak, by hand). Time only bounds the
// work; no assertion depends on it.
#pragma once

#include <chrono>
#include <cstdlib>
#include <string>

namespace pmrkit::test {

// 0 when PMRKIT_LOAD_SECONDS is unset, empty or not a positive number.
inline double load_seconds() {
  const char* text = std::getenv("PMRKIT_LOAD_SECONDS");
  if (!text || !*text) return 0;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  return (end && *end == '\0' && seconds > 0) ? seconds : 0;
}

class load_budget {
 public:
  // `default_units` of work when no duration is set.
  explicit load_budget(long default_units)
      : seconds_(load_seconds()), units_left_(default_units),
        start_(std::chrono::steady_clock::now()) {}
  // Whether to start another unit of work.
  bool another() {
    if (seconds_ > 0)
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() <
             seconds_;
    return units_left_-- > 0;
  }
  bool timed() const { return seconds_ > 0; }

 private:
  double seconds_;
  long units_left_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace pmrkit::test
