// checked_resource: the bookkeeping, the checks and the reports, and the registry's factory
// for "checked". Each block taken from upstream is laid out as
//   [front guard: guard_bytes rounded up to the alignment][the block][back guard: guard_bytes]
// so the block keeps its alignment and a write just outside it lands in a guard byte.
#include "pmrkit/checked_resource.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>


namespace pmrkit {
namespace {

// Distinct fill bytes, so a dump tells which state a byte was left in (the values MSVC's
// debug heap uses, familiar to many readers).
constexpr std::byte fresh_fill{0xCD};   // handed out, not yet written by its owner
constexpr std::byte guard_fill{0xFD};   // the guard bytes around every block
constexpr std::byte freed_fill{0xDD};   // freed, waiting in quarantine

struct block_record {
  std::byte* raw;
  std::size_t raw_bytes;
  std::size_t front;  // guard bytes before the block
  std::size_t bytes;
  std::size_t alignment;
  std::uint64_t serial;
  std::uint64_t freed_order;  // nonzero while the block waits in quarantine

  std::byte* user() const noexcept { return raw + front; }
  std::size_t back() const noexcept { return raw_bytes - front - bytes; }
};

struct finding {
  allocation_violation violation;
  std::string message;
};

bool is_power_of_two(std::size_t n) noexcept { return n != 0 && (n & (n - 1)) == 0; }

// Index of the first byte in [p, p + n) that is not `expected`, or n.
std::size_t first_mismatch(const std::byte* p, std::size_t n, std::byte expected) noexcept {
  std::size_t i = 0;
  // Word at a time: poison checks run over every freed block, some of them megabytes.
  std::uint64_t pattern;
  std::memset(&pattern, std::to_integer<int>(expected), sizeof pattern);
  for (; i + sizeof pattern <= n; i += sizeof pattern) {
    std::uint64_t word;
    std::memcpy(&word, p + i, sizeof word);
    if (word != pattern) break;
  }
  for (; i < n; ++i)
    if (p[i] != expected) return i;
  return n;
}

std::string address(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

std::string hex_byte(std::byte b) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", std::to_integer<unsigned>(b));
  return text;
}

std::string describe(const block_record& r) {
  return "block #" + std::to_string(r.serial) + " (" + std::to_string(r.bytes) +
         " bytes, alignment " + std::to_string(r.alignment) + ") at " + address(r.user());
}

std::string call(const char* what, const void* p, std::size_t bytes, std::size_t alignment) {
  return std::string(what) + "(" + address(p) + ", " + std::to_string(bytes) + ", " +
         std::to_string(alignment) + ")";
}

std::string allocate_call(std::size_t bytes, std::size_t alignment) {
  return "allocate(" + std::to_string(bytes) + ", " + std::to_string(alignment) + ")";
}

// Damage to the guard bytes of a block (live or freed); `when` says what found it.
std::optional<finding> check_guards(const block_record& r, const char* when) {
  const std::size_t back = first_mismatch(r.user() + r.bytes, r.back(), guard_fill);
  if (back != r.back())
    return finding{allocation_violation::overrun,
                   describe(r) + " was written past its end: the byte " + std::to_string(back) +
                       " past the end is " + hex_byte(r.user()[r.bytes + back]) +
                       ", not the guard byte 0xfd; found when " + when};
  if (first_mismatch(r.raw, r.front, guard_fill) != r.front) {
    std::size_t before = 1;  // report the damaged byte nearest the block
    while (r.user()[-static_cast<std::ptrdiff_t>(before)] == guard_fill) ++before;
    return finding{allocation_violation::underrun,
                   describe(r) + " was written before its start: the byte " +
                       std::to_string(before) + " before it is " +
                       hex_byte(r.user()[-static_cast<std::ptrdiff_t>(before)]) +
                       ", not the guard byte 0xfd; found when " + when};
  }
  return std::nullopt;
}

// Damage to a quarantined block: its poison or its guards.
std::optional<finding> check_freed(const block_record& r, const char* when) {
  const std::size_t at = first_mismatch(r.user(), r.bytes, freed_fill);
  if (at != r.bytes)
    return finding{allocation_violation::write_after_free,
                   describe(r) + " was written after it was freed: its byte " +
                       std::to_string(at) + " is " + hex_byte(r.user()[at]) +
                       ", not the poison 0xdd; found when " + when};
  return check_guards(r, when);
}

}  // namespace

struct checked_resource::state {
  using shape = std::pair<std::size_t, std::size_t>;  // bytes, alignment

