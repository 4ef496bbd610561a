// basic_size_class_resource: the public face of size_class_engine (the registry's strategies
// "size_class" and "size_class_unsync" are in src/strategies/size_class.cpp).
#include "pmrkit/size_class_resource.hpp"

#include "size_class_engine.hpp"

namespace pmrkit {

template <class Policy>
basic_size_class_resource<Policy>::basic_size_class_resource(size_class_options options,
                                                             std::pmr::memory_resource* upstream)
    : engine_(std::make_unique<detail::size_class_engine<Policy>>(options, upstream, this)) {}

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
  return detail::size_class_engine<Policy>::allocate(this, engine_, bytes, alignment);
}

template <class Policy>
void basic_size_class_resource<Policy>::do_deallocate(void* p, std::size_t bytes,
                                                      std::size_t alignment) {
  detail::size_class_engine<Policy>::deallocate(this, engine_, p, bytes, alignment);
}

template class basic_size_class_resource<sync_policy>;
template class basic_size_class_resource<unsync_policy>;

}  // namespace pmrkit
