// pmrkit-listen as a user meets it: its flags (each validated, each listed with its default),
// the options they reach in the receivers, its summary, and its exit codes.
#include <catch2/catch.hpp>

#include <arpa/inet.h>

#include <chrono>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "listen_test_support.hpp"
#include "net_test_support.hpp"
#include "pmrkit/datagram/tcp_receiver.hpp"
#include "pmrkit/datagram/udp_receiver.hpp"

namespace {

using namespace pmrkit::datagram;
using namespace pmrkit::test::net;
using namespace std::chrono_literals;

// The text after `flag` in --help, up to the next flag.
std::string help_entry(const std::string& help, const std::string& flag) {
  const std::size_t at = help.find("  " + flag + " ");
  if (at == std::string::npos) return {};
  const std::size_t end = help.find("\n  --", at + 1);
  return help.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

TEST_CASE("pmrkit-listen --help lists every option with the library's default", "[listen]") {
  child_process child({PMRKIT_LISTEN_PATH, "--help"}, scratch("listen-help"));
  REQUIRE(child.wait() == std::optional<int>(0));
  const std::string help = child.out();
  const udp_receiver_options udp;
  const tcp_receiver_options tcp;
  const std::vector<std::pair<std::string, std::string>> defaults{
      {"--address", udp.address},
      {"--strategy", "new_delete"},
      {"--max-datagram", std::to_string(udp.max_datagram_size)},
      {"--receive-buffer", std::to_string(udp.receive_buffer_size)},
      {"--max-connections", std::to_string(tcp.max_connections)},
      {"--max-per-peer", std::to_string(tcp.max_connections_per_peer)},
      {"--idle-timeout",
       std::to_string(std::chrono::duration_cast<std::chrono::seconds>(tcp.idle_timeout).count())},
      {"--max-frame", std::to_string(tcp.max_frame_size)},
      {"--framing", "automatic"},
  };
  REQUIRE(udp.address == tcp.address);
  for (const auto& [flag, value] : defaults) {
    INFO(flag << " in:\n" << help);
    CHECK_THAT(help_entry(help, flag), Catch::Matchers::Contains("(default " + value));
  }
}

TEST_CASE("pmrkit-listen refuses a bad value for each option, saying what is allowed",
          "[listen]") {
  // {arguments, what the message must say}
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad{
      {{"--udp", "0", "--address", "localhost"}, "--address"},
      {{"--udp", "0", "--address", "127.0.0.300"}, "numeric IPv4 or IPv6"},
      {{"--udp", "0", "--max-datagram", "0"}, "--max-datagram needs a number in 1..65536"},
      {{"--udp", "0", "--max-datagram", "65537"}, "--max-datagram needs a number in 1..65536"},
      {{"--udp", "0", "--receive-buffer", "-1"}, "--receive-buffer needs a number in 0.."},
      {{"--udp", "0", "--receive-buffer", "4294967296"}, "--receive-buffer needs a number in 0.."},
      {{"--tcp", "0", "--max-connections", "0"}, "--max-connections needs a number in 1.."},
      {{"--tcp", "0", "--max-per-peer", "0"}, "--max-per-peer needs a number in 1.."},
      {{"--tcp", "0", "--idle-timeout", "soon"}, "--idle-timeout needs a number in 0.."},
      {{"--tcp", "0", "--max-frame", "0"}, "--max-frame needs a number in 1..1073741824"},
      {{"--tcp", "0", "--max-frame", "1073741825"}, "--max-frame needs a number in 1..1073741824"},
      {{"--tcp", "0", "--framing", "json"}, "automatic, octet-counting or newline"},
      {{"--tcp", "0", "--framing"}, "--framing needs a value"},
  };
  for (const auto& [arguments, message] : bad) {
    std::vector<std::string> argv{PMRKIT_LISTEN_PATH};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    child_process child(argv, scratch("listen-bad-value"));
    INFO(arguments[2] << " " << (arguments.size() > 3 ? arguments[3] : ""));
    REQUIRE(child.wait() == std::optional<int>(2));
    CHECK_THAT(child.err(), Catch::Matchers::Contains(message));
    if (arguments.size() > 3)
      CHECK_THAT(child.err(), Catch::Matchers::Contains("\"" + arguments[3] + "\""));
  }
}

TEST_CASE("pmrkit-listen binds --address and applies --max-datagram; its summary counts right",
          "[listen]") {
  listen_process listen({"--udp", "0", "--address", "127.0.0.2", "--max-datagram", "10",
                         "--count", "1", "--print"},
                        "listen-udp-options");
  INFO(listen.child.err());
  REQUIRE(!listen.udp_port.empty());
  CHECK_THAT(listen.child.err(), Catch::Matchers::Contains("udp 127.0.0.2:" + listen.udp_port));
  fd_guard tx(::socket(AF_INET, SOCK_DGRAM, 0));
  sockaddr_in to = loopback(static_cast<std::uint16_t>(std::stoi(listen.udp_port)));
  REQUIRE(::inet_pton(AF_INET, "127.0.0.2", &to.sin_addr) == 1);
  for (const std::string datagram : {"twenty bytes, truncd", "hello"}) {
    REQUIRE(::sendto(tx.get(), datagram.data(), datagram.size(), 0,
                     reinterpret_cast<const sockaddr*>(&to), sizeof to) ==
            static_cast<ssize_t>(datagram.size()));
  }
  REQUIRE(listen.child.wait() == std::optional<int>(0));
  CHECK(listen.child.out() == "hello\n");
  const std::string summary = listen.child.err();
  CHECK_THAT(summary, Catch::Matchers::Contains("received 1 message\n"));
  CHECK(
      std::regex_search(summary, std::regex("udp: 1 datagram \\(5 bytes\\) in (1 batch|2 batches), "
                                            "1 truncated, 0 dropped by the kernel\n")));
}

TEST_CASE("pmrkit-listen applies --max-per-peer and --framing; its summary counts right",
          "[listen]") {
  listen_process listen({"--tcp", "0", "--max-per-peer", "1", "--framing", "newline", "--count",
                         "2", "--print"},
                        "listen-tcp-options");
  INFO(listen.child.err());
  REQUIRE(!listen.tcp_port.empty());
  const auto port = static_cast<std::uint16_t>(std::stoi(listen.tcp_port));
  tcp_client first(port);
  tcp_client second(port);  // the same address: over --max-per-peer 1
  CHECK(second.closed_by_peer());
  // With newline framing a leading digit is part of the message, not an octet count.
  REQUIRE(first.send("1 one\n2 two\n"));
  REQUIRE(listen.child.wait() == std::optional<int>(0));
  CHECK(listen.child.out() == "1 one\n2 two\n");
  const std::string summary = listen.child.err();
  CHECK_THAT(summary, Catch::Matchers::Contains("received 2 messages\n"));
  CHECK_THAT(summary, Catch::Matchers::Contains(
                          "tcp: 2 messages (12 bytes); 2 connections accepted, 1 closed, "
                          "1 rejected, 0 closed idle, 0 reset, 0 framing errors, "
                          "0 cut at close, 0 closed by an exception, 0 accept failures\n"));
}

TEST_CASE("pmrkit-listen stops on SIGTERM and prints its statistics", "[listen]") {
  listen_process listen({"--udp", "0", "--print"}, "listen-sigterm");
  REQUIRE(!listen.udp_port.empty());
  udp_sender tx(static_cast<std::uint16_t>(std::stoi(listen.udp_port)));
  REQUIRE(tx.send("line one\nstill one line\x01"));
  poll_until([&] { return !listen.child.out().empty(); }, [] { std::this_thread::sleep_for(5ms); });
  listen.child.signal(SIGTERM);
  REQUIRE(listen.child.wait() == std::optional<int>(0));
  CHECK(listen.child.out() == "line one\\nstill one line\\x01\n");
  CHECK_THAT(listen.child.err(), Catch::Matchers::Contains("received 1 message\n"));
}

TEST_CASE("pmrkit-listen answers bad arguments with its usage and exit code 2", "[listen]") {
  const std::vector<std::vector<std::string>> bad{
      {},
      {"--udp"},
      {"--udp", "70000"},
      {"--udp", "12x"},
      {"--udp", "0", "--count", "0"},
      {"--udp", "0", "--frobnicate"},
  };
  for (const auto& arguments : bad) {
    std::vector<std::string> argv{PMRKIT_LISTEN_PATH};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    child_process child(argv, scratch("listen-bad"));
    REQUIRE(child.wait() == std::optional<int>(2));
    CHECK_THAT(child.err(), Catch::Matchers::Contains("usage: pmrkit-listen"));
  }
  child_process strategy({PMRKIT_LISTEN_PATH, "--udp", "0", "--strategy", "no_such_strategy"},
                         scratch("listen-strategy"));
  REQUIRE(strategy.wait() == std::optional<int>(2));
  CHECK_THAT(strategy.err(), Catch::Matchers::Contains("no_such_strategy"));
  CHECK_THAT(strategy.err(), Catch::Matchers::Contains("size_class"));  // the valid names
  // TCP is received on a thread of its own, where a heap bound to main's cannot serve.
  child_process bound({PMRKIT_LISTEN_PATH, "--tcp", "0", "--strategy", "mimalloc_heap"},
                     scratch("listen-bound"));
  REQUIRE(bound.wait() == std::optional<int>(2));
  CHECK_THAT(bound.err(), Catch::Matchers::Contains("must be used on the thread that made it"));
}

TEST_CASE("pmrkit-listen reports a port it cannot bind with exit code 1", "[listen]") {
  udp_receiver taken;
  child_process child({PMRKIT_LISTEN_PATH, "--udp", std::to_string(taken.local_port())},
                      scratch("listen-taken"));
  REQUIRE(child.wait() == std::optional<int>(1));
  CHECK_THAT(child.err(), Catch::Matchers::Contains("Address already in use"));
}

}  // namespace
