// pmrkit-record on real programs: the preloaded recorder sees every allocation function, pairs
// every free, follows threads, and records neither forked children nor exec'd programs.
#include <sys/wait.h>

#include <csignal>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <memory_resource>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pmrkit/recording_resource.hpp"
#include "pmrkit/trace/trace_file.hpp"
#include "record_probe_sizes.hpp"
#include "shell_quote.hpp"
#include "trace_test_support.hpp"

using pmrkit::trace::operation_kind;
using trace_test::count_ops;
namespace sizes = record_probe_sizes;

namespace {

std::filesystem::path temp_trace(const char* name) {
  return std::filesystem::temp_directory_path() /
         (std::string("pmrkit_record_test_") + name + ".trace");
}

// Runs pmrkit-record -o trace -- command; returns the exit status.
int record(const std::filesystem::path& trace, const std::string& command) {
  const std::string line =
      pmrkit::test::shell_quoted(PMRKIT_RECORD) + " -o " + pmrkit::test::shell_quoted(trace.string()) + " -- " + command;
  const int status = std::system(line.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::size_t count_allocations(const pmrkit::trace::recorded_trace& trace, std::uint64_t size,
                              std::size_t alignment) {
  std::size_t n = 0;
  for (const auto& op : trace.operations)
    n += op.kind == operation_kind::allocate && op.size == size && op.alignment() == alignment;
  return n;
}

}  // namespace

TEST_CASE("pmrkit-record sees every allocation function of a program", "[record]") {
  const auto path = temp_trace("probe");
  REQUIRE(record(path, PMRKIT_RECORD_PROBE) == 0);
  const auto trace = pmrkit::trace::read_trace_file(path);
  std::filesystem::remove(path);

  CHECK(trace.unpaired_frees == 0);
  CHECK(trace.implicit_frees == 0);
  CHECK(count_allocations(trace, sizes::malloc_size, 16) == sizes::count);
  CHECK(count_ops(trace, operation_kind::deallocate, sizes::malloc_size) == sizes::count);
  CHECK(count_allocations(trace, sizes::new_size, 16) == sizes::count);
  CHECK(count_allocations(trace, sizes::aligned_size, 64) == 1);
  CHECK(count_allocations(trace, sizes::posix_aligned_size, 128) == 1);
  CHECK(count_allocations(trace, sizes::aligned_new_size, 256) == 1);
  CHECK(count_allocations(trace, sizes::calloc_size, 16) == 1);
  CHECK(count_allocations(trace, sizes::realloc_size, 16) == 1);  // realloc: a new object
  CHECK(count_ops(trace, operation_kind::deallocate, sizes::calloc_size) == 1);

  // Made on two threads, freed on the main one.
  std::set<std::uint32_t> makers;
  std::vector<std::uint32_t> allocated_on(trace.objects);
  std::size_t cross_thread = 0;
  for (const auto& op : trace.operations) {
    if (op.kind == operation_kind::allocate) allocated_on[op.object] = op.thread;
    if (op.size != sizes::thread_size) continue;
    if (op.kind == operation_kind::allocate) makers.insert(op.thread);
    else cross_thread += allocated_on[op.object] != op.thread;
  }
  CHECK(makers.size() == 2);
  CHECK(makers.count(0) == 0);  // not the main thread, the first to allocate
  CHECK(cross_thread == 2 * sizes::count);

  // The forked child's allocations are not in the parent's trace.
  CHECK(count_ops(trace, operation_kind::allocate, sizes::forked_child) == 0);
}

TEST_CASE(
    "pmrkit-record: an exec ends the recording; the exec'd program still has the library, "
    "unrecording",
    "[record]") {
  // execveat was not interposed: its image's recording was lost ("0 events").
  const char* const how = GENERATE("exec", "execveat");
  const auto path = temp_trace(how);
  // record_probe exits 3 after the exec if LD_PRELOAD no longer names the recorder.
  REQUIRE(record(path, std::string(PMRKIT_RECORD_PROBE) + " " + how) == 0);
  const auto trace = pmrkit::trace::read_trace_file(path);  // complete: the exec wrote the end
  std::filesystem::remove(path);
  CHECK(count_allocations(trace, sizes::malloc_size, 16) == sizes::count);
  CHECK(count_ops(trace, operation_kind::allocate, sizes::after_exec) == 0);
  CHECK(count_ops(trace, operation_kind::allocate, sizes::forked_child) == 0);
}

TEST_CASE("pmrkit-record never writes into a file the program opened after closing descriptors",
          "[record]") {
  // The stream file's descriptor was a low number: a program that closes what it did not open
  // and then opens a file got it, and the recorder wrote its chunks into the program's file.
  const auto path = temp_trace("closes");
  const auto own = std::filesystem::temp_directory_path() / "pmrkit_record_test_own_file.txt";
  // The probe exits 7 if its file holds anything but its own line.
  SECTION("descriptors 3 to 255: the recording goes on") {
    REQUIRE(record(path, std::string(PMRKIT_RECORD_PROBE) + " closes-descriptors " +
                             own.string() + " 256") == 0);
    const auto trace = pmrkit::trace::read_trace_file(path);
    CHECK(count_ops(trace, operation_kind::allocate, sizes::around_own_file) ==
          2 * static_cast<std::size_t>(sizes::killed_count));
  }
  SECTION("every descriptor: the recording stops, the program's file is left alone") {
    CHECK(record(path, std::string(PMRKIT_RECORD_PROBE) + " closes-descriptors " +
                           own.string() + " 1048576") == 0);
  }
  std::filesystem::remove(path);
  std::filesystem::remove(own);
}

TEST_CASE("pmrkit-record keeps a thread's late frees on that thread", "[record]") {
  // The C library frees strerror's buffer after a thread's key destructors have run: the
  // recorder took a new slot and a new thread number for it, and never gave the slot back.
  const auto path = temp_trace("late_frees");
  REQUIRE(record(path, std::string(PMRKIT_RECORD_PROBE) + " late-frees") == 0);
  const auto trace = pmrkit::trace::read_trace_file(path);
  std::filesystem::remove(path);
  CHECK(trace.threads == 1 + static_cast<std::uint32_t>(sizes::late_threads));
  std::vector<std::uint32_t> allocated_on(trace.objects);
  std::size_t cross_thread = 0;
  for (const auto& op : trace.operations) {
    if (op.kind == operation_kind::allocate) allocated_on[op.object] = op.thread;
    else cross_thread += allocated_on[op.object] != op.thread;
  }
  CHECK(cross_thread == 0);
  CHECK(count_allocations(trace, sizes::late_thread, 16) == sizes::late_threads);
}

TEST_CASE("pmrkit-record keeps operator new's call of the new_handler", "[record]") {
  // The recorder's operator new threw std::bad_alloc at once, where the C++ library's calls the
  // installed new_handler first; the probe exits 10 if it was not called.
  const auto path = temp_trace("new_handler");
  CHECK(record(path, std::string(PMRKIT_RECORD_PROBE) + " new-handler") == 0);
  std::filesystem::remove(path);
}

TEST_CASE("pmrkit-record keeps what a killed program's recorder had written", "[record]") {
  const auto path = temp_trace("killed");
  CHECK(record(path, std::string(PMRKIT_RECORD_PROBE) + " killed") == 128 + 9);
  const auto trace = pmrkit::trace::read_trace_file(path);  // readable: cut after a whole chunk
  std::filesystem::remove(path);
  const std::size_t kept = count_allocations(trace, sizes::malloc_size, 16);
  CHECK(kept > 0);  // the buffers that filled were written
  CHECK(kept < static_cast<std::size_t>(sizes::killed_count));  // the last one was lost
  CHECK(trace.unpaired_frees == 0);
  CHECK(trace.implicit_frees == 0);
}

TEST_CASE("pmrkit-record leaves out a child made without fork's handlers (_Fork)",
          "[record]") {
  const auto path = temp_trace("raw_fork");
  CHECK(record(path, std::string(PMRKIT_RECORD_PROBE) + " raw-fork") == 0);
  const auto trace = pmrkit::trace::read_trace_file(path);  // readable: no chunk of the child's
  std::filesystem::remove(path);
  CHECK(count_allocations(trace, sizes::malloc_size, 16) ==
        static_cast<std::size_t>(sizes::killed_count));
  CHECK(count_ops(trace, operation_kind::allocate, sizes::forked_child) == 0);
}

TEST_CASE("a _Fork child that copied a held file lock neither hangs nor writes", "[record]") {
  // A thread of the parent may hold the recorder's file lock at the _Fork: the child's copy of
  // it is never released, so the child must find out it is a child before taking it.
  const auto path = temp_trace("raw_fork_threads");
  CHECK(record(path, std::string(PMRKIT_RECORD_PROBE) + " raw-fork-threads") == 0);
  const auto trace = pmrkit::trace::read_trace_file(path);
  std::filesystem::remove(path);
  CHECK(count_ops(trace, operation_kind::allocate, sizes::forked_child) == 0);
}

TEST_CASE("pmrkit-record terminated by SIGTERM passes it on and still writes the trace",
          "[record]") {
  // `kill PID`, `timeout`, a service manager: the recorder must not die before the program,
  // or the stream is left unfinished and uncompressed.
  const auto path = temp_trace("terminated");
  CHECK(record(path, std::string(PMRKIT_RECORD_PROBE) + " terminated") == 128 + SIGTERM);
  CHECK_FALSE(std::filesystem::exists(path.string() + ".stream"));
  const auto trace = pmrkit::trace::read_trace_file(path);
  std::filesystem::remove(path);
  CHECK(count_allocations(trace, sizes::malloc_size, 16) > 0);
}

TEST_CASE("pmrkit-record on an unmodified multi-threaded program (python3 building JSON)",
          "[record]") {
  const auto path = temp_trace("python");
  // Recorded directly: `env VAR=... python3` would exec, and only env's image is recorded.
  const int direct = std::system(
      ("PYTHONMALLOC=malloc " + pmrkit::test::shell_quoted(PMRKIT_RECORD) + " -o " + pmrkit::test::shell_quoted(path.string()) +
       " -- /usr/bin/python3 -c '"
       "import json, threading\n"
       "def work(n):\n"
       "    d = [{\"k\": i, \"v\": str(i) * 3} for i in range(n)]\n"
       "    json.loads(json.dumps(d))\n"
       "ts = [threading.Thread(target=work, args=(3000,)) for _ in range(3)]\n"
       "[t.start() for t in ts]\n"
       "[t.join() for t in ts]'")
          .c_str());
  REQUIRE(WIFEXITED(direct));
  REQUIRE(WEXITSTATUS(direct) == 0);
  const auto trace = pmrkit::trace::read_trace_file(path);
  std::filesystem::remove(path);
  std::size_t allocations = 0;
  for (const auto& op : trace.operations) allocations += op.kind == operation_kind::allocate;
  CHECK(allocations > 50000);
  CHECK(trace.threads >= 4);  // the main thread and three workers
  CHECK(trace.unpaired_frees == 0);
  CHECK(trace.implicit_frees == 0);
}

TEST_CASE("pmrkit-record refuses a recorder path that LD_PRELOAD cannot carry", "[record]") {
  // The loader would split it at the space, preload nothing, and the program run unrecorded.
  const auto trace = temp_trace("unpreloadable");
  const auto [status, message] = pmrkit::test::run_for_stderr(
      "PMRKIT_RECORD_PRELOAD='/opt/my libs/libpmrkit_record_preload.so' " +
      pmrkit::test::shell_quoted(PMRKIT_RECORD) + " -o " +
      pmrkit::test::shell_quoted(trace.string()) + " -- /bin/true");
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK_THAT(message, Catch::Contains("cannot be preloaded") && Catch::Contains("spaces"));
  CHECK_FALSE(std::filesystem::exists(trace));
}

TEST_CASE("pmrkit-record refuses, before the program runs, what would leave it unrecorded",
          "[record]") {
  const auto marker = temp_trace("ran_anyway");
  std::filesystem::remove(marker);
  const std::string program = " -- /usr/bin/touch " + pmrkit::test::shell_quoted(marker.string());
  // -o in a directory that does not exist: the stream file beside it cannot be created.
  const auto no_directory = pmrkit::test::run_for_stderr(
      pmrkit::test::shell_quoted(PMRKIT_RECORD) + " -o /nonexistent-pmrkit-dir/x.trace" +
      program);
  REQUIRE(WIFEXITED(no_directory.status));
  CHECK(WEXITSTATUS(no_directory.status) == 1);
  CHECK_THAT(no_directory.stderr_text,
             Catch::Contains("cannot create /nonexistent-pmrkit-dir/x.trace.stream") &&
                 Catch::Contains("No such file or directory"));
  // A recorder library that is not there.
  const auto no_recorder = pmrkit::test::run_for_stderr(
      "PMRKIT_RECORD_PRELOAD=/nonexistent-pmrkit-dir/librecord.so " +
      pmrkit::test::shell_quoted(PMRKIT_RECORD) + " -o " +
      pmrkit::test::shell_quoted(temp_trace("no_recorder").string()) + program);
  REQUIRE(WIFEXITED(no_recorder.status));
  CHECK(WEXITSTATUS(no_recorder.status) == 1);
  CHECK_THAT(no_recorder.stderr_text,
             Catch::Contains("/nonexistent-pmrkit-dir/librecord.so is not a file"));
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("pmrkit-record --finish makes a stream its recorder left behind into a trace",
          "[record]") {
  // What a pmrkit-record killed with SIGKILL leaves: the stream of whole chunks, no end record.
  trace_test::memory_sink sink;
  std::vector<std::byte> unfinished;
  {
    pmrkit::recording_resource recorder(std::pmr::new_delete_resource(), sink);
    for (int i = 0; i < 10; ++i)
      recorder.deallocate(recorder.allocate(sizes::malloc_size), sizes::malloc_size);
    std::thread([&] { recorder.deallocate(recorder.allocate(64), 64); }).join();  // one chunk
    unfinished = sink.stream;
  }
  const auto trace_path = temp_trace("finished");
  const std::string stream_path = trace_path.string() + ".stream";
  {
    std::FILE* f = std::fopen(stream_path.c_str(), "wb");
    REQUIRE(f);
    std::fwrite(unfinished.data(), 1, unfinished.size(), f);
    std::fclose(f);
  }
  CHECK_THROWS_WITH(pmrkit::trace::read_trace_file(stream_path), Catch::Contains("--finish"));
  const auto finished = pmrkit::test::run_for_stderr(
      pmrkit::test::shell_quoted(PMRKIT_RECORD) + " -o " +
      pmrkit::test::shell_quoted(trace_path.string()) + " --finish " +
      pmrkit::test::shell_quoted(stream_path));
  REQUIRE(WIFEXITED(finished.status));
  CHECK(WEXITSTATUS(finished.status) == 0);
  CHECK_THAT(finished.stderr_text, Catch::Contains("did not finish normally"));
  CHECK_FALSE(std::filesystem::exists(stream_path));
  const auto trace = pmrkit::trace::read_trace_file(trace_path);
  std::filesystem::remove(trace_path);
  CHECK(trace.operations.size() == 2);  // the thread's chunk; the main thread's was unwritten
}
