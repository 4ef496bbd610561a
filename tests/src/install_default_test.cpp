// install_default_from_env() is once per process, so it has an executable of its own; CTest
// sets PMRKIT_STRATEGY for it (see tests/src/CMakeLists.txt).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory_resource>
#include <string>

#include "pmrkit/registry.hpp"

TEST_CASE("install_default_from_env installs PMRKIT_STRATEGY once", "[registry]") {
  const char* env = std::getenv("PMRKIT_STRATEGY");
  REQUIRE(env != nullptr);
  REQUIRE(std::string(env) == "std_unsync_pool:max_blocks_per_chunk=32");
  std::pmr::memory_resource& installed = pmrkit::install_default_from_env();
  CHECK(std::pmr::get_default_resource() == &installed);
  CHECK(&pmrkit::install_default_from_env() == &installed);  // built once
  std::pmr::vector<int> v{1, 2, 3};  // default-constructed allocator: the installed resource
  CHECK(v.get_allocator().resource() == &installed);
  CHECK_FALSE(installed.is_equal(*std::pmr::new_delete_resource()));
}
