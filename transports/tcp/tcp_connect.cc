#include "transports/tcp/tcp_connect.hpp"

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

namespace chorus::transport::tcp {

namespace {

constexpr uint64_t kAddressMagic = 0x3150435453524843ull;    // "CHRSTCP1"

struct AddressWire {
  uint64_t magic;
  uint32_t family;
  uint16_t port;
  uint16_t streams;
  uint8_t ip[16];
  uint32_t scope_id;
  uint8_t token[16];
};

bool is_loopback(const SocketAddress& address) {
  if (address.family() == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address.storage);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
  return IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
}

SocketAddress from_sockaddr(const sockaddr* address) {
  SocketAddress out;
  out.length = address->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  std::memcpy(&out.storage, address, out.length);
  out.set_port(0);
  return out;
}

std::optional<SocketAddress> parse_literal(const std::string& text) {
  SocketAddress out;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  if (inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    out.length = sizeof(sockaddr_in);
    return out;
  }
  if (inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    out.length = sizeof(sockaddr_in6);
    return out;
  }
  return std::nullopt;
}

// The interface's first IPv4 address, else its first routable IPv6 one.
std::optional<SocketAddress> interface_address(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) fail(Status::transport, "tcp: getifaddrs failed: ", errno_string(errno));
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> owner(list, freeifaddrs);
  std::optional<SocketAddress> v6;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || name != entry->ifa_name) continue;
    if (entry->ifa_addr->sa_family == AF_INET) return from_sockaddr(entry->ifa_addr);
    if (entry->ifa_addr->sa_family == AF_INET6 && !v6) {
      const auto* address = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
      if (!IN6_IS_ADDR_LINKLOCAL(&address->sin6_addr)) v6 = from_sockaddr(entry->ifa_addr);
    }
  }
  return v6;
}

// The local address the kernel would use to reach host:port (a UDP
// connect() sends nothing).
std::optional<SocketAddress> route_to(const std::string& host, uint16_t port, std::string& why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rc != 0) {
    why = concat("cannot resolve the store host \"", host, "\": ", gai_strerror(rc));
    return std::nullopt;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(list, freeaddrinfo);
  for (addrinfo* entry = list; entry != nullptr; entry = entry->ai_next) {
    Fd probe(socket(entry->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!probe || ::connect(probe.get(), entry->ai_addr, entry->ai_addrlen) != 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (getsockname(probe.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0) continue;
    return from_sockaddr(reinterpret_cast<sockaddr*>(&local));
  }
  why = concat("no route to the store host \"", host, "\"");
  return std::nullopt;
}

std::optional<bootstrap::net::HostPort> store_address() {
  if (auto text = config::get("CHORUS_STORE_ADDR")) return bootstrap::net::parse_host_port(*text);
  auto host = config::get("MASTER_ADDR");
  if (!host) return std::nullopt;
  return bootstrap::net::HostPort{*host, 29500};
}

}  // namespace

uint16_t SocketAddress::port() const {
  return ntohs(family() == AF_INET ? reinterpret_cast<const sockaddr_in*>(&storage)->sin_port
                                   : reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
}

void SocketAddress::set_port(uint16_t port) {
  if (family() == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
  }
}

std::string SocketAddress::to_string() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, text, sizeof text);
    return concat(text, ":", port());
  }
  inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, text, sizeof text);
  return concat("[", text, "]:", port());
}

SocketAddress choose_local_address(const std::string& setting, bool all_ranks_on_one_host, std::string* how) {
  auto say = [how](auto&&... parts) {
    if (how != nullptr) *how = concat(parts...);
  };
  if (!setting.empty() && setting != "auto") {
    if (auto literal = parse_literal(setting)) {
      say("CHORUS_TCP_IFACE=", setting);
      return *literal;
    }
    if (auto address = interface_address(setting)) {
      say("interface ", setting, " (CHORUS_TCP_IFACE)");
      return *address;
    }
    fail(Status::config, "CHORUS_TCP_IFACE=\"", setting,
         "\": expected auto, an interface with an IPv4 or routable IPv6 address (see `ip addr`), or an IP address");
  }
  std::string why = "no store address known (CHORUS_STORE_ADDR, MASTER_ADDR)";
  if (auto store = store_address()) {
    if (auto local = route_to(store->host, store->port, why)) {
      if (!is_loopback(*local) || all_ranks_on_one_host) {
        say("the address that reaches the store ", store->host);
        return *local;
      }
      why = concat("the store ", store->host, " is reached over loopback, but the ranks span hosts");
    }
  }
  if (all_ranks_on_one_host) {
    say("loopback: all ranks share this host (", why, ")");
    return *parse_literal("127.0.0.1");
  }
  fail(Status::config, "tcp: cannot choose the interface to listen on: ", why,
       "; set CHORUS_TCP_IFACE to an interface name or an address");
}

