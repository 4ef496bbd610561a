// JSON text for the tools that print it (pmrkit_bench's registry and counters, pmrkit_interleaved,
// pmrkit-replay): one escaping rule for every string they write, so that a name a user chose (a
// spec, a trace's file name) cannot break the JSON that bench/report reads. Plain functions, no
// state: safe from any thread.
#pragma once

#include <string>
#include <string_view>

namespace pmrkit::bench {

// A JSON string literal of `text`: quotes, backslashes and control characters escaped (the
// control characters as \u00XX); every other byte as it is, so UTF-8 passes through.
std::string json_string(std::string_view text);

}  // namespace pmrkit::bench
