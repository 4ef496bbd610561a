#include "pmrkit/bson/op_msg_reader.hpp"

#include <string>

#include "bson_structure.hpp"
#include "byte_order.hpp"

namespace pmrkit::bson {
namespace {

constexpr std::size_t flags_at = header_size;        // flagBits follow the header
constexpr std::size_t sections_at = header_size + 4;  // then the sections
constexpr std::uint32_t known_required_flags = flag_checksum_present | flag_more_to_come;

std::string hex(std::uint32_t v) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) out += digits[(v >> shift) & 0xFu];
  return out;
}

[[noreturn]] void fail(std::size_t offset, const std::string& message) {
  throw wire_format_error("OP_MSG, offset " + std::to_string(offset) + ": " + message);
}

// One step of the section walk over bytes that parse_op_msg() has already checked.
struct section {
  std::uint8_t kind;
  std::size_t payload;  // offset just after the kind byte
  std::size_t end;      // offset just past the section
};

section next_section(const std::byte* base, std::size_t at) noexcept {
  const auto kind = static_cast<std::uint8_t>(base[at]);
  const std::size_t payload = at + 1;
  const auto length = static_cast<std::size_t>(detail::load_u32(base + payload));
  return {kind, payload, payload + length};  // both kinds start with their own int32 length
}

std::string_view identifier_at(const std::byte* base, std::size_t payload) noexcept {
  return {reinterpret_cast<const char*>(base + payload + 4)};  // checked to be terminated
}

}  // namespace

// ---------------------------------------------------------------- document_range

document_range::iterator::value_type document_range::iterator::operator*() const noexcept {
  return {at_, static_cast<std::size_t>(detail::load_u32(at_))};
}

document_range::iterator& document_range::iterator::operator++() noexcept {
  at_ += detail::load_u32(at_);
  return *this;
}

// ---------------------------------------------------------------- op_msg_view

document_sequence op_msg_view::sequence(std::size_t index) const {
  if (index >= sequence_count_) {
    throw std::out_of_range("op_msg_view::sequence(" + std::to_string(index) +
                            "): the message has " + std::to_string(sequence_count_) +
                            " document sequences");
  }
  const std::byte* base = message_.data();
  const std::size_t end = sections_at + sections_.size();
  for (std::size_t at = sections_at; at < end;) {
    const section s = next_section(base, at);
    if (s.kind == 1 && index-- == 0) {
      document_sequence seq;
      seq.identifier = identifier_at(base, s.payload);
      seq.size = detail::load_i32(base + s.payload);
      const std::size_t first = s.payload + 4 + seq.identifier.size() + 1;
      std::size_t count = 0;
      for (std::size_t d = first; d < s.end; d += detail::load_u32(base + d)) ++count;
      seq.documents = document_range({base + first, s.end - first}, count);
      return seq;
    }
    at = s.end;
  }
  return {};  // unreachable: sequence_count_ was counted by the same walk
}

document_sequence op_msg_view::find_sequence(std::string_view identifier, bool* found) const {
  for (std::size_t i = 0; i < sequence_count_; ++i) {
    document_sequence seq = sequence(i);
    if (seq.identifier == identifier) {
      if (found) *found = true;
      return seq;
    }
  }
  if (found) *found = false;
  return {};
}

// ---------------------------------------------------------------- parse_op_msg

