// pmrkit-listen: point real syslog senders at pmrkit's receivers and watch what arrives.
//
//   pmrkit-listen [--udp PORT] [--tcp PORT] [--address ADDRESS] [--strategy SPEC] [--count N]
//                 [--print] [receiver options: see --help]
//
// Listens on 127.0.0.1 unless --address says otherwise; every receiver option a user may need
// is a flag, validated here with the range it allows, its default taken from the library.
// Prints each message on a line of its own with --print (control characters escaped, so one
// message is always one line), stops after N messages or on SIGINT/SIGTERM, then prints every
// statistic the receivers keep to stderr. Exit status: 0 done, 1 a runtime error (e.g. the
// port is taken), 2 bad arguments.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "pmrkit/counting_resource.hpp"
#include "pmrkit/datagram/tcp_receiver.hpp"
#include "pmrkit/datagram/udp_receiver.hpp"
#include "pmrkit/registry.hpp"

namespace {

// The flags' ranges, where the library allows more than a command line needs.
constexpr std::size_t max_datagram_limit = 64 * 1024;     // udp_receiver_options' range
constexpr std::size_t max_receive_buffer = INT32_MAX / 2;  // what SO_RCVBUF takes
constexpr std::size_t max_connections_limit = 1 << 20;
constexpr std::uint64_t max_idle_seconds = 24 * 60 * 60;
constexpr std::size_t max_frame_limit = std::size_t{1} << 30;  // syslog_framer's range

std::string_view framing_name(pmrkit::datagram::framing mode) {
  switch (mode) {
    case pmrkit::datagram::framing::octet_counting: return "octet-counting";
    case pmrkit::datagram::framing::newline: return "newline";
    case pmrkit::datagram::framing::automatic: break;
  }
  return "automatic";
}

std::uint64_t whole_seconds(std::chrono::milliseconds duration) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(duration).count());
}

// Built from the library's defaults, so --help cannot drift from what the receivers do.
std::string usage_text() {
  const pmrkit::datagram::udp_receiver_options udp;
  const pmrkit::datagram::tcp_receiver_options tcp;
  auto n = [](auto value) { return std::to_string(value); };
  return "usage: pmrkit-listen [--udp PORT] [--tcp PORT] [options]   (at least one of the two)\n"
         "  --udp PORT            receive syslog datagrams on ADDRESS:PORT (0: a free port)\n"
         "  --tcp PORT            accept syslog over TCP on ADDRESS:PORT (RFC 6587 octet\n"
         "                        counting or newline framing)\n"
         "  --address ADDRESS     numeric IPv4 or IPv6 address to listen on; 0.0.0.0 or ::\n"
         "                        for every interface (default " + udp.address + ")\n"
         "  --strategy SPEC       memory strategy for the buffers, e.g. size_class or\n"
         "                        std_unsync_pool:max_blocks_per_chunk=32 (default new_delete)\n"
         "  --count N             stop after N messages (default: until SIGINT or SIGTERM)\n"
         "  --print               print each message on its own line to stdout\n"
         "UDP:\n"
         "  --max-datagram BYTES  largest datagram handed on, 1.." + n(max_datagram_limit) +
         " (default " + n(udp.max_datagram_size) + ");\n"
         "                        a longer one is counted as truncated. UDP carries at most\n"
         "                        65507 bytes over IPv4, 65527 over IPv6: from 65527 up,\n"
         "                        nothing is truncated\n"
         "  --receive-buffer BYTES  kernel receive buffer (SO_RCVBUF), 0.." +
         n(max_receive_buffer) +
         "\n                        (default " + n(udp.receive_buffer_size) +
         ": the system's; the kernel caps it at net.core.rmem_max\n"
         "                        unless run with CAP_NET_ADMIN)\n"
         "TCP:\n"
         "  --max-connections N   connections open at once, 1.." + n(max_connections_limit) +
         " (default " + n(tcp.max_connections) + ");\n"
         "                        more are closed at once and counted as rejected\n"
         "  --max-per-peer N      connections one address may hold, 1.." +
         n(max_connections_limit) +
         " (default " + n(tcp.max_connections_per_peer) + ");\n"
         "                        more from it are closed at once and counted as rejected\n"
         "  --idle-timeout SECONDS  close a connection that sends nothing this long, 0.." +
         n(max_idle_seconds) +
         "\n                        (default " + n(whole_seconds(tcp.idle_timeout)) +
         "; 0: never)\n"
         "  --max-frame BYTES     largest message, 1.." + n(max_frame_limit) + " (default " +
         n(tcp.max_frame_size) + ");\n"
         "                        a longer one closes its connection\n"
         "  --framing MODE        automatic, octet-counting or newline (default " +
         std::string(framing_name(tcp.mode)) + ");\n"
         "                        automatic: a digit starts an octet count, anything else a line\n"
         "Try: pmrkit-listen --udp 5514 --print   and, in another terminal,\n"
         "     logger -n 127.0.0.1 -P 5514 -d 'hello from logger'\n";
}

