#include "pmrkit/protobuf/span_codec.hpp"

#include <google/protobuf/arena.h>
#include <google/protobuf/stubs/common.h>  // IsStructurallyValidUTF8, the parser's own check

#include <algorithm>
#include <bit>
#include <climits>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

#include "span_message.hpp"
#include "span_wire_check.hpp"

namespace pmrkit::protobuf {
namespace {

using string_map = ::google::protobuf::Map<std::string, std::string>;

// The arena block serialize() takes per call: enough for a span with a handful of metrics.
constexpr std::size_t fresh_arena_block = 8 * 1024;
constexpr std::size_t min_arena_block = 1024;
constexpr std::size_t max_arena_block_limit = std::size_t{1} << 30;

void sync_tags(string_map& to, const std::map<std::string, std::string>& from) {
  for (const auto& [key, value] : from) {
    const auto found = to.find(key);
    if (found == to.end()) {
      to[key] = value;
    } else if (found->second != value) {
      found->second.assign(value);
    }
  }
  // Every key of `from` is in `to` now, so a larger `to` holds stale keys.
  if (to.size() == from.size()) return;
  for (auto it = to.begin(); it != to.end();) {
    if (from.find(it->first) == from.end()) {
      it = to.erase(it);
    } else {
      ++it;
    }
  }
}

void assign_sample(ssf::SSFSample& to, const sample& from) {
  to.set_metric(static_cast<ssf::SSFSample_Metric>(from.metric));
  to.set_name(from.name);
  to.set_value(from.value);
  to.set_timestamp(from.timestamp);
  to.set_message(from.message);
  to.set_status(static_cast<ssf::SSFSample_Status>(from.status));
  to.set_sample_rate(from.sample_rate);
  sync_tags(*to.mutable_tags(), from.tags);
  to.set_unit(from.unit);
}

std::map<std::string, std::string> copy_tags(const string_map& tags) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : tags) out.emplace(key, value);
  return out;
}

std::optional<std::string_view> find_tag(const string_map& tags, std::string_view key) {
  const auto found = tags.find(std::string(key));
  if (found == tags.end()) return std::nullopt;
  return std::string_view(found->second);
}

// Serializes `message` (after ByteSizeLong) into the spare room of `out`.
std::size_t write(const ssf::SSFSpan& message, std::size_t size, byte_buffer& out) {
  out.reserve(out.size() + size);
  auto* begin = reinterpret_cast<std::uint8_t*>(out.spare().data());
  const std::uint8_t* end = message.SerializeWithCachedSizesToArray(begin);
  const auto written = static_cast<std::size_t>(end - begin);
  out.commit(written);
  return written;
}

::google::protobuf::ArenaOptions arena_on(byte_buffer& block) {
  ::google::protobuf::ArenaOptions options;
  options.initial_block = reinterpret_cast<char*>(block.data());
  options.initial_block_size = block.capacity();
  return options;
}

// The SSF fields are proto3 strings, which must be UTF-8: libprotobuf serializes any bytes,
// but every parser (ours included) refuses the result, so a span would be sent that no receiver
// takes. Checked here, with the check libprotobuf's parser makes.
void require_utf8(std::string_view text, const char* field) {
  if (text.size() > INT_MAX ||
      !::google::protobuf::internal::IsStructurallyValidUTF8(text.data(),
                                                              static_cast<int>(text.size())))
    throw std::invalid_argument(std::string("pmrkit::protobuf: the span's ") + field +
                                " is not valid UTF-8 (SSF's fields are protobuf strings: text "
                                "in UTF-8; send other bytes encoded, as hex or base64)");
}

void require_utf8(const std::map<std::string, std::string>& tags, const char* field) {
  for (const auto& [key, value] : tags) {
    require_utf8(key, field);
    require_utf8(value, field);
  }
}

void require_utf8(const span& s) {
  require_utf8(s.service, "service");
  require_utf8(s.name, "name");
  require_utf8(s.tags, "tags");
  for (const sample& m : s.metrics) {
    require_utf8(m.name, "metric name");
    require_utf8(m.message, "metric message");
    require_utf8(m.unit, "metric unit");
    require_utf8(m.tags, "metric tags");
  }
}

}  // namespace

