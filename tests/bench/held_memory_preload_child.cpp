// Run by held_memory_test under LD_PRELOAD: measures an 8 MiB block with the probe chosen for
// the preloaded allocator, prints "<method> <peak held bytes>", exits 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "held_memory.hpp"

int main() {
  using namespace pmrkit::bench;
  constexpr std::size_t block = 8u << 20;
  process_held_probe probe(held_method_for("malloc", malloc_is_preloaded()));
  probe.start();
  auto* p = static_cast<char*>(std::malloc(block));
  if (!p) return 1;
  std::memset(p, 1, block);
  probe.note_block(p, block);
  probe.sample();
  const int last = static_cast<volatile char*>(p)[block - 1];
  std::free(p);
  std::printf("%s %llu\n", std::string(held_method_name(probe.method())).c_str(),
              static_cast<unsigned long long>(probe.peak()));
  return last == 1 ? 0 : 1;
}
