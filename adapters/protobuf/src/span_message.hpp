// Internal: filling the generated SSFSpan from a pmrkit::protobuf::span so that a reused
// message keeps its storage. Not installed.
#pragma once

#include "pmrkit/ssf/span.pb.h"
#include "pmrkit/protobuf/span.hpp"

namespace pmrkit::protobuf::detail {

// Makes `message` equal to `s`, reusing its strings, map nodes and repeated elements where
// they already exist: when `s` has the same shape as the span last assigned (same tag keys,
// same number of metrics), nothing is allocated.
void assign(ssf::SSFSpan& message, const span& s);

}  // namespace pmrkit::protobuf::detail
