// chorus' own TCP transport (docs/transport-tcp.md): `streams` connections
// per pair of ranks over plain sockets, eager messages as one sendmsg each,
// rendezvous reads answered by the owner streaming the range back, progress
// by non-blocking recv and an epoll set to block on.
#pragma once

#include "common/config.hpp"
#include "transports/transport.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace chorus::transport {

// The defaults are the library's (config::kVariables); the transport
// factory sets every field from config::Settings.
struct TcpOptions {
  size_t max_eager_bytes = config::default_bytes(config::kVariables, "CHORUS_EAGER_LIMIT");  // headers are added on top
  std::string iface;  // CHORUS_TCP_IFACE: "", "auto", an interface name or an address
  // CHORUS_TCP_STREAMS: connections per pair of ranks
  int streams = static_cast<int>(config::default_int(config::kVariables, "CHORUS_TCP_STREAMS"));
  // CHORUS_TCP_SOCKET_BUFFER: 0 keeps the kernel's autotuning
  size_t socket_buffer = config::default_bytes(config::kVariables, "CHORUS_TCP_SOCKET_BUFFER");
  bool all_ranks_on_one_host = false;
  // For connection setup.
  std::chrono::milliseconds timeout{std::chrono::seconds(config::default_int(config::kVariables, "CHORUS_TIMEOUT"))};
};

std::unique_ptr<Transport> make_tcp_transport(int rank, int size, const TcpOptions& options);

// What CHORUS_TCP_IFACE (or auto) would choose on this host, for chorus_info.
std::string describe_tcp_choice(const std::string& iface, bool all_ranks_on_one_host);

}  // namespace chorus::transport
