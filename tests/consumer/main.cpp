// Builds against the installed pmrkit package and exercises the public API once: exits 0 only
// if every strategy can be made by name and serves a pmr container, and a pooled buffer is
// reused.
#include <cstdio>
#include <type_traits>
#include <memory_resource>
#include <string>
#include <vector>

#include <pmrkit/pmrkit.hpp>

#ifdef PMRKIT_CONSUMER_ADAPTERS
int run_adapters(std::pmr::memory_resource* resource);
#endif

// The umbrella header brings every core class, the recorder included.
static_assert(std::is_base_of_v<std::pmr::memory_resource, pmrkit::recording_resource>);

int main() {
  int failures = 0;
  for (const auto& s : pmrkit::strategies()) {
    pmrkit::counting_resource upstream(std::pmr::new_delete_resource());
    {
      auto r = pmrkit::make_resource(s.name, &upstream);
      std::pmr::vector<std::pmr::string> words(r.get());
      for (int i = 0; i < 100; ++i)
        words.emplace_back("a string long enough to allocate " + std::to_string(i));
      if (words.size() != 100 || words[99].find("99") == std::pmr::string::npos) ++failures;
    }
    if (upstream.stats().bytes_in_use != 0) ++failures;
    std::printf("%-20s ok\n", s.name.c_str());
  }
  pmrkit::buffer_pool pool(std::pmr::new_delete_resource());
  const void* first = nullptr;
  {
    auto b = pool.acquire(1000);
    first = b.data();
  }
  if (pool.acquire(1000).data() != first) ++failures;
#ifdef PMRKIT_CONSUMER_ADAPTERS
  {
    pmrkit::counting_resource counted(std::pmr::new_delete_resource());
    auto size_class = pmrkit::make_resource("size_class", &counted);
    failures += run_adapters(size_class.get());
    size_class.reset();
    if (counted.stats().bytes_in_use != 0) ++failures;
    std::printf("adapters (bson, zstd, protobuf) ok\n");
  }
#endif
  std::printf("%s\n", failures == 0 ? "consumer: all good" : "consumer: FAILED");
  return failures == 0 ? 0 : 1;
}
