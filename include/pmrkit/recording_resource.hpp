// pmrkit/recording_resource.hpp — record every allocation a program makes through a resource,
// to replay it later under other strategies (docs/replay.md).
//
// recording_resource forwards every call to the resource it wraps and records it: the
// operation, size, alignment, the block's address (which, with the order of events, is the
// object's identity: a new allocation at a freed address is a new object), the thread and the
// time. Each thread appends to a buffer of its own, without locks; a full buffer goes to the
// sink as one chunk, so memory stays bounded however long the program runs. A call on a thread
// that has no buffer (one past its exit, freeing a thread_local container) goes to the sink at
// once, under that thread's own number (or, for a thread that never had one, or one that used
// more than four recording_resources, under one number kept for such calls), so threads that
// ran in turn stay apart. The sink receives the
// uncompressed trace stream; pmrkit::trace (trace/) has a sink that writes a zstd-compressed
// file, and the reader.
//
// Thread-safety: allocate and deallocate may be called from any threads at once. The sink is
// called under the resource's lock, never concurrently, from whichever thread filled a buffer
// (or is exiting, or calls finish()). finish() and the destructor must not overlap other calls.
// Ownership: borrows the wrapped resource and the sink; both must outlive it.
// Errors: a sink that throws stops the recording (the calls keep being forwarded); finish()
// rethrows what the sink threw.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <span>

namespace pmrkit {

namespace detail {
struct recording_buffer;
template <class Owner, class Cache>
class thread_caches;
}  // namespace detail

// Where a recording goes: the trace stream's bytes, in order, a piece at a time.
class trace_sink {
 public:
  virtual ~trace_sink() = default;
  virtual void write(std::span<const std::byte> bytes) = 0;
};

class recording_resource final : public std::pmr::memory_resource {
 public:
  struct options {
    // Each thread's buffer; the sink is called once per this many bytes of events (about
    // 6 bytes each). At least 256.
    std::size_t buffer_bytes = 64 * 1024;
  };

  // Writes the trace header to the sink at once (which may throw).
  recording_resource(std::pmr::memory_resource* wrapped, trace_sink& sink);
  recording_resource(std::pmr::memory_resource* wrapped, trace_sink& sink, options opts);
  // Calls finish(), ignoring a sink error.
  ~recording_resource() override;
  recording_resource(const recording_resource&) = delete;
  recording_resource& operator=(const recording_resource&) = delete;

  // Sends every thread's buffered events and the end record to the sink and stops recording;
  // later calls are only forwarded. Rethrows the first error the sink threw, if any. Only the
  // first call does anything.
  void finish();

  // Events sent to the sink so far (buffered ones are not counted until sent).
  std::uint64_t events_written() const noexcept {
    return events_written_.load(std::memory_order_relaxed);
  }
  std::pmr::memory_resource* wrapped() const noexcept { return wrapped_; }

 private:
  template <class Owner, class Cache>
  friend class detail::thread_caches;
  // Called by the per-thread cache machinery when a thread exits.
  void absorb_exiting_cache(detail::recording_buffer& buffer) noexcept;

  friend struct detail::recording_buffer;
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  detail::recording_buffer* this_thread_buffer() noexcept;
  std::uint64_t now_ns() const noexcept;
  void record(bool allocation, std::uint64_t time, const void* p, std::size_t bytes,
              std::size_t alignment) noexcept;
  void send(detail::recording_buffer& buffer) noexcept;  // takes sink_mutex_
  void send_locked(detail::recording_buffer& buffer) noexcept;
  void write_chunk_locked(std::uint32_t thread, std::uint64_t events, const unsigned char* begin,
                          const unsigned char* end) noexcept;

  std::pmr::memory_resource* wrapped_;
  trace_sink& sink_;
  options options_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<bool> recording_{true};
  std::atomic<std::uint32_t> next_thread_{0};
  std::atomic<std::uint64_t> events_written_{0};
  std::mutex sink_mutex_;
  std::exception_ptr sink_error_;  // guarded by sink_mutex_
  bool finished_ = false;          // guarded by sink_mutex_
  // The thread number of events from threads without a buffer (record), made on first use.
  std::uint32_t unbuffered_thread_ = 0;   // guarded by sink_mutex_
  bool has_unbuffered_thread_ = false;    // guarded by sink_mutex_
  std::unique_ptr<detail::thread_caches<recording_resource, detail::recording_buffer>> buffers_;
};

}  // namespace pmrkit