namespace detail {

void assign(ssf::SSFSpan& message, const span& s) {
  require_utf8(s);
  message.set_version(s.version);
  message.set_trace_id(s.trace_id);
  message.set_id(s.id);
  message.set_parent_id(s.parent_id);
  message.set_start_timestamp(s.start_timestamp);
  message.set_end_timestamp(s.end_timestamp);
  message.set_error(s.error);
  message.set_service(s.service);
  message.set_name(s.name);
  sync_tags(*message.mutable_tags(), s.tags);
  message.set_indicator(s.indicator);
  auto& metrics = *message.mutable_metrics();
  // RemoveLast keeps the element, cleared, for a later Add: a varying number of metrics
  // reuses the same sample objects.
  while (static_cast<std::size_t>(metrics.size()) > s.metrics.size()) metrics.RemoveLast();
  for (std::size_t i = 0; i < s.metrics.size(); ++i) {
    ssf::SSFSample& sample = i < static_cast<std::size_t>(metrics.size())
                                 ? *metrics.Mutable(static_cast<int>(i))
                                 : *metrics.Add();
    assign_sample(sample, s.metrics[i]);
  }
}

}  // namespace detail

byte_buffer serialize(const span& s, std::pmr::memory_resource* resource) {
  byte_buffer block = byte_buffer::make_standalone(resource, fresh_arena_block);
  byte_buffer out(resource);
  {
    ::google::protobuf::Arena arena(arena_on(block));
    auto* message = ::google::protobuf::Arena::CreateMessage<ssf::SSFSpan>(&arena);
    detail::assign(*message, s);
    const std::size_t size = message->ByteSizeLong();
    out = byte_buffer::make_standalone(resource, size);
    write(*message, size, out);
  }  // the arena goes before its block
  return out;
}

// ---------------------------------------------------------------- span_encoder

struct span_encoder::impl {
  explicit impl(buffer_pool& buffers) : pool(buffers) {}
  buffer_pool& pool;
  ssf::SSFSpan message;  // reused: see detail::assign
};

span_encoder::span_encoder(buffer_pool& pool) : impl_(std::make_unique<impl>(pool)) {}
span_encoder::~span_encoder() = default;

byte_buffer span_encoder::encode(const span& s) {
  detail::assign(impl_->message, s);
  const std::size_t size = impl_->message.ByteSizeLong();
  byte_buffer out = impl_->pool.acquire(size);
  write(impl_->message, size, out);
  return out;
}

std::size_t span_encoder::encode_into(const span& s, byte_buffer& out) {
  detail::assign(impl_->message, s);
  return write(impl_->message, impl_->message.ByteSizeLong(), out);
}

std::size_t span_encoder::encode_to(const span& s, std::span<std::byte> out) {
  detail::assign(impl_->message, s);
  const std::size_t size = impl_->message.ByteSizeLong();
  if (size > out.size()) {
    throw std::length_error("span_encoder::encode_to: the span needs " + std::to_string(size) +
                            " bytes, the buffer holds " + std::to_string(out.size()));
  }
  auto* begin = reinterpret_cast<std::uint8_t*>(out.data());
  return static_cast<std::size_t>(impl_->message.SerializeWithCachedSizesToArray(begin) - begin);
}

// ---------------------------------------------------------------- views

