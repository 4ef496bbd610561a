#include "pmrkit/recording_resource.hpp"

#include <algorithm>
#include <stdexcept>

#include "thread_cache_directory.hpp"
#include "trace_encoding.hpp"

namespace pmrkit {
namespace detail {

namespace format = trace_format;

// One thread's events since its last chunk went to the sink.
struct recording_buffer {
  explicit recording_buffer(recording_resource& owner)
      : thread(owner.next_thread_.fetch_add(1, std::memory_order_relaxed)),
        capacity(owner.options_.buffer_bytes),
        bytes(new unsigned char[capacity]) {}

  bool has_room() const noexcept { return capacity - used >= format::max_event_bytes; }
  void clear() noexcept {
    used = 0;
    events = 0;
    state = {};
  }

  std::uint32_t thread;
  std::size_t capacity;
  std::unique_ptr<unsigned char[]> bytes;
  std::size_t used = 0;
  std::uint64_t events = 0;
  format::chunk_state state;
};

}  // namespace detail

namespace {
namespace format = detail::trace_format;

void write_bytes(trace_sink& sink, const unsigned char* begin, const unsigned char* end) {
  sink.write({reinterpret_cast<const std::byte*>(begin), static_cast<std::size_t>(end - begin)});
}
}  // namespace

recording_resource::recording_resource(std::pmr::memory_resource* wrapped, trace_sink& sink)
    : recording_resource(wrapped, sink, options{}) {}

recording_resource::recording_resource(std::pmr::memory_resource* wrapped, trace_sink& sink,
                                       options opts)
    : wrapped_(wrapped),
      sink_(sink),
      options_(opts),
      start_(std::chrono::steady_clock::now()),
      buffers_(
          std::make_unique<detail::thread_caches<recording_resource, detail::recording_buffer>>()) {
  if (options_.buffer_bytes < 256)
    throw std::invalid_argument("recording_resource: buffer_bytes must be at least 256, got " +
                                std::to_string(options_.buffer_bytes));
  unsigned char header[format::header_bytes + format::max_varint_bytes];
  write_bytes(sink_, header, format::put_header(header));
}

namespace {

// The thread numbers this thread had with the recording_resources whose buffers its exit hook
// gave back: the C++ runtime destroys a thread_local container made before the thread's first
// recorded call after that hook, and its frees belong to this thread still. (One number shared
// by every such late event would span every thread's life and make threads that ran one after
// another look concurrent to the replay.) A resource is named by its address and its start
// time, so that a later resource at the same address is not taken for it. A few slots: a thread
// rarely records through more resources than that; the rest share the resource's late number.
struct late_thread_number {
  const void* resource = nullptr;
  std::chrono::steady_clock::rep started = 0;
  std::uint32_t thread = 0;
};
constexpr std::size_t late_thread_slots = 4;
thread_local late_thread_number late_thread_numbers[late_thread_slots];
thread_local std::size_t next_late_slot = 0;

const late_thread_number* late_number_of(const void* resource,
                                         std::chrono::steady_clock::rep started) noexcept {
  for (const late_thread_number& n : late_thread_numbers)
    if (n.resource == resource && n.started == started) return &n;
  return nullptr;
}

}  // namespace

recording_resource::~recording_resource() {
  try {
    finish();
  } catch (...) {  // the caller who wanted the error calls finish() first
  }
}

std::uint64_t recording_resource::now_ns() const noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - start_)
                                        .count());
}

detail::recording_buffer* recording_resource::this_thread_buffer() noexcept {
  return buffers_->find_or_make(this, *this);
}

void* recording_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = wrapped_->allocate(bytes, alignment);
  // The clock is read after the block is ours: whoever freed this address before us read it
  // before freeing, so the free sorts first (the reader pairs frees with allocations by time).
  if (recording_.load(std::memory_order_relaxed)) record(true, now_ns(), p, bytes, alignment);
  return p;
}