  checked_options options;
  std::pmr::memory_resource* upstream;
  mutable std::mutex lock;
  std::map<std::uintptr_t, block_record> blocks;  // live and quarantined, by block address
  std::map<std::uint64_t, std::uintptr_t> quarantine_by_age;  // freed_order -> address
  // Quarantined blocks of each shape, oldest first: a request of that exact shape reuses the
  // oldest, which is also the first of its shape to leave when the quarantine is full.
  std::map<shape, std::deque<std::uintptr_t>> quarantine_by_shape;
  checked_stats counters;
  std::uint64_t next_serial = 1;
  std::uint64_t next_freed_order = 1;

  static constexpr std::size_t max_recorded = 16;
  std::vector<std::string> recorded;  // under error_action::record and log: the first messages

  static std::string text_of(const finding& f) {
    return "pmrkit checked_resource: " + std::string(to_string(f.violation)) + ": " + f.message;
  }

  [[noreturn]] void raise(const finding& f) const {
    const std::string text = text_of(f);
    if (options.on_error != checked_options::error_action::abort)
      throw allocation_error(f.violation, text);
    std::fprintf(stderr, "%s\n", text.c_str());
    std::abort();
  }

  // Whether a bad deallocate() returns instead of raising.
  bool keeps_violations() const noexcept {
    return options.on_error == checked_options::error_action::record ||
           options.on_error == checked_options::error_action::log;
  }

  // Counts a violation and, under error_action::record and log, keeps its message: every one,
  // whether it is then thrown, printed or only kept, so that violation_report() lists them in
  // order.
  const finding& count(const finding& f) {
    ++counters.violations;
    if (keeps_violations() && recorded.size() < max_recorded) {
      try {
        recorded.push_back(text_of(f));
      } catch (const std::bad_alloc&) {
        // Counted all the same; only its text is lost.
      }
    }
    return f;
  }

  // For deallocate(), which may return instead: under error_action::record and log the caller
  // returns (the finding was counted and kept; under log, printed too); otherwise it is raised.
  void report_from_deallocate(const finding& f) const {
    if (!keeps_violations()) raise(f);
    if (options.on_error == checked_options::error_action::log) {
      // As text_of() reads, without allocating: the caller goes on, whatever memory is left.
      const std::string_view name = to_string(f.violation);
      std::fprintf(stderr, "pmrkit checked_resource: %.*s: %s\n", static_cast<int>(name.size()),
                   name.data(), f.message.c_str());
    }
  }

  std::size_t front_guard(std::size_t alignment) const noexcept {
    if (options.guard_bytes == 0) return 0;
    if (alignment >= options.guard_bytes) return alignment;
    return (options.guard_bytes + alignment - 1) & ~(alignment - 1);
  }

  void give_back(std::map<std::uintptr_t, block_record>::iterator it) {
    const block_record& r = it->second;
    counters.upstream_bytes_in_use -= r.raw_bytes;
    std::byte* raw = r.raw;
    const std::size_t raw_bytes = r.raw_bytes;
    const std::size_t alignment = r.alignment;
    blocks.erase(it);
    upstream->deallocate(raw, raw_bytes, alignment);
  }

  // Takes the block out of the quarantine's indexes (the record stays).
  void unquarantine(block_record& r) {
    const auto s = quarantine_by_shape.find({r.bytes, r.alignment});
    auto& queue = s->second;
    queue.erase(std::find(queue.begin(), queue.end(), reinterpret_cast<std::uintptr_t>(r.user())));
    if (queue.empty()) quarantine_by_shape.erase(s);
    quarantine_by_age.erase(r.freed_order);
    r.freed_order = 0;
    --counters.quarantined_blocks;
    counters.quarantined_bytes -= r.raw_bytes;
  }

  // Whether a quarantined block may be reused: half the quarantine's blocks (at least one) have
  // been freed since it was, so a stale pointer to it stays a stale pointer for that long.
  bool has_waited(const block_record& r) const noexcept {
    return next_freed_order - 1 - r.freed_order >=
           std::max<std::size_t>(1, options.quarantine_blocks / 2);
  }

  void note_allocation(std::size_t bytes) {
    ++counters.allocations;
    ++counters.blocks_in_use;
    counters.bytes_in_use += bytes;
    counters.bytes_allocated += bytes;
    counters.peak_blocks_in_use = std::max(counters.peak_blocks_in_use, counters.blocks_in_use);
    counters.peak_bytes_in_use = std::max(counters.peak_bytes_in_use, counters.bytes_in_use);
  }