op_msg_view parse_op_msg(std::span<const std::byte> message, const reader_limits& limits) {
  if (limits.max_nesting > detail::max_nesting_limit) {
    throw std::invalid_argument("reader_limits::max_nesting " +
                                std::to_string(limits.max_nesting) + " is too large: allowed 0.." +
                                std::to_string(detail::max_nesting_limit));
  }
  const std::size_t size = message.size();
  if (size > limits.max_message_bytes) {
    fail(0, "the message is " + std::to_string(size) + " bytes, more than the allowed " +
                std::to_string(limits.max_message_bytes));
  }
  if (size < sections_at + 1) {
    fail(0, std::to_string(size) + " bytes is too short: an OP_MSG needs a 16-byte header, 4 "
                                   "bytes of flagBits and at least one section");
  }
  const std::byte* base = message.data();
  op_msg_view view;
  view.message_ = message;
  view.header_ = read_message_header(message, limits.max_message_bytes);
  if (static_cast<std::size_t>(view.header_.message_length) != size) {
    fail(0, "messageLength " + std::to_string(view.header_.message_length) +
                " disagrees with the " + std::to_string(size) + " bytes of the message");
  }
  if (view.header_.op_code != op_msg) {
    fail(12, "opCode " + std::to_string(view.header_.op_code) + " is not OP_MSG (2013)");
  }
  view.flag_bits_ = detail::load_u32(base + flags_at);
  if (const std::uint32_t unknown = view.flag_bits_ & 0xFFFFu & ~known_required_flags) {
    fail(flags_at, "flagBits " + hex(view.flag_bits_) + " set unknown required bit(s) " +
                       hex(unknown) +
                       ": of bits 0-15 only checksumPresent (0) and moreToCome (1) are allowed");
  }
  std::size_t end = size;
  if (view.checksum_present()) {
    if (size < sections_at + 1 + 4) fail(size, "checksumPresent is set but there is no room for "
                                               "both a section and the 4-byte checksum");
    end = size - 4;
    const std::uint32_t stored = detail::load_u32(base + end);
    const std::uint32_t computed = crc32c(message.first(end));
    if (stored != computed) {
      fail(end, "CRC-32C checksum " + std::to_string(stored) + " does not match the message (" +
                    std::to_string(computed) + ")");
    }
  }

  std::size_t bodies = 0;
  for (std::size_t at = sections_at; at < end;) {
    const auto kind = static_cast<std::uint8_t>(base[at]);
    const std::size_t payload = at + 1;
    if (kind == 0) {
      if (++bodies > 1) fail(at, "a second kind-0 (body) section: exactly one is allowed");
      const std::size_t length = detail::check_document(
          base, payload, end, limits.validate_documents, limits.max_nesting, "OP_MSG body");
      if (length > limits.max_document_bytes) {
        fail(payload, "the body document is " + std::to_string(length) +
                          " bytes, more than the allowed " +
                          std::to_string(limits.max_document_bytes));
      }
      view.body_ = message.subspan(payload, length);
      at = payload + length;
    } else if (kind == 1) {
      if (end - payload < 4) {
        fail(payload, "a document sequence needs a 4-byte size, " +
                          std::to_string(end - payload) + " bytes are left");
      }
      const std::int32_t declared = detail::load_i32(base + payload);
      // Its size counts itself and the identifier's terminator at least.
      if (declared < 6 || static_cast<std::size_t>(declared) > end - payload) {
        fail(payload, "document sequence size " + std::to_string(declared) +
                          " is out of range: allowed 6.." + std::to_string(end - payload) +
                          " (the size field, a non-empty identifier and the bytes left)");
      }
      const std::size_t section_end = payload + static_cast<std::size_t>(declared);
      std::size_t nul = payload + 4;
      while (nul < section_end && base[nul] != std::byte{0}) ++nul;
      if (nul == section_end) {
        fail(payload + 4, "the document sequence identifier is not terminated within the "
                          "section's " + std::to_string(declared) + " bytes");
      }
      if (nul == payload + 4) fail(payload + 4, "the document sequence identifier is empty");
      if (++view.sequence_count_ > limits.max_document_sequences) {
        fail(at, "more than the allowed " + std::to_string(limits.max_document_sequences) +
                     " document sequences");
      }
      const std::string_view identifier(reinterpret_cast<const char*>(base + payload + 4),
                                        nul - payload - 4);
      // Identifiers must be unique; re-walk the (already checked) sections before this one.
      for (std::size_t earlier = sections_at; earlier < at;) {
        const section s = next_section(base, earlier);
        if (s.kind == 1 && identifier_at(base, s.payload) == identifier) {
          fail(payload + 4, "document sequence identifier \"" + std::string(identifier) +
                                "\" appears twice: identifiers must be unique");
        }
        earlier = s.end;
      }
      for (std::size_t d = nul + 1; d < section_end;) {
        const std::size_t length =
            detail::check_document(base, d, section_end, limits.validate_documents,
                                   limits.max_nesting, "document in a document sequence");
        if (length > limits.max_document_bytes) {
          fail(d, "a document in sequence \"" + std::string(identifier) + "\" is " +
                      std::to_string(length) +
                      " bytes, more than the allowed " + std::to_string(limits.max_document_bytes));
        }
        d += length;
      }
      at = section_end;
    } else {
      fail(at, "section kind " + std::to_string(kind) +
                   " is not allowed: 0 (body) or 1 (document sequence)");
    }
  }
  if (bodies == 0) fail(sections_at, "no kind-0 (body) section: exactly one is required");
  view.sections_ = message.subspan(sections_at, end - sections_at);
  return view;
}

}  // namespace pmrkit::bson
