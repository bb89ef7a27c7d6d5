// Setting up the TCP transport's connections (docs/transport-tcp.md,
// "Connections"): which local address to listen on, the address blob each
// rank publishes through the bootstrap store, and the handshake that joins
// every pair of ranks with `streams` connections and refuses anyone who does
// not know the job's token.
#pragma once

#include "bootstrap/socket.hpp"
#include "common/config.hpp"
#include "transports/transport.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::transport::tcp {

using bootstrap::net::Fd;

// An IPv4 or IPv6 socket address.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void set_port(uint16_t port);
  std::string to_string() const;  // "10.0.0.1:4242", "[::1]:4242"
};

// The local address to listen on:
//   setting "" or "auto": the address this host uses to reach the bootstrap
//     store (CHORUS_STORE_ADDR or MASTER_ADDR), loopback when all ranks share
//     a host and no store address is known;
//   an interface name ("eth0", "lo"): its first IPv4 address, else its first
//     IPv6 address that is not link-local;
//   an IPv4 or IPv6 literal: that address.
// `how` says what was chosen and why, for the log and chorus_info.
SocketAddress choose_local_address(const std::string& setting, bool all_ranks_on_one_host, std::string* how);

using Token = std::array<uint8_t, 16>;
Token random_token();

// What a rank publishes through the store.
struct PeerAddress {
  SocketAddress address;
  Token token{};
  uint32_t streams = 0;
};
Blob encode_address(const PeerAddress& address);
// Throws Error(Status::transport) naming `peer` for a blob that is not one.
PeerAddress decode_address(const Blob& blob, int peer);

// A listening non-blocking socket on `address` (its port 0 picks one); the
// bound address, with its port, is written back.
Fd listen_at(SocketAddress& address);

struct ConnectOptions {
  int rank = 0;
  int size = 1;
  uint32_t streams = static_cast<uint32_t>(config::default_int(config::kVariables, "CHORUS_TCP_STREAMS"));
  // SO_SNDBUF/SO_RCVBUF; 0 keeps the kernel's autotuning
  size_t socket_buffer = config::default_bytes(config::kVariables, "CHORUS_TCP_SOCKET_BUFFER");
  std::chrono::milliseconds timeout{std::chrono::seconds(config::default_int(config::kVariables, "CHORUS_TIMEOUT"))};
};

// Joins this rank to every other: rank r dials every lower rank's listener
// `streams` times and accepts `streams` connections from every higher rank.
// Every connection starts with a hello naming the dialer's rank and stream
// and carrying the listener's token; the listener answers with the dialer's
// token. A connection whose hello is wrong is closed and logged, and setup
// goes on. Returns, per peer, its `streams` connected non-blocking sockets
// (TCP_NODELAY set); none for ourselves. Throws naming the ranks that did not
// connect by the timeout.
std::vector<std::vector<Fd>> connect_all(Fd& listener, const Token& own_token, const std::vector<PeerAddress>& peers,
                                         const ConnectOptions& options);

// Applies TCP_NODELAY and, when non-zero, the socket buffer sizes.
void tune_socket(int fd, size_t socket_buffer, int peer);

}  // namespace chorus::transport::tcp