  // Returns quarantined blocks to upstream, oldest first, while `over` says so; the first
  // damage found is returned (all damaged blocks are counted).
  template <class Predicate>
  std::optional<finding> evict_while(Predicate over, const char* when) {
    std::optional<finding> first;
    while (!quarantine_by_age.empty() && over()) {
      const auto it = blocks.find(quarantine_by_age.begin()->second);
      if (auto damage = check_freed(it->second, when)) {
        count(*damage);
        if (!first) first = std::move(damage);
      }
      unquarantine(it->second);
      give_back(it);
    }
    return first;
  }

  // Checks every block; damaged quarantined blocks are returned to upstream. All findings.
  std::vector<finding> check_all(const char* when) {
    std::vector<finding> found;
    std::vector<std::uintptr_t> damaged_freed;
    for (const auto& [addr, r] : blocks) {
      auto damage = r.freed_order ? check_freed(r, when) : check_guards(r, when);
      if (!damage) continue;
      found.push_back(count(*damage));
      if (r.freed_order) damaged_freed.push_back(addr);
    }
    for (const std::uintptr_t addr : damaged_freed) {
      const auto it = blocks.find(addr);
      unquarantine(it->second);
      give_back(it);
    }
    return found;
  }

  std::string leak_report() const {
    if (counters.blocks_in_use == 0) return {};
    std::map<std::size_t, std::uint64_t> sizes;
    const block_record* oldest = nullptr;
    for (const auto& [addr, r] : blocks) {
      if (r.freed_order) continue;
      ++sizes[r.bytes];
      if (!oldest || r.serial < oldest->serial) oldest = &r;
    }
    // Appended piece by piece: `" " + std::to_string(...)` trips GCC 12's -Wrestrict.
    std::string text = std::to_string(counters.blocks_in_use);
    text.append(counters.blocks_in_use == 1 ? " block (" : " blocks (")
        .append(std::to_string(counters.bytes_in_use))
        .append(" bytes) still allocated; sizes:");
    constexpr std::size_t shown = 16;
    std::size_t n = 0;
    for (const auto& [bytes, count] : sizes) {
      if (n++ == shown) {
        text.append(" ... and ").append(std::to_string(sizes.size() - shown)).append(" more");
        break;
      }
      text.append(" ").append(std::to_string(bytes)).append(" x").append(std::to_string(count));
    }
    text.append("; the oldest is ").append(describe(*oldest));
    return text;
  }

  std::string violation_report() const {
    if (!keeps_violations() || counters.violations == 0) return {};
    std::string text = std::to_string(counters.violations) + " violation" +
                       (counters.violations == 1 ? "" : "s") + " recorded";
    if (counters.violations > recorded.size())
      text += " (the first " + std::to_string(recorded.size()) + " below)";
    for (const std::string& message : recorded) text += "\n" + message;
    return text;
  }
};

checked_resource::checked_resource(checked_options options, std::pmr::memory_resource* upstream)
    : state_(std::make_unique<state>()) {
  if (!upstream) throw std::invalid_argument("pmrkit: checked_resource was given a null upstream");
  if (options.guard_bytes > checked_options::max_guard_bytes)
    throw std::invalid_argument("pmrkit: checked_resource guard_bytes " +
                                std::to_string(options.guard_bytes) +
                                " is too large; allowed: 0 to " +
                                std::to_string(checked_options::max_guard_bytes));
  state_->options = options;
  state_->upstream = upstream;
}

checked_resource::~checked_resource() {
  state& s = *state_;
  const std::lock_guard guard(s.lock);
  const std::vector<finding> damage = s.check_all("the resource was destroyed");
  for (const finding& f : damage)
    std::fprintf(stderr, "pmrkit checked_resource: %s: %s\n",
                 std::string(to_string(f.violation)).c_str(), f.message.c_str());
  const bool leaked = s.counters.blocks_in_use != 0;
  if (leaked && s.options.on_leak != checked_options::leak_action::ignore)
    std::fprintf(stderr, "pmrkit checked_resource: at destruction, %s\n",
                 s.leak_report().c_str());
  // Everything goes back, live blocks included: destruction never leaks upstream memory.
  while (!s.blocks.empty()) s.give_back(s.blocks.begin());
  if ((!damage.empty() && s.options.on_error == checked_options::error_action::abort) ||
      (leaked && s.options.on_leak == checked_options::leak_action::abort))
    std::abort();
}

void* checked_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  state& s = *state_;
  const std::lock_guard guard(s.lock);
  if (!is_power_of_two(alignment)) {
    s.raise(s.count({allocation_violation::bad_alignment,
                     allocate_call(bytes, alignment) + ": the alignment must be a power of two"}));
  }

