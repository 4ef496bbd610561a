// Statistics of paired rounds, for pmrkit_interleaved: in each round every subject runs once, so
// a subject's time over the reference's in the same round is one paired ratio, and the machine's
// drift from round to round divides out. What a comparison reports is the median of those
// ratios, the rounds the subject was faster in, and how likely that count is if neither were
// faster (a two-sided sign test: no assumption about the ratios' distribution, which on a shared
// machine has long tails). Pure functions, thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <utility>
#include <vector>

namespace pmrkit::bench {

// The median (the mean of the middle two for an even count). Throws std::invalid_argument for
// no values.
inline double median(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("median of no values");
  const std::size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + middle, values.end());
  if (values.size() % 2 == 1) return values[middle];
  const double upper = values[middle];
  const double lower = *std::max_element(values.begin(), values.begin() + middle);
  return (lower + upper) / 2;
}

// Two-sided sign test: the probability, were each round a fair coin, of `below` rounds of
// `rounds` or a count as far from half. 1 for no rounds. Throws std::invalid_argument if
// below > rounds. In log space, so that thousands of rounds do not underflow.
inline double sign_test_p(std::size_t below, std::size_t rounds) {
  if (below > rounds) throw std::invalid_argument("sign test: more rounds below than rounds");
  if (rounds == 0) return 1.0;
  const std::size_t tail = std::min(below, rounds - below);
  const double n = static_cast<double>(rounds);
  double p = 0;
  for (std::size_t i = 0; i <= tail; ++i) {
    const double k = static_cast<double>(i);
    p += std::exp(std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1) -
                  n * std::log(2.0));
  }
  return std::min(1.0, 2 * p);
}

// What the rounds of one subject and phase say against the reference.
struct paired_summary {
  double median_ratio = 0;   // subject / reference, round by round
  std::size_t faster = 0;    // rounds with a ratio below 1
  std::size_t slower = 0;    // rounds above 1 (ties count in neither, nor in the test)
  double p = 1;              // sign_test_p(faster, faster + slower)
};

// Throws std::invalid_argument if the two differ in length or are empty.
inline paired_summary summarize_pairs(const std::vector<double>& subject,
                                      const std::vector<double>& reference) {
  if (subject.size() != reference.size() || subject.empty())
    throw std::invalid_argument("paired rounds: the subject and the reference need the same, "
                                "non-zero number of rounds");
  std::vector<double> ratios(subject.size());
  paired_summary s;
  for (std::size_t i = 0; i < subject.size(); ++i) {
    ratios[i] = subject[i] / reference[i];
    s.faster += ratios[i] < 1;
    s.slower += ratios[i] > 1;
  }
  s.median_ratio = median(std::move(ratios));
  s.p = sign_test_p(s.faster, s.faster + s.slower);
  return s;
}

}  // namespace pmrkit::bench
