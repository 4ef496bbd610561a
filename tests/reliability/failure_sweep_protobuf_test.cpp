// Allocation-failure sweeps over the protobuf adapter: encoding spans into pooled buffers,
// parsing datagrams on pooled arena blocks, and a span_sender/span_receiver pair on loopback.
// After each failure the error was std::bad_alloc (an allocation failure is never miscounted
// as a parse error), nothing leaked, and encoder, parser and receiver still work; the
// receiver loses no span to the failure.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <memory_resource>
#include <new>
#include <optional>
#include <vector>

#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/protobuf/span_codec.hpp"
#include "pmrkit/protobuf/span_transport.hpp"
#include "pmrkit/testing/failure_sweep.hpp"
#include "sweep_helpers.hpp"

using pmrkit::test::require;
using pmrkit::testing::failure_sweep;
namespace pb = pmrkit::protobuf;

namespace {

pb::span sample_span(int i) {
  pb::span s;
  s.version = 1;
  s.trace_id = 1000 + i;
  s.id = i;
  s.service = "reliability";
  s.name = "span " + std::to_string(i) + std::string(static_cast<std::size_t>(i * 131 % 3000), 'n');
  s.tags = {{"i", std::to_string(i)}, {"kind", "sweep"}};
  for (int m = 0; m < i % 5; ++m) {
    pb::sample sample;
    sample.name = "metric " + std::to_string(m);
    sample.value = static_cast<float>(m) * 1.5f;
    sample.tags = {{"m", std::to_string(m)}};
    s.metrics.push_back(sample);
  }
  return s;
}

std::vector<std::vector<std::byte>> encoded_spans(int count) {
  pmrkit::buffer_pool pool;
  pb::span_encoder encoder(pool);
  std::vector<std::vector<std::byte>> out;
  for (int i = 0; i < count; ++i)
    out.push_back(pmrkit::test::snapshot(encoder.encode(sample_span(i)).span()));
  return out;
}

struct codec_subject {
  std::unique_ptr<pmrkit::buffer_pool> pool;
  std::unique_ptr<pb::span_encoder> encoder;
  std::unique_ptr<pb::span_parser> parser;
  std::vector<pmrkit::byte_buffer> kept;
};

codec_subject make_codec(std::pmr::memory_resource& memory) {
  codec_subject s;
  pmrkit::buffer_pool_options o;
  o.min_capacity = 64;
  s.pool = std::make_unique<pmrkit::buffer_pool>(&memory, o);
  s.encoder = std::make_unique<pb::span_encoder>(*s.pool);
  s.parser = std::make_unique<pb::span_parser>(
      *s.pool, pb::span_parser_options{.initial_arena_block = 1024});
  return s;
}

}  // namespace

TEST_CASE("failure sweep: encoding spans into pooled buffers", "[failure_sweep][protobuf]") {
  const auto result = failure_sweep(
      make_codec,
      [](codec_subject& s) {
        for (int i = 0; i < 12; ++i) s.kept.push_back(s.encoder->encode(sample_span(i)));
        pmrkit::byte_buffer all(s.pool->resource());
        for (int i = 0; i < 12; ++i) s.encoder->encode_into(sample_span(i), all);
      },
      [](codec_subject& s) {
        for (std::size_t i = 0; i < s.kept.size(); ++i) {
          const auto back = s.parser->parse_copy(s.kept[i].span());
          require(back && *back == sample_span(static_cast<int>(i)), "an encoded span is wrong");
        }
        s.kept.clear();
        require(s.parser->parse_copy(s.encoder->encode(sample_span(3)).span()) == sample_span(3),
                "the encoder is broken after the failure");
      });
  CHECK(result.surfaced > 3);
}

TEST_CASE("failure sweep: parsing datagrams on pooled arena blocks", "[failure_sweep][protobuf]") {
  const auto datagrams = encoded_spans(12);
  const auto result = failure_sweep(
      make_codec,
      [&](codec_subject& s) {
        for (std::size_t i = 0; i < datagrams.size(); ++i) {
          const bool ok = s.parser->parse(datagrams[i], [&](const pb::span_view& v) {
            require(v.id() == static_cast<std::int64_t>(i), "parsed the wrong span");
          });
          require(ok, "a valid span was counted as a parse error");
        }
      },
      [&](codec_subject& s) {
        require(s.parser->stats().parse_errors == 0,
                "an allocation failure was counted as a parse error");
        require(s.parser->parse_copy(datagrams[7]) == sample_span(7),
                "the parser is broken after the failure");
      });
  CHECK(result.surfaced > 0);
}

