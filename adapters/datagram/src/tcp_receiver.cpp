#include "pmrkit/datagram/tcp_receiver.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <compare>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "pmrkit/datagram/errors.hpp"
#include "pmrkit/single_writer_counter.hpp"
#include "socket_util.hpp"

namespace pmrkit::datagram {
namespace {

constexpr std::size_t min_read_buffer = 512;
constexpr std::size_t max_read_buffer = std::size_t{16} << 20;
constexpr int events_per_wait = 64;
// Fairness: a connection that always has data gets this many reads per wakeup, then the
// others have their turn (epoll is level-triggered, so it is reported again).
constexpr int reads_per_turn = 16;
constexpr int accepts_per_turn = 64;
// How long accepting pauses when accept() lacks a descriptor or memory.
constexpr std::chrono::milliseconds accept_pause{100};
// A message buffer is reused for the next message if its capacity is at most this many times
// what that message needs (or at most reuse_floor bytes).
constexpr std::size_t reuse_slack = 4;
constexpr std::size_t reuse_floor = 1024;

using clock = std::chrono::steady_clock;

// A peer's address without its port: what max_connections_per_peer counts by.
struct host_key {
  int family = AF_UNSPEC;
  std::array<unsigned char, 16> bytes{};
  friend auto operator<=>(const host_key&, const host_key&) = default;
};

host_key host_of(const peer_address& peer) noexcept {
  host_key key{.family = peer.family()};
  if (key.family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(peer.data());
    std::memcpy(key.bytes.data(), &v4->sin_addr, sizeof v4->sin_addr);
  } else if (key.family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(peer.data());
    std::memcpy(key.bytes.data(), &v6->sin6_addr, sizeof v6->sin6_addr);
  }
  return key;
}

// `timeout_ms` (negative: no limit), shortened so that a wait ends by `deadline`.
int wait_until(int timeout_ms, clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()).count();
  const int bounded = static_cast<int>(std::clamp<long long>(left, 0, INT32_MAX));
  return timeout_ms < 0 ? bounded : std::min(timeout_ms, bounded);
}

const tcp_receiver_options& checked(const tcp_receiver_options& options) {
  if (options.read_buffer_size < min_read_buffer || options.read_buffer_size > max_read_buffer) {
    throw invalid_option("read_buffer_size " + std::to_string(options.read_buffer_size) +
                         " is out of range; allowed: " + std::to_string(min_read_buffer) + ".." +
                         std::to_string(max_read_buffer) + " bytes");
  }
  if (options.max_connections == 0) {
    throw invalid_option("max_connections 0 is out of range; allowed: 1 or more");
  }
  if (options.max_connections_per_peer == 0) {
    throw invalid_option("max_connections_per_peer 0 is out of range; allowed: 1 or more");
  }
  if (options.idle_timeout.count() < 0) {
    throw invalid_option("idle_timeout " + std::to_string(options.idle_timeout.count()) +
                         " ms is out of range; allowed: 0 (never) or more");
  }
  if (options.listen_backlog <= 0) {
    throw invalid_option("listen_backlog " + std::to_string(options.listen_backlog) +
                         " is out of range; allowed: 1 or more");
  }
  return options;
}

// Whether anything (bytes, the peer's close, a reset) waits unread on the connection: one
// wait hands on at most events_per_wait ready connections, so a connection whose bytes came
// in time may not have been read yet when its idle deadline is checked. poll, not a peek: a
// recv would consume a pending reset, and the read that follows would take it for a close.
bool has_unread_input(int fd) {
  pollfd watched{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&watched, 1, 0) > 0;
}

}  // namespace

struct tcp_receiver::impl {
  struct connection {
    // Takes the descriptor only as its first member is made: if making the connection fails
    // before that (no memory for it), the caller's unique_fd still closes it.
    connection(detail::unique_fd&& descriptor, const peer_address& from, std::uint64_t number,
               buffer_pool& pool, const framer_options& framing, clock::time_point now)
        : fd(std::move(descriptor)),
          peer(from),
          host(host_of(from)),
          id(number),
          framer(pool, framing),
          last_active(now) {}
    detail::unique_fd fd;
    peer_address peer;
    host_key host;
    std::uint64_t id;
    syslog_framer framer;
    clock::time_point last_active;  // accepted, or last read bytes
    std::size_t index = 0;  // in impl::connections
  };

