#include "pmrkit/bson/document.hpp"

#include <bson/bson.h>

#include <array>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "pmrkit/bson/op_msg_reader.hpp"

namespace pmrkit::bson {
namespace {

constexpr std::size_t storage_alignment = alignof(std::max_align_t);
// libbson refuses documents larger than this.
constexpr std::size_t max_document_size = INT32_MAX;

[[noreturn]] void too_large(std::size_t used, std::size_t adding) {
  throw std::length_error("pmrkit::bson::document: appending " + std::to_string(adding) +
                          " bytes to a " + std::to_string(used) +
                          "-byte document would pass BSON's 2 GiB limit");
}

// The bytes of a value with a `fixed` overhead, or too_large() if that overflows.
std::size_t value_size(std::size_t used, std::size_t payload, std::size_t fixed) {
  if (payload > max_document_size - fixed) too_large(used, payload);
  return payload + fixed;
}

}  // namespace

struct document::impl {
  std::pmr::memory_resource* resource;
  // libbson keeps pointers to these two and reads/updates them when it grows the buffer.
  std::uint8_t* data = nullptr;
  std::size_t buf_len = 0;
  std::size_t capacity = 0;  // bytes allocated at `data`; libbson's buf_len never exceeds it
  std::size_t used = 5;      // the encoded size if every open container were closed now
  bson_t* top = nullptr;
  // Open nested documents/arrays, one bson_t per level, each allocated the first time that
  // level is reached and kept. bson_t is 128-byte aligned (BSON_EXTRA_ALIGN), more than a
  // resource promises, so each block is over-allocated and aligned by hand.
  static constexpr std::size_t child_block_bytes = sizeof(bson_t) + alignof(bson_t);
  std::array<void*, max_depth> child_blocks{};
  bson_t* children[max_depth] = {};  // (std::array would drop bson_t's alignment attribute)
  std::size_t depth = 0;
  // The block that grow() replaced during the append in progress, freed when the append ends:
  // the caller's key or value may lie in it (a document appending a view of its own bytes),
  // and libbson reads them after the growth.
  std::uint8_t* retired = nullptr;
  std::size_t retired_bytes = 0;
  std::array<bool, max_depth + 1> in_array{};
  std::array<std::uint32_t, max_depth + 1> next_index{};

  explicit impl(std::pmr::memory_resource* r) : resource(r) {}

  bson_t* current() noexcept { return depth == 0 ? top : children[depth - 1]; }

  // Makes room for at least `required` bytes, keeping the contents. Throws what the resource
  // throws, leaving everything unchanged.
  void grow(std::size_t required) {
    if (required <= capacity) return;
    std::size_t target = capacity > max_document_size / 2 ? required : capacity * 2;
    if (target < required) target = required;
    if (target < 64) target = 64;
    move_to(target);
  }

  // Moves the contents to a new block of `new_capacity` (at least the old one). The block the
  // append began with is kept until the append ends, since only it can hold the caller's
  // bytes (release_retired); one an append moved to before is freed at once.
  void move_to(std::size_t new_capacity) {
    auto* fresh = static_cast<std::uint8_t*>(resource->allocate(new_capacity, storage_alignment));
    if (data) {
      std::memcpy(fresh, data, capacity);
      if (retired == nullptr) {
        retired = data;
        retired_bytes = capacity;
      } else {
        resource->deallocate(data, capacity, storage_alignment);
      }
    }
    data = fresh;
    capacity = new_capacity;
    buf_len = new_capacity;
  }

  // libbson's bson_realloc_func: it gives the new size only, so the old one is kept here. It
  // cannot report failure (libbson writes through the result at once), which is why every
  // append makes room from C++ first (reserve_for) and this hook only runs if libbson asks
  // for more than that.
  static void* realloc_hook(void* mem, std::size_t num_bytes, void* ctx) noexcept {
    auto* self = static_cast<impl*>(ctx);
    (void)mem;  // always self->data
    try {
      self->grow(num_bytes);
    } catch (...) {
      std::fputs("pmrkit::bson::document: the memory resource failed inside libbson's realloc "
                 "hook, which cannot report failure\n",
                 stderr);
      std::terminate();
    }
    return self->data;
  }

  void reserve_for(std::size_t element_bytes) {
    if (element_bytes > max_document_size - used) too_large(used, element_bytes);
    // What libbson checks before writing: offset + len + size + depth <= buf_len.
    grow(used + element_bytes + depth + 1);
  }