struct arguments {
  std::optional<std::uint16_t> udp_port;
  std::optional<std::uint16_t> tcp_port;
  std::string strategy = "new_delete";
  std::uint64_t count = 0;  // 0: no limit
  bool print = false;
  bool help = false;
  pmrkit::datagram::udp_receiver_options udp;  // address and port are filled in at the end
  pmrkit::datagram::tcp_receiver_options tcp;
};

class usage_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

template <class Integer>
Integer parse_number(std::string_view flag, std::string_view text, Integer low, Integer high) {
  Integer value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < low || value > high) {
    throw usage_error(std::string(flag) + " needs a number in " + std::to_string(low) + ".." +
                      std::to_string(high) + ", not \"" + std::string(text) + "\"");
  }
  return value;
}

std::string parse_address(std::string_view flag, std::string_view text) {
  try {
    (void)pmrkit::datagram::peer_address::numeric(std::string(text), 0);
  } catch (const std::invalid_argument&) {
    throw usage_error(std::string(flag) + " needs a numeric IPv4 or IPv6 address (such as "
                      "127.0.0.1, ::1, or 0.0.0.0 or :: for every interface), not \"" +
                      std::string(text) + "\"");
  }
  return std::string(text);
}

pmrkit::datagram::framing parse_framing(std::string_view flag, std::string_view text) {
  using pmrkit::datagram::framing;
  for (const framing mode : {framing::automatic, framing::octet_counting, framing::newline}) {
    if (text == framing_name(mode)) return mode;
  }
  throw usage_error(std::string(flag) + " needs automatic, octet-counting or newline, not \"" +
                    std::string(text) + "\"");
}

arguments parse_arguments(int argc, char** argv) {
  arguments args;
  std::string address = args.udp.address;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) throw usage_error(std::string(flag) + " needs a value");
      return argv[++i];
    };
    if (flag == "--udp") {
      args.udp_port = parse_number<std::uint16_t>(flag, value(), 0, 65535);
    } else if (flag == "--tcp") {
      args.tcp_port = parse_number<std::uint16_t>(flag, value(), 0, 65535);
    } else if (flag == "--address") {
      address = parse_address(flag, value());
    } else if (flag == "--strategy") {
      args.strategy = std::string(value());
    } else if (flag == "--count") {
      args.count = parse_number<std::uint64_t>(flag, value(), 1, UINT64_MAX);
    } else if (flag == "--print") {
      args.print = true;
    } else if (flag == "--max-datagram") {
      args.udp.max_datagram_size = parse_number<std::size_t>(flag, value(), 1, max_datagram_limit);
    } else if (flag == "--receive-buffer") {
      args.udp.receive_buffer_size =
          parse_number<std::size_t>(flag, value(), 0, max_receive_buffer);
    } else if (flag == "--max-connections") {
      args.tcp.max_connections = parse_number<std::size_t>(flag, value(), 1, max_connections_limit);
    } else if (flag == "--max-per-peer") {
      args.tcp.max_connections_per_peer =
          parse_number<std::size_t>(flag, value(), 1, max_connections_limit);
    } else if (flag == "--idle-timeout") {
      args.tcp.idle_timeout =
          std::chrono::seconds(parse_number<std::uint64_t>(flag, value(), 0, max_idle_seconds));
    } else if (flag == "--max-frame") {
      args.tcp.max_frame_size = parse_number<std::size_t>(flag, value(), 1, max_frame_limit);
    } else if (flag == "--framing") {
      args.tcp.mode = parse_framing(flag, value());
    } else if (flag == "--help" || flag == "-h") {
      args.help = true;
      return args;
    } else {
      throw usage_error("unknown argument \"" + std::string(flag) + "\"");
    }
  }
  if (!args.udp_port && !args.tcp_port) throw usage_error("give --udp PORT, --tcp PORT or both");
  args.udp.address = address;
  args.tcp.address = address;
  args.udp.port = args.udp_port.value_or(0);
  args.tcp.port = args.tcp_port.value_or(0);
  return args;
}

