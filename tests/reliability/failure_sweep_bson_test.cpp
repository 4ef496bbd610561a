// Allocation-failure sweeps over the bson adapter: building OP_MSG insert messages from a pool
// (one, several, many documents, with buffer growth) and encoding documents on a resource.
// After each failure the error was std::bad_alloc, nothing leaked, the builder still builds
// messages the reader accepts, and a document whose append failed is unchanged (documented).
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/insert_message.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/testing/failure_sweep.hpp"
#include "sweep_helpers.hpp"

using pmrkit::test::require;
using pmrkit::testing::failure_sweep;
using pmrkit::testing::failure_sweep_options;
namespace bson = pmrkit::bson;

namespace {

// Documents encoded once, outside the swept memory.
std::vector<bson::document> sample_documents(int count) {
  std::vector<bson::document> docs;
  for (int i = 0; i < count; ++i) {
    docs.emplace_back(std::pmr::new_delete_resource());
    docs.back()
        .append_int32("n", i)
        .append_utf8("text", std::string(static_cast<std::size_t>(20 + i * 37 % 900), 'a' + i % 26))
        .begin_document("nested")
        .append_double("x", i * 0.5)
        .append_bool("odd", i % 2 == 1)
        .end();
  }
  return docs;
}

struct builder_subject {
  std::unique_ptr<pmrkit::buffer_pool> pool;
  std::unique_ptr<bson::insert_builder> builder;
};

void build_and_check(bson::insert_builder& builder, const std::vector<bson::document>& docs,
                     std::size_t count) {
  std::vector<std::span<const std::byte>> spans;
  for (std::size_t i = 0; i < count; ++i) spans.push_back(docs[i].bytes());
  const pmrkit::byte_buffer message = builder.build("reliability", "sweep", spans);
  const auto view = bson::parse_op_msg(message.span());
  require(view.find_sequence("documents").documents.count() == count, "documents lost");
}

}  // namespace

TEST_CASE("failure sweep: building insert messages", "[failure_sweep][bson]") {
  const auto docs = sample_documents(60);
  const bool sticky = GENERATE(false, true);
  CAPTURE(sticky);
  failure_sweep_options options;
  options.sticky = sticky;
  const auto result = failure_sweep(
      [](std::pmr::memory_resource& memory) {
        builder_subject s;
        pmrkit::buffer_pool_options o;
        o.min_capacity = 64;  // start small, so big messages grow their buffer
        s.pool = std::make_unique<pmrkit::buffer_pool>(&memory, o);
        s.builder = std::make_unique<bson::insert_builder>(*s.pool);
        return s;
      },
      [&](builder_subject& s) {
        for (std::size_t count : {1u, 5u, 60u, 2u}) build_and_check(*s.builder, docs, count);
        // add() one by one, as a streaming writer would.
        bson::insert_message m = s.builder->begin("reliability", "one_by_one");
        for (const auto& d : docs) m.add(d);
        const pmrkit::byte_buffer out = m.finish();
        require(bson::parse_op_msg(out.span()).find_sequence("documents").documents.count() == 60,
                "documents lost");
      },
      [&](builder_subject& s) { build_and_check(*s.builder, docs, 60); }, options);
  CHECK(result.surfaced > 3);
}

TEST_CASE("failure sweep: encoding a document; a failed append leaves it unchanged",
          "[failure_sweep][bson]") {
  struct subject {
    std::unique_ptr<bson::document> doc;
    std::vector<std::byte> last_good;  // the document after its last successful append
  };
  const auto result = failure_sweep(
      [](std::pmr::memory_resource& memory) {
        subject s{std::make_unique<bson::document>(&memory, 16), {}};
        s.last_good = pmrkit::test::snapshot(s.doc->bytes());
        return s;
      },
      [](subject& s) {
        const auto nested = sample_documents(1);
        for (int i = 0; i < 200; ++i) {
          std::string key("k");  // not "k" + to_string(i): GCC 12's -Wrestrict misfires on it
          key += std::to_string(i);
          if (i % 3 == 0)
            s.doc->append_utf8(key, std::string(static_cast<std::size_t>(i * 7), 'z'));
          else if (i % 3 == 1) s.doc->append_int64(key, i);
          else s.doc->append_document(key, nested[0].bytes());
          s.last_good = pmrkit::test::snapshot(s.doc->bytes());
        }
      },
      [](subject& s) {
        require(s.doc->depth() == 0, "a failed append left a nested document open");
        require(pmrkit::test::same_bytes(s.doc->bytes(), s.last_good),
                "a failed append changed the document");
        bson::validate_document(s.doc->bytes());
        s.doc->append_utf8("after", "the failure");
        bson::validate_document(s.doc->bytes());
      });
  CHECK(result.surfaced > 3);
}

TEST_CASE("failure sweep: constructing a document", "[failure_sweep][bson]") {
  struct slot {
    std::pmr::memory_resource* memory;
    std::unique_ptr<bson::document> doc;
  };
  failure_sweep([](std::pmr::memory_resource& memory) { return slot{&memory, nullptr}; },
                [](slot& s) {
                  s.doc = std::make_unique<bson::document>(s.memory, 4096);
                  s.doc->append_int32("a", 1);
                },
                [](slot&) {});
}
