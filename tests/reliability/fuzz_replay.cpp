// Replays a fuzz target's seed corpus and its regression inputs (tests/fuzz/regressions/<name>/:
// every input fuzzing ever crashed on) through the target itself, on every ordinary build and
// under the sanitizers, so what fuzzing found stays fixed. The target aborts with a message on
// a broken invariant, which fails this test.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::filesystem::path> inputs_in(std::string_view dirs) {
  std::vector<std::filesystem::path> files;
  while (!dirs.empty()) {
    const auto bar = dirs.find('|');
    const std::filesystem::path dir(std::string(dirs.substr(0, bar)));
    if (std::filesystem::is_directory(dir))
      for (const auto& entry : std::filesystem::directory_iterator(dir))
        if (entry.is_regular_file()) files.push_back(entry.path());
    dirs = bar == std::string_view::npos ? "" : dirs.substr(bar + 1);
  }
  return files;
}

}  // namespace

TEST_CASE("fuzz target: every seed and regression input runs cleanly", "[fuzz]") {
  const auto files = inputs_in(PMRKIT_FUZZ_INPUTS);
  REQUIRE_FALSE(files.empty());
  for (const auto& file : files) {
    INFO("input " << file.string());
    std::ifstream in(file, std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                  std::istreambuf_iterator<char>()};
    CHECK(LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                 bytes.size()) == 0);
  }
}