  impl(tcp_receiver& owner, const tcp_receiver_options& options, buffer_pool& buffers)
      : receiver(owner),
        pool(buffers),
        framing{.mode = options.mode, .max_frame_size = options.max_frame_size},
        wake_fd(detail::make_wake_fd()) {}

  void listen(const tcp_receiver_options& options);
  void watch(int fd, void* tag);
  void accept_ready();
  void pause_accepting();
  int resume_accepting_within(int timeout_ms);
  std::size_t service(connection& c, tcp_frame_handler& handler);
  void ended(connection& c);
  void admit(detail::unique_fd&& owned, const peer_address& peer);
  void schedule_idle_check(clock::time_point from);
  void close(connection& c);
  int idle_check_within(int timeout_ms) const;
  void close_idle();

  tcp_receiver& receiver;
  buffer_pool& pool;
  framer_options framing;
  detail::unique_fd listen_fd;
  detail::unique_fd epoll_fd;
  detail::unique_fd wake_fd;
  byte_buffer read_buffer;
  std::vector<std::unique_ptr<connection>> connections;
  std::uint64_t next_id = 1;
  std::function<void(const connection_error&)> on_error;
  tcp_frame frame;  // reused: only its buffer changes per message
  // Addresses that tag the listening socket and the eventfd in epoll (connections are tagged
  // with their own address).
  char listen_tag = 0;
  // While accept() lacks resources (no free descriptor), the listening socket is taken out of
  // the epoll set until this time: it stays readable, and would otherwise wake every wait.
  std::optional<std::chrono::steady_clock::time_point> accepting_paused_until;
  char wake_tag = 0;
  std::map<host_key, std::size_t> connections_per_host;
  clock::time_point now;  // read once per poll_once, after the wait
  // No connection can have been idle for idle_timeout before this time: when to look again.
  std::optional<clock::time_point> next_idle_check;

  // Written only by the receiving thread, read by stats() and open_connections() on any.
  single_writer_counter<std::uint64_t> frames;
  single_writer_counter<std::uint64_t> bytes_received;
  single_writer_counter<std::uint64_t> accepted;
  single_writer_counter<std::uint64_t> closed;
  single_writer_counter<std::uint64_t> rejected;
  single_writer_counter<std::uint64_t> framing_errors;
  single_writer_counter<std::uint64_t> cut_at_close;
  single_writer_counter<std::uint64_t> accept_failures;
  single_writer_counter<std::uint64_t> resets;
  single_writer_counter<std::uint64_t> idle_closed;
  single_writer_counter<std::uint64_t> closed_by_exception;
  single_writer_counter<std::size_t> open;
};

void tcp_receiver::impl::listen(const tcp_receiver_options& options) {
  const peer_address local = detail::parse_address(options.address, options.port);
  const std::string where = local.to_string();
  listen_fd =
      detail::unique_fd(::socket(local.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (listen_fd.get() < 0) detail::throw_errno(errno, "socket(SOCK_STREAM)", where);
  const int on = 1;
  // A restarted server must be able to bind while old connections sit in TIME_WAIT.
  if (::setsockopt(listen_fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0)
    detail::throw_errno(errno, "setsockopt(SO_REUSEADDR)", where);
  if (::bind(listen_fd.get(), local.data(), local.size()) != 0)
    detail::throw_errno(errno, "bind tcp", where);
  if (::listen(listen_fd.get(), options.listen_backlog) != 0)
    detail::throw_errno(errno, "listen", where);
  epoll_fd = detail::unique_fd(::epoll_create1(EPOLL_CLOEXEC));
  if (epoll_fd.get() < 0) detail::throw_errno(errno, "epoll_create1", "");
  watch(listen_fd.get(), &listen_tag);
  watch(wake_fd.get(), &wake_tag);
  read_buffer = pool.acquire(options.read_buffer_size);
}

void tcp_receiver::impl::watch(int fd, void* tag) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = tag;
  if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, fd, &event) != 0)
    detail::throw_errno(errno, "epoll_ctl(ADD)", "");
}

