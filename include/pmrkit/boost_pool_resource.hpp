// pmrkit/boost_pool_resource.hpp — Boost.Pool behind std::pmr::memory_resource.
//
// One boost::pool per power-of-two size class (8 bytes up to max_pooled); each pool's chunks
// come from `upstream`, and blocks larger than the largest class (or aligned more strictly
// than 64 bytes) go straight to upstream. Frees use boost::pool::free, never the O(n)
// ordered_free. Single-threaded: one thread at a time may use an instance. Upstream is
// borrowed and must outlive the resource; destroying the resource returns every chunk to
// upstream, whatever is still allocated. Boost itself stays out of this header.
#pragma once

#include <cstddef>
#include <memory>
#include <memory_resource>

namespace pmrkit {

struct boost_pool_options {
  std::size_t max_pooled = 64 * 1024;  // largest pooled block; a power of two, 8 B to 1 MiB
  std::size_t chunk_size = 64 * 1024;  // bytes in a pool's first chunk; later chunks double...
  std::size_t max_chunk_size = 1024 * 1024;  // ...up to this many bytes, at least chunk_size

  // The ranges allowed (the constructor throws std::invalid_argument outside them).
  static constexpr std::size_t smallest_max_pooled = 8;
  static constexpr std::size_t largest_max_pooled = std::size_t{1} << 20;
  static constexpr std::size_t smallest_chunk = 64;
  static constexpr std::size_t largest_chunk = std::size_t{1} << 30;
};

class boost_pool_resource final : public std::pmr::memory_resource {
 public:
  // Throws std::invalid_argument for a null upstream or an option outside its range (the
  // message says what is allowed).
  explicit boost_pool_resource(boost_pool_options options = {},
                               std::pmr::memory_resource* upstream =
                                   std::pmr::get_default_resource());
  ~boost_pool_resource() override;
  boost_pool_resource(const boost_pool_resource&) = delete;
  boost_pool_resource& operator=(const boost_pool_resource&) = delete;

  // Returns every chunk whose blocks are all free to upstream. It sorts each class's free
  // list first (boost::pool::release_memory needs it ordered), so it costs O(n log n) in the
  // free blocks; the next allocation of a class starts again with a small chunk.
  void trim();

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  struct pools;
  std::unique_ptr<pools> pools_;
  std::pmr::memory_resource* upstream_;
  std::size_t max_pooled_;
};

}  // namespace pmrkit
