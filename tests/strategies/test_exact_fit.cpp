// Strategy "test_exact_fit" (test builds only): keeps freed blocks and hands one out again only
// for a request of exactly its size and alignment. Small enough to be obviously correct, it is
// here to show that a strategy added the documented way (this one file and one line in
// list.txt) reaches strategies(), the conformance suite and the benchmark's strategy list.
#include <algorithm>
#include <cstdint>
#include <new>

#include "strategy.hpp"

namespace pmrkit::detail::strategies {
namespace {

class exact_fit_resource final : public std::pmr::memory_resource {
 public:
  exact_fit_resource(std::size_t max_cached, std::pmr::memory_resource* upstream)
      : max_cached_(max_cached), upstream_(upstream) {}
  ~exact_fit_resource() override {
    release_all(live_);
    release_all(cached_);
  }
  exact_fit_resource(const exact_fit_resource&) = delete;
  exact_fit_resource& operator=(const exact_fit_resource&) = delete;

 private:
  // Sits at the start of every block taken from upstream; the caller's bytes follow at
  // offset(alignment). Each block is on exactly one list: live, or cached for reuse.
  struct header {
    header* prev;
    header* next;
    std::size_t bytes;
    std::size_t alignment;
  };
  struct block_list {
    header head{&head, &head, 0, 0};
    std::size_t size = 0;
  };

  static std::size_t offset(std::size_t alignment) {
    return (sizeof(header) + alignment - 1) / alignment * alignment;
  }
  static std::size_t upstream_alignment(std::size_t alignment) {
    return std::max(alignment, alignof(header));
  }
  static void push(block_list& list, header* h) {
    h->prev = &list.head;
    h->next = list.head.next;
    h->next->prev = h;
    list.head.next = h;
    ++list.size;
  }
  static void unlink(block_list& list, header* h) {
    h->prev->next = h->next;
    h->next->prev = h->prev;
    --list.size;
  }
  void give_back(header* h) {
    upstream_->deallocate(h, offset(h->alignment) + h->bytes, upstream_alignment(h->alignment));
  }
  void release_all(block_list& list) {
    while (list.head.next != &list.head) {
      header* h = list.head.next;
      unlink(list, h);
      give_back(h);
    }
  }

  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    header* h = nullptr;
    for (header* c = cached_.head.next; c != &cached_.head && !h; c = c->next)
      if (c->bytes == bytes && c->alignment == alignment) h = c;
    if (h) {
      unlink(cached_, h);
    } else {
      // No object exceeds PTRDIFF_MAX bytes; the header must not wrap a larger request.
      if (offset(alignment) > PTRDIFF_MAX || bytes > PTRDIFF_MAX - offset(alignment))
        throw std::bad_alloc();
      void* raw = upstream_->allocate(offset(alignment) + bytes, upstream_alignment(alignment));
      h = ::new (raw) header{nullptr, nullptr, bytes, alignment};
    }
    push(live_, h);
    return reinterpret_cast<std::byte*>(h) + offset(alignment);
  }

  void do_deallocate(void* p, std::size_t, std::size_t alignment) override {
    auto* h = reinterpret_cast<header*>(static_cast<std::byte*>(p) - offset(alignment));
    unlink(live_, h);
    if (cached_.size < max_cached_) {
      push(cached_, h);
    } else {
      give_back(h);
    }
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::size_t max_cached_;
  std::pmr::memory_resource* upstream_;
  block_list live_;
  block_list cached_;
};

constexpr option_definition option_table[] = {
    size_option("max_cached", 1024, 0, std::size_t{1} << 20,
                "freed blocks kept for reuse; beyond it they go back to upstream"),
};

resource_ptr make(option_reader& options, std::pmr::memory_resource* upstream) {
  return std::make_unique<exact_fit_resource>(options.size("max_cached"), upstream);
}

}  // namespace

extern const strategy_definition test_exact_fit{
    .name = "test_exact_fit",
    .summary = "test builds only: reuses a freed block for a request of exactly its size and "
               "alignment, other requests go to upstream; single-threaded",
    .can = {.thread_safe = false, .uses_upstream = true, .reuses_memory = true},
    .options = option_table,
    .make = make,
};

}  // namespace pmrkit::detail::strategies