void tcp_receiver::impl::accept_ready() {
  for (int i = 0; i < accepts_per_turn; ++i) {
    peer_address peer;
    socklen_t length = peer_address::capacity();
    const int fd = ::accept4(listen_fd.get(), peer.data(), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;  // nothing more to accept
      // A connection that went away before we took it, or an interrupted call: go on.
      if (errno == ECONNABORTED || errno == EINTR || errno == EPROTO) continue;
      // No descriptor or memory for it (EMFILE, ENFILE, ENOBUFS, ...): the connection stays
      // queued and the socket readable, so stop watching it for a while instead of spinning.
      accept_failures.add();
      pause_accepting();
      return;
    }
    detail::unique_fd owned(fd);
    peer.set_size(length);
    accepted.add();
    const tcp_receiver_options& options = receiver.options_;
    const auto held = connections_per_host.find(host_of(peer));
    const std::size_t held_by_peer = held == connections_per_host.end() ? 0 : held->second;
    if (connections.size() >= options.max_connections ||
        held_by_peer >= options.max_connections_per_peer) {
      rejected.add();
      closed.add();
      continue;  // `owned` closes it
    }
    admit(std::move(owned), peer);
  }
}

// Makes the accepted connection one of the receiver's. Whatever may fail (memory for the
// connection, its peer's count or the set's room; the epoll registration) happens before
// anything is changed, and a failure closes this connection alone and counts it closed, so
// that accepted = closed + open and the per-peer counts hold. Out of memory is then passed on.
void tcp_receiver::impl::admit(detail::unique_fd&& owned, const peer_address& peer) {
  std::unique_ptr<connection> c;
  std::map<host_key, std::size_t>::iterator held;
  bool new_entry = false;
  const auto undo = [&] {
    if (new_entry) connections_per_host.erase(held);
    c.reset();  // closes the descriptor, if the connection took it (else `owned` does)
    closed.add();
  };
  try {
    c = std::make_unique<connection>(std::move(owned), peer, next_id++, pool, framing, now);
    // Geometric: libstdc++ reserves exactly what is asked, and one more at a time would copy
    // the whole set on every accept.
    if (connections.size() == connections.capacity())
      connections.reserve(std::max<std::size_t>(16, 2 * connections.capacity()));
    std::tie(held, new_entry) = connections_per_host.try_emplace(c->host, 0);
    watch(c->fd.get(), c.get());
  } catch (const socket_error&) {  // the kernel would not watch it: this connection only
    undo();
    accept_failures.add();
    return;
  } catch (...) {
    undo();
    throw;
  }
  ++held->second;
  c->index = connections.size();
  connections.push_back(std::move(c));  // room reserved: does not throw
  open.set(connections.size());
  schedule_idle_check(now);
}

void tcp_receiver::impl::schedule_idle_check(clock::time_point from) {
  const std::chrono::milliseconds timeout = receiver.options_.idle_timeout;
  if (timeout.count() == 0) return;
  const clock::time_point due = detail::later_by(from, timeout);
  if (!next_idle_check || due < *next_idle_check) next_idle_check = due;
}

void tcp_receiver::impl::pause_accepting() {
  epoll_event event{};
  event.data.ptr = &listen_tag;  // no events: parked
  if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_MOD, listen_fd.get(), &event) != 0) return;
  accepting_paused_until = std::chrono::steady_clock::now() + accept_pause;
}

