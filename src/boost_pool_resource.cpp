#include "pmrkit/boost_pool_resource.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <boost/pool/pool.hpp>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "oversize_blocks.hpp"

namespace pmrkit {
namespace {

// Chunks are handed to boost::pool this far into an upstream block: the header keeps the
// block's size and upstream (boost's UserAllocator::free gets neither), and keeps chunk
// starts 64-byte aligned so power-of-two blocks up to 64 bytes are naturally aligned.
constexpr std::size_t chunk_alignment = 64;

struct chunk_header {
  std::pmr::memory_resource* upstream;
  std::size_t bytes;
};
static_assert(sizeof(chunk_header) <= chunk_alignment);

// Boost.Pool's UserAllocator is a type with static functions, so it cannot carry a pointer to
// "this resource's upstream". The resource names its upstream in this thread-local slot for
// the duration of each call into a pool that may grow; free() reads it from the chunk header.
thread_local std::pmr::memory_resource* growing_upstream = nullptr;

struct upstream_user_allocator {
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;

  static char* malloc(size_type bytes) {
    std::pmr::memory_resource* upstream = growing_upstream;
    auto* raw = static_cast<char*>(upstream->allocate(bytes + chunk_alignment, chunk_alignment));
    const chunk_header header{upstream, bytes + chunk_alignment};
    std::memcpy(raw, &header, sizeof header);
    return raw + chunk_alignment;
  }

  static void free(char* chunk) {
    char* raw = chunk - chunk_alignment;
    chunk_header header;
    std::memcpy(&header, raw, sizeof header);
    header.upstream->deallocate(raw, header.bytes, chunk_alignment);
  }
};

class growing_scope {
 public:
  explicit growing_scope(std::pmr::memory_resource* upstream) : saved_(growing_upstream) {
    growing_upstream = upstream;
  }
  ~growing_scope() { growing_upstream = saved_; }
  growing_scope(const growing_scope&) = delete;
  growing_scope& operator=(const growing_scope&) = delete;

 private:
  std::pmr::memory_resource* saved_;
};

// boost::pool::release_memory() frees a chunk only when it finds every block of the chunk in
// the free list, walking the chunk list and the free list together: both must be sorted by
// address. Frees use the O(1) unordered free(), so trimmable_pool sorts both lists just
// before it releases (O(n log n) in the free blocks, no allocation), and the fast paths stay
// as they are.
class trimmable_pool : public boost::pool<upstream_user_allocator> {
 public:
  using boost::pool<upstream_user_allocator>::pool;

  void trim() {
    order_chunks();
    order_free_list();
    release_memory();
  }

 private:
  using chunk = boost::details::PODptr<size_type>;

  static bool below(const void* a, const void* b) noexcept {
    return std::less<const void*>()(a, b);
  }

  // Insertion sort: a pool has few chunks, since each is larger than the one before.
  void order_chunks() {
    chunk sorted;
    for (chunk c = list; c.valid();) {
      const chunk next = c.next();
      if (!sorted.valid() || below(c.begin(), sorted.begin())) {
        c.next(sorted);
        sorted = c;
      } else {
        chunk at = sorted;
        while (at.next().valid() && below(at.next().begin(), c.begin())) at = at.next();
        c.next(at.next());
        at.next(c);
      }
      c = next;
    }
    list = sorted;
  }

  static void* merge(void* a, void* b) noexcept {
    void* head = nullptr;
    void** tail = &head;
    while (a && b) {
      void*& smaller = below(b, a) ? b : a;
      *tail = smaller;
      tail = &nextof(smaller);
      smaller = nextof(smaller);
    }
    *tail = a ? a : b;
    return head;
  }

