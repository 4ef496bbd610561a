// Fuzz target: the allocation-trace reader (pmrkit::trace::read_trace), fed untrusted files:
// pmrkit's stream, zstd-compressed or not, and heaptrack's text. It must return a trace or
// throw trace_format_error (std::bad_alloc only past the fuzzer's memory bound), and a trace
// it returns must be one the replay can run:
//  - every deallocate frees an object allocated before it and not yet freed, with that
//    allocation's size and alignment;
//  - objects are numbered in allocation order, threads below `threads`, times never go back;
//  - the live-byte statistics agree with the operations.
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <vector>

#include "fuzz_support.hpp"
#include "pmrkit/trace/trace_file.hpp"

using pmrkit::fuzz::broken;
using namespace pmrkit::trace;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  read_options options;
  options.max_uncompressed_bytes = 4 << 20;
  recorded_trace trace;
  try {
    trace = read_trace({reinterpret_cast<const std::byte*>(data), size}, options);
  } catch (const trace_format_error&) {
    return 0;
  }
  struct object_state {
    std::uint64_t size;
    std::uint8_t alignment_log2;
    bool live;
  };
  std::vector<object_state> objects;
  std::uint64_t live = 0, peak = 0, live_objects = 0, last_time = 0;
  for (const operation& op : trace.operations) {
    if (op.thread >= trace.threads) broken("an operation on a thread the trace does not count");
    if (op.time_ns < last_time) broken("operations out of time order");
    last_time = op.time_ns;
    if (op.kind == operation_kind::allocate) {
      if (op.object != objects.size()) broken("objects not numbered in allocation order");
      objects.push_back({op.size, op.alignment_log2, true});
      live += op.size;
      ++live_objects;
      if (live > peak) peak = live;
    } else {
      if (op.object >= objects.size()) broken("a free before its allocation");
      object_state& o = objects[op.object];
      if (!o.live) broken("an object freed twice");
      if (o.size != op.size || o.alignment_log2 != op.alignment_log2)
        broken("a free whose size or alignment is not its allocation's");
      o.live = false;
      live -= op.size;
      --live_objects;
    }
  }
  if (objects.size() != trace.objects) broken("the object count is wrong");
  if (live != trace.live_bytes_at_end || peak != trace.peak_live_bytes ||
      live_objects != trace.live_objects_at_end)
    broken("the live-byte statistics disagree with the operations");
  return 0;
}
