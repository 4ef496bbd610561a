// heaptrack's own recording of a small program, read as a trace: skipped (with a message) where
// heaptrack is not installed.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "pmrkit/trace/replay.hpp"
#include "pmrkit/trace/trace_file.hpp"
#include "record_probe_sizes.hpp"
#include "shell_quote.hpp"
#include "trace_test_support.hpp"

using pmrkit::trace::operation_kind;
namespace sizes = record_probe_sizes;

TEST_CASE("a heaptrack recording reads as a trace and replays", "[heaptrack]") {
  if (std::system("command -v heaptrack >/dev/null 2>&1") != 0) {
    WARN(
        "SKIPPED: heaptrack is not installed (apt-get install heaptrack), so its import is not "
        "tested here");
    return;
  }
  const auto dir = std::filesystem::temp_directory_path() / "pmrkit_heaptrack_test";
  std::filesystem::create_directories(dir);
  const auto base = dir / "probe";
  const std::string line =
      "heaptrack -o " + pmrkit::test::shell_quoted(base.string()) + " " + pmrkit::test::shell_quoted(PMRKIT_RECORD_PROBE) +
      " >/dev/null 2>&1";
  const int status = std::system(line.c_str());
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const auto file = base.string() + ".zst";
  REQUIRE(std::filesystem::exists(file));
  const auto trace = pmrkit::trace::read_trace_file(file);
  std::filesystem::remove_all(dir);

  CHECK(trace.format == "heaptrack");
  CHECK(trace.threads == 1);  // heaptrack does not say which thread
  CHECK(trace_test::count_ops(trace, operation_kind::allocate, sizes::malloc_size) == sizes::count);
  CHECK(trace_test::count_ops(trace, operation_kind::deallocate, sizes::malloc_size) ==
        sizes::count);
  CHECK(trace_test::count_ops(trace, operation_kind::allocate, sizes::thread_size) ==
        2 * sizes::count);
  CHECK(trace.unpaired_frees == 0);

  const pmrkit::trace::replay_plan plan(trace);
  CHECK(pmrkit::trace::replay_strategy(plan, "size_class_unsync").operations ==
        trace.operations.size());
}

TEST_CASE("pmrkit-record --import-heaptrack reports the frees it could not pair", "[heaptrack]") {
  // The trace written holds only paired operations; the summary must be of what was read.
  const auto dir = std::filesystem::temp_directory_path() / "pmrkit_heaptrack_import_test";
  std::filesystem::create_directories(dir);
  const auto input = dir / "unpaired.txt";
  const auto output = dir / "unpaired.trace";
  {
    std::ofstream text(input);
    text << "v 10400 3\na 40 1\n- 0\n- 0\n+ 0\n- 0\n";  // two frees of nothing heaptrack saw
  }
  const auto [status, said] = pmrkit::test::run_for_stderr(
      pmrkit::test::shell_quoted(PMRKIT_RECORD) + " -o " +
      pmrkit::test::shell_quoted(output.string()) + " --import-heaptrack " +
      pmrkit::test::shell_quoted(input.string()));
  std::filesystem::remove_all(dir);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_THAT(said, Catch::Contains("1 allocations, 1 frees") &&
                       Catch::Contains("2 frees of memory from before the recording"));
}
