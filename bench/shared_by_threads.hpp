// One object shared by the threads of a multi-threaded row (Google Benchmark's Threads(n)): the
// subject of AllocMixedShared, the resource or pool of the threaded container rows. Thread 0
// makes it, every thread waits for it, and the last thread out hands it to a finishing call.
// With one thread it is destroyed there; with more it is kept until the next run of the same
// row family starts, when Google Benchmark has joined every thread that used it: libstdc++'s
// synchronized_pool_resource must not be destroyed while a thread that used it is still
// exiting (its thread-specific pools' destructor then runs against the dying resource: a crash
// in about 1 run in 25).
// Use one instance per row family and pass (a function-local static): the runs of one family
// never overlap, and a pass of one thread (the counting pass) must not meet the threads of the
// timed pass.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

namespace pmrkit::bench {

template <class T>
class shared_by_threads {
 public:
  // Thread `me` of the run joins: thread 0 makes the object with make() (a unique_ptr<T>),
  // after destroying what an earlier run of more threads left; every thread gets the object.
  template <class Make>
  T& join(int me, Make&& make) {
    if (me == 0) {
      retired_.reset();
      owner_ = make();
      object_.store(owner_.get(), std::memory_order_release);
    }
    T* object = nullptr;
    while (!(object = object_.load(std::memory_order_acquire))) std::this_thread::yield();
    return *object;
  }

  // Thread `me` of `threads` is done with the object. The last one calls finish(object)
  // (which may report to thread 0's pass), and thread 0 returns only after that, so that the
  // pass it reports to is still there.
  template <class Finish>
  void leave(int me, int threads, Finish&& finish) {
    if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads) {
      finish(*owner_);
      if (threads == 1)
        owner_.reset();  // no other thread used it
      else
        retired_ = std::move(owner_);
      finished_.store(0, std::memory_order_relaxed);
      object_.store(nullptr, std::memory_order_release);
    }
    if (me == 0)
      while (object_.load(std::memory_order_acquire)) std::this_thread::yield();
  }

 private:
  std::atomic<T*> object_{nullptr};
  std::unique_ptr<T> owner_;
  std::unique_ptr<T> retired_;  // the last run's, when it had more than one thread
  std::atomic<int> finished_{0};
};

// The thread counts of the threaded rows beyond one: doubling up to the hardware threads, so a
// 16-core machine draws a scaling curve, and 2 at least, so a 2-core one still shows whether a
// strategy's threads fight over shared state (more threads than cores would measure the
// scheduler).
inline std::vector<int> shared_thread_counts() {
  const int cores = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<int> counts;
  for (int threads = 2; threads <= cores; threads *= 2) counts.push_back(threads);
  return counts;
}

}  // namespace pmrkit::bench
