// class_high_water: each size class's count of live blocks and its highest, and the floor that
// per-class chunks set on a workload: the chunk bytes each class would need for its own highest
// count, perfectly packed, if no chunk ever changed class (docs/size_class.md, "Memory held for
// what is live"). Used by pmrkit_size_class_footprint and size_class_footprint_test. Not
// thread-safe: one workload thread calls allocated() and freed() as it goes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "pmrkit/size_class_resource.hpp"

namespace pmrkit::bench {

class class_high_water {
 public:
  using class_table = std::vector<size_class_stats::size_class>;

  // `classes` from the resource's stats(); an empty table tracks nothing (floor_bytes() 0).
  explicit class_high_water(class_table classes)
      : classes_(std::move(classes)), live_(classes_.size()), highest_(classes_.size()) {}

  // A block of `bytes` at the default alignment (16: 8-byte requests take the 16-byte class).
  void allocated(std::size_t bytes) {
    if (const std::size_t c = class_of(bytes); c < classes_.size())
      highest_[c] = std::max(highest_[c], ++live_[c]);
  }
  void freed(std::size_t bytes) {
    if (const std::size_t c = class_of(bytes); c < classes_.size()) --live_[c];
  }

  // Chunk bytes for each class's highest count, perfectly packed.
  std::uint64_t floor_bytes() const {
    std::uint64_t bytes = 0;
    for (std::size_t c = 0; c < classes_.size(); ++c) {
      const std::uint64_t per_chunk = classes_[c].blocks_per_chunk;
      bytes += (highest_[c] + per_chunk - 1) / per_chunk * classes_[c].chunk_bytes;
    }
    return bytes;
  }

 private:
  std::size_t class_of(std::size_t bytes) const {
    const std::size_t size = std::max<std::size_t>(bytes, alignof(std::max_align_t));
    std::size_t c = 0;
    while (c < classes_.size() && classes_[c].block_size < size) ++c;
    return c;
  }

  class_table classes_;
  std::vector<std::uint64_t> live_;
  std::vector<std::uint64_t> highest_;
};

}  // namespace pmrkit::bench
