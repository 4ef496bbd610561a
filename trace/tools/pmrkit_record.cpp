// pmrkit-record: runs a program with the recorder preloaded and writes its allocation trace.
//
//   pmrkit-record -o FILE -- COMMAND [ARGS...]
//   pmrkit-record -o FILE --import-heaptrack HEAPTRACK_FILE.zst
//
// The program runs unmodified; libpmrkit_record_preload.so (beside this executable, or where
// PMRKIT_RECORD_PRELOAD says) writes the uncompressed stream to FILE.stream, which is
// compressed into FILE once the program exits. Exits with the program's status. See
// docs/replay.md for what is recorded, and for fork and exec.
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
               "       pmrkit-record -o FILE --import-heaptrack HEAPTRACK_FILE.zst\n");
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

// `trace` is what was read, recorded or imported: the file written holds only its paired
// operations, so its own counts of dropped and missed frees are always 0.
void summarise(const fs::path& file, const pmrkit::trace::recorded_trace& trace) {
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
    std::fprintf(stderr, " (%llu frees of memory from before the recording, %llu missed frees)",
                 static_cast<unsigned long long>(trace.unpaired_frees),
                 static_cast<unsigned long long>(trace.implicit_frees));
  std::fprintf(stderr, "\n");
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
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
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
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!fs::exists(stream)) {
    std::fprintf(stderr, "pmrkit-record: %s recorded nothing (did it start? is it static?)\n",
                 command[0]);
    return exit_code ? exit_code : 1;
  }
  const pmrkit::trace::stream_repair repair = pmrkit::trace::finish_interrupted_stream(stream);
  if (!repair.was_complete)
    std::fprintf(stderr,
                 "pmrkit-record: %s did not finish normally (%s): the trace keeps the %llu events "
                 "written before; those still in its threads' buffers are lost\n",
                 command[0],
                 WIFSIGNALED(status) ? strsignal(WTERMSIG(status))
                                     : "it left through _exit, or closed the recorder's file",
                 static_cast<unsigned long long>(repair.events_kept));
  pmrkit::trace::compress_stream_file(stream, out);
  fs::remove(stream);
  summarise(out, pmrkit::trace::read_trace_file(out));
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path out;
  fs::path heaptrack;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-o" && i + 1 < argc) out = argv[++i];
    else if (arg == "--import-heaptrack" && i + 1 < argc) heaptrack = argv[++i];
    else if (arg == "--") { ++i; break; }
    else return usage();
  }
  if (out.empty() || (heaptrack.empty() == (i >= argc))) return usage();
  try {
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
