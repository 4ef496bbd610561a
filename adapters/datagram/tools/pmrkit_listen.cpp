// pmrkit-listen: point real syslog senders at pmrkit's receivers and watch what arrives.
//
//   pmrkit-listen --udp PORT [--tcp PORT] [--strategy SPEC] [--count N] [--print]
//
// Listens on 127.0.0.1 only. Prints each message on a line of its own with --print (control
// characters escaped, so one message is always one line), stops after N messages or on
// SIGINT/SIGTERM, then prints its statistics to stderr. Exit status: 0 done, 1 a runtime
// error (e.g. the port is taken), 2 bad arguments.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <charconv>
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

constexpr const char* usage_text =
    "usage: pmrkit-listen --udp PORT [--tcp PORT] [--strategy SPEC] [--count N] [--print]\n"
    "  --udp PORT       receive syslog datagrams on 127.0.0.1:PORT (0: a free port)\n"
    "  --tcp PORT       also accept syslog over TCP on 127.0.0.1:PORT (RFC 6587 octet\n"
    "                   counting or newline framing); either --udp or --tcp may be left out\n"
    "  --strategy SPEC  memory strategy for the buffers, e.g. size_class or\n"
    "                   std_unsync_pool:max_blocks_per_chunk=32 (default new_delete)\n"
    "  --count N        stop after N messages (default: until SIGINT or SIGTERM)\n"
    "  --print          print each message on its own line to stdout\n"
    "Try: pmrkit-listen --udp 5514 --print   and, in another terminal,\n"
    "     logger -n 127.0.0.1 -P 5514 -d 'hello from logger'\n";

struct arguments {
  std::optional<std::uint16_t> udp_port;
  std::optional<std::uint16_t> tcp_port;
  std::string strategy = "new_delete";
  std::uint64_t count = 0;  // 0: no limit
  bool print = false;
  bool help = false;
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

arguments parse_arguments(int argc, char** argv) {
  arguments args;
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
    } else if (flag == "--strategy") {
      args.strategy = std::string(value());
    } else if (flag == "--count") {
      args.count = parse_number<std::uint64_t>(flag, value(), 1, UINT64_MAX);
    } else if (flag == "--print") {
      args.print = true;
    } else if (flag == "--help" || flag == "-h") {
      args.help = true;
      return args;
    } else {
      throw usage_error("unknown argument \"" + std::string(flag) + "\"");
    }
  }
  if (!args.udp_port && !args.tcp_port) throw usage_error("give --udp PORT, --tcp PORT or both");
  return args;
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
  udp_receiver_stats udp_stats;
  tcp_receiver_stats tcp_stats;
  listener shared(args);
  {
    std::optional<udp_receiver> udp;
    std::optional<tcp_receiver> tcp;
    if (args.udp_port) udp.emplace(udp_receiver_options{.port = *args.udp_port}, &counted);
    if (args.tcp_port) tcp.emplace(tcp_receiver_options{.port = *args.tcp_port}, &counted);
    shared.attach(udp ? &*udp : nullptr, tcp ? &*tcp : nullptr);
    if (tcp) {
      tcp->set_error_handler([](const connection_error& e) {
        std::fprintf(stderr, "pmrkit-listen: closed tcp connection %llu from %s: %s\n",
                     static_cast<unsigned long long>(e.connection), e.peer.to_string().c_str(),
                     std::string(to_string(e.error)).c_str());
      });
    }
    std::string banner = "pmrkit-listen: strategy " + args.strategy;
    if (udp) banner += ", udp 127.0.0.1:" + std::to_string(udp->local_port());
    if (tcp) banner += ", tcp 127.0.0.1:" + std::to_string(tcp->local_port());
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
  const pmrkit::allocation_stats memory = counted.stats();
  std::fprintf(stderr, "pmrkit-listen: received %llu messages",
               static_cast<unsigned long long>(shared.handled()));
  if (args.udp_port && args.tcp_port) {
    std::fprintf(stderr, " (udp %llu, tcp %llu)", static_cast<unsigned long long>(udp_stats.received),
                 static_cast<unsigned long long>(tcp_stats.frames));
  }
  std::fprintf(stderr, "\n");
  if (shared.ignored() != 0)
    std::fprintf(stderr, "  ignored after --count: %llu\n", static_cast<unsigned long long>(shared.ignored()));
  if (args.udp_port) {
    std::fprintf(stderr, "  udp: truncated %llu, dropped by the kernel %llu\n",
                 static_cast<unsigned long long>(udp_stats.truncated),
                 static_cast<unsigned long long>(udp_stats.kernel_drops));
  }
  if (args.tcp_port) {
    std::fprintf(stderr, "  tcp: connections %llu, framing errors %llu, cut at close %llu\n",
                 static_cast<unsigned long long>(tcp_stats.connections_accepted),
                 static_cast<unsigned long long>(tcp_stats.framing_errors),
                 static_cast<unsigned long long>(tcp_stats.cut_at_close));
  }
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
      std::fputs(usage_text, stdout);
      return 0;
    }
    strategy = pmrkit::make_resource(args.strategy);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "pmrkit-listen: %s\n", e.what());
    std::fputs(usage_text, stderr);
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
