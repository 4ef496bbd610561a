// A program for record_preload_test to record: allocations of sizes nothing else in a process
// uses, so the test can count them in the trace.
//   record_probe            the allocations below, a forked child's, then exits
//   record_probe exec       the same, then execs itself as `record_probe after-exec`
//   record_probe execveat   the same, through execveat
//   record_probe after-exec allocates, and exits 0 only if LD_PRELOAD still names the recorder
//   record_probe killed     many allocations, then SIGKILL: the recorder's exit code never runs
//   record_probe raw-fork   a child made by _Fork (no fork handlers run) allocates many blocks of
//                           its own size while the parent allocates; the parent waits for it
//   record_probe raw-fork-threads  four threads allocate while the main thread makes 20 _Fork
//                           children, each allocating a buffer's worth: a child that copied the
//                           recorder's file lock held by a thread must still exit (exits 10 if
//                           one is still running after 20 s)
//   record_probe terminated many allocations, then SIGTERM to its parent (pmrkit-record, as
//                           `kill PID` or a service manager would send it), then more until the
//                           forwarded SIGTERM ends it (exits 9 after 30 s without it)
//   record_probe late-frees  threads, one after another, that each allocate and call strerror,
//                           whose buffer the C library frees after the thread's key destructors
//   record_probe new-handler  an impossible operator new: exits 0 only if the installed
//                           new_handler was called before std::bad_alloc
//   record_probe closes-descriptors FILE N
//                           closes descriptors 3..N-1 (as daemons do), opens FILE, writes a line
//                           between many allocations, and exits 0 only if FILE holds just that
//                           line
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "record_probe_sizes.hpp"

namespace sizes = record_probe_sizes;

// Keeps the compiler from eliding an allocation and its free (which it may).
template <class T>
T* used(T* p) {
  asm volatile("" : : "r"(p) : "memory");
  return p;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "after-exec") {
    for (int i = 0; i < sizes::count; ++i) std::free(used(std::malloc(sizes::after_exec)));
    const char* preload = std::getenv("LD_PRELOAD");
    return preload && std::strstr(preload, "pmrkit_record_preload") ? 0 : 3;
  }

  if (mode == "late-frees") {
    for (int i = 0; i < sizes::late_threads; ++i) {
      pthread_t thread;
      const auto body = [](void*) -> void* {
        std::free(used(std::malloc(sizes::late_thread)));
        used(strerror(12345));  // "Unknown error 12345", in a buffer freed at thread exit
        return nullptr;
      };
      if (pthread_create(&thread, nullptr, body, nullptr) != 0) return 12;
      pthread_join(thread, nullptr);
    }
    return 0;
  }

  if (mode == "new-handler") {
    static int calls = 0;
    std::set_new_handler([] {
      ++calls;
      std::set_new_handler(nullptr);  // the next failure throws
    });
    try {
      used(::operator new(std::size_t{1} << 62));
      return 11;
    } catch (const std::bad_alloc&) {
    }
    return calls == 1 ? 0 : 10;
  }

  if (mode == "closes-descriptors" && argc == 4) {
    for (int fd = 3; fd < std::atoi(argv[3]); ++fd) ::close(fd);
    const auto churn = [] {
      for (int i = 0; i < sizes::killed_count; ++i)
        std::free(used(std::malloc(sizes::around_own_file)));
    };
    churn();  // several buffers' worth: the recorder writes while the file is open
    const int own = ::open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (own < 0) return 8;
    static const char line[] = "user data\n";
    if (::write(own, line, sizeof line - 1) != static_cast<ssize_t>(sizeof line - 1)) return 9;
    churn();
    char back[64];
    const ssize_t n = ::pread(own, back, sizeof back, 0);
    ::close(own);
    return n == static_cast<ssize_t>(sizeof line - 1) && std::memcmp(back, line, n) == 0 ? 0 : 7;
  }

  if (mode == "raw-fork") {
    const pid_t forked = _Fork();
    if (forked < 0) return 8;
    const std::size_t size = forked == 0 ? sizes::forked_child : sizes::malloc_size;
    for (int i = 0; i < sizes::killed_count; ++i) std::free(used(std::malloc(size)));
    if (forked == 0) _exit(0);
    int status = 0;
    waitpid(forked, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 5;
  }

  if (mode == "raw-fork-threads") {
    std::atomic<bool> done{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < 4; ++t)
      workers.emplace_back([&] {
        while (!done.load()) std::free(used(std::malloc(sizes::thread_size)));
      });
    int result = 0;
    for (int i = 0; i < 20 && result == 0; ++i) {
      const pid_t forked = _Fork();
      if (forked < 0) {
        result = 8;
        break;
      }
      if (forked == 0) {
        for (int k = 0; k < sizes::killed_count; ++k)
          std::free(used(std::malloc(sizes::forked_child)));
        _exit(0);
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      int status = 0;
      while (waitpid(forked, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          kill(forked, SIGKILL);
          waitpid(forked, &status, 0);
          result = 10;
          break;
        }
        usleep(1000);
      }
      if (result == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) result = 5;
    }
    done = true;
    for (auto& w : workers) w.join();
    return result;
  }

  if (mode == "terminated") {
    for (int i = 0; i < sizes::killed_count; ++i) std::free(used(std::malloc(sizes::malloc_size)));
    kill(getppid(), SIGTERM);
    // Until the forwarded SIGTERM ends it; a recorder that died instead never sends it, and
    // the probe must not spin on as an orphan.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < give_up)
      std::free(used(std::malloc(sizes::new_size)));
    return 9;
  }

  if (mode == "killed") {
    for (int i = 0; i < sizes::killed_count; ++i) std::free(used(std::malloc(sizes::malloc_size)));
    kill(getpid(), SIGKILL);
  }

  std::vector<void*> blocks;
  for (int i = 0; i < sizes::count; ++i) blocks.push_back(std::malloc(sizes::malloc_size));
  for (void* p : blocks) std::free(p);
  blocks.clear();
  for (int i = 0; i < sizes::count; ++i) delete[] used(new char[sizes::new_size]);
  std::free(used(std::aligned_alloc(64, sizes::aligned_size)));
  void* p = nullptr;
  if (posix_memalign(&p, 128, sizes::posix_aligned_size) != 0) return 4;
  std::free(p);
  ::operator delete(used(::operator new(sizes::aligned_new_size, std::align_val_t{256})),
                    std::align_val_t{256});
  void* grown = used(std::calloc(1, sizes::calloc_size));
  grown = used(std::realloc(grown, sizes::realloc_size));
  std::free(grown);

  // Allocated on two threads, freed on this one.
  std::vector<void*> made(2 * sizes::count);
  std::thread a([&] {
    for (int i = 0; i < sizes::count; ++i) made[i] = std::malloc(sizes::thread_size);
  });
  std::thread b([&] {
    for (int i = 0; i < sizes::count; ++i) made[sizes::count + i] = std::malloc(sizes::thread_size);
  });
  a.join();
  b.join();
  for (void* q : made) std::free(q);

  const pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < sizes::count; ++i) std::free(used(std::malloc(sizes::forked_child)));
    std::exit(0);  // runs the recorder's exit code in the child too: it must write nothing
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 5;

  if (mode == "exec") {
    execl(argv[0], argv[0], "after-exec", static_cast<char*>(nullptr));
    return 6;
  }
  if (mode == "execveat") {
    char after[] = "after-exec";
    char* const args[] = {argv[0], after, nullptr};
    execveat(AT_FDCWD, argv[0], args, environ, 0);
    return 6;
  }
  return 0;
}
