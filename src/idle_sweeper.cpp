// The sweeper thread of idle_sweeper.hpp.
#include "idle_sweeper.hpp"

namespace pmrkit::detail {

bool idle_sweeper::start(std::chrono::nanoseconds period, sweep_function sweep,
                         void* context) noexcept {
  const std::lock_guard lock(mutex_);
  if (started_) return !stopping_;
  period_ = period;
  sweep_ = sweep;
  context_ = context;
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    // No thread to be had: std::system_error (a limit on threads) or std::bad_alloc.
    return false;
  }
  started_ = true;
  return true;
}

void idle_sweeper::wake() noexcept {
  {
    const std::lock_guard lock(mutex_);
    woken_ = true;
  }
  wake_.notify_one();
}

std::unique_lock<std::mutex> idle_sweeper::pause() noexcept { return std::unique_lock(mutex_); }

void idle_sweeper::stop() noexcept {
  {
    const std::lock_guard lock(mutex_);
    if (!started_ || stopping_) return;
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void idle_sweeper::run() noexcept {
  std::unique_lock lock(mutex_);
  bool more = true;
  while (!stopping_) {
    if (more) {
      // Every period while there is something to sweep; a wake() in between does not
      // shorten it (sweeps are no more frequent than the owner's idle time).
      wake_.wait_for(lock, period_, [&] { return stopping_; });
    } else {
      wake_.wait(lock, [&] { return stopping_ || woken_; });
    }
    if (stopping_) break;
    woken_ = false;
    // Under the lock, so that pause() waits for a sweep in progress.
    more = sweep_(context_);
  }
}

}  // namespace pmrkit::detail
