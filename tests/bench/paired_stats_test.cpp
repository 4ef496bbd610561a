// bench/paired_stats.hpp: what pmrkit_interleaved reports of paired rounds, the median ratio,
// the rounds faster and the sign test, checked against values worked out by hand.
#include "paired_stats.hpp"

#include <catch2/catch.hpp>
#include <stdexcept>
#include <vector>

using pmrkit::bench::median;
using pmrkit::bench::sign_test_p;
using pmrkit::bench::summarize_pairs;

TEST_CASE("median of an odd and an even count, in any order") {
  CHECK(median({3.0, 1.0, 2.0}) == 2.0);
  CHECK(median({4.0, 1.0, 3.0, 2.0}) == 2.5);
  CHECK(median({7.0}) == 7.0);
  CHECK_THROWS_AS(median({}), std::invalid_argument);
}

TEST_CASE("sign test: exact binomial tails, two-sided") {
  // 0 or 10 of 10: 2 * 1/1024.
  CHECK(sign_test_p(0, 10) == Approx(2.0 / 1024));
  CHECK(sign_test_p(10, 10) == Approx(2.0 / 1024));
  // 2 of 10: 2 * (1 + 10 + 45) / 1024; 8 of 10 is as far from half.
  CHECK(sign_test_p(2, 10) == Approx(2.0 * 56 / 1024));
  CHECK(sign_test_p(8, 10) == Approx(2.0 * 56 / 1024));
  // Half, or no rounds at all: nothing told apart.
  CHECK(sign_test_p(5, 10) == 1.0);
  CHECK(sign_test_p(0, 0) == 1.0);
  // Thousands of rounds neither underflow nor exceed 1.
  CHECK(sign_test_p(1000, 2000) == 1.0);
  const double far = sign_test_p(900, 2000);
  CHECK(far > 0.0);
  CHECK(far < 1e-5);
  CHECK_THROWS_AS(sign_test_p(11, 10), std::invalid_argument);
}

TEST_CASE("paired rounds: ratios round by round, ties in neither count") {
  // Ratios 0.5, 1, 2, 0.8, 0.9: faster in 3, slower in 1, one tie.
  const std::vector<double> subject = {1, 2, 6, 4, 9};
  const std::vector<double> reference = {2, 2, 3, 5, 10};
  const auto s = summarize_pairs(subject, reference);
  CHECK(s.median_ratio == Approx(0.9));
  CHECK(s.faster == 3);
  CHECK(s.slower == 1);
  CHECK(s.p == Approx(sign_test_p(3, 4)));
  // The ratio is per round, not of the medians: the reference's median here is 5, the
  // subject's 4, yet the median ratio is 0.9.
  CHECK(s.median_ratio != Approx(4.0 / 5.0));
  CHECK_THROWS_AS(summarize_pairs({1, 2}, {1}), std::invalid_argument);
  CHECK_THROWS_AS(summarize_pairs({}, {}), std::invalid_argument);
}