  // The bson_t for nesting level `level` (0 = the first child).
  bson_t* child_at(std::size_t level) {
    if (children[level] == nullptr) {
      void* block = resource->allocate(child_block_bytes, storage_alignment);
      void* p = block;
      std::size_t space = child_block_bytes;
      children[level] = static_cast<bson_t*>(std::align(alignof(bson_t), sizeof(bson_t), p, space));
      child_blocks[level] = block;
    }
    return children[level];
  }

  // Checks the key and gives the one to write: the caller's, or the next index in an array.
  std::string_view resolve_key(std::string_view key, char (&digits)[12]) const {
    if (in_array[depth]) {
      if (!key.empty()) {
        throw std::invalid_argument("pmrkit::bson::document: key \"" + std::string(key) +
                                    "\" given inside an array: pass \"\", array keys are the "
                                    "indexes 0, 1, ...");
      }
      const auto r = std::to_chars(digits, digits + sizeof digits, next_index[depth]);
      return {digits, static_cast<std::size_t>(r.ptr - digits)};
    }
    if (key.find('\0') != std::string_view::npos) {
      throw std::invalid_argument("pmrkit::bson::document: a key may not contain NUL (BSON keys "
                                  "are C strings)");
    }
    if (key.size() > max_document_size - 16) {
      throw std::length_error("pmrkit::bson::document: key longer than BSON's 2 GiB limit");
    }
    return key;
  }

  void release_retired() noexcept {
    if (retired == nullptr) return;
    resource->deallocate(retired, retired_bytes, storage_alignment);
    retired = nullptr;
  }

  // Whether `view` lies, even in part, in this document's storage.
  template <class View>
  bool holds(const View& view) const noexcept {
    const auto begin = reinterpret_cast<std::uintptr_t>(view.data());
    const auto end = begin + view.size() * sizeof(*view.data());
    const auto own = reinterpret_cast<std::uintptr_t>(data);
    return data != nullptr && begin < end && begin < own + capacity && own < end;
  }

  // Appends one element of `value_bytes` through `write(bson_t*, key, key_length)`. `views`
  // are what `write` reads besides the key.
  template <class Write, class... Views>
  void append(std::string_view key, std::size_t value_bytes, Write write, const Views&... views) {
    struct release_at_end {
      impl& self;
      ~release_at_end() { self.release_retired(); }
    } release{*this};
    char digits[12];
    const std::string_view k = resolve_key(key, digits);
    const std::size_t element = value_size(used, value_bytes, k.size() + 2);
    // libbson writes the new element's type byte over the terminator before it copies the key
    // and the value, so a view of this document's own bytes is read from a block nothing
    // writes to: the one it began in, kept until the append ends (grow() keeps it likewise).
    if (holds(k) || (holds(views) || ...)) move_to(capacity);
    reserve_for(element);
    if (!write(current(), k.data(), static_cast<int>(k.size()))) {
      throw std::length_error("pmrkit::bson::document: libbson refused to append \"" +
                              std::string(k) + "\" (the document would be too large)");
    }
    used += element;
    if (in_array[depth]) ++next_index[depth];
  }

  void begin(std::string_view key, bool array) {
    if (depth == max_depth) {
      throw std::logic_error("pmrkit::bson::document: more than " + std::to_string(max_depth) +
                             " nested documents/arrays open at once");
    }
    bson_t* child = child_at(depth);
    append(key, 5, [&](bson_t* b, const char* k, int n) {
      return array ? bson_append_array_begin(b, k, n, child)
                   : bson_append_document_begin(b, k, n, child);
    });
    ++depth;
    in_array[depth] = array;
    next_index[depth] = 0;
  }

  void end() {
    if (depth == 0) {
      throw std::logic_error("pmrkit::bson::document::end(): no nested document or array is open");
    }
    bson_t* parent = depth == 1 ? top : children[depth - 2];
    bson_t* child = children[depth - 1];
    const bool ok = in_array[depth] ? bson_append_array_end(parent, child)
                                    : bson_append_document_end(parent, child);
    --depth;
    if (!ok) throw std::logic_error("pmrkit::bson::document::end(): libbson refused to close");
  }