metric_type sample_view::metric() const noexcept {
  return static_cast<metric_type>(message_->metric());
}
std::string_view sample_view::name() const noexcept { return message_->name(); }
float sample_view::value() const noexcept { return message_->value(); }
std::int64_t sample_view::timestamp() const noexcept { return message_->timestamp(); }
std::string_view sample_view::message() const noexcept { return message_->message(); }
sample_status sample_view::status() const noexcept {
  return static_cast<sample_status>(message_->status());
}
float sample_view::sample_rate() const noexcept { return message_->sample_rate(); }
std::string_view sample_view::unit() const noexcept { return message_->unit(); }
std::size_t sample_view::tag_count() const noexcept { return message_->tags().size(); }
std::optional<std::string_view> sample_view::tag(std::string_view key) const {
  return find_tag(message_->tags(), key);
}
void sample_view::visit_tags(function_ref<void(std::string_view, std::string_view)> visit) const {
  for (const auto& [key, value] : message_->tags()) visit(key, value);
}
sample sample_view::to_sample() const {
  sample s;
  s.metric = metric();
  s.name = message_->name();
  s.value = value();
  s.timestamp = timestamp();
  s.message = message_->message();
  s.status = status();
  s.sample_rate = sample_rate();
  s.tags = copy_tags(message_->tags());
  s.unit = message_->unit();
  return s;
}

std::int32_t span_view::version() const noexcept { return message_->version(); }
std::int64_t span_view::trace_id() const noexcept { return message_->trace_id(); }
std::int64_t span_view::id() const noexcept { return message_->id(); }
std::int64_t span_view::parent_id() const noexcept { return message_->parent_id(); }
std::int64_t span_view::start_timestamp() const noexcept { return message_->start_timestamp(); }
std::int64_t span_view::end_timestamp() const noexcept { return message_->end_timestamp(); }
bool span_view::error() const noexcept { return message_->error(); }
bool span_view::indicator() const noexcept { return message_->indicator(); }
std::string_view span_view::service() const noexcept { return message_->service(); }
std::string_view span_view::name() const noexcept { return message_->name(); }
std::size_t span_view::tag_count() const noexcept { return message_->tags().size(); }
std::optional<std::string_view> span_view::tag(std::string_view key) const {
  return find_tag(message_->tags(), key);
}
void span_view::visit_tags(function_ref<void(std::string_view, std::string_view)> visit) const {
  for (const auto& [key, value] : message_->tags()) visit(key, value);
}
std::size_t span_view::metric_count() const noexcept {
  return static_cast<std::size_t>(message_->metrics_size());
}
sample_view span_view::metric(std::size_t index) const {
  if (index >= metric_count()) {
    throw std::out_of_range("span_view::metric(" + std::to_string(index) + "): the span has " +
                            std::to_string(metric_count()) + " metrics");
  }
  return sample_view(&message_->metrics(static_cast<int>(index)));
}
span span_view::to_span() const {
  span s;
  s.version = version();
  s.trace_id = trace_id();
  s.id = id();
  s.parent_id = parent_id();
  s.start_timestamp = start_timestamp();
  s.end_timestamp = end_timestamp();
  s.error = error();
  s.service = message_->service();
  s.name = message_->name();
  s.tags = copy_tags(message_->tags());
  s.indicator = indicator();
  s.metrics.reserve(metric_count());
  for (std::size_t i = 0; i < metric_count(); ++i) s.metrics.push_back(metric(i).to_sample());
  return s;
}

// ---------------------------------------------------------------- span_parser

span_parser::span_parser(buffer_pool& pool, const span_parser_options& options)
    : pool_(&pool), options_(options), arena_block_(options.initial_arena_block) {
  if (options.max_arena_block > max_arena_block_limit) {
    throw std::invalid_argument(
        "span_parser: max_arena_block " + std::to_string(options.max_arena_block) +
        " is too large; allowed: up to " + std::to_string(max_arena_block_limit));
  }
  if (options.initial_arena_block < min_arena_block ||
      options.initial_arena_block > options.max_arena_block) {
    throw std::invalid_argument(
        "span_parser: initial_arena_block " + std::to_string(options.initial_arena_block) +
        " is out of range; allowed: " + std::to_string(min_arena_block) + ".." +
        std::to_string(options.max_arena_block) + " (max_arena_block)");
  }
  arena_block_published_.set(arena_block_);
}

