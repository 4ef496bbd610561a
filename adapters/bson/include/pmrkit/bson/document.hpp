// pmrkit/bson/document.hpp — a BSON document encoded by libbson into memory from a
// std::pmr::memory_resource, reusable from one document to the next.
//
// document wraps a libbson bson_t whose buffer is grown through the resource (libbson's
// bson_realloc_func hook, bridged to allocate/deallocate), so encoding takes no memory from
// the global heap once the document exists; clear() keeps the storage for the next document, so
// a reused document encodes with no allocation at all. Creating one costs libbson's own small
// bson_t allocation (see global_allocator.hpp to route that to a resource too). Appends either
// succeed completely or throw and leave the document as it was (std::length_error when the
// document would pass 2 GiB; std::invalid_argument for a key containing NUL, or a non-empty key
// inside an array, whose keys are the indexes "0", "1", ...; std::logic_error for a nesting
// mistake). A key or value may be a view of the document's own bytes (bytes(): appending a
// document to itself): such an append first moves the document to a new block (one
// allocation, and data() changes), since libbson overwrites the terminator before it copies.
// Not thread-safe: one thread at a time.
// Move-only (a moved-from document may only be destroyed or assigned to); the resource must
// outlive it.
//
// docs/adapters/bson.md tables which call writes which BSON type. A value a call's comment says
// it refuses throws std::invalid_argument, also leaving the document as it was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <span>
#include <string_view>

#include "pmrkit/bson/value_types.hpp"

namespace pmrkit::bson {

class document {
 public:
  // Nested documents and arrays this encoder can have open at once.
  static constexpr std::size_t max_depth = 15;

  // Throws std::invalid_argument for a null resource, std::length_error, allocating nothing,
  // for an initial_capacity above INT32_MAX (the most a BSON document may hold).
  explicit document(std::pmr::memory_resource* resource = std::pmr::get_default_resource(),
                    std::size_t initial_capacity = 256);
  document(document&& other) noexcept;
  document& operator=(document&& other) noexcept;
  document(const document&) = delete;
  document& operator=(const document&) = delete;
  ~document();

  document& append_int32(std::string_view key, std::int32_t value);
  document& append_int64(std::string_view key, std::int64_t value);
  document& append_double(std::string_view key, double value);
  document& append_bool(std::string_view key, bool value);
  document& append_null(std::string_view key);
  // Any bytes, as a BSON string: pass valid UTF-8 (libbson does not check it, nor does this).
  document& append_utf8(std::string_view key, std::string_view value);
  // UTC milliseconds since the Unix epoch.
  document& append_date_time(std::string_view key, std::int64_t milliseconds_since_epoch);
  document& append_object_id(std::string_view key, const object_id& id);
  document& append_binary(std::string_view key, std::span<const std::byte> bytes,
                          std::uint8_t subtype = 0);
  document& append_decimal128(std::string_view key, const decimal128& value);
  // A regular expression: `pattern` may not contain NUL (std::invalid_argument); `options` is
  // any of the letters i, l, m, s, u, x (anything else throws), written sorted and once each,
  // as libbson and pymongo write them ("xi" is written "ix"). The one append that takes
  // global-heap memory: libbson builds the sorted options in a string of its own (bson_malloc,
  // four small blocks, freed before it returns; global_allocator.hpp routes them too).
  document& append_regex(std::string_view key, std::string_view pattern,
                         std::string_view options = {});
  document& append_timestamp(std::string_view key, const timestamp& value);
  document& append_min_key(std::string_view key);
  document& append_max_key(std::string_view key);
  // JavaScript code (BSON type 0x0D, without scope): any bytes, like append_utf8.
  document& append_code(std::string_view key, std::string_view javascript);
  // An already-encoded document as a nested document (checked like validate_document()).
  document& append_document(std::string_view key, std::span<const std::byte> encoded);
  // An already-encoded array (BSON's array is a document whose keys are the indexes): checked
  // like validate_document(), and its own keys must be "0", "1", ... in order
  // (std::invalid_argument otherwise; the keys of documents and arrays nested inside it are
  // not checked).
  document& append_array(std::string_view key, std::span<const std::byte> encoded);

  document& begin_document(std::string_view key);
  document& begin_array(std::string_view key);
  // Closes the innermost open document or array; std::logic_error if none is open.
  document& end();

  // The encoded document. std::logic_error while a nested document or array is open.
  std::span<const std::byte> bytes() const;
  std::size_t size() const noexcept;      // encoded bytes so far
  std::size_t capacity() const noexcept;  // bytes of storage held
  std::size_t depth() const noexcept;     // open nested documents and arrays
  // Empties the document, keeping its storage.
  void clear() noexcept;

  std::pmr::memory_resource* resource() const noexcept { return resource_; }

 private:
  struct impl;
  // Gives impl_ back to resource_ and leaves the object moved-from (destructor, move-assign).
  void release_storage() noexcept;
  std::pmr::memory_resource* resource_;
  impl* impl_ = nullptr;  // allocated from resource_
};

}  // namespace pmrkit::bson
