#include "pmrkit/bson/insert_message.hpp"

#include <climits>
#include <cstring>
#include <string>
#include <utility>

#include "byte_order.hpp"
#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"

namespace pmrkit::bson {
namespace {

constexpr std::string_view sequence_identifier = "documents";
// flagBits, the kind byte of the body, and the kind byte, size and identifier of the sequence.
constexpr std::size_t fixed_overhead = 4 + 1 + 1 + 4 + sequence_identifier.size() + 1;
constexpr std::size_t smallest_message = header_size + fixed_overhead + 5;

void check_name(std::string_view name, const char* what) {
  if (name.empty()) {
    throw std::invalid_argument(std::string("pmrkit::bson::insert_message: the ") + what +
                                " name is empty");
  }
  if (name.find('\0') != std::string_view::npos) {
    throw std::invalid_argument(std::string("pmrkit::bson::insert_message: the ") + what +
                                " name contains NUL");
  }
  if (name.size() > default_max_document_bytes) {
    throw std::invalid_argument(std::string("pmrkit::bson::insert_message: the ") + what +
                                " name is longer than a BSON document may be");
  }
}

void check_options(const insert_options& options) {
  if (options.max_message_bytes > static_cast<std::size_t>(INT32_MAX) ||
      options.max_message_bytes < smallest_message) {
    throw std::invalid_argument("pmrkit::bson::insert_options: max_message_bytes " +
                                std::to_string(options.max_message_bytes) +
                                " is out of range: allowed " + std::to_string(smallest_message) +
                                ".." + std::to_string(INT32_MAX));
  }
}

// The body {insert: <collection>, $db: <database>, ordered: <bool>}, element by element.
std::size_t body_size(std::string_view database, std::string_view collection) {
  return 4 + (1 + 7 + 4 + collection.size() + 1) + (1 + 4 + 4 + database.size() + 1) +
         (1 + 8 + 1) + 1;
}

std::byte* put(std::byte* at, const void* bytes, std::size_t count) {
  std::memcpy(at, bytes, count);
  return at + count;
}

std::byte* put_byte(std::byte* at, std::uint8_t value) {
  *at = static_cast<std::byte>(value);
  return at + 1;
}

std::byte* put_i32(std::byte* at, std::int32_t value) {
  detail::store_i32(at, value);
  return at + 4;
}

std::byte* put_cstring(std::byte* at, std::string_view text) {
  at = put(at, text.data(), text.size());
  return put_byte(at, 0);
}

std::byte* put_utf8_element(std::byte* at, std::string_view key, std::string_view value) {
  at = put_byte(at, 0x02);
  at = put_cstring(at, key);
  at = put_i32(at, static_cast<std::int32_t>(value.size() + 1));
  return put_cstring(at, value);
}

}  // namespace

insert_message::insert_message(byte_buffer buffer, std::string_view database,
                               std::string_view collection, std::int32_t request_id,
                               const insert_options& options)
    : buffer_(std::move(buffer)), options_(options) {
  check_options(options);
  check_name(database, "database");
  check_name(collection, "collection");
  const std::size_t body = body_size(database, collection);
  if (body > max_command_document_bytes) {
    throw std::invalid_argument(
        "pmrkit::bson::insert_message: the names make the command document " +
        std::to_string(body) + " bytes, more than a server (or parse_op_msg) takes: " +
        std::to_string(max_command_document_bytes) + " (MongoDB's own namespaces are far "
        "shorter: 255 bytes)");
  }
  const std::size_t start = header_size + fixed_overhead + body;
  if (start > options.max_message_bytes) {
    throw message_too_large("pmrkit::bson::insert_message: the header and body alone take " +
                            std::to_string(start) + " bytes, more than max_message_bytes (" +
                            std::to_string(options.max_message_bytes) + ")");
  }
  buffer_.clear();
  buffer_.resize_for_overwrite(start);
  std::byte* at = buffer_.data();
  at = put_i32(at, 0);  // messageLength, filled in by finish()
  at = put_i32(at, request_id);
  at = put_i32(at, 0);  // responseTo
  at = put_i32(at, op_msg);
  at = put_i32(at, 0);  // flagBits: no checksum, a reply is wanted

  at = put_byte(at, 0);  // section kind 0: the command document
  at = put_i32(at, static_cast<std::int32_t>(body));
  at = put_utf8_element(at, "insert", collection);  // the command name must come first
  at = put_utf8_element(at, "$db", database);
  at = put_byte(at, 0x08);
  at = put_cstring(at, "ordered");
  at = put_byte(at, options.ordered ? 1 : 0);
  at = put_byte(at, 0);  // the body's terminator

  at = put_byte(at, 1);  // section kind 1: the documents
  sequence_at_ = static_cast<std::size_t>(at - buffer_.data());
  at = put_i32(at, 0);  // size, filled in by finish()
  put_cstring(at, sequence_identifier);
}

bool insert_message::fits(std::size_t document_bytes) const noexcept {
  return document_bytes <= options_.max_document_bytes &&
         document_bytes <= options_.max_message_bytes - buffer_.size();
}

void insert_message::add(std::span<const std::byte> document) {
  if (finished_ || buffer_.data() == nullptr) {
    throw std::logic_error("pmrkit::bson::insert_message::add: the message is finished");
  }
  if (document.size() > options_.max_document_bytes) {
    throw message_too_large("pmrkit::bson::insert_message::add: a " +
                            std::to_string(document.size()) +
                            "-byte document exceeds max_document_bytes (" +
                            std::to_string(options_.max_document_bytes) + ")");
  }
  if (document.size() > options_.max_message_bytes - buffer_.size()) {
    throw message_too_large("pmrkit::bson::insert_message::add: a " +
                            std::to_string(document.size()) + "-byte document would make the " +
                            std::to_string(buffer_.size()) +
                            "-byte message exceed max_message_bytes (" +
                            std::to_string(options_.max_message_bytes) +
                            "); finish() this message and start another");
  }
  try {
    if (options_.validate_documents) {
      validate_document(document);
    } else if (document.size() < 5 ||
               detail::load_u32(document.data()) != document.size() ||
               document.back() != std::byte{0}) {
      throw wire_format_error("the span is not one BSON document (length prefix " +
                              std::string(document.size() < 4 ? "missing" : "or terminator") +
                              " disagrees)");
    }
  } catch (const wire_format_error& e) {
    throw std::invalid_argument(std::string("pmrkit::bson::insert_message::add: ") + e.what());
  }
  buffer_.append(document);
  ++documents_;
}

void insert_message::add(const document& document) { add(document.bytes()); }

byte_buffer insert_message::finish() {
  if (finished_ || buffer_.data() == nullptr) {
    throw std::logic_error("pmrkit::bson::insert_message::finish: the message is finished");
  }
  detail::store_i32(buffer_.data(), static_cast<std::int32_t>(buffer_.size()));
  detail::store_i32(buffer_.data() + sequence_at_,
                    static_cast<std::int32_t>(buffer_.size() - sequence_at_));
  finished_ = true;
  return std::move(buffer_);
}

insert_builder::insert_builder(buffer_pool& pool, insert_options options)
    : pool_(&pool), options_(options) {
  check_options(options);
}

insert_message insert_builder::begin(std::string_view database, std::string_view collection,
                                     std::size_t expected_bytes) {
  const std::int32_t id = next_request_id_.fetch_add(1, std::memory_order_relaxed);
  return insert_message(pool_->acquire(expected_bytes), database, collection, id, options_);
}

byte_buffer insert_builder::build(std::string_view database, std::string_view collection,
                                  std::span<const std::span<const std::byte>> documents) {
  std::size_t total = header_size + fixed_overhead + body_size(database, collection);
  for (const auto& d : documents) total += d.size() <= options_.max_message_bytes ? d.size() : 0;
  insert_message message = begin(database, collection,
                                 total <= options_.max_message_bytes ? total : 0);
  for (const auto& d : documents) message.add(d);
  return message.finish();
}

}  // namespace pmrkit::bson
