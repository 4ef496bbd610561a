// Strategy "boost_pool": one boost::pool per power-of-two size class (boost_pool_resource).
#include <algorithm>

#include "pmrkit/boost_pool_resource.hpp"
#include "strategy.hpp"

namespace pmrkit::detail::strategies {
namespace {

constexpr boost_pool_options defaults{};

constexpr option_definition option_table[] = {
    power_of_two_option("max_pooled", defaults.max_pooled, defaults.smallest_max_pooled,
                        defaults.largest_max_pooled,
                        "largest pooled block; larger ones go straight to upstream"),
    size_option("chunk_size", defaults.chunk_size, defaults.smallest_chunk, defaults.largest_chunk,
                "bytes of a pool's first chunk; each later chunk doubles"),
    size_option("max_chunk_size", defaults.max_chunk_size, defaults.smallest_chunk,
                defaults.largest_chunk,
                "largest chunk; at least chunk_size, and raised to it when not given"),
};

resource_ptr make(option_reader& options, std::pmr::memory_resource* upstream) {
  boost_pool_options o;
  o.max_pooled = options.size("max_pooled");
  o.chunk_size = options.size("chunk_size");
  o.max_chunk_size = options.size("max_chunk_size");
  if (!options.given("max_chunk_size"))
    o.max_chunk_size = std::max(o.max_chunk_size, o.chunk_size);
  else if (o.max_chunk_size < o.chunk_size)
    options.reject("max_chunk_size",
                   "allowed: at least chunk_size (" + format_size(o.chunk_size) + ")");
  return std::make_unique<boost_pool_resource>(o, upstream);
}

}  // namespace

extern const strategy_definition boost_pool{
    .name = "boost_pool",
    .summary = "one boost::pool per power-of-two size class, chunks from upstream; larger "
               "blocks go straight to upstream; single-threaded",
    .can = {.thread_safe = false, .uses_upstream = true, .reuses_memory = true},
    .options = option_table,
    .make = make,
};

}  // namespace pmrkit::detail::strategies