  // Reuse the oldest quarantined block of exactly this shape, once it has waited (a block
  // handed out again at once would hide the commonest double free and write through a stale
  // pointer: free, allocate the same shape, free the stale pointer again) and proves untouched.
  const auto q = s.quarantine_by_shape.find({bytes, alignment});
  if (const auto it = q == s.quarantine_by_shape.end() ? s.blocks.end()
                                                        : s.blocks.find(q->second.front());
      it != s.blocks.end() && s.has_waited(it->second)) {
    block_record& r = it->second;
    s.unquarantine(r);
    if (auto damage = check_freed(r, "it was about to be reused")) {
      s.count(*damage);
      s.give_back(it);
      s.raise(*damage);
    }
    r.serial = s.next_serial++;
    std::memset(r.user(), std::to_integer<int>(fresh_fill), bytes);
    ++s.counters.reused_from_quarantine;
    s.note_allocation(bytes);
    return r.user();
  }

  const std::size_t front = s.front_guard(alignment);
  const std::size_t back = s.options.guard_bytes;
  // PTRDIFF_MAX, not SIZE_MAX: an upstream over libstdc++'s aligned operator new turns a size
  // near SIZE_MAX into a tiny block, which the fill below would overrun.
  const std::size_t guards = front + back + 1;  // front is at most the alignment: no wrap
  if (guards > PTRDIFF_MAX || bytes > PTRDIFF_MAX - guards) throw std::bad_alloc();
  // At least one byte, so even zero-byte blocks have distinct addresses.
  const std::size_t raw_bytes = std::max<std::size_t>(front + bytes + back, 1);
  auto* raw = static_cast<std::byte*>(s.upstream->allocate(raw_bytes, alignment));
  const block_record record{raw, raw_bytes, front, bytes, alignment, 0, 0};
  const auto key = reinterpret_cast<std::uintptr_t>(record.user());
  // The blocks held (live or in quarantine) are disjoint and ordered alike by address, so a new
  // one that overlaps any of them overlaps the one just below it or the one just above.
  auto next = s.blocks.lower_bound(key);
  const block_record* overlapped = nullptr;
  if (next != s.blocks.end() && next->second.raw < raw + raw_bytes) overlapped = &next->second;
  if (next != s.blocks.begin()) {
    const block_record& below = std::prev(next)->second;
    if (below.raw + below.raw_bytes > raw) overlapped = &below;
  }
  if (overlapped) {
    s.upstream->deallocate(raw, raw_bytes, alignment);
    s.raise(s.count({allocation_violation::corrupt_upstream,
                     "upstream returned " + address(raw) + " (" + std::to_string(raw_bytes) +
                         " bytes) for " + allocate_call(bytes, alignment) + ", overlapping " +
                         describe(*overlapped) + ", which it holds"}));
  }
  std::map<std::uintptr_t, block_record>::iterator placed;
  try {
    placed = s.blocks.emplace_hint(next, key, record);
  } catch (...) {
    s.upstream->deallocate(raw, raw_bytes, alignment);
    throw;
  }
  block_record& r = placed->second;
  r.serial = s.next_serial++;
  s.counters.upstream_bytes_in_use += raw_bytes;
  std::memset(r.raw, std::to_integer<int>(guard_fill), front);
  std::memset(r.user(), std::to_integer<int>(fresh_fill), bytes);
  std::memset(r.user() + bytes, std::to_integer<int>(guard_fill), r.back());
  s.note_allocation(bytes);
  return r.user();
}