  void release() noexcept {
    if (top) bson_destroy(top);  // frees the bson_t only: its buffer is ours (BSON_FLAG_NO_FREE)
    if (data) resource->deallocate(data, capacity, storage_alignment);
    release_retired();
    for (void* block : child_blocks)
      if (block) resource->deallocate(block, child_block_bytes, storage_alignment);
  }
};

namespace {

using impl_allocator = std::pmr::polymorphic_allocator<std::byte>;

[[noreturn]] void moved_from() {
  throw std::logic_error("pmrkit::bson::document: used after being moved from");
}

// Makes `view` a read-only libbson view of an already-encoded document or array from the
// caller, after checking its structure (libbson trusts the bytes it is given). `call` names the
// caller in the message. An out-parameter because a static bson_t points into itself and must
// not be copied.
void init_checked_view(bson_t& view, std::span<const std::byte> encoded, const char* call) {
  try {
    validate_document(encoded);
  } catch (const wire_format_error& e) {
    throw std::invalid_argument(std::string("pmrkit::bson::document::") + call + ": " + e.what());
  }
  if (!bson_init_static(&view, reinterpret_cast<const std::uint8_t*>(encoded.data()),
                        encoded.size())) {
    throw std::invalid_argument(std::string("pmrkit::bson::document::") + call +
                                ": libbson refused the document");
  }
}

// Throws unless the keys of `array` (a checked view) are "0", "1", ... in order.
void check_array_keys(const bson_t& array) {
  bson_iter_t it;
  if (!bson_iter_init(&it, &array)) return;  // cannot happen for a checked view
  std::uint32_t index = 0;
  char expected[12];
  while (bson_iter_next(&it)) {
    const auto r = std::to_chars(expected, expected + sizeof expected, index);
    const std::string_view want(expected, static_cast<std::size_t>(r.ptr - expected));
    const std::string_view key(bson_iter_key(&it), bson_iter_key_len(&it));
    if (key != want) {
      throw std::invalid_argument("pmrkit::bson::document::append_array: element " +
                                  std::to_string(index) + " has key \"" + std::string(key) +
                                  "\": an array's keys must be its indexes \"0\", \"1\", ... "
                                  "in order (append it with append_document if it is a "
                                  "document)");
    }
    ++index;
  }
}

// The options of a regular expression as BSON stores them: each letter once, in this order.
constexpr std::string_view regex_option_letters = "ilmsux";

// `options` checked, deduplicated and sorted, NUL-terminated for libbson.
std::array<char, regex_option_letters.size() + 1> sorted_regex_options(std::string_view options) {
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (regex_option_letters.find(options[i]) == std::string_view::npos) {
      const auto byte = static_cast<unsigned char>(options[i]);
      char shown[64];
      if (byte > 0x20 && byte < 0x7F) {
        std::snprintf(shown, sizeof shown, "'%c' at position %zu", options[i], i);
      } else {
        std::snprintf(shown, sizeof shown, "byte 0x%02X at position %zu", byte, i);
      }
      throw std::invalid_argument(std::string("pmrkit::bson::document::append_regex: options "
                                              "may only be the letters i, l, m, s, u, x; got ") +
                                  shown);
    }
  }
  std::array<char, regex_option_letters.size() + 1> sorted{};
  std::size_t n = 0;
  for (const char letter : regex_option_letters)
    if (options.find(letter) != std::string_view::npos) sorted[n++] = letter;
  return sorted;
}

}  // namespace

