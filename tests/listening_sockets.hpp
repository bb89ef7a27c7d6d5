// The TCP sockets in LISTEN state, read from /proc/net/tcp and /proc/net/tcp6:
// lets a test assert where a server really listens (e.g. the store on
// 127.0.0.1 only), whoever opened the socket.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace chorus::testing {

struct ListeningSocket {
  std::string address;  // "127.0.0.1", "0.0.0.0", "::1", ...
  uint16_t port = 0;
  unsigned long inode = 0;
};

namespace detail {

// The kernel prints each 32-bit word of the address as it lies in memory, read
// as a host-order integer; writing the words back gives the address bytes.
inline std::string address_from_proc(const std::string& hex, int family) {
  unsigned char bytes[16] = {};
  const size_t words = hex.size() / 8;
  for (size_t w = 0; w < words && w < 4; ++w) {
    uint32_t word = static_cast<uint32_t>(std::strtoul(hex.substr(8 * w, 8).c_str(), nullptr, 16));
    std::memcpy(bytes + 4 * w, &word, 4);
  }
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family, bytes, text, sizeof text);
  return text;
}

inline void read_proc_table(const char* path, int family, std::vector<ListeningSocket>& out) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // column titles
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    unsigned long inode = 0;
    fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (state != "0A") continue;  // TCP_LISTEN
    auto colon = local.find(':');
    out.push_back({address_from_proc(local.substr(0, colon), family),
                   static_cast<uint16_t>(std::strtoul(local.substr(colon + 1).c_str(), nullptr, 16)), inode});
  }
}

// Socket inodes among `pid`'s open descriptors.
inline std::set<unsigned long> socket_inodes_of(pid_t pid) {
  std::set<unsigned long> inodes;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* fds = opendir(dir.c_str());
  if (fds == nullptr) return inodes;
  while (dirent* entry = readdir(fds)) {
    char target[64] = {};
    ssize_t n = readlink((dir + "/" + entry->d_name).c_str(), target, sizeof target - 1);
    unsigned long inode = 0;
    if (n > 0 && std::sscanf(target, "socket:[%lu]", &inode) == 1) inodes.insert(inode);
  }
  closedir(fds);
  return inodes;
}

}  // namespace detail

// Every listening TCP socket of this network namespace.
inline std::vector<ListeningSocket> listening_sockets() {
  std::vector<ListeningSocket> sockets;
  detail::read_proc_table("/proc/net/tcp", AF_INET, sockets);
  detail::read_proc_table("/proc/net/tcp6", AF_INET6, sockets);
  return sockets;
}

// The listening TCP sockets that process `pid` holds open.
inline std::vector<ListeningSocket> listening_sockets_of(pid_t pid) {
  auto inodes = detail::socket_inodes_of(pid);
  std::vector<ListeningSocket> mine;
  for (auto& socket : listening_sockets()) {
    if (inodes.contains(socket.inode)) mine.push_back(socket);
  }
  return mine;
}

}  // namespace chorus::testing