namespace {

constexpr int receiver_spans = 16;

struct receiver_subject {
  std::unique_ptr<pb::span_receiver> receiver;
  std::vector<int> seen = std::vector<int>(receiver_spans, 0);
};

receiver_subject make_receiver(std::pmr::memory_resource& memory) {
  receiver_subject s;
  s.receiver = std::make_unique<pb::span_receiver>(
      pmrkit::datagram::udp_receiver_options{.batch_size = 4}, &memory,
      pb::span_parser_options{.initial_arena_block = 1024});
  pb::span_sender sender({.port = s.receiver->local_port(), .batch_size = 8},
                         std::pmr::new_delete_resource());
  for (int i = 0; i < receiver_spans; ++i) sender.send(sample_span(i));
  sender.flush();
  return s;
}

// Until every datagram sent was handed to the parser (or dropped by the kernel).
void receive_all(receiver_subject& s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  const auto accounted = [&] {
    const auto st = s.receiver->stats().udp;
    return st.received + st.truncated + st.kernel_drops >= receiver_spans;
  };
  while (!accounted()) {
    require(std::chrono::steady_clock::now() < end, "timed out receiving spans");
    s.receiver->poll_once(std::chrono::milliseconds(50), [&](const pb::span_view& v) {
      if (v.id() >= 0 && v.id() < receiver_spans) ++s.seen[static_cast<std::size_t>(v.id())];
    });
  }
}

}  // namespace

TEST_CASE("failure sweep: span_receiver loses at most the span whose parse failed",
          "[failure_sweep][protobuf][concurrent]") {
  const auto result = failure_sweep(make_receiver, receive_all, [](receiver_subject& s) {
    receive_all(s);
    const auto st = s.receiver->stats();
    require(st.parser.parse_errors == 0, "an allocation failure was counted as a parse error");
    int handed_on = 0;
    for (int i = 0; i < receiver_spans; ++i) {
      require(s.seen[static_cast<std::size_t>(i)] <= 1,
              "span " + std::to_string(i) + " handed on twice");
      handed_on += s.seen[static_cast<std::size_t>(i)];
    }
    // One datagram was being parsed when the allocation failed; udp_receiver documents that
    // a datagram whose handler throws is not handed on again.
    require(handed_on + 1 + static_cast<int>(st.udp.kernel_drops) >= receiver_spans,
            "more spans lost than the one whose parse failed");
  });
  CHECK(result.surfaced > 0);
}

// The span lost above is counted as received by the UDP layer; the parser counts it as an
// allocation failure, so span_receiver's statistics still add up.
TEST_CASE("span_receiver statistics add up after an allocation failure while parsing",
          "[protobuf]") {
  // Fails the first small allocation: the parser's arena block (receive buffers are 64 KiB).
  class small_block_fails final : public std::pmr::memory_resource {
    bool failed_ = false;
    void* do_allocate(std::size_t bytes, std::size_t alignment) override {
      if (bytes <= 4096 && !failed_) {
        failed_ = true;
        throw std::bad_alloc();
      }
      return std::pmr::new_delete_resource()->allocate(bytes, alignment);
    }
    void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
      std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
    }
    bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override {
      return this == &o;
    }
  } memory;
  receiver_subject s = make_receiver(memory);
  CHECK_THROWS_AS(receive_all(s), std::bad_alloc);
  receive_all(s);
  const auto st = s.receiver->stats();
  INFO("udp received " << st.udp.received << ", parsed " << st.parser.parsed << ", parse errors "
                       << st.parser.parse_errors << ", allocation failures "
                       << st.parser.allocation_failures);
  CHECK(st.parser.allocation_failures == 1);
  CHECK(st.udp.received ==
        st.parser.parsed + st.parser.parse_errors + st.parser.allocation_failures);
}

TEST_CASE("failure sweep: span_sender sending batches", "[failure_sweep][protobuf][concurrent]") {
  struct subject {
    std::unique_ptr<pb::span_receiver> sink;  // on the heap, outside the sweep
    std::unique_ptr<pb::span_sender> sender;
    std::uint64_t submitted = 0;
  };
  const auto result = failure_sweep(
      [](std::pmr::memory_resource& memory) {
        subject s;
        s.sink = std::make_unique<pb::span_receiver>(pmrkit::datagram::udp_receiver_options{},
                                                     std::pmr::new_delete_resource());
        s.sender = std::make_unique<pb::span_sender>(
            pb::span_sender_options{.port = s.sink->local_port(), .batch_size = 4}, &memory);
        return s;
      },
      [](subject& s) {
        for (int i = 0; i < 20; ++i) {
          s.sender->send(sample_span(i));
          ++s.submitted;
        }
        s.sender->flush();
      },
      [](subject& s) {
        s.sender->flush();
        const auto st = s.sender->stats();
        require(st.sent + st.send_errors + st.too_large == s.submitted,
                "the sender's account of submitted spans does not close");
        s.sender->send(sample_span(1));
        s.sender->flush();
      });
  CHECK(result.surfaced > 0);
}
