// basic_size_class_resource: the public face of size_class_engine, and the registry's
// factories for "size_class" and "size_class_unsync".
#include "pmrkit/size_class_resource.hpp"

#include <limits>

#include "factories.hpp"
#include "size_class_engine.hpp"

namespace pmrkit {

template <class Policy>
basic_size_class_resource<Policy>::basic_size_class_resource(size_class_options options,
                                                             std::pmr::memory_resource* upstream)
    : engine_(std::make_unique<detail::size_class_engine<Policy>>(options, upstream)) {}

template <class Policy>
basic_size_class_resource<Policy>::~basic_size_class_resource() = default;

template <class Policy>
void basic_size_class_resource<Policy>::release() {
  engine_->release();
}

template <class Policy>
void basic_size_class_resource<Policy>::trim() noexcept {
  engine_->trim();
}

template <class Policy>
size_class_stats basic_size_class_resource<Policy>::stats() const {
  return engine_->stats();
}

template <class Policy>
const size_class_options& basic_size_class_resource<Policy>::options() const noexcept {
  return engine_->options();
}

template <class Policy>
std::pmr::memory_resource* basic_size_class_resource<Policy>::upstream_resource() const noexcept {
  return engine_->upstream();
}

template <class Policy>
void* basic_size_class_resource<Policy>::do_allocate(std::size_t bytes, std::size_t alignment) {
  return engine_->allocate(bytes, alignment);
}

template <class Policy>
void basic_size_class_resource<Policy>::do_deallocate(void* p, std::size_t bytes,
                                                      std::size_t alignment) {
  engine_->deallocate(p, bytes, alignment);
}

template class basic_size_class_resource<sync_policy>;
template class basic_size_class_resource<unsync_policy>;

namespace detail {
namespace {

size_class_options read_size_class_options(option_reader& options) {
  size_class_options o;
  o.max_pooled = options.power_of_two("max_pooled", o.max_pooled, 8, std::size_t{1} << 20);
  o.chunk_size = options.power_of_two("chunk_size", o.chunk_size, 4096, std::size_t{256} << 20);
  o.max_retained = options.size("max_retained", o.max_retained, 0,
                                std::numeric_limits<std::size_t>::max());
  o.thread_cache = options.size("thread_cache", o.thread_cache, 0, std::size_t{1} << 30);
  return o;
}

}  // namespace

resource_ptr make_size_class(option_reader& options, std::pmr::memory_resource* upstream) {
  return std::make_unique<size_class_resource>(read_size_class_options(options), upstream);
}

resource_ptr make_size_class_unsync(option_reader& options, std::pmr::memory_resource* upstream) {
  return std::make_unique<size_class_unsync_resource>(read_size_class_options(options), upstream);
}

}  // namespace detail
}  // namespace pmrkit
