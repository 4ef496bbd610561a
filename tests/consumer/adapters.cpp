// The adapters through the installed package: an insert message, wrapped in OP_COMPRESSED and
// unwrapped, then read back; an SSF span serialized and parsed. Returns the number of failures.
#include <memory_resource>
#include <string>

#include <pmrkit/bson.hpp>
#include <pmrkit/buffer_pool.hpp>
#include <pmrkit/protobuf/span_codec.hpp>
#include <pmrkit/zstd.hpp>

int run_adapters(std::pmr::memory_resource* resource) {
  int failures = 0;
  pmrkit::buffer_pool pool(resource);

  pmrkit::bson::insert_builder builder(pool);
  pmrkit::bson::document doc(resource);
  doc.append_utf8("name", "consumer").append_int32("answer", 42);
  pmrkit::bson::insert_message msg = builder.begin("db", "things");
  msg.add(doc);
  pmrkit::byte_buffer wire = msg.finish();

  pmrkit::zstd::compressor compressor(resource);
  pmrkit::zstd::decompressor inflate(resource);
  pmrkit::byte_buffer compressed = pool.acquire();
  pmrkit::bson::wrap_op_compressed(wire.span(), pmrkit::bson::compressor_id_zstd, compressor,
                                   compressed);
  pmrkit::byte_buffer original = pool.acquire();
  pmrkit::bson::unwrap_op_compressed(compressed.span(), pmrkit::bson::compressor_id_zstd, inflate,
                                     original);
  const auto view = pmrkit::bson::parse_op_msg(original.span());
  bool found = false;
  const auto documents = view.find_sequence("documents", &found);
  if (!found || documents.documents.count() != 1) ++failures;

  pmrkit::protobuf::span s;
  s.service = "consumer";
  s.name = "check";
  s.trace_id = 7;
  const pmrkit::byte_buffer bytes = pmrkit::protobuf::serialize(s, resource);
  pmrkit::protobuf::span_parser parser(pool);
  const auto parsed = parser.parse_copy(bytes.span());
  if (!parsed || parsed->service != "consumer" || parsed->trace_id != 7) ++failures;
  return failures;
}
