// A small locked hand-off of blocks between threads, so tests can have a block freed by a
// thread other than the one that allocated it. Each block carries the seed of the pattern
// written over it, so the receiver can check nothing touched it in between.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>

namespace pmrkit::test {

struct handed_block {
  void* p;
  std::size_t bytes;
  std::uint64_t seed;
};

class block_mailbox {
 public:
  void put(handed_block b) {
    const std::lock_guard guard(lock_);
    blocks_.push_back(b);
  }
  bool take(handed_block& out) {
    const std::lock_guard guard(lock_);
    if (blocks_.empty()) return false;
    out = blocks_.front();
    blocks_.pop_front();
    return true;
  }

 private:
  std::mutex lock_;
  std::deque<handed_block> blocks_;
};

}  // namespace pmrkit::test
