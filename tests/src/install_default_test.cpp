// install_default_from_env() installs once per process, so it has an executable of its own,
// which CTest runs twice (see tests/src/CMakeLists.txt): once for the refusals and the
// install, once for a blank variable. A call that throws installs nothing, so the refusals can
// come first in the same process.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory_resource>
#include <stdexcept>
#include <string>
#include <vector>

#include "pmrkit/registry.hpp"

using Catch::Matchers::Contains;

namespace {

void set_strategy(const char* spec) { REQUIRE(::setenv("PMRKIT_STRATEGY", spec, 1) == 0); }

}  // namespace

TEST_CASE("install_default_from_env refuses what cannot serve every thread, then installs once",
          "[registry]") {
  std::pmr::memory_resource* const before = std::pmr::get_default_resource();

  // The default resource serves every thread: strategies that are not thread-safe, or belong
  // to the thread that made them, are refused unless the program says it has one thread.
  set_strategy("std_unsync_pool:max_blocks_per_chunk=32");
  CHECK_THROWS_WITH(pmrkit::install_default_from_env(),
                    Contains("PMRKIT_STRATEGY='std_unsync_pool:max_blocks_per_chunk=32'") &&
                        Contains("std_unsync_pool is not thread-safe") &&
                        Contains("size_class") && Contains("default_resource_users::one_thread"));
  set_strategy("mimalloc_heap");
  CHECK_THROWS_WITH(pmrkit::install_default_from_env(),
                    Contains("mimalloc_heap must be used on the thread that made it"));
  set_strategy("size_class_unsync");
  CHECK_THROWS_AS(pmrkit::install_default_from_env(), std::invalid_argument);

  // A bad spec names the variable; a misspelt name is reported before its options.
  set_strategy("sizeclass:max_pooled");
  CHECK_THROWS_WITH(pmrkit::install_default_from_env(),
                    Contains("PMRKIT_STRATEGY='sizeclass:max_pooled': unknown strategy "
                             "'sizeclass'"));
  set_strategy("size_class:max_pooled=7");
  CHECK_THROWS_WITH(pmrkit::install_default_from_env(),
                    Contains("PMRKIT_STRATEGY='size_class:max_pooled=7'") &&
                        Contains("max_pooled=7 is invalid"));
  CHECK(std::pmr::get_default_resource() == before);  // nothing installed by a refusal

  set_strategy("std_unsync_pool:max_blocks_per_chunk=32");
  std::pmr::memory_resource& installed =
      pmrkit::install_default_from_env(pmrkit::default_resource_users::one_thread);
  CHECK(std::pmr::get_default_resource() == &installed);
  CHECK(&pmrkit::install_default_from_env() == &installed);  // built once, whatever is passed
  std::pmr::vector<int> v{1, 2, 3};  // default-constructed allocator: the installed resource
  CHECK(v.get_allocator().resource() == &installed);
  CHECK_FALSE(installed.is_equal(*std::pmr::new_delete_resource()));
}

TEST_CASE("install_default_from_env reads a blank PMRKIT_STRATEGY as unset", "[blank]") {
  // A value read from an empty file is a line break: that is new_delete, not an error.
  set_strategy(" \n");
  std::pmr::memory_resource& installed = pmrkit::install_default_from_env();
  CHECK(std::pmr::get_default_resource() == &installed);
  CHECK(pmrkit::describe_strategy("new_delete").thread_safe);
  std::pmr::vector<int> v{1, 2, 3};
  CHECK(v.get_allocator().resource() == &installed);
}
