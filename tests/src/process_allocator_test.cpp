// Linking pmrkit, and using its mimalloc strategies, must not replace the process allocator:
// Debian's libmimalloc.so exports malloc/free/operator new, so merely linking it would.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "pmrkit/registry.hpp"
#include "sanitizers.hpp"

namespace {
std::string object_of(void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || !info.dli_fname) return "?";
  return info.dli_fname;
}
}  // namespace

TEST_CASE("malloc and operator new stay the C and C++ libraries' after mimalloc is used",
          "[mimalloc]") {
  auto r = pmrkit::make_resource("mimalloc");  // loads libmimalloc
  void* p = r->allocate(100, 16);
  r->deallocate(p, 100, 16);
  auto heap = pmrkit::make_resource("mimalloc_heap");
  (void)heap->allocate(10, 8);

  // The mimalloc library is loaded, yet the symbols the process resolves are glibc's.
  CHECK(dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_NOLOAD) != nullptr);
  void* process_malloc = dlsym(RTLD_DEFAULT, "malloc");
  void* process_free = dlsym(RTLD_DEFAULT, "free");
  void* process_new = dlsym(RTLD_DEFAULT, "_Znwm");
  REQUIRE(process_malloc != nullptr);
  CHECK(object_of(process_malloc).find("mimalloc") == std::string::npos);
  CHECK(object_of(process_free).find("mimalloc") == std::string::npos);
  CHECK(object_of(process_new).find("mimalloc") == std::string::npos);
  // AddressSanitizer puts its own malloc in front of glibc's; only without it can the test
  // name the libraries.
  if (!pmrkit::test::under_address_sanitizer) {
    CHECK_THAT(object_of(process_malloc), Catch::Matchers::Contains("libc.so"));
    CHECK_THAT(object_of(process_free), Catch::Matchers::Contains("libc.so"));
    CHECK_THAT(object_of(process_new), Catch::Matchers::Contains("libstdc++"));
  }

  // And the calls this program actually makes land in glibc too.
  void* m = std::malloc(24);
  CHECK(object_of(reinterpret_cast<void*>(&std::malloc)).find("mimalloc") == std::string::npos);
  std::free(m);
}
