// For the protobuf tests and the span_parse fuzzer: a span message's bytes with its maps in key
// order, so that equal messages give equal bytes, floats compared bit for bit
// (MessageDifferencer calls two NaNs different).
#pragma once

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <string>

#include "pmrkit/ssf/span.pb.h"

namespace pmrkit::test {

inline std::string deterministic_bytes(const pmrkit::ssf::SSFSpan& message) {
  std::string out;
  {
    ::google::protobuf::io::StringOutputStream stream(&out);
    ::google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

}  // namespace pmrkit::test
