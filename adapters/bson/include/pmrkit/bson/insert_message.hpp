// pmrkit/bson/insert_message.hpp — MongoDB OP_MSG insert commands written into pooled buffers.
//
// insert_message writes one complete OP_MSG into a byte_buffer: the header, flagBits, a kind-0
// body {insert: <collection>, $db: <database>, ordered: <bool>} and a kind-1 "documents"
// sequence holding any number of documents, as a driver's insert_many sends them. Documents
// come in encoded (a span of BSON bytes, e.g. from a bson_t or a pmrkit::bson::document) and
// are copied once, into the message. finish() fills in the lengths and hands the buffer back:
// a buffer from a buffer_pool returns to its pool when the caller drops it, so a warm pool makes
// a message cost no allocation. insert_builder is the pool-backed front door.
//
// Errors: std::invalid_argument for a database or collection name that is empty or contains
// NUL, for names that make the command document larger than max_command_document_bytes
// (16 MiB + 16 KiB: what a server and parse_op_msg take), and for a document that is not one
// well-formed BSON document (length prefix, terminator, element structure; see
// validate_document()); message_too_large when a document exceeds
// max_document_bytes or the message would exceed max_message_bytes (the message is unchanged,
// so the caller can finish() it and put the document in the next one). Thread-safety: an
// insert_message is used by one thread at a time; insert_builder is thread-safe (its pool is,
// and request ids come from an atomic counter). The pool must outlive the builder and buffers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string_view>

#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/bson/wire_format.hpp"

namespace pmrkit::bson {

class document;

struct insert_options {
  bool ordered = true;
  std::size_t max_message_bytes = default_max_message_bytes;
  std::size_t max_document_bytes = default_max_document_bytes;
  // Walk each document's elements before copying it in (on by default: a malformed document
  // would otherwise only be caught by the server).
  bool validate_documents = true;
};

class insert_message {
 public:
  // Clears `buffer` (keeping its storage) and writes the header, the body and the start of the
  // documents sequence into it.
  insert_message(byte_buffer buffer, std::string_view database, std::string_view collection,
                 std::int32_t request_id, const insert_options& options = {});
  insert_message(insert_message&&) noexcept = default;
  insert_message& operator=(insert_message&&) noexcept = default;

  // Copies one encoded document into the sequence.
  void add(std::span<const std::byte> document);
  void add(const document& document);
  // Whether a document of this many bytes would still fit under max_message_bytes.
  bool fits(std::size_t document_bytes) const noexcept;

  std::size_t document_count() const noexcept { return documents_; }
  std::size_t size() const noexcept { return buffer_.size(); }

  // Fills in messageLength and the sequence's size and returns the finished message. The
  // insert_message is empty afterwards (further add() throws std::logic_error).
  byte_buffer finish();

 private:
  byte_buffer buffer_;
  insert_options options_;
  std::size_t sequence_at_ = 0;  // offset of the kind-1 section's size field
  std::size_t documents_ = 0;
  bool finished_ = false;
};

class insert_builder {
 public:
  // Throws std::invalid_argument if max_message_bytes is below the smallest possible message
  // or above INT32_MAX.
  explicit insert_builder(buffer_pool& pool, insert_options options = {});

  // A message in a buffer from the pool, with the next request id.
  insert_message begin(std::string_view database, std::string_view collection,
                       std::size_t expected_bytes = 0);
  // One message holding all `documents`.
  byte_buffer build(std::string_view database, std::string_view collection,
                    std::span<const std::span<const std::byte>> documents);

  const insert_options& options() const noexcept { return options_; }
  buffer_pool& pool() const noexcept { return *pool_; }

 private:
  buffer_pool* pool_;
  insert_options options_;
  std::atomic<std::int32_t> next_request_id_{1};
};

}  // namespace pmrkit::bson