// A span that overflowed the block sets the block size for the next parses: big enough for it,
// but no larger than the pool keeps (a block it would free on return costs an allocation on
// every parse) nor max_arena_block. And one large span must not set the size for good: after
// arena_block_decay parses in a row that used at most half the block, it halves, down to
// initial_arena_block.
// (`allocated` counts the whole initial block, `used` what the span took of it.)
void span_parser::learn_arena_block(std::uint64_t allocated, std::uint64_t used,
                                    std::size_t block_capacity) noexcept {
  if (allocated > block_capacity) {
    arena_overflows_.add();
    const std::size_t wanted = allocated >= std::size_t{1} << 62
                                   ? options_.max_arena_block
                                   : std::bit_ceil(static_cast<std::size_t>(allocated));
    // The pool's largest bucket: a larger block it would free on return.
    const std::size_t largest_kept =
        std::bit_ceil(std::min(pool_->options().max_capacity, std::size_t{1} << 62));
    arena_block_ = std::max(options_.initial_arena_block,
                            std::min({options_.max_arena_block, largest_kept, wanted}));
    small_parses_ = 0;
  } else if (arena_block_ > options_.initial_arena_block && used <= arena_block_ / 2) {
    if (++small_parses_ == arena_block_decay) {
      arena_block_ = std::max(options_.initial_arena_block, arena_block_ / 2);
      small_parses_ = 0;
    }
  } else {
    small_parses_ = 0;
  }
  arena_block_published_.set(arena_block_);
}

bool span_parser::parse(std::span<const std::byte> bytes,
                        function_ref<void(const span_view&)> on_span) {
  // Bytes that libprotobuf would refuse are refused here first, so that it never logs a line
  // for a string that is not UTF-8 (span_wire_check.hpp).
  const detail::span_wire verdict = bytes.size() > static_cast<std::size_t>(INT_MAX)
                                        ? detail::span_wire::refused
                                        : detail::check_span_wire(bytes);
  if (verdict == detail::span_wire::refused) {
    parse_errors_.add();
    return false;
  }
  byte_buffer block;
  byte_buffer known_fields;
  try {
    block = pool_->acquire(arena_block_);
    // Fields a span_view cannot read (a newer sender's) would cost heap allocations in
    // libprotobuf's unknown-field set every parse: they are dropped in a pooled copy first.
    if (verdict == detail::span_wire::valid_with_unknown_fields) {
      known_fields = pool_->acquire(bytes.size());
      known_fields.commit(detail::copy_without_unknown_fields(bytes, known_fields.spare().data()));
      bytes = known_fields.span();
      with_unknown_fields_.add();
    }
  } catch (const std::bad_alloc&) {
    allocation_failures_.add();  // so the account of datagrams still closes
    throw;
  }
  // ArenaOptions' block_alloc/block_dealloc are bare function pointers with no context, so
  // they cannot reach this parser's pool without global state. Instead the arena gets a block
  // from the pool as its initial block, which it never frees; only a span that outgrows it
  // reaches the arena's default (heap) allocation, which the parser counts and learns from.
  ::google::protobuf::Arena arena(arena_on(block));
  auto* message = ::google::protobuf::Arena::CreateMessage<ssf::SSFSpan>(&arena);
  bool parsed = false;
  try {
    parsed = message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  } catch (const std::bad_alloc&) {  // the heap, for strings and arena growth
    allocation_failures_.add();
    throw;
  }
  learn_arena_block(arena.SpaceAllocated(), arena.SpaceUsed(), block.capacity());
  if (!parsed) {
    parse_errors_.add();
    return false;
  }
  parsed_.add();
  on_span(span_view(message));
  return true;
}

std::optional<span> span_parser::parse_copy(std::span<const std::byte> bytes) {
  std::optional<span> out;
  parse(bytes, [&](const span_view& view) { out = view.to_span(); });
  return out;
}

span_parser_stats span_parser::stats() const noexcept {
  return {.parsed = parsed_.get(),
          .parse_errors = parse_errors_.get(),
          .allocation_failures = allocation_failures_.get(),
          .with_unknown_fields = with_unknown_fields_.get(),
          .arena_overflows = arena_overflows_.get(),
          .arena_block = arena_block_published_.get()};
}

}  // namespace pmrkit::protobuf
