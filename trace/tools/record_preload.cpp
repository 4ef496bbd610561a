// libpmrkit_record_preload.so: the recorder pmrkit-record preloads (LD_PRELOAD) into the
// program it runs. It interposes every allocation function (malloc, calloc, realloc,
// reallocarray, free, posix_memalign, aligned_alloc, memalign, valloc, pvalloc, and every
// operator new and delete), forwards each call to the next allocator (dlsym RTLD_NEXT) and
// records it in pmrkit's trace format (src/trace_encoding.hpp, docs/replay.md).
//
// It never allocates through the functions it intercepts: each thread's buffer is mmap'd, the
// file is written with write(2), dlsym's own early calloc is served from a static arena, and a
// per-thread guard forwards, unrecorded, anything the recorder's own calls allocate.
//
// Which process is recorded (docs/replay.md, "fork and exec"): the one whose pid is
// PMRKIT_RECORD_PID, and only its first program image. On first use it overwrites that
// variable's digits with zeros in place (no allocation), so a program it execs, and every
// descendant, finds the library preloaded (LD_PRELOAD is inherited) but records nothing. A
// forked child stops recording in the child (pthread_atfork) and leaves the file to its parent;
// one made without fork's handlers (_Fork, clone) stops at its first write, which checks the pid.
// An exec ends the recording first (end record written), since the new image cannot.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "bootstrap_arena.hpp"
#include "interpose_hooks.hpp"

#include "trace_encoding.hpp"

