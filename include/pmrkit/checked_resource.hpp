// pmrkit/checked_resource.hpp — a memory resource that catches misuse (in the spirit of BDE's
// test allocator).
//
// checked_resource wraps its upstream and keeps a record of every block it hands out. It detects
// and reports: a double free; a deallocate with the wrong size or alignment; a pointer it never
// handed out (or one pointing inside a block); a write past the end or before the start of a block
// (guard bytes around each block, checked when it is freed); a write to freed memory (freed blocks
// are filled with a poison pattern and kept in a bounded quarantine, checked when reused, when they
// leave the quarantine, by verify(), and at destruction); and every block still live at destruction
// (count, bytes, sizes). New blocks are filled with a pattern too, so reads of uninitialised memory
// are visible. A freed block in quarantine is reused only for a later request of exactly its size
// and alignment (the oldest such block first, after checking its poison), and only once half the
// quarantine's blocks (quarantine_blocks / 2, at least one) have been freed after it, so that a
// stale pointer freed or written through soon after the free is still caught (a quarantine of one
// block therefore never reuses it: the free it waits for evicts it); everything else comes from
// upstream.
//
// A violation found by allocate() or deallocate() is reported as the options say: by default
// a message naming the violation on stderr, then std::abort(); with on_error = throw_error,
// pmrkit::allocation_error (allocation_error.hpp) so tests can assert; with on_error = record,
// one found by deallocate() is counted and kept for violation_report(), and the call returns
// (for code under test that frees in a destructor, which must not throw); with on_error = log,
// the same, and its message goes to stderr as it is found (for a service that should log misuse
// and carry on: its resource, installed as the default, may never be destroyed). The state
// stays consistent after a throw: a bad deallocate changes nothing (the block stays live), a
// block whose guard bytes were overwritten is still freed, and so is the block of a deallocate
// that found damage in another block as that one left the quarantine. Destructors cannot throw, so
// damage found at destruction is printed (and, under on_error = abort, aborts): call verify()
// first to have it thrown. Blocks live at destruction are reported per on_leak. Destroying
// the resource returns every byte it took to upstream, whatever is still allocated.
//
// Thread-safety: any thread may call any member at once; one mutex guards everything,
// including the calls to upstream, so upstream need not be thread-safe. Ownership: upstream is
// borrowed and must outlive the resource. Not copyable or movable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <string>
#include <vector>

#include "pmrkit/allocation_error.hpp"

namespace pmrkit {

struct checked_options {
  // record: a violation that deallocate() finds is counted in violations and its message kept
  // (violation_report()), and the call returns having freed nothing more than throw_error
  // would; everything else (allocate(), verify(), flush_quarantine()) throws as throw_error.
  // log: as record, and each message that deallocate() finds is also printed to stderr then.
  enum class error_action { abort, throw_error, log, record };
  enum class leak_action { report, abort, ignore };

  error_action on_error = error_action::abort;
  // Blocks live at destruction: report lists them on stderr and carries on (the default, so
  // a resource torn down during unwinding does not turn one error into a crash), abort prints
  // the list then aborts, ignore says nothing (live_blocks() and leak_report() still tell).
  leak_action on_leak = leak_action::report;
  // Guard bytes after each block; before it, this rounded up to the block's alignment. At
  // most max_guard_bytes (the constructor throws std::invalid_argument beyond it).
  static constexpr std::size_t max_guard_bytes = 4096;
  std::size_t guard_bytes = 16;
  // Freed blocks kept poisoned before going back to upstream: at most this many, and at most
  // quarantine_bytes of upstream memory (guards included). 0 returns each block at once.
  std::size_t quarantine_blocks = 1024;
  std::size_t quarantine_bytes = 4 * 1024 * 1024;
};

// A snapshot (taken under the resource's lock, so fields agree with each other).
struct checked_stats {
  std::uint64_t allocations = 0;           // successful allocate() calls
  std::uint64_t deallocations = 0;         // deallocate() calls that freed a block
  std::uint64_t blocks_in_use = 0;         // allocated and not yet freed
  std::uint64_t bytes_in_use = 0;          // their sizes, as requested
  std::uint64_t peak_blocks_in_use = 0;    // high-water marks
  std::uint64_t peak_bytes_in_use = 0;
  std::uint64_t bytes_allocated = 0;       // total requested over the lifetime
  std::uint64_t reused_from_quarantine = 0;
  std::uint64_t quarantined_blocks = 0;    // freed, poisoned, not yet returned upstream
  std::uint64_t quarantined_bytes = 0;     // upstream bytes they hold, guards included
  std::uint64_t upstream_bytes_in_use = 0; // held from upstream now: live + quarantined + guards
  std::uint64_t violations = 0;  // found: each reported, thrown, or recorded (on_error = record)
};

struct checked_block {
  const void* address;
  std::size_t bytes;
  std::size_t alignment;
  std::uint64_t serial;  // 1 for the resource's first allocation, 2 for the second, ...
};

class checked_resource final : public std::pmr::memory_resource {
 public:
  // Throws std::invalid_argument for a null upstream.
  explicit checked_resource(
      checked_options options = {},
      std::pmr::memory_resource* upstream = std::pmr::get_default_resource());
  explicit checked_resource(std::pmr::memory_resource* upstream)
      : checked_resource(checked_options{}, upstream) {}
  ~checked_resource() override;
  checked_resource(const checked_resource&) = delete;
  checked_resource& operator=(const checked_resource&) = delete;

  checked_stats stats() const;
  // Every live block, oldest first.
  std::vector<checked_block> live_blocks() const;
  // What destruction would report now: count, bytes and sizes of the live blocks; empty
  // when there are none.
  std::string leak_report() const;
  // Under on_error = record: how many violations were counted (those allocate(), verify() and
  // flush_quarantine() threw included) and the messages of the first 16, in the order found;
  // empty when there are none.
  std::string violation_report() const;
  // Checks the guards of every live block and the poison of every quarantined block now,
  // reporting the first damage found per on_error (damaged quarantined blocks are returned to
  // upstream first).
  void verify();
  // Checks the quarantine (as verify()) and returns all of it to upstream.
  void flush_quarantine();

  const checked_options& options() const noexcept;
  std::pmr::memory_resource* upstream_resource() const noexcept;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace pmrkit
