// Bounds-checked walk over BSON document structure, shared by validate_document() and the
// OP_MSG reader. Pure; never reads outside [base + begin, base + limit).
#pragma once

#include <cstddef>

namespace pmrkit::bson::detail {

// The largest max_nesting accepted: the walk recurses once per level.
inline constexpr std::size_t max_nesting_limit = 1000;

// Checks the document that starts at base[begin] and must end by base[limit] (exclusive);
// returns its length. Offsets in error messages are from `base`. `what` names the document
// ("document 3 of sequence \"documents\"") for the message. With `elements` false only the
// length prefix and the terminator are checked.
std::size_t check_document(const std::byte* base, std::size_t begin, std::size_t limit,
                           bool elements, std::size_t max_nesting, const char* what);

}  // namespace pmrkit::bson::detail
