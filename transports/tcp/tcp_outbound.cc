#include "transports/tcp/tcp_outbound.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace chorus::transport::tcp {

namespace {
constexpr int kMaxParts = 64;
}

ssize_t send_parts(int fd, const iovec* parts, int count) {
  msghdr message{};
  message.msg_iov = const_cast<iovec*>(parts);
  message.msg_iovlen = static_cast<size_t>(count);
  for (;;) {
    const ssize_t sent = sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) return sent;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

int Outbound::send_or_copy(int fd, const iovec* parts, int count) {
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += parts[i].iov_len;
  size_t sent = 0;
  if (frames_.empty()) {
    const ssize_t result = send_parts(fd, parts, count);
    if (result < 0) return static_cast<int>(-result);
    sent = static_cast<size_t>(result);
    if (sent == total) return 0;
  }
  // Keep the rest, in order, as one frame of copied bytes.
  Frame frame;
  frame.owned.resize(total - sent);
  size_t skip = sent;
  size_t at = 0;
  for (int i = 0; i < count; ++i) {
    const size_t length = parts[i].iov_len;
    if (skip >= length) {
      skip -= length;
      continue;
    }
    std::memcpy(frame.owned.data() + at, static_cast<const uint8_t*>(parts[i].iov_base) + skip, length - skip);
    at += length - skip;
    skip = 0;
  }
  frame.body = frame.owned.data();
  frame.body_bytes = frame.owned.size();
  queued_bytes_ += frame.body_bytes;
  frames_.push_back(std::move(frame));
  return 0;
}

void Outbound::queue_reference(const uint8_t* head, size_t head_bytes, const uint8_t* body, size_t body_bytes) {
  Frame frame;
  std::memcpy(frame.head, head, std::min(head_bytes, sizeof frame.head));
  frame.head_bytes = head_bytes;
  frame.body = body;
  frame.body_bytes = body_bytes;
  queued_bytes_ += head_bytes + body_bytes;
  frames_.push_back(std::move(frame));
}

void Outbound::copy_bodies_in(const uint8_t* begin, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(begin);
  for (Frame& frame : frames_) {
    if (frame.body_bytes == 0 || !frame.owned.empty()) continue;
    const auto body = reinterpret_cast<uintptr_t>(frame.body);
    if (body + frame.body_bytes <= start || body >= start + bytes) continue;
    frame.owned.assign(frame.body, frame.body + frame.body_bytes);
    frame.body = frame.owned.data();
  }
}

int Outbound::flush(int fd) {
  while (!frames_.empty()) {
    iovec parts[kMaxParts];
    int count = 0;
    size_t skip = front_offset_;
    size_t total = 0;
    for (auto it = frames_.begin(); it != frames_.end() && count + 2 <= kMaxParts; ++it) {
      const iovec pieces[2] = {{it->head, it->head_bytes}, {const_cast<uint8_t*>(it->body), it->body_bytes}};
      for (const iovec& piece : pieces) {
        if (skip >= piece.iov_len) {
          skip -= piece.iov_len;
          continue;
        }
        parts[count++] = {static_cast<uint8_t*>(piece.iov_base) + skip, piece.iov_len - skip};
        total += piece.iov_len - skip;
        skip = 0;
      }
    }
    const ssize_t sent = send_parts(fd, parts, count);
    if (sent < 0) return static_cast<int>(-sent);
    advance(static_cast<size_t>(sent));
    if (static_cast<size_t>(sent) < total) return 0;  // the socket is full
  }
  return 0;
}

void Outbound::advance(size_t sent) {
  queued_bytes_ -= sent;
  while (sent != 0) {
    const Frame& front = frames_.front();
    const size_t left = front.head_bytes + front.body_bytes - front_offset_;
    if (sent < left) {
      front_offset_ += sent;
      return;
    }
    sent -= left;
    front_offset_ = 0;
    frames_.pop_front();
  }
}

}  // namespace chorus::transport::tcp