namespace {

namespace format = pmrkit::detail::trace_format;
using format::event_kind;

// ---------------------------------------------------------------- the next allocator

struct next_allocator {
  void* (*malloc)(std::size_t);
  void (*free)(void*);
  void* (*calloc)(std::size_t, std::size_t);
  void* (*realloc)(void*, std::size_t);
  void* (*memalign)(std::size_t, std::size_t);
  void* (*aligned_alloc)(std::size_t, std::size_t);
  int (*posix_memalign)(void**, std::size_t, std::size_t);
  void* (*valloc)(std::size_t);
  void* (*pvalloc)(std::size_t);
  std::size_t (*malloc_usable_size)(void*);
  int (*execve)(const char*, char* const[], char* const[]);
  int (*execvpe)(const char*, char* const[], char* const[]);
  int (*fexecve)(int, char* const[], char* const[]);
  int (*execveat)(int, const char*, char* const[], char* const[], int);
};

// dlsym may allocate (calloc for its error buffer) before the real functions are known: those
// few requests come from this zeroed static arena and are never given back.
constinit pmrkit::interpose::bootstrap_arena bootstrap;
std::atomic<bool> resolving{false};

void* bootstrap_allocate(std::size_t bytes) noexcept { return bootstrap.allocate(bytes); }
bool from_bootstrap(const void* p) noexcept { return bootstrap.contains(p); }

template <class Fn>
void resolve(Fn& fn, const char* name) noexcept {
  fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

const next_allocator& next() noexcept {
  static std::atomic<const next_allocator*> ready{nullptr};
  if (const next_allocator* n = ready.load(std::memory_order_acquire)) return *n;
  static next_allocator resolved;
  resolving.store(true);
  resolve(resolved.malloc, "malloc");
  resolve(resolved.free, "free");
  resolve(resolved.calloc, "calloc");
  resolve(resolved.realloc, "realloc");
  resolve(resolved.memalign, "memalign");
  resolve(resolved.aligned_alloc, "aligned_alloc");
  resolve(resolved.posix_memalign, "posix_memalign");
  resolve(resolved.valloc, "valloc");
  resolve(resolved.pvalloc, "pvalloc");
  resolve(resolved.malloc_usable_size, "malloc_usable_size");
  resolve(resolved.execve, "execve");
  resolve(resolved.execvpe, "execvpe");
  resolve(resolved.fexecve, "fexecve");
  resolve(resolved.execveat, "execveat");
  resolving.store(false);
  ready.store(&resolved, std::memory_order_release);
  return resolved;
}

// ---------------------------------------------------------------- the recording

constexpr std::size_t buffer_bytes = 256 * 1024;
constexpr int max_threads = 1024;
constexpr std::size_t malloc_alignment = alignof(std::max_align_t);

// One recording thread's buffer. The owner appends events and publishes how far it got in
// `committed` (events << 32 | bytes); whoever writes the buffer out holds file_lock.
struct thread_slot {
  std::atomic<bool> taken{false};
  unsigned char* buffer = nullptr;  // mmap'd on first use, kept for the slot's next thread
  std::atomic<std::uint64_t> committed{0};
  // The owner's own:
  std::uint32_t thread = 0;
  std::size_t used = 0;
  std::uint32_t events = 0;
  format::chunk_state state;
};

enum class mode : int { unknown, starting, recording, forwarding };

thread_slot slots[max_threads];
std::atomic<mode> current_mode{mode::unknown};
int out_fd = -1;
// The stream file's identity: a program may close the descriptors it did not open (daemons
// do) and open a file of its own, which then gets our number. Before writing, the recorder
// checks the descriptor is still its file, and stops for good when it is not.
dev_t out_device = 0;
ino_t out_inode = 0;
bool stream_lost = false;  // guarded by file_lock
std::atomic_flag file_lock = ATOMIC_FLAG_INIT;
bool file_finished = false;  // guarded by file_lock
std::uint64_t events_written = 0;  // guarded by file_lock
std::atomic<std::uint64_t> events_dropped{0};
std::atomic<std::uint32_t> next_thread{0};
timespec start_time;
pid_t recorded_pid = 0;
pthread_key_t exit_key;

[[gnu::tls_model("initial-exec")]] thread_local thread_slot* my_slot = nullptr;
// The thread's number in the trace, plus one (0: none yet), kept after its slot goes back: the C
// library frees some of a thread's buffers (strerror's, dlerror's) after the key destructors
// have run, and those late frees belong to the same thread.
[[gnu::tls_model("initial-exec")]] thread_local std::uint32_t my_thread_plus_one = 0;
// Set when the thread's key destructor has run: a later event borrows a slot for itself alone.
[[gnu::tls_model("initial-exec")]] thread_local bool my_thread_exited = false;
// Set while the recorder itself runs: anything it allocates is forwarded, not recorded.
[[gnu::tls_model("initial-exec")]] thread_local bool inside_recorder = false;

struct recorder_guard {
  recorder_guard() noexcept { inside_recorder = true; }
  ~recorder_guard() { inside_recorder = false; }
  recorder_guard(const recorder_guard&) = delete;
  recorder_guard& operator=(const recorder_guard&) = delete;
};

// The signals a thread had before it took file_lock. Held with every signal blocked: a handler
// that calls exit() (common, though not async-signal-safe) would otherwise reach
// finish_recording, which takes the lock its own thread holds, and spin for ever.
[[gnu::tls_model("initial-exec")]] thread_local sigset_t signals_before_lock;

void lock_file() noexcept {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &signals_before_lock);
  while (file_lock.test_and_set(std::memory_order_acquire)) sched_yield();
}
void unlock_file() noexcept {
  file_lock.clear(std::memory_order_release);
  pthread_sigmask(SIG_SETMASK, &signals_before_lock, nullptr);
}

void write_all(const unsigned char* p, std::size_t n) noexcept {
  while (n > 0) {
    const ssize_t w = ::write(out_fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // disk full or closed: the reader will report the truncation
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void say(const char* text) noexcept {
  const ssize_t ignored = ::write(2, text, std::strlen(text));
  (void)ignored;
}

// Under file_lock (or before other threads record): whether out_fd is still the stream file.
bool stream_is_ours() noexcept {
  if (stream_lost || out_fd < 0) return false;
  struct stat now;
  if (::fstat(out_fd, &now) == 0 && now.st_dev == out_device && now.st_ino == out_inode)
    return true;
  stream_lost = true;
  say("pmrkit-record: the program closed the recorder's stream file (and may have reused its "
      "descriptor); the recording stops there\n");
  return false;
}

// Moves the stream file's descriptor near the top of the table, above the low numbers a
// program that closes what it did not open goes through, and notes its identity.
int settle_stream(int fd) noexcept {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur > 64) {
    const rlim_t room = limit.rlim_cur == RLIM_INFINITY ? rlim_t{1} << 20 : limit.rlim_cur;
    const int floor = static_cast<int>(std::min<rlim_t>(room - room / 4, 1 << 16));
    const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, floor);
    if (moved >= 0) {
      ::close(fd);
      fd = moved;
    }
  }
  struct stat identity;
  if (::fstat(fd, &identity) == 0) {
    out_device = identity.st_dev;
    out_inode = identity.st_ino;
  }
  return fd;
}

void stop_in_child() noexcept;

// Under file_lock.
void write_chunk_locked(thread_slot& slot, std::uint64_t packed) noexcept {
  const std::uint64_t events = packed >> 32;
  const std::size_t bytes = packed & 0xffffffffu;
  if (events == 0 || file_finished || !stream_is_ours()) return;
  unsigned char header[format::max_chunk_header_bytes];
  write_all(header, static_cast<std::size_t>(
                        format::put_chunk_header(header, slot.thread, events, bytes) - header));
  write_all(slot.buffer, bytes);
  events_written += events;
}

// On the owner's thread.
void flush_own(thread_slot& slot) noexcept {
  // A child made without fork()'s handlers (_Fork, clone, syscall(SYS_fork)) still thinks it
  // records: its chunks would land among its parent's, and file_lock may be a copy that a
  // parent thread held at the fork, which nobody in the child will release. So before the lock:
  // one getpid a chunk (256 KiB of events) finds such a child, which stops recording.
  if (::getpid() != recorded_pid) {
    stop_in_child();
    slot.committed.store(0, std::memory_order_relaxed);
    slot.used = 0;
    slot.events = 0;
    slot.state = {};
    return;
  }
  lock_file();
  write_chunk_locked(slot, slot.committed.load(std::memory_order_relaxed));
  slot.committed.store(0, std::memory_order_relaxed);
  unlock_file();
  slot.used = 0;
  slot.events = 0;
  slot.state = {};
}

void thread_exiting(void* p) noexcept {
  auto* slot = static_cast<thread_slot*>(p);
  const recorder_guard guard;
  flush_own(*slot);
  my_slot = nullptr;
  my_thread_exited = true;
  slot->taken.store(false, std::memory_order_release);
}

// A free slot for the calling thread, under its own thread number (a new one on its first
// event). A thread past its key destructor borrows it for one event: no destructor would give
// it back.
thread_slot* claim_slot() noexcept {
  const recorder_guard guard;
  for (thread_slot& slot : slots) {
    bool expected = false;
    if (slot.taken.load(std::memory_order_relaxed) ||
        !slot.taken.compare_exchange_strong(expected, true, std::memory_order_acquire))
      continue;
    if (!slot.buffer) {
      void* m =
          mmap(nullptr, buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) {
        slot.taken.store(false);
        return nullptr;
      }
      slot.buffer = static_cast<unsigned char*>(m);
    }
    if (my_thread_plus_one == 0)
      my_thread_plus_one = next_thread.fetch_add(1, std::memory_order_relaxed) + 1;
    slot.thread = my_thread_plus_one - 1;
    slot.used = 0;
    slot.events = 0;
    slot.state = {};
    slot.committed.store(0, std::memory_order_relaxed);
    if (my_thread_exited) return &slot;
    pthread_setspecific(exit_key, &slot);
    return my_slot = &slot;
  }
  return nullptr;
}

std::uint64_t now_ns() noexcept {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec - start_time.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(t.tv_nsec) - static_cast<std::uint64_t>(start_time.tv_nsec);
}

void stop_in_child() noexcept {
  current_mode.store(mode::forwarding);
  my_slot = nullptr;
  // The child's own descriptor (the parent keeps writing), unless the program reused it.
  if (out_fd >= 0 && stream_is_ours()) ::close(out_fd);
  out_fd = -1;
}

// Decides, once, whether this process records. Other threads calling meanwhile forward.
bool start_recording() noexcept {
  mode expected = mode::unknown;
  if (!current_mode.compare_exchange_strong(expected, mode::starting)) return false;
  const recorder_guard guard;
  next();
  mode decided = mode::forwarding;
  char* pid_text = std::getenv("PMRKIT_RECORD_PID");
  const char* path = std::getenv("PMRKIT_RECORD_STREAM");
  if (pid_text && path && std::strtol(pid_text, nullptr, 10) == static_cast<long>(getpid())) {
    for (char* c = pid_text; *c; ++c) *c = '0';  // the next image, and descendants, see pid 0
    const int opened = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    out_fd = opened < 0 ? opened : settle_stream(opened);
    if (out_fd < 0) {
      const int error = errno;
      say("pmrkit-record: cannot create the stream file ");
      say(path);
      say(": ");
      say(std::strerror(error));
      say("; not recording\n");
    } else if (pthread_key_create(&exit_key, thread_exiting) == 0 &&
               pthread_atfork(nullptr, nullptr, stop_in_child) == 0) {
      unsigned char header[format::header_bytes + format::max_varint_bytes];
      write_all(header, static_cast<std::size_t>(format::put_header(header) - header));
      clock_gettime(CLOCK_MONOTONIC, &start_time);
      recorded_pid = getpid();
      decided = mode::recording;
    }
  }
  current_mode.store(decided, std::memory_order_release);
  return decided == mode::recording;
}

bool recording() noexcept {
  const mode m = current_mode.load(std::memory_order_acquire);
  if (m == mode::recording) [[likely]]
    return !inside_recorder;
  if (m == mode::unknown && !inside_recorder) return start_recording();
  return false;
}

// `time` 0: now.
void record(event_kind kind, const void* address, std::size_t size, std::size_t alignment,
            std::uint64_t time = 0) noexcept {
  if (!recording()) return;
  thread_slot* slot = my_slot;
  if (!slot && !(slot = claim_slot())) {
    events_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (time == 0) time = now_ns();
  if (buffer_bytes - slot->used < format::max_event_bytes || slot->events == UINT32_MAX) {
    const recorder_guard guard;
    flush_own(*slot);
  }
  unsigned char* end =
      format::put_event(slot->buffer + slot->used, slot->state, kind, time,
                        reinterpret_cast<std::uintptr_t>(address), size, alignment);
  slot->used = static_cast<std::size_t>(end - slot->buffer);
  ++slot->events;
  slot->committed.store(std::uint64_t{slot->events} << 32 | slot->used, std::memory_order_release);
  if (slot != my_slot) {  // borrowed after the thread's exit: written and given back at once
    const recorder_guard guard;
    flush_own(*slot);
    slot->taken.store(false, std::memory_order_release);
  }
}

// Writes every thread's events and the end record, and stops: at exit, or before an exec.
// Not in a vfork child (another pid sharing our memory) about to exec: that is not our exec.
void finish_recording() noexcept {
  if (current_mode.load() != mode::recording || getpid() != recorded_pid) return;
  mode expected = mode::recording;
  if (!current_mode.compare_exchange_strong(expected, mode::forwarding)) return;
  const recorder_guard guard;
  lock_file();
  for (thread_slot& slot : slots)
    if (slot.taken.load(std::memory_order_acquire))
      write_chunk_locked(slot, slot.committed.load(std::memory_order_acquire));
  if (stream_is_ours()) {
    unsigned char end[1 + format::max_varint_bytes];
    write_all(end, static_cast<std::size_t>(format::put_end(end, events_written) - end));
    ::close(out_fd);
  }
  file_finished = true;
  out_fd = -1;
  unlock_file();
  if (events_dropped.load() != 0)
    say("pmrkit-record: some events were dropped (more than 1024 threads at once)\n");
}

[[gnu::destructor]] void at_exit() { finish_recording(); }

template <class Exec>
int exec_ending_recording(Exec exec) {
  const bool was_recording =
      current_mode.load() == mode::recording && getpid() == recorded_pid;
  finish_recording();
  const int status = exec();
  if (was_recording) {
    const int error = errno;
    say("pmrkit-record: an exec failed after the recording had ended for it; the program goes "
        "on unrecorded\n");
    errno = error;
  }
  return status;
}

// ---------------------------------------------------------------- forwarding and recording

void* recorded_malloc(std::size_t bytes) noexcept {
  if (resolving.load(std::memory_order_relaxed)) return bootstrap_allocate(bytes);
  void* p = next().malloc(bytes);
  if (p) record(event_kind::allocate, p, bytes, malloc_alignment);
  return p;
}

void* recorded_aligned(std::size_t alignment, std::size_t bytes) noexcept {
  void* p = next().memalign(alignment, bytes);
  if (p) record(event_kind::allocate, p, bytes, alignment);
  return p;
}

void recorded_free(void* p) noexcept {
  if (!p || from_bootstrap(p)) return;
  // The clock is read before the block goes back: a thread that gets this address next reads
  // it later, so the reader sees this free first.
  record(event_kind::deallocate, p, 0, 0);
  next().free(p);
}

// realloc as a free of the old block (timed before the call, as any free) and an allocation of
// the new one (timed after); nothing when it fails and leaves the old block as it was.
void* recorded_realloc(void* p, std::size_t bytes) noexcept {
  if (p && from_bootstrap(p)) {  // bootstrap blocks are tiny and never shrink here
    void* moved = recorded_malloc(bytes);
    if (moved) std::memcpy(moved, p, bytes);
    return moved;
  }
  const std::uint64_t before = p && recording() ? now_ns() : 0;
  void* moved = next().realloc(p, bytes);
  if (p && (moved || bytes == 0)) record(event_kind::deallocate, p, 0, 0, before);
  if (moved) record(event_kind::allocate, moved, bytes, malloc_alignment);
  return moved;
}

}  // namespace

extern "C" {

void* malloc(std::size_t bytes) { return recorded_malloc(bytes); }
void free(void* p) { recorded_free(p); }

void* calloc(std::size_t count, std::size_t size) {
  if (size != 0 && count > SIZE_MAX / size) {
    errno = ENOMEM;  // as the C library's calloc does
    return nullptr;
  }
  if (resolving.load(std::memory_order_relaxed)) return bootstrap_allocate(count * size);
  void* p = next().calloc(count, size);
  if (p) record(event_kind::allocate, p, count * size, malloc_alignment);
  return p;
}

void* realloc(void* p, std::size_t bytes) { return recorded_realloc(p, bytes); }

void* reallocarray(void* p, std::size_t count, std::size_t size) {
  if (size != 0 && count > SIZE_MAX / size) {
    errno = ENOMEM;
    return nullptr;
  }
  // Through realloc ourselves: glibc's reallocarray may call realloc, which would record twice.
  return recorded_realloc(p, count * size);
}

void* memalign(std::size_t alignment, std::size_t bytes) {
  return recorded_aligned(alignment, bytes);
}
void* aligned_alloc(std::size_t alignment, std::size_t bytes) {
  return recorded_aligned(alignment, bytes);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t bytes) {
  const int status = next().posix_memalign(out, alignment, bytes);
  if (status == 0) record(event_kind::allocate, *out, bytes, alignment);
  return status;
}
void* valloc(std::size_t bytes) {
  void* p = next().valloc(bytes);
  if (p) record(event_kind::allocate, p, bytes, static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  return p;
}
void* pvalloc(std::size_t bytes) {
  void* p = next().pvalloc(bytes);
  if (p) record(event_kind::allocate, p, bytes, static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  return p;
}
std::size_t malloc_usable_size(void* p) {
  if (!p) return 0;
  if (from_bootstrap(p)) return 0;
  return next().malloc_usable_size(p);
}

// An exec replaces this image, whose buffers would be lost: end the recording first. One that
// fails returns to a program no longer recorded, which is said.
int execve(const char* path, char* const argv[], char* const envp[]) {
  return exec_ending_recording([&] { return next().execve(path, argv, envp); });
}
int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return exec_ending_recording([&] { return next().execvpe(file, argv, envp); });
}
int fexecve(int fd, char* const argv[], char* const envp[]) {
  return exec_ending_recording([&] { return next().fexecve(fd, argv, envp); });
}
int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) {
  if (!next().execveat) {  // a C library without it: as the kernel without the call says
    errno = ENOSYS;
    return -1;
  }
  return exec_ending_recording([&] { return next().execveat(dirfd, path, argv, envp, flags); });
}
int execv(const char* path, char* const argv[]) {
  return execve(path, argv, environ);
}
int execvp(const char* file, char* const argv[]) {
  return execvpe(file, argv, environ);
}

}  // extern "C"

namespace {
// The list forms of exec: gathers `first` and the arguments after it (up to the null) into an
// argv on this frame's stack (no allocation), then the environment (execle) or environ, and
// calls exec(argv, envp).
template <class Exec>
int exec_with_list(const char* first, va_list args, bool with_environment, Exec exec) {
  std::size_t count = 1;
  va_list counting;
  va_copy(counting, args);
  while (va_arg(counting, char*)) ++count;
  va_end(counting);
  char** argv = static_cast<char**>(__builtin_alloca((count + 1) * sizeof(char*)));
  argv[0] = const_cast<char*>(first);
  for (std::size_t i = 1; i <= count; ++i) argv[i] = va_arg(args, char*);
  char* const* envp = with_environment ? va_arg(args, char* const*) : environ;
  return exec(argv, envp);
}
}  // namespace

extern "C" {

int execl(const char* path, const char* arg, ...) {
  va_list args;
  va_start(args, arg);
  const int status = exec_with_list(arg, args, false, [path](char** argv, char* const* envp) {
    return execve(path, argv, envp);
  });
  va_end(args);
  return status;
}
int execle(const char* path, const char* arg, ...) {
  va_list args;
  va_start(args, arg);
  const int status = exec_with_list(arg, args, true, [path](char** argv, char* const* envp) {
    return execve(path, argv, envp);
  });
  va_end(args);
  return status;
}
int execlp(const char* file, const char* arg, ...) {
  va_list args;
  va_start(args, arg);
  const int status = exec_with_list(arg, args, false, [file](char** argv, char* const* envp) {
    return execvpe(file, argv, envp);
  });
  va_end(args);
  return status;
}

}  // extern "C"

// operator new and delete in every form come from interpose/operator_new_forms.cpp, through
// these.
void* pmrkit::interpose::allocate(std::size_t bytes) noexcept { return recorded_malloc(bytes); }
void* pmrkit::interpose::allocate_aligned(std::size_t alignment, std::size_t bytes) noexcept {
  return recorded_aligned(alignment, bytes);
}
void pmrkit::interpose::release(void* p) noexcept { recorded_free(p); }