// "1 message", "2 messages".
std::string count_of(std::uint64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

// One message, one line: bytes that would break the line (or the terminal) are escaped.
void print_line(std::span<const std::byte> bytes) {
  std::string line;
  line.reserve(bytes.size() + 1);
  for (const std::byte b : bytes) {
    const auto c = std::to_integer<unsigned char>(b);
    if (c == '\\') {
      line += "\\\\";
    } else if (c == '\n') {
      line += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      line += escaped;
    } else {
      line += static_cast<char>(c);
    }
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

// Shared by the receiving threads: counts messages, prints them, stops everything at --count.
class listener {
 public:
  explicit listener(const arguments& args) : args_(args) {}

  void attach(pmrkit::datagram::udp_receiver* udp, pmrkit::datagram::tcp_receiver* tcp) {
    udp_ = udp;
    tcp_ = tcp;
  }
  // Returns false for a message past --count, which is ignored.
  bool on_message(std::span<const std::byte> bytes) {
    const std::uint64_t number = seen_.fetch_add(1) + 1;
    if (args_.count != 0 && number > args_.count) {
      ignored_.fetch_add(1);
      return false;
    }
    if (args_.print) {
      const std::lock_guard lock(print_mutex_);
      print_line(bytes);
    }
    if (args_.count != 0 && number == args_.count) stop_all();
    return true;
  }
  void stop_all() noexcept {
    if (udp_) udp_->stop();
    if (tcp_) tcp_->stop();
  }
  std::uint64_t handled() const noexcept { return seen_.load() - ignored_.load(); }
  std::uint64_t ignored() const noexcept { return ignored_.load(); }

 private:
  const arguments& args_;
  pmrkit::datagram::udp_receiver* udp_ = nullptr;
  pmrkit::datagram::tcp_receiver* tcp_ = nullptr;
  std::atomic<std::uint64_t> seen_{0};
  std::atomic<std::uint64_t> ignored_{0};
  std::mutex print_mutex_;
};

int listen(const arguments& args, std::pmr::memory_resource* strategy) {
  using namespace pmrkit::datagram;
  pmrkit::counting_resource counted(strategy);
  // The TCP receiver runs on a thread of its own: a strategy that is not thread-safe
  // (std_unsync_pool, size_class_unsync, ...) gets a second instance for it.
  std::unique_ptr<std::pmr::memory_resource> tcp_strategy;
  if (args.udp_port && args.tcp_port && !pmrkit::describe_strategy(args.strategy).thread_safe)
    tcp_strategy = pmrkit::make_resource(args.strategy);
  pmrkit::counting_resource tcp_counted(tcp_strategy ? tcp_strategy.get() : strategy);
  pmrkit::counting_resource& for_tcp = tcp_strategy ? tcp_counted : counted;
  udp_receiver_stats udp_stats;
  tcp_receiver_stats tcp_stats;
  listener shared(args);
  {
    std::optional<udp_receiver> udp;
    std::optional<tcp_receiver> tcp;
    if (args.udp_port) udp.emplace(args.udp, &counted);
    if (args.tcp_port) tcp.emplace(args.tcp, &for_tcp);
    shared.attach(udp ? &*udp : nullptr, tcp ? &*tcp : nullptr);
    if (tcp) {
      tcp->set_error_handler([](const connection_error& e) {
        std::fprintf(stderr, "pmrkit-listen: closed tcp connection %llu from %s: %s\n",
                     static_cast<unsigned long long>(e.connection), e.peer.to_string().c_str(),
                     std::string(to_string(e.error)).c_str());
      });
    }
    std::string banner = "pmrkit-listen: strategy " + args.strategy;
    if (udp)
      banner += ", udp " + peer_address::numeric(args.udp.address, udp->local_port()).to_string();
    if (tcp)
      banner += ", tcp " + peer_address::numeric(args.tcp.address, tcp->local_port()).to_string();
    std::fprintf(stderr, "%s\n", banner.c_str());
    std::fflush(stderr);

    // SIGINT and SIGTERM are blocked in every thread (set in main) and taken here with
    // sigwait, so stopping needs no state shared with a signal handler. SIGUSR1 is how the
    // main thread ends this waiter when --count ended the run.
    std::thread signal_waiter([&shared] {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGINT);
      sigaddset(&set, SIGTERM);
      sigaddset(&set, SIGUSR1);
      int signal_number = 0;
      sigwait(&set, &signal_number);
      shared.stop_all();
    });

    std::exception_ptr failure;
    std::mutex failure_mutex;
    auto record = [&](std::exception_ptr e) {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = e;
      shared.stop_all();
    };
    std::thread tcp_thread;
    if (tcp) {
      tcp_thread = std::thread([&] {
        try {
          tcp->run([&](tcp_frame& frame) { shared.on_message(frame.bytes()); });
        } catch (...) {
          record(std::current_exception());
        }
      });
    }
    if (udp) {
      try {
        udp->run([&](datagram& d) { shared.on_message(d.bytes()); });
      } catch (...) {
        record(std::current_exception());
      }
    }
    if (tcp_thread.joinable()) tcp_thread.join();
    pthread_kill(signal_waiter.native_handle(), SIGUSR1);
    signal_waiter.join();
    if (udp) udp_stats = udp->stats();
    if (tcp) tcp_stats = tcp->stats();
    if (failure) std::rethrow_exception(failure);
  }
  pmrkit::allocation_stats memory = counted.stats();
  if (tcp_strategy) {
    const pmrkit::allocation_stats more = tcp_counted.stats();
    memory.allocations += more.allocations;
    memory.bytes_allocated += more.bytes_allocated;
    memory.bytes_in_use += more.bytes_in_use;
  }
  std::string summary =
      "pmrkit-listen: received " + count_of(shared.handled(), "message", "messages");
  if (args.udp_port && args.tcp_port) {
    summary += " (udp " + std::to_string(udp_stats.received) + ", tcp " +
               std::to_string(tcp_stats.frames) + ")";
  }
  summary += "\n";
  if (shared.ignored() != 0)
    summary +=
        "  ignored after --count: " + count_of(shared.ignored(), "message", "messages") + "\n";
  if (args.udp_port) {
    summary += "  udp: " + count_of(udp_stats.received, "datagram", "datagrams") + " (" +
               count_of(udp_stats.bytes_received, "byte", "bytes") + ") in " +
               count_of(udp_stats.batches, "batch", "batches") + ", " +
               std::to_string(udp_stats.truncated) + " truncated, " +
               std::to_string(udp_stats.kernel_drops) + " dropped by the kernel\n";
  }
  if (args.tcp_port) {
    summary += "  tcp: " + count_of(tcp_stats.frames, "message", "messages") + " (" +
               count_of(tcp_stats.bytes_received, "byte", "bytes") + "); " +
               count_of(tcp_stats.connections_accepted, "connection", "connections") +
               " accepted, " + std::to_string(tcp_stats.connections_closed) + " closed, " +
               std::to_string(tcp_stats.connections_rejected) + " rejected, " +
               std::to_string(tcp_stats.idle_closed) + " closed idle, " +
               std::to_string(tcp_stats.connections_reset) + " reset, " +
               count_of(tcp_stats.framing_errors, "framing error", "framing errors") + ", " +
               std::to_string(tcp_stats.cut_at_close) + " cut at close, " +
               std::to_string(tcp_stats.closed_by_exception) + " closed by an exception, " +
               count_of(tcp_stats.accept_failures, "accept failure", "accept failures") + "\n";
  }
  std::fputs(summary.c_str(), stderr);
  std::fprintf(stderr, "  allocations seen: %llu (%llu bytes), bytes still in use at exit: %llu\n",
               static_cast<unsigned long long>(memory.allocations),
               static_cast<unsigned long long>(memory.bytes_allocated),
               static_cast<unsigned long long>(memory.bytes_in_use));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  arguments args;
  std::unique_ptr<std::pmr::memory_resource> strategy;
  try {
    args = parse_arguments(argc, argv);
    if (args.help) {
      std::fputs(usage_text().c_str(), stdout);
      return 0;
    }
    strategy = pmrkit::make_resource(args.strategy);
    if (args.tcp_port && pmrkit::describe_strategy(args.strategy).bound_to_thread)
      throw usage_error("strategy \"" + args.strategy +
                        "\" must be used on the thread that made it, and --tcp receives on a "
                        "thread of its own: give --udp alone, or another strategy");
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "pmrkit-listen: %s\n", e.what());
    std::fputs(usage_text().c_str(), stderr);
    return 2;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread exists, so all inherit it
  try {
    return listen(args, strategy.get());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pmrkit-listen: %s\n", e.what());
    return 1;
  }
}