document::document(std::pmr::memory_resource* resource, std::size_t initial_capacity)
    : resource_(resource) {
  if (resource == nullptr) throw std::invalid_argument("pmrkit::bson::document: null resource");
  // libbson takes a buffer of at most INT32_MAX bytes; asking first spares the allocation.
  if (initial_capacity > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw std::length_error("pmrkit::bson::document: initial_capacity " +
                            std::to_string(initial_capacity) + " is more than a BSON document "
                            "may hold (at most " +
                            std::to_string(std::numeric_limits<std::int32_t>::max()) +
                            " bytes)");
  impl_allocator alloc(resource);
  impl* d = alloc.new_object<impl>(resource);
  try {
    d->grow(initial_capacity < 5 ? 5 : initial_capacity);
    const std::uint8_t empty[5] = {5, 0, 0, 0, 0};
    std::memcpy(d->data, empty, sizeof empty);
    d->top = bson_new_from_buffer(&d->data, &d->buf_len, &impl::realloc_hook, d);
    if (d->top == nullptr) throw std::runtime_error("libbson refused an empty document buffer");
  } catch (...) {
    d->release();
    alloc.delete_object(d);
    throw;
  }
  impl_ = d;
}

document::document(document&& other) noexcept
    : resource_(other.resource_), impl_(std::exchange(other.impl_, nullptr)) {}

document& document::operator=(document&& other) noexcept {
  if (this != &other) {
    release_storage();
    resource_ = other.resource_;
    impl_ = std::exchange(other.impl_, nullptr);
  }
  return *this;
}

document::~document() { release_storage(); }

void document::release_storage() noexcept {
  if (impl_ == nullptr) return;
  impl_->release();
  impl_allocator(resource_).delete_object(impl_);
  impl_ = nullptr;
}

document& document::append_int32(std::string_view key, std::int32_t value) {
  if (!impl_) moved_from();
  impl_->append(key, 4, [&](bson_t* b, const char* k, int n) {
    return bson_append_int32(b, k, n, value);
  });
  return *this;
}

document& document::append_int64(std::string_view key, std::int64_t value) {
  if (!impl_) moved_from();
  impl_->append(key, 8, [&](bson_t* b, const char* k, int n) {
    return bson_append_int64(b, k, n, value);
  });
  return *this;
}

document& document::append_double(std::string_view key, double value) {
  if (!impl_) moved_from();
  impl_->append(key, 8, [&](bson_t* b, const char* k, int n) {
    return bson_append_double(b, k, n, value);
  });
  return *this;
}

document& document::append_bool(std::string_view key, bool value) {
  if (!impl_) moved_from();
  impl_->append(key, 1, [&](bson_t* b, const char* k, int n) {
    return bson_append_bool(b, k, n, value);
  });
  return *this;
}

document& document::append_null(std::string_view key) {
  if (!impl_) moved_from();
  impl_->append(key, 0, [&](bson_t* b, const char* k, int n) { return bson_append_null(b, k, n); });
  return *this;
}

document& document::append_utf8(std::string_view key, std::string_view value) {
  if (!impl_) moved_from();
  impl_->append(key, value_size(impl_->used, value.size(), 4 + 1),
                [&](bson_t* b, const char* k, int n) {
                  return bson_append_utf8(b, k, n, value.data(), static_cast<int>(value.size()));
                },
                value);
  return *this;
}

document& document::append_date_time(std::string_view key, std::int64_t milliseconds) {
  if (!impl_) moved_from();
  impl_->append(key, 8, [&](bson_t* b, const char* k, int n) {
    return bson_append_date_time(b, k, n, milliseconds);
  });
  return *this;
}

document& document::append_object_id(std::string_view key, const object_id& id) {
  if (!impl_) moved_from();
  bson_oid_t oid;
  std::memcpy(oid.bytes, id.bytes.data(), sizeof oid.bytes);
  impl_->append(key, 12, [&](bson_t* b, const char* k, int n) {
    return bson_append_oid(b, k, n, &oid);
  });
  return *this;
}

document& document::append_binary(std::string_view key, std::span<const std::byte> bytes,
                                  std::uint8_t subtype) {
  if (!impl_) moved_from();
  // The old binary subtype 0x02 carries its length twice.
  const std::size_t value =
      value_size(impl_->used, bytes.size(), 4 + 1 + (subtype == 0x02 ? 4 : 0));
  impl_->append(
      key, value,
      [&](bson_t* b, const char* k, int n) {
        return bson_append_binary(b, k, n, static_cast<bson_subtype_t>(subtype),
                                  reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                  static_cast<std::uint32_t>(bytes.size()));
      },
      bytes);
  return *this;
}

document& document::append_decimal128(std::string_view key, const decimal128& value) {
  if (!impl_) moved_from();
  bson_decimal128_t dec;
  dec.high = value.high;
  dec.low = value.low;
  impl_->append(key, 16, [&](bson_t* b, const char* k, int n) {
    return bson_append_decimal128(b, k, n, &dec);
  });
  return *this;
}

document& document::append_regex(std::string_view key, std::string_view pattern,
                                 std::string_view options) {
  if (!impl_) moved_from();
  if (pattern.find('\0') != std::string_view::npos) {
    throw std::invalid_argument("pmrkit::bson::document::append_regex: the pattern contains NUL, "
                                "which BSON cannot store (a pattern is a C string)");
  }
  const auto sorted = sorted_regex_options(options);
  const std::size_t options_bytes = std::char_traits<char>::length(sorted.data()) + 1;
  impl_->append(key, value_size(impl_->used, pattern.size(), options_bytes + 1),
                [&](bson_t* b, const char* k, int n) {
                  return bson_append_regex_w_len(b, k, n, pattern.data(),
                                                 static_cast<int>(pattern.size()), sorted.data());
                },
                pattern);
  return *this;
}

document& document::append_timestamp(std::string_view key, const timestamp& value) {
  if (!impl_) moved_from();
  impl_->append(key, 8, [&](bson_t* b, const char* k, int n) {
    return bson_append_timestamp(b, k, n, value.seconds, value.increment);
  });
  return *this;
}

document& document::append_min_key(std::string_view key) {
  if (!impl_) moved_from();
  impl_->append(key, 0,
                [&](bson_t* b, const char* k, int n) { return bson_append_minkey(b, k, n); });
  return *this;
}

document& document::append_max_key(std::string_view key) {
  if (!impl_) moved_from();
  impl_->append(key, 0,
                [&](bson_t* b, const char* k, int n) { return bson_append_maxkey(b, k, n); });
  return *this;
}

document& document::append_code(std::string_view key, std::string_view javascript) {
  if (!impl_) moved_from();
  // libbson's bson_append_code takes a C string only (no length: no NUL inside, and a
  // string_view is not terminated). Code is laid out exactly like a string, so it is written as
  // one, with its length, and its type byte changed afterwards.
  impl_->append(key, value_size(impl_->used, javascript.size(), 4 + 1),
                [&](bson_t* b, const char* k, int n) {
                  const std::uint32_t type_at = b->len - 1;  // where the terminator was
                  if (!bson_append_utf8(b, k, n, javascript.data(),
                                        static_cast<int>(javascript.size()))) {
                    return false;
                  }
                  // The buffer is this document's own (libbson hands it out read-only).
                  const_cast<std::uint8_t*>(bson_get_data(b))[type_at] = BSON_TYPE_CODE;
                  return true;
                },
                javascript);
  return *this;
}

document& document::append_document(std::string_view key, std::span<const std::byte> encoded) {
  if (!impl_) moved_from();
  bson_t nested;
  init_checked_view(nested, encoded, "append_document");
  impl_->append(
      key, encoded.size(),
      [&](bson_t* b, const char* k, int n) { return bson_append_document(b, k, n, &nested); },
      encoded);
  return *this;
}

document& document::append_array(std::string_view key, std::span<const std::byte> encoded) {
  if (!impl_) moved_from();
  bson_t array;
  init_checked_view(array, encoded, "append_array");
  check_array_keys(array);
  impl_->append(
      key, encoded.size(),
      [&](bson_t* b, const char* k, int n) { return bson_append_array(b, k, n, &array); },
      encoded);
  return *this;
}

document& document::begin_document(std::string_view key) {
  if (!impl_) moved_from();
  impl_->begin(key, false);
  return *this;
}

document& document::begin_array(std::string_view key) {
  if (!impl_) moved_from();
  impl_->begin(key, true);
  return *this;
}

document& document::end() {
  if (!impl_) moved_from();
  impl_->end();
  return *this;
}

std::span<const std::byte> document::bytes() const {
  if (!impl_) moved_from();
  if (impl_->depth != 0) {
    throw std::logic_error("pmrkit::bson::document::bytes(): " + std::to_string(impl_->depth) +
                           " nested document(s)/array(s) still open: end() them first");
  }
  return {reinterpret_cast<const std::byte*>(bson_get_data(impl_->top)), impl_->top->len};
}

std::size_t document::size() const noexcept { return impl_ ? impl_->used : 0; }
std::size_t document::capacity() const noexcept { return impl_ ? impl_->capacity : 0; }
std::size_t document::depth() const noexcept { return impl_ ? impl_->depth : 0; }

void document::clear() noexcept {
  if (!impl_) return;
  // libbson marks a parent while a child is open; close them so the top accepts appends again.
  while (impl_->depth > 0) {
    try {
      impl_->end();
    } catch (...) {
      break;  // cannot happen: end() only fails with nothing open
    }
  }
  bson_reinit(impl_->top);
  impl_->used = 5;
  impl_->next_index[0] = 0;
}

}  // namespace pmrkit::bson
