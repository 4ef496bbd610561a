// Real senders: util-linux logger, sending to the receivers in-process and to pmrkit-listen.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "listen_test_support.hpp"
#include "net_test_support.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/datagram/tcp_receiver.hpp"
#include "pmrkit/datagram/udp_receiver.hpp"

namespace {

using namespace pmrkit::datagram;
using namespace pmrkit::test::net;
using namespace std::chrono_literals;

// logger is util-linux's (Debian: bsdutils, always installed); without it there is no sender.
bool have_logger() {
  if (program_exists("logger")) return true;
  WARN("util-linux logger is not installed; skipped");
  return false;
}

std::string unique_text(const std::string& what) {
  return "pmrkit " + what + " test " + std::to_string(::getpid()) + " with some words";
}

// What logger sends, RFC 5424: "<13>1 TIMESTAMP HOST USER - - [timeQuality ...] TEXT".
void check_syslog_line(const std::string& line, const std::string& text) {
  INFO(line);
  CHECK(line.rfind("<13>1 ", 0) == 0);
  CHECK(line.size() >= text.size());
  CHECK(line.substr(line.size() - std::min(line.size(), text.size())) == text);
}

TEST_CASE("logger's UDP messages arrive intact", "[logger]") {
  if (!have_logger()) return;
  pmrkit::counting_resource counted;
  {
    udp_receiver rx({}, &counted);
    const std::string text = unique_text("udp");
    REQUIRE(run_program(
                {"logger", "-n", "127.0.0.1", "-P", std::to_string(rx.local_port()), "-d", text},
                scratch("logger-udp")) == 0);
    std::vector<std::string> got;
    poll_until(
        [&] { return !got.empty(); },
        [&] { rx.poll_once(100ms, [&](datagram& d) { got.push_back(as_string(d.bytes())); }); });
    REQUIRE(got.size() == 1);
    check_syslog_line(got[0], text);
  }
  CHECK(counted.stats().bytes_in_use == 0);
}

TEST_CASE("logger's TCP messages arrive intact, octet-counted or newline-delimited",
          "[logger]") {
  if (!have_logger()) return;
  tcp_receiver rx;
  const std::string port = std::to_string(rx.local_port());
  const std::string counted_text = unique_text("tcp octet-counted");
  const std::string newline_text = unique_text("tcp newline");
  // logger connects, writes and exits; the kernel queues the connection until we accept it.
  REQUIRE(
      run_program({"logger", "-T", "--octet-count", "-n", "127.0.0.1", "-P", port, counted_text},
                  scratch("logger-tcp1")) == 0);
  REQUIRE(run_program({"logger", "-T", "-n", "127.0.0.1", "-P", port, newline_text},
                      scratch("logger-tcp2")) == 0);
  std::vector<std::string> got;
  poll_until(
      [&] { return got.size() >= 2 && rx.open_connections() == 0; },
      [&] { rx.poll_once(100ms, [&](tcp_frame& f) { got.push_back(as_string(f.bytes())); }); });
  REQUIRE(got.size() == 2);
  std::sort(got.begin(), got.end(), [](const std::string& a, const std::string& b) {
    return a.find("octet-counted") != std::string::npos &&
           b.find("octet-counted") == std::string::npos;
  });
  check_syslog_line(got[0], counted_text);
  check_syslog_line(got[1], newline_text);
  CHECK(rx.stats().framing_errors == 0);
  CHECK(rx.stats().cut_at_close == 0);
}

TEST_CASE("pmrkit-listen prints what logger sends and stops after --count", "[logger][listen]") {
  if (!have_logger()) return;
  listen_process listen(
      {"--udp", "0", "--tcp", "0", "--strategy", "size_class", "--count", "3", "--print"},
      "listen-count");
  INFO(listen.child.err());
  REQUIRE(!listen.udp_port.empty());
  REQUIRE(!listen.tcp_port.empty());
  const std::vector<std::string> texts{unique_text("listen udp"), unique_text("listen tcp counted"),
                                       unique_text("listen tcp newline")};
  REQUIRE(run_program({"logger", "-n", "127.0.0.1", "-P", listen.udp_port, "-d", texts[0]},
                      scratch("listen-logger1")) == 0);
  REQUIRE(run_program(
              {"logger", "-T", "--octet-count", "-n", "127.0.0.1", "-P", listen.tcp_port, texts[1]},
              scratch("listen-logger2")) == 0);
  REQUIRE(run_program({"logger", "-T", "-n", "127.0.0.1", "-P", listen.tcp_port, texts[2]},
                      scratch("listen-logger3")) == 0);
  REQUIRE(listen.child.wait() == std::optional<int>(0));
  const auto printed = lines(listen.child.out());
  REQUIRE(printed.size() == 3);
  for (const std::string& text : texts) {
    CHECK(std::count_if(printed.begin(), printed.end(), [&](const std::string& line) {
            return line.size() >= text.size() && line.substr(line.size() - text.size()) == text;
          }) == 1);
  }
  const std::string stats = listen.child.err();
  CHECK_THAT(stats, Catch::Matchers::Contains("received 3 messages (udp 1, tcp 2)"));
  CHECK_THAT(stats, Catch::Matchers::Contains("udp: 1 datagram ("));
  CHECK_THAT(stats, Catch::Matchers::Contains("0 truncated, 0 dropped by the kernel"));
  CHECK_THAT(stats, Catch::Matchers::Contains("tcp: 2 messages ("));
  CHECK_THAT(stats, Catch::Matchers::Contains("2 connections accepted"));
  CHECK_THAT(stats, Catch::Matchers::Contains("0 framing errors, 0 cut at close"));
  CHECK_THAT(stats, Catch::Matchers::Contains("bytes still in use at exit: 0"));
  CHECK(std::regex_search(stats, std::regex("allocations seen: [1-9][0-9]* ")));
}

}  // namespace
