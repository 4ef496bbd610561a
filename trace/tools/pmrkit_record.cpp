// pmrkit-record: runs a program with the recorder preloaded and writes its allocation trace.
//
//   pmrkit-record -o FILE -- COMMAND [ARGS...]
//   pmrkit-record -o FILE --import-heaptrack HEAPTRACK_FILE.zst
//   pmrkit-record -o FILE --finish STREAM
//
// The program runs unmodified; libpmrkit_record_preload.so (beside this executable, or where
// PMRKIT_RECORD_PRELOAD says) writes the uncompressed stream to FILE.stream, which is
// compressed into FILE once the program exits. Exits with the program's status. ^C and ^\ are
// left to the program; SIGTERM and SIGHUP sent to pmrkit-record are passed on to it, so the
// trace is finished whichever one a service manager or `timeout` signals. See docs/replay.md
// for what is recorded, and for fork and exec. --finish turns a FILE.stream left behind by a
// pmrkit-record that could not finish (killed itself, by SIGKILL or the OOM killer) into FILE:
// the stream cut after its last whole chunk, then compressed.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "pmrkit/trace/trace_file.hpp"

namespace {

namespace fs = std::filesystem;

int usage() {
  std::fprintf(stderr,
               "usage: pmrkit-record -o FILE -- COMMAND [ARGS...]\n"
               "       pmrkit-record -o FILE --import-heaptrack HEAPTRACK_FILE.zst\n"
               "       pmrkit-record -o FILE --finish FILE.stream\n");
  return 2;
}

fs::path preload_library() {
  if (const char* given = std::getenv("PMRKIT_RECORD_PRELOAD")) return given;
  const fs::path here = fs::read_symlink("/proc/self/exe").parent_path();
  for (const fs::path& candidate :
       {here / "libpmrkit_record_preload.so",
        here / PMRKIT_RECORD_LIB_FROM_BIN / "libpmrkit_record_preload.so"})
    if (fs::exists(candidate)) return fs::canonical(candidate);
  throw std::runtime_error("cannot find libpmrkit_record_preload.so beside " + here.string() +
                           " (set PMRKIT_RECORD_PRELOAD to its path)");
}

// The recorded program, for the forwarding handler (0: none yet).
volatile sig_atomic_t program_pid = 0;

// A signal that would end pmrkit-record before the program (SIGTERM from `kill PID`, a service
// manager or timeout; SIGHUP when the terminal goes) is passed on instead: the program decides,
// and pmrkit-record outlives it to finish and compress the trace. A signal sent to the whole
// process group reaches the program twice, which ends it all the same.
void pass_on(int signal) {
  const int saved = errno;  // the interrupted code may be about to read it
  if (program_pid > 0) ::kill(static_cast<pid_t>(program_pid), signal);
  errno = saved;
}

// Fails early, and says why, where the recorder would only find out inside the program (and let
// it run unrecorded): the stream file beside FILE cannot be created, or the library is missing.
void check_recordable(const fs::path& stream, const fs::path& library) {
  if (!fs::is_regular_file(library))
    throw std::runtime_error("the recorder " + library.string() +
                             " is not a file (PMRKIT_RECORD_PRELOAD names it when set)");
  const int fd = ::open(stream.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot create " + stream.string() + ", where the recording goes " +
                             "before it is compressed into -o's file: " + std::strerror(errno));
  ::close(fd);
  fs::remove(stream);
}

// `trace` is what was read, recorded or imported: the file written holds only its paired
// operations, so its own counts of dropped and missed frees are always 0. `complete`: false
// for a recording cut short, whose threads' unwritten buffers held allocations that the frees
// written later no longer find.
void summarise(const fs::path& file, const pmrkit::trace::recorded_trace& trace,
               bool complete = true) {
  std::uint64_t allocations = 0;
  for (const auto& op : trace.operations)
    allocations += op.kind == pmrkit::trace::operation_kind::allocate;
  std::fprintf(stderr,
               "pmrkit-record: %s: %llu allocations, %llu frees, %u threads, peak live %llu bytes, "
               "%llu bytes on disk",
               file.c_str(), static_cast<unsigned long long>(allocations),
               static_cast<unsigned long long>(trace.operations.size() - allocations),
               trace.threads, static_cast<unsigned long long>(trace.peak_live_bytes),
               static_cast<unsigned long long>(fs::file_size(file)));
  if (trace.unpaired_frees || trace.implicit_frees)
    std::fprintf(stderr,
                 complete ? " (%llu frees of memory from before the recording, %llu missed frees)"
                          : " (%llu frees without their allocation and %llu missed frees, most "
                            "of them from the events lost with the threads' buffers)",
                 static_cast<unsigned long long>(trace.unpaired_frees),
                 static_cast<unsigned long long>(trace.implicit_frees));
  std::fprintf(stderr, "\n");
}

// Cuts `stream` after its last whole chunk if its writer stopped early, compresses it into
// `out`, removes it and prints the summary. `who` and `why` name the program and what stopped it.
void finish(const fs::path& stream, const fs::path& out, const char* who, const char* why) {
  const pmrkit::trace::stream_repair repair = pmrkit::trace::finish_interrupted_stream(stream);
  if (!repair.was_complete)
    std::fprintf(stderr,
                 "pmrkit-record: %s did not finish normally (%s): the trace keeps the %llu events "
                 "written before; those still in its threads' buffers are lost\n",
                 who, why, static_cast<unsigned long long>(repair.events_kept));
  pmrkit::trace::compress_stream_file(stream, out);
  fs::remove(stream);
  summarise(out, pmrkit::trace::read_trace_file(out), repair.was_complete);
}

int record(const fs::path& out, char** command) {
  const fs::path library = preload_library();
  // The loader splits LD_PRELOAD at spaces and colons, with no escape: such a path would
  // preload pieces of it, and the program would run unrecorded.
  if (library.string().find_first_of(" :") != std::string::npos)
    throw std::runtime_error("the recorder " + library.string() +
                             " cannot be preloaded: LD_PRELOAD splits paths at spaces and "
                             "colons (install pmrkit, or point PMRKIT_RECORD_PRELOAD at a copy, "
                             "under a path without them)");
  const fs::path stream = out.string() + ".stream";
  fs::remove(stream);
  check_recordable(stream, library);
  // Blocked until the parent's dispositions are set (a ^C or a SIGTERM in between would end
  // pmrkit-record and leave the stream unfinished); the child unblocks them, with its own
  // dispositions untouched.
  sigset_t handled, before;
  sigemptyset(&handled);
  for (const int signal : {SIGTERM, SIGHUP, SIGINT, SIGQUIT}) sigaddset(&handled, signal);
  sigprocmask(SIG_BLOCK, &handled, &before);
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &before, nullptr);
    std::string preload = library.string();
    if (const char* existing = std::getenv("LD_PRELOAD"); existing && *existing)
      preload += std::string(":") + existing;
    setenv("LD_PRELOAD", preload.c_str(), 1);
    setenv("PMRKIT_RECORD_STREAM", stream.c_str(), 1);
    setenv("PMRKIT_RECORD_PID", std::to_string(getpid()).c_str(), 1);
    execvp(command[0], command);
    std::fprintf(stderr, "pmrkit-record: cannot run %s: %s\n", command[0], std::strerror(errno));
    _exit(127);
  }
  // Like time(1): a ^C reaches the program, which decides; we wait for it and keep the trace.
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGQUIT, SIG_IGN);
  program_pid = child;
  struct sigaction pass{};
  pass.sa_handler = pass_on;
  sigemptyset(&pass.sa_mask);
  sigaction(SIGTERM, &pass, nullptr);
  sigaction(SIGHUP, &pass, nullptr);
  sigprocmask(SIG_SETMASK, &before, nullptr);
  // Waits without reaping, so that the pid cannot be reused while the handler may still send
  // to it; then stops passing signals on, then reaps.
  siginfo_t ended{};
  while (waitid(P_PID, static_cast<id_t>(child), &ended, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  program_pid = 0;
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!fs::exists(stream)) {
    std::fprintf(stderr, "pmrkit-record: %s recorded nothing (did it start? is it static?)\n",
                 command[0]);
    return exit_code ? exit_code : 1;
  }
  finish(stream, out, command[0],
         WIFSIGNALED(status) ? strsignal(WTERMSIG(status))
                             : "it left through _exit, or closed the recorder's file");
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path out;
  fs::path heaptrack;
  fs::path leftover;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-o" && i + 1 < argc) out = argv[++i];
    else if (arg == "--import-heaptrack" && i + 1 < argc) heaptrack = argv[++i];
    else if (arg == "--finish" && i + 1 < argc) leftover = argv[++i];
    else if (arg == "--") { ++i; break; }
    else return usage();
  }
  const int sources = !heaptrack.empty() + !leftover.empty() + (i < argc);
  if (out.empty() || sources != 1) return usage();
  try {
    if (!leftover.empty()) {
      if (!fs::is_regular_file(leftover))
        throw std::runtime_error(leftover.string() + " is not a file");
      finish(leftover, out, leftover.c_str(), "its recorder did not finish it");
      return 0;
    }
    if (!heaptrack.empty()) {
      const pmrkit::trace::recorded_trace trace = pmrkit::trace::read_trace_file(heaptrack);
      pmrkit::trace::write_trace_file(trace, out);
      summarise(out, trace);
      return 0;
    }
    return record(out, argv + i);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pmrkit-record: %s\n", e.what());
    return 1;
  }
}