void checked_resource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
  state& s = *state_;
  const std::lock_guard guard(s.lock);
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const auto it = s.blocks.find(addr);
  if (it == s.blocks.end()) {
    std::string where = "a pointer this resource did not hand out (or one freed long ago "
                        "and already returned to upstream)";
    // The blocks are indexed by their user address, so a pointer into a block's front guard
    // lies below its block's key: look at the block above the pointer as well as below it.
    const auto above = s.blocks.upper_bound(addr);
    const auto below = above == s.blocks.begin() ? s.blocks.end() : std::prev(above);
    for (const auto candidate : {below, above}) {
      if (candidate == s.blocks.end()) continue;
      const block_record& r = candidate->second;
      const auto start = reinterpret_cast<std::uintptr_t>(r.raw);
      if (addr < start || addr >= start + r.raw_bytes) continue;
      const auto user = reinterpret_cast<std::uintptr_t>(r.user());
      where = addr >= user && addr < user + r.bytes
                  ? "a pointer " + std::to_string(addr - user) + " bytes inside "
                  : "a pointer into the guard bytes of ";
      where += describe(r) + (r.freed_order ? ", which is already freed" : "");
      break;
    }
    s.report_from_deallocate(s.count({allocation_violation::unknown_pointer,
                                      call("deallocate", p, bytes, alignment) + " of " + where +
                                          "; deallocate takes only what allocate returned"}));
    return;
  }
  block_record& r = it->second;
  if (r.freed_order) {
    s.report_from_deallocate(
        s.count({allocation_violation::double_free,
                 call("deallocate", p, bytes, alignment) + " of " + describe(r) +
                     ", which was already freed; a block may be freed once"}));
    return;
  }
  if (bytes != r.bytes || alignment != r.alignment) {
    s.report_from_deallocate(
        s.count({bytes != r.bytes ? allocation_violation::wrong_size
                                  : allocation_violation::wrong_alignment,
                 call("deallocate", p, bytes, alignment) + " of " + describe(r) +
                     ": deallocate must be given the size and alignment passed to allocate; "
                     "the block is still allocated"}));
    return;
  }

  --s.counters.blocks_in_use;
  s.counters.bytes_in_use -= r.bytes;
  ++s.counters.deallocations;
  if (auto damage = check_guards(r, "it was freed")) {
    s.count(*damage);
    s.give_back(it);  // freed all the same: the caller is done with it
    s.report_from_deallocate(*damage);
    return;
  }
  const checked_options& o = s.options;
  if (o.quarantine_blocks == 0 || r.raw_bytes > o.quarantine_bytes) {
    s.give_back(it);
    return;
  }
  std::memset(r.user(), std::to_integer<int>(freed_fill), r.bytes);
  // Index first (this may throw bad_alloc), then mark the block freed; without room in the
  // indexes the block simply skips the quarantine.
  const state::shape key{r.bytes, r.alignment};
  try {
    auto& queue = s.quarantine_by_shape[key];
    try {
      queue.push_back(addr);
      s.quarantine_by_age.emplace(s.next_freed_order, addr);
    } catch (...) {
      if (!queue.empty() && queue.back() == addr) queue.pop_back();
      if (queue.empty()) s.quarantine_by_shape.erase(key);
      throw;
    }
  } catch (const std::bad_alloc&) {
    s.give_back(it);
    return;
  }
  r.freed_order = s.next_freed_order++;
  ++s.counters.quarantined_blocks;
  s.counters.quarantined_bytes += r.raw_bytes;
  const auto found = s.evict_while(
      [&] {
        return s.counters.quarantined_blocks > o.quarantine_blocks ||
               s.counters.quarantined_bytes > o.quarantine_bytes;
      },
      "it left the quarantine");
  if (found) s.report_from_deallocate(*found);
}

checked_stats checked_resource::stats() const {
  const std::lock_guard guard(state_->lock);
  return state_->counters;
}

std::vector<checked_block> checked_resource::live_blocks() const {
  const std::lock_guard guard(state_->lock);
  std::vector<checked_block> out;
  for (const auto& [addr, r] : state_->blocks)
    if (!r.freed_order) out.push_back({r.user(), r.bytes, r.alignment, r.serial});
  std::sort(out.begin(), out.end(),
            [](const checked_block& a, const checked_block& b) { return a.serial < b.serial; });
  return out;
}

std::string checked_resource::leak_report() const {
  const std::lock_guard guard(state_->lock);
  return state_->leak_report();
}

std::string checked_resource::violation_report() const {
  const std::lock_guard guard(state_->lock);
  return state_->violation_report();
}

void checked_resource::verify() {
  const std::lock_guard guard(state_->lock);
  const std::vector<finding> found = state_->check_all("verify() was called");
  if (found.empty()) return;
  finding first = found.front();
  if (found.size() > 1)
    first.message += " (and " + std::to_string(found.size() - 1) + " more damaged blocks)";
  state_->raise(first);
}

void checked_resource::flush_quarantine() {
  const std::lock_guard guard(state_->lock);
  const auto found = state_->evict_while([] { return true; }, "the quarantine was flushed");
  if (found) state_->raise(*found);
}

const checked_options& checked_resource::options() const noexcept { return state_->options; }

std::pmr::memory_resource* checked_resource::upstream_resource() const noexcept {
  return state_->upstream;
}

}  // namespace pmrkit
