// pmrkit/bson/op_msg_reader.hpp — a bounds-checked reader for OP_MSG, the receive side of the
// messages insert_message writes.
//
// parse_op_msg() checks the whole message once — header, flagBits, every section and every
// document in it, optionally each document's element structure — and throws wire_format_error
// for anything truncated or inconsistent; it never reads outside the span it is given, whatever
// the bytes. The op_msg_view it returns borrows the bytes (they must outlive it) and walks the
// already-checked sections without allocating. No libbson here; everything is pure, and views
// may be shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string_view>

#include "pmrkit/bson/wire_format.hpp"

namespace pmrkit::bson {

struct reader_limits {
  std::size_t max_message_bytes = default_max_message_bytes;
  // The server allows 16 MiB documents plus 16 KiB of command overhead in OP_MSG.
  std::size_t max_document_bytes = max_command_document_bytes;
  std::size_t max_document_sequences = 16;  // kind-1 sections per message
  // Walk each document's elements (types, key and string terminators, nested lengths) too,
  // not only its length prefix and terminator.
  bool validate_documents = true;
  std::size_t max_nesting = 100;  // nested documents/arrays, as the server allows
};

// The documents stored back to back in a span that has been checked to hold exactly that.
class document_range {
 public:
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::span<const std::byte>;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = value_type;

    iterator() = default;
    value_type operator*() const noexcept;
    iterator& operator++() noexcept;
    iterator operator++(int) noexcept {
      iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const iterator& other) const noexcept { return at_ == other.at_; }

   private:
    friend class document_range;
    explicit iterator(const std::byte* at) noexcept : at_(at) {}
    const std::byte* at_ = nullptr;
  };

  document_range() = default;
  iterator begin() const noexcept { return iterator(bytes_.data()); }
  iterator end() const noexcept { return iterator(bytes_.data() + bytes_.size()); }
  std::size_t count() const noexcept { return count_; }
  std::span<const std::byte> bytes() const noexcept { return bytes_; }

 private:
  friend class op_msg_view;
  document_range(std::span<const std::byte> bytes, std::size_t count) noexcept
      : bytes_(bytes), count_(count) {}
  std::span<const std::byte> bytes_;
  std::size_t count_ = 0;
};

// A kind-1 section: an identifier ("documents" for insert) and the documents after it.
struct document_sequence {
  std::string_view identifier;
  document_range documents;
  std::int32_t size = 0;  // the section's size field: its own 4 bytes, the identifier, documents
};

class op_msg_view {
 public:
  const message_header& header() const noexcept { return header_; }
  std::uint32_t flag_bits() const noexcept { return flag_bits_; }
  bool checksum_present() const noexcept { return (flag_bits_ & flag_checksum_present) != 0; }
  bool more_to_come() const noexcept { return (flag_bits_ & flag_more_to_come) != 0; }
  // The kind-0 section's document (the command).
  std::span<const std::byte> body() const noexcept { return body_; }
  std::size_t sequence_count() const noexcept { return sequence_count_; }
  // The index-th kind-1 section, in message order (index < sequence_count()).
  document_sequence sequence(std::size_t index) const;
  // The first kind-1 section with this identifier; found is false if there is none.
  document_sequence find_sequence(std::string_view identifier, bool* found = nullptr) const;
  std::span<const std::byte> bytes() const noexcept { return message_; }

 private:
  friend op_msg_view parse_op_msg(std::span<const std::byte>, const reader_limits&);
  std::span<const std::byte> message_;
  std::span<const std::byte> sections_;  // after flagBits, before the checksum
  message_header header_;
  std::uint32_t flag_bits_ = 0;
  std::span<const std::byte> body_;
  std::size_t sequence_count_ = 0;
};

// Checks `message` (exactly one OP_MSG: its messageLength must equal message.size()) and
// returns a view of it. Throws wire_format_error, naming the offset and what is allowed, for:
// a message shorter than its header or longer than limits.max_message_bytes; a messageLength
// that disagrees with the span; an opCode other than 2013; an unknown required flag bit; a bad
// checksum; a section of unknown kind; zero or several kind-0 sections; a section or document
// that overruns what contains it; documents that do not fill their sequence exactly; duplicate
// sequence identifiers; too many sequences; a document larger than max_document_bytes; and (with
// validate_documents) a malformed element or nesting beyond max_nesting.
op_msg_view parse_op_msg(std::span<const std::byte> message, const reader_limits& limits = {});

// Checks that `document` is one well-formed BSON document filling the span: its length prefix
// matches, it ends with 0x00, every element has a known type and lies inside its document, and
// nesting stays within max_nesting. Throws wire_format_error. Strings are not checked for valid
// UTF-8 (that is the application's concern, as it is the server's).
void validate_document(std::span<const std::byte> document, std::size_t max_nesting = 100);

}  // namespace pmrkit::bson
