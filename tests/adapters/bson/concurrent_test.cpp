// One insert_builder (and its buffer_pool) shared by several threads: every message is whole
// and every pooled buffer comes back.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/insert_message.hpp"
#include "pmrkit/bson/op_msg_reader.hpp"
#include "pmrkit/counting_resource.hpp"

TEST_CASE("insert_builder is shared safely between threads", "[bson][concurrent]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  std::atomic<int> bad{0};
  {
    pmrkit::buffer_pool pool(&counted);
    pmrkit::bson::insert_builder builder(pool);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        pmrkit::bson::document d;  // each thread encodes with its own document
        for (int i = 0; i < 200; ++i) {
          auto message = builder.begin("db", "c");
          for (int k = 0; k < 1 + i % 7; ++k) {
            d.clear();
            d.append_int32("thread", t).append_int32("i", i).append_int32("k", k);
            message.add(d);
          }
          const pmrkit::byte_buffer m = message.finish();
          const auto view = pmrkit::bson::parse_op_msg(m.span());
          if (view.sequence(0).documents.count() != static_cast<std::size_t>(1 + i % 7)) ++bad;
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  CHECK(bad.load() == 0);
  CHECK(counted.stats().bytes_in_use == 0);
}
