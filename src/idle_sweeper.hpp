// Internal: a thread of a resource's own that sweeps for idle thread caches.
//
// Sweeps for idle caches otherwise ride on the slow paths of the threads that use a resource,
// so when every one of them parks, the caches of those that parked last are never swept
// (docs/size_class.md, "Many threads"). This thread closes that gap: once started, it calls
// sweep(context) every period, and sleeps without a timeout once sweep returns false (nothing
// left to sweep) until wake() is called. The owner starts it (lazily: only resources that
// threads share need one), wakes it when there is something to sweep again, holds it off with
// pause() while it tears its state down, and stops it before it is destroyed.
//
// Thread safety: every member function may be called from any thread. sweep runs on the
// sweeper's thread, never while pause()'s lock is held. Ownership: the owner owns the sweeper
// and must outlive its thread: stop() (or the destructor) joins it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace pmrkit::detail {

class idle_sweeper {
 public:
  using sweep_function = bool (*)(void* context) noexcept;

  idle_sweeper() = default;
  ~idle_sweeper() { stop(); }
  idle_sweeper(const idle_sweeper&) = delete;
  idle_sweeper& operator=(const idle_sweeper&) = delete;

  // Starts the thread unless it runs already (or was stopped). False if the system refused a
  // thread: the owner then goes on without one.
  bool start(std::chrono::nanoseconds period, sweep_function sweep, void* context) noexcept;
  // There is something to sweep again: a sleeping sweeper resumes its period.
  void wake() noexcept;
  // Holds off sweeps while the returned lock lives; waits for one in progress to end.
  std::unique_lock<std::mutex> pause() noexcept;
  // Ends and joins the thread; it does not start again.
  void stop() noexcept;

 private:
  void run() noexcept;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
  std::chrono::nanoseconds period_{};
  sweep_function sweep_ = nullptr;
  void* context_ = nullptr;
  bool started_ = false;   // guarded by mutex_
  bool stopping_ = false;  // guarded by mutex_
  bool woken_ = false;     // guarded by mutex_: wake() came while the sweeper was not asleep
};

}  // namespace pmrkit::detail