// Watches the listening socket again once the pause is over; returns the wait timeout to use
// so that the pause ends on time (`timeout_ms` itself when not paused).
int tcp_receiver::impl::resume_accepting_within(int timeout_ms) {
  if (!accepting_paused_until) return timeout_ms;
  if (clock::now() < *accepting_paused_until)
    return wait_until(timeout_ms, *accepting_paused_until);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = &listen_tag;
  if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_MOD, listen_fd.get(), &event) == 0)
    accepting_paused_until.reset();
  return timeout_ms;
}

void tcp_receiver::impl::close(connection& c) {
  const std::size_t at = c.index;
  const auto held = connections_per_host.find(c.host);
  if (held != connections_per_host.end() && --held->second == 0) connections_per_host.erase(held);
  // Out of the epoll set before the close: closing removes a socket only when no other
  // descriptor refers to it, and a child forked without exec holds a copy of each, so epoll
  // would go on reporting the socket, tagged with the connection destroyed below.
  ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  std::swap(connections[at], connections.back());
  connections[at]->index = at;
  connections.pop_back();  // destroys c
  closed.add();
  open.set(connections.size());
}

// The peer ended the connection, with a close (FIN) or a reset: a frame it had begun is lost.
void tcp_receiver::impl::ended(connection& c) {
  if (c.framer.has_partial_frame()) cut_at_close.add();
  close(c);
}

// The wait timeout to use so that the next idle check happens on time.
int tcp_receiver::impl::idle_check_within(int timeout_ms) const {
  return next_idle_check ? wait_until(timeout_ms, *next_idle_check) : timeout_ms;
}

// Closes every connection that has sent nothing for idle_timeout, and notes when to look next.
// A connection with input waiting is not idle: it counts as active now and is read by the
// next wait. One closed with a frame begun loses it, which counts as cut.
void tcp_receiver::impl::close_idle() {
  if (!next_idle_check || now < *next_idle_check) return;
  const std::chrono::milliseconds timeout = receiver.options_.idle_timeout;
  next_idle_check.reset();
  // Backwards: close() moves the last connection into the closed one's place.
  for (std::size_t i = connections.size(); i-- > 0;) {
    connection& c = *connections[i];
    if (detail::later_by(c.last_active, timeout) <= now && has_unread_input(c.fd.get()))
      c.last_active = now;
    const clock::time_point due = detail::later_by(c.last_active, timeout);
    if (due <= now) {
      idle_closed.add();
      if (c.framer.has_partial_frame()) cut_at_close.add();
      close(c);
    } else if (!next_idle_check || due < *next_idle_check) {
      next_idle_check = due;
    }
  }
}

std::size_t tcp_receiver::impl::service(connection& c, tcp_frame_handler& handler) {
  std::size_t delivered = 0;
  auto on_frame = [&](std::span<const std::byte> bytes) {
    // The buffer a handler left alone is reused, as long as it is not much larger than this
    // message needs: a handler that keeps a small message must not pin a large block.
    const std::size_t capacity = frame.buffer.capacity();
    if (capacity < bytes.size() || capacity > std::max(reuse_slack * bytes.size(), reuse_floor)) {
      frame.buffer = pool.acquire(bytes.size());
    }
    frame.buffer.clear();
    frame.buffer.append(bytes);
    frame.peer = c.peer;
    frame.connection = c.id;
    frames.add();
    ++delivered;
    handler(frame);
  };
  for (int i = 0; i < reads_per_turn; ++i) {
    const ssize_t got = ::read(c.fd.get(), read_buffer.data(), read_buffer.capacity());
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {  // reset by peer, timed out, ...
        resets.add();
        ended(c);
      }
      return delivered;
    }
    if (got == 0) {
      ended(c);
      return delivered;
    }
    c.last_active = now;
    bytes_received.add(static_cast<std::uint64_t>(got));
    framing_error error;
    try {
      error = c.framer.feed({read_buffer.data(), static_cast<std::size_t>(got)}, on_frame);
    } catch (...) {
      closed_by_exception.add();
      close(c);
      throw;
    }
    if (error != framing_error::none) {
      framing_errors.add();
      const connection_error report{c.peer, c.id, error};
      close(c);
      if (on_error) on_error(report);
      return delivered;
    }
    if (static_cast<std::size_t>(got) < read_buffer.capacity()) return delivered;  // drained
  }
  return delivered;
}