  // Bottom-up merge sort: runs[i] is empty or a sorted run of 2^i blocks.
  void order_free_list() {
    std::array<void*, 64> runs{};
    for (void* block = this->first; block;) {
      void* const next = nextof(block);
      nextof(block) = nullptr;
      void* run = block;
      std::size_t i = 0;
      for (; runs[i]; ++i) {
        run = merge(runs[i], run);
        runs[i] = nullptr;
      }
      runs[i] = run;
      block = next;
    }
    void* all = nullptr;
    for (void* run : runs) all = merge(run, all);
    this->first = all;
  }
};

constexpr std::size_t min_class = 8;

std::size_t class_index(std::size_t rounded) {
  return static_cast<std::size_t>(std::countr_zero(rounded) - std::countr_zero(min_class));
}

void check_options(const boost_pool_options& o, const std::pmr::memory_resource* upstream) {
  const auto reject = [](const std::string& what) {
    throw std::invalid_argument("pmrkit::boost_pool_resource: " + what);
  };
  using limits = boost_pool_options;
  if (upstream == nullptr) reject("the upstream resource must not be null");
  if (!std::has_single_bit(o.max_pooled) || o.max_pooled < limits::smallest_max_pooled ||
      o.max_pooled > limits::largest_max_pooled)
    reject("max_pooled is " + std::to_string(o.max_pooled) + "; allowed: a power of two from " +
           std::to_string(limits::smallest_max_pooled) + " to " +
           std::to_string(limits::largest_max_pooled));
  for (const auto& [name, value] :
       {std::pair{"chunk_size", o.chunk_size}, std::pair{"max_chunk_size", o.max_chunk_size}})
    if (value < limits::smallest_chunk || value > limits::largest_chunk)
      reject(std::string(name) + " is " + std::to_string(value) + "; allowed: " +
             std::to_string(limits::smallest_chunk) + " to " +
             std::to_string(limits::largest_chunk));
  if (o.max_chunk_size < o.chunk_size)
    reject("max_chunk_size " + std::to_string(o.max_chunk_size) +
           " is below chunk_size " + std::to_string(o.chunk_size) + "; allowed: at least it");
}

}  // namespace

struct boost_pool_resource::pools {
  std::vector<std::unique_ptr<trimmable_pool>> by_class;
  detail::oversize_blocks oversize;
};

boost_pool_resource::boost_pool_resource(boost_pool_options options,
                                         std::pmr::memory_resource* upstream)
    : pools_((check_options(options, upstream), std::make_unique<pools>())),
      upstream_(upstream),
      max_pooled_(options.max_pooled) {
  for (std::size_t size = min_class; size <= max_pooled_; size *= 2) {
    const std::size_t first = std::max<std::size_t>(1, options.chunk_size / size);
    const std::size_t most = std::max(first, options.max_chunk_size / size);
    pools_->by_class.push_back(
        std::make_unique<trimmable_pool>(size, first, most));
  }
}

// Each boost::pool purges its chunks as it is destroyed; oversize blocks are ours to return.
boost_pool_resource::~boost_pool_resource() { pools_->oversize.release_all(upstream_); }

void boost_pool_resource::trim() {
  for (auto& pool : pools_->by_class) pool->trim();
}

// The class a request is pooled in, or 0 when it goes straight to upstream.
static std::size_t pooled_class(std::size_t bytes, std::size_t alignment, std::size_t max_pooled) {
  if (bytes > max_pooled || alignment > chunk_alignment) return 0;
  const std::size_t rounded = std::bit_ceil(std::max({bytes, alignment, min_class}));
  return rounded > max_pooled ? 0 : rounded;
}

void* boost_pool_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  const std::size_t rounded = pooled_class(bytes, alignment, max_pooled_);
  if (rounded == 0) return pools_->oversize.allocate(upstream_, bytes, alignment);
  const growing_scope scope(upstream_);
  void* p = pools_->by_class[class_index(rounded)]->malloc();
  if (!p) throw std::bad_alloc();
  return p;
}

void boost_pool_resource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
  const std::size_t rounded = pooled_class(bytes, alignment, max_pooled_);
  if (rounded == 0) return pools_->oversize.deallocate(upstream_, p);
  pools_->by_class[class_index(rounded)]->free(p);
}

}  // namespace pmrkit
