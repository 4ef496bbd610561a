// The sender process of the UDP load test: sends datagrams to 127.0.0.1:PORT as fast as it
// can, until COUNT are sent or SECONDS have passed, then prints what it sent:
//   sent N oversize K bytes B failed F
// (`failed`: sendto calls that did not send; those datagrams never left and are not in N).
//   pmrkit_udp_load_sender PORT COUNT SECONDS MAX_OK
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "udp_load_payload.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: pmrkit_udp_load_sender PORT COUNT SECONDS MAX_OK\n");
    return 2;
  }
  const auto port = static_cast<std::uint16_t>(std::strtoul(argv[1], nullptr, 10));
  const std::uint64_t count = std::strtoull(argv[2], nullptr, 10);
  const double seconds = std::strtod(argv[3], nullptr);
  const std::size_t max_ok = std::strtoull(argv[4], nullptr, 10);
  namespace load = pmrkit::test::udp_load;

  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    std::perror("socket");
    return 1;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

  std::vector<std::byte> datagram(load::max_udp_payload);
  std::uint64_t sent = 0, oversize = 0, bytes = 0, failed = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (std::uint64_t seq = 0; seq < count; ++seq) {
    if (seq % 256 == 0 && std::chrono::steady_clock::now() >= end) break;
    const std::size_t size = load::size_of(seq, max_ok);
    load::fill({datagram.data(), size}, seq);
    if (::sendto(fd, datagram.data(), size, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) !=
        static_cast<ssize_t>(size)) {
      ++failed;
      continue;
    }
    ++sent;
    bytes += size;
    if (size > max_ok) ++oversize;
  }
  ::close(fd);
  std::printf("sent %llu oversize %llu bytes %llu failed %llu\n",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(oversize),
              static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(failed));
  return 0;
}
