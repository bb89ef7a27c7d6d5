// The frames one TCP connection has yet to send, sent with gathering
// sendmsg() calls (docs/transport-tcp.md, "Sending").
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace chorus::transport::tcp {

class Outbound {
 public:
  // Sends the parts now if nothing is queued ahead of them (one sendmsg:
  // frame header, engine header and payload together) and copies what the
  // socket did not take. Returns 0, or an errno value when the connection
  // failed.
  int send_or_copy(int fd, const iovec* parts, int count);
  // Queues a frame whose body stays valid until sent (a READ_DATA reply
  // from registered memory): `head` is copied, `body` is not.
  void queue_reference(const uint8_t* head, size_t head_bytes, const uint8_t* body, size_t body_bytes);
  // Frames queued by reference whose body lies in [begin, begin + bytes)
  // copy it now: that memory is about to be released (its registration
  // closes; a failed operation's buffer goes back to the application).
  void copy_bodies_in(const uint8_t* begin, size_t bytes);
  // Sends as much of the queue as the socket takes. Returns 0, or an errno
  // value when the connection failed.
  int flush(int fd);

  bool empty() const { return frames_.empty(); }
  size_t frames() const { return frames_.size(); }
  uint64_t bytes() const { return queued_bytes_; }

 private:
  struct Frame {
    uint8_t head[64];
    size_t head_bytes = 0;
    std::vector<uint8_t> owned;  // the body, when copied
    const uint8_t* body = nullptr;
    size_t body_bytes = 0;
  };
  // Drops `sent` bytes from the front of the queue.
  void advance(size_t sent);

  std::deque<Frame> frames_;
  size_t front_offset_ = 0;  // bytes of frames_.front() already sent
  uint64_t queued_bytes_ = 0;
};

// sendmsg() that retries EINTR; returns the bytes taken, 0 when the socket
// is full, or -errno.
ssize_t send_parts(int fd, const iovec* parts, int count);

}  // namespace chorus::transport::tcp