tcp_receiver::tcp_receiver(const tcp_receiver_options& options, std::pmr::memory_resource* resource)
    : tcp_receiver(checked(options), std::make_unique<buffer_pool>(resource), nullptr) {}

tcp_receiver::tcp_receiver(const tcp_receiver_options& options, buffer_pool& pool)
    : tcp_receiver(checked(options), nullptr, &pool) {}

tcp_receiver::tcp_receiver(const tcp_receiver_options& options, std::unique_ptr<buffer_pool> owned,
                           buffer_pool* pool)
    : options_(options),
      owned_pool_(std::move(owned)),
      pool_(pool != nullptr ? pool : owned_pool_.get()) {
  // The framer validates max_frame_size; make one now so a bad value fails here.
  (void)syslog_framer(*pool_, {.mode = options.mode, .max_frame_size = options.max_frame_size});
  impl_ = std::make_unique<impl>(*this, options_, *pool_);
  impl_->listen(options_);
  port_ = detail::bound_port(impl_->listen_fd.get());
}

tcp_receiver::~tcp_receiver() = default;

void tcp_receiver::set_error_handler(std::function<void(const connection_error&)> on_error) {
  impl_->on_error = std::move(on_error);
}

std::size_t tcp_receiver::poll_once(std::chrono::milliseconds timeout, tcp_frame_handler handler) {
  if (stop_requested()) return 0;
  epoll_event events[events_per_wait];
  const long long wait_ms =
      timeout.count() < 0 ? -1 : std::min<long long>(timeout.count(), INT32_MAX);
  const int ready = ::epoll_wait(
      impl_->epoll_fd.get(), events, events_per_wait,
      impl_->idle_check_within(impl_->resume_accepting_within(static_cast<int>(wait_ms))));
  if (ready < 0) {
    if (errno == EINTR) return 0;
    detail::throw_errno(errno, "epoll_wait", "");
  }
  impl_->now = clock::now();
  std::size_t delivered = 0;
  for (int i = 0; i < ready; ++i) {
    void* tag = events[i].data.ptr;
    if (tag == &impl_->wake_tag) continue;  // stop(): nothing to read, the flag says it all
    if (tag == &impl_->listen_tag) {
      impl_->accept_ready();
      continue;
    }
    // A connection closed earlier in this loop cannot appear again: epoll reports each
    // descriptor once per wait, and new connections are not in this batch of events.
    delivered += impl_->service(*static_cast<impl::connection*>(tag), handler);
  }
  impl_->close_idle();  // after the events: none of them may refer to a closed connection
  return delivered;
}

std::uint64_t tcp_receiver::run(tcp_frame_handler handler) {
  std::uint64_t delivered = 0;
  while (!stop_requested()) delivered += poll_once(std::chrono::milliseconds(-1), handler);
  return delivered;
}

void tcp_receiver::stop() noexcept {
  stop_requested_.store(true, std::memory_order_release);
  detail::signal_wake_fd(impl_->wake_fd.get());
}

tcp_receiver_stats tcp_receiver::stats() const noexcept {
  const impl& i = *impl_;
  return {.frames = i.frames.get(),
          .bytes_received = i.bytes_received.get(),
          .connections_accepted = i.accepted.get(),
          .connections_closed = i.closed.get(),
          .connections_rejected = i.rejected.get(),
          .framing_errors = i.framing_errors.get(),
          .cut_at_close = i.cut_at_close.get(),
          .accept_failures = i.accept_failures.get(),
          .connections_reset = i.resets.get(),
          .idle_closed = i.idle_closed.get(),
          .closed_by_exception = i.closed_by_exception.get()};
}

std::size_t tcp_receiver::open_connections() const noexcept {
  return impl_->open.get();
}

}  // namespace pmrkit::datagram
