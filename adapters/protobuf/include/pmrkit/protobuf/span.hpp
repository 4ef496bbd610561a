// pmrkit/protobuf/span.hpp — a trace span with metrics (SSF), as plain C++ values.
//
// What you build and send with span_encoder/span_sender, and what span_view::to_span() gives
// back. Plain values: no protobuf type appears here, so a user of pmrkit::protobuf never
// includes a generated header. The wire format is pmrkit/ssf/span.proto (installed with the
// package), modelled on Veneur's SSFSpan. Thread-safety and ownership as for any value type.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pmrkit::protobuf {

enum class metric_type : int { counter = 0, gauge = 1, histogram = 2, set = 3, status = 4 };
enum class sample_status : int { ok = 0, warning = 1, critical = 2, unknown = 3 };

struct sample {
  metric_type metric = metric_type::counter;
  std::string name;
  float value = 0;
  std::int64_t timestamp = 0;
  std::string message;
  sample_status status = sample_status::ok;
  float sample_rate = 1;
  std::map<std::string, std::string> tags;
  std::string unit;

  bool operator==(const sample&) const = default;
};

struct span {
  std::int32_t version = 0;
  std::int64_t trace_id = 0;
  std::int64_t id = 0;
  std::int64_t parent_id = 0;
  std::int64_t start_timestamp = 0;
  std::int64_t end_timestamp = 0;
  bool error = false;
  std::string service;
  std::string name;
  std::map<std::string, std::string> tags;
  bool indicator = false;
  std::vector<sample> metrics;

  bool operator==(const span&) const = default;
};

}  // namespace pmrkit::protobuf