Token random_token() {
  Token token{};
  size_t got = 0;
  while (got < token.size()) {
    const ssize_t n = getrandom(token.data() + got, token.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(Status::transport, "tcp: getrandom failed: ", errno_string(errno));
    got += static_cast<size_t>(n);
  }
  return token;
}

Blob encode_address(const PeerAddress& address) {
  AddressWire wire{};
  wire.magic = kAddressMagic;
  wire.family = static_cast<uint32_t>(address.address.family());
  wire.port = address.address.port();
  wire.streams = static_cast<uint16_t>(address.streams);
  if (address.address.family() == AF_INET) {
    std::memcpy(wire.ip, &reinterpret_cast<const sockaddr_in*>(&address.address.storage)->sin_addr, 4);
  } else {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address.address.storage);
    std::memcpy(wire.ip, &v6->sin6_addr, 16);
    wire.scope_id = v6->sin6_scope_id;
  }
  std::memcpy(wire.token, address.token.data(), sizeof wire.token);
  Blob blob(sizeof wire);
  std::memcpy(blob.data(), &wire, sizeof wire);
  return blob;
}

PeerAddress decode_address(const Blob& blob, int peer) {
  AddressWire wire{};
  if (blob.size() != sizeof wire) {
    fail_peer(Status::transport, peer, "tcp: rank ", peer, " published a ", blob.size(), "-byte address, expected ",
              sizeof wire, " (does every rank run CHORUS_TRANSPORT=tcp of this chorus version?)");
  }
  std::memcpy(&wire, blob.data(), sizeof wire);
  if (wire.magic != kAddressMagic || (wire.family != AF_INET && wire.family != AF_INET6)) {
    fail_peer(Status::transport, peer, "tcp: rank ", peer, " published an address that is not a chorus tcp one");
  }
  PeerAddress out;
  if (wire.family == AF_INET) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out.address.storage);
    v4->sin_family = AF_INET;
    std::memcpy(&v4->sin_addr, wire.ip, 4);
    out.address.length = sizeof(sockaddr_in);
  } else {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.address.storage);
    v6->sin6_family = AF_INET6;
    std::memcpy(&v6->sin6_addr, wire.ip, 16);
    v6->sin6_scope_id = wire.scope_id;
    out.address.length = sizeof(sockaddr_in6);
  }
  out.address.set_port(wire.port);
  out.streams = wire.streams;
  std::memcpy(out.token.data(), wire.token, sizeof wire.token);
  return out;
}

Fd listen_at(SocketAddress& address) {
  Fd fd(socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) fail(Status::transport, "tcp: socket() for the listener failed: ", errno_string(errno));
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    fail(Status::transport, "tcp: bind to ", address.to_string(), " failed: ", errno_string(errno));
  }
  if (listen(fd.get(), SOMAXCONN) != 0) {
    fail(Status::transport, "tcp: listen on ", address.to_string(), " failed: ", errno_string(errno));
  }
  socklen_t length = sizeof address.storage;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address.storage), &length) != 0) {
    fail(Status::transport, "tcp: getsockname of the listener failed: ", errno_string(errno));
  }
  address.length = length;
  return fd;
}

void tune_socket(int fd, size_t socket_buffer, int peer) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    fail_peer(Status::transport, peer, "tcp: setting TCP_NODELAY on the connection to rank ", peer,
              " failed: ", errno_string(errno));
  }
  if (socket_buffer == 0) return;
  const int bytes = static_cast<int>(socket_buffer);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes) != 0) {
    fail_peer(Status::transport, peer, "tcp: setting ", socket_buffer, "-byte socket buffers for rank ", peer,
              " failed: ", errno_string(errno));
  }
}

}  // namespace chorus::transport::tcp