void recording_resource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
  if (recording_.load(std::memory_order_relaxed)) record(false, now_ns(), p, bytes, alignment);
  wrapped_->deallocate(p, bytes, alignment);
}

void recording_resource::record(bool allocation, std::uint64_t time, const void* p,
                                std::size_t bytes, std::size_t alignment) noexcept {
  const auto kind = allocation ? format::event_kind::allocate : format::event_kind::deallocate;
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (detail::recording_buffer* b = this_thread_buffer()) {
    b->used = static_cast<std::size_t>(
        format::put_event(b->bytes.get() + b->used, b->state, kind, time, address, bytes,
                          alignment) -
        b->bytes.get());
    ++b->events;
    if (!b->has_room()) send(*b);
    return;
  }
  // No buffer on this thread: it is past its exit hook (a thread_local container freed as the
  // thread ends) or there was no memory for one. The event goes to the sink at once, a chunk of
  // its own, under the thread's own number where its exit hook left it, else under one number
  // kept for such events, so that no call goes unrecorded.
  unsigned char event[format::max_event_bytes];
  format::chunk_state fresh;
  const unsigned char* end = format::put_event(event, fresh, kind, time, address, bytes, alignment);
  const late_thread_number* own = late_number_of(this, start_.time_since_epoch().count());
  const std::lock_guard lock(sink_mutex_);
  if (own) {
    write_chunk_locked(own->thread, 1, event, end);
    return;
  }
  if (!has_unbuffered_thread_) {
    unbuffered_thread_ = next_thread_.fetch_add(1, std::memory_order_relaxed);
    has_unbuffered_thread_ = true;
  }
  write_chunk_locked(unbuffered_thread_, 1, event, end);
}

void recording_resource::send(detail::recording_buffer& buffer) noexcept {
  const std::lock_guard lock(sink_mutex_);
  send_locked(buffer);
}

void recording_resource::send_locked(detail::recording_buffer& buffer) noexcept {
  if (buffer.events == 0) return;
  write_chunk_locked(buffer.thread, buffer.events, buffer.bytes.get(),
                     buffer.bytes.get() + buffer.used);
  buffer.clear();
}

void recording_resource::write_chunk_locked(std::uint32_t thread, std::uint64_t events,
                                            const unsigned char* begin,
                                            const unsigned char* end) noexcept {
  if (sink_error_ || finished_) return;
  try {
    unsigned char header[format::max_chunk_header_bytes];
    write_bytes(sink_, header,
                format::put_chunk_header(header, thread, events,
                                         static_cast<std::uint64_t>(end - begin)));
    write_bytes(sink_, begin, end);
    events_written_.fetch_add(events, std::memory_order_relaxed);
  } catch (...) {
    sink_error_ = std::current_exception();
    recording_.store(false, std::memory_order_relaxed);
  }
}

void recording_resource::absorb_exiting_cache(detail::recording_buffer& buffer) noexcept {
  // On the exiting thread, whose later events keep its number (record).
  late_thread_numbers[next_late_slot++ % late_thread_slots] = {
      this, start_.time_since_epoch().count(), buffer.thread};
  send(buffer);
}

void recording_resource::finish() {
  std::unique_lock lock(sink_mutex_);
  if (finished_) return;
  recording_.store(false, std::memory_order_relaxed);
  lock.unlock();  // detach_all takes each cache's lock, then ours through send()
  buffers_->detach_all([this](detail::recording_buffer& buffer) noexcept { send(buffer); });
  lock.lock();
  if (!sink_error_) {
    try {
      unsigned char end[1 + format::max_varint_bytes];
      write_bytes(sink_, end,
                  format::put_end(end, events_written_.load(std::memory_order_relaxed)));
    } catch (...) {
      sink_error_ = std::current_exception();
    }
  }
  finished_ = true;
  if (sink_error_) std::rethrow_exception(sink_error_);
}

}  // namespace pmrkit
