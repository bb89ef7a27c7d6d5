// The TCP transport's wire format and the receive-side reassembly
// (docs/transport-tcp.md, "Wire format"). Pure: no sockets, so the framing
// is unit-tested over a simulated wire cut at every possible boundary
// (tests/tcp/test_tcp_wire.cc).
//
// A stream of frames, each a 24-byte header and `length` bytes of payload:
//   EAGER       payload: one eager message (engine header + payload)
//   READ_REQ    payload: ReadRequest (24 bytes); `request` names it
//   READ_DATA   payload: the requested bytes, straight from the owner's memory
//   READ_ERROR  payload: a reason (text) the owner refused the read
//   GOODBYE     no payload: the sender closes on purpose (end of the job)
// Integers are in the host's byte order: ranks of one job share it (the
// handshake checks a magic number, which differs if they do not).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace chorus::transport::tcp {

enum class FrameKind : uint32_t { eager = 1, read_request = 2, read_data = 3, read_error = 4, goodbye = 5 };

struct FrameHeader {
  uint32_t kind = 0;
  uint32_t reserved = 0;
  uint64_t length = 0;   // payload bytes after the header
  uint64_t request = 0;  // READ_*: the reader's request id; 0 otherwise
};
static_assert(sizeof(FrameHeader) == 24);

struct ReadRequest {
  uint64_t address = 0;  // in the owner's memory
  uint64_t key = 0;      // the owner's registration the range lies in
  uint64_t bytes = 0;
};
static_assert(sizeof(ReadRequest) == 24);

constexpr size_t kFrameHeaderBytes = sizeof(FrameHeader);
constexpr size_t kMaxErrorText = 1024;

// What the decoder found; called from FrameDecoder::consume.
class FrameHandler {
 public:
  virtual ~FrameHandler() = default;
  virtual void on_eager(const uint8_t* data, size_t bytes) = 0;
  virtual void on_read_request(uint64_t request, const ReadRequest& read) = 0;
  // Where the `bytes` of READ_DATA for `request` go; nullptr drops them (the
  // read was abandoned). Throws WireError when the reply was not asked for or
  // its size differs from the request.
  virtual uint8_t* read_data_destination(uint64_t request, uint64_t bytes) = 0;
  virtual void on_read_data_done(uint64_t request) = 0;
  virtual void on_read_error(uint64_t request, const std::string& reason) = 0;
  virtual void on_goodbye() = 0;
};

// A byte stream that is not this protocol (a bug or a foreign peer); the
// connection cannot be trusted after it.
class WireError : public std::exception {
 public:
  explicit WireError(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

// Reassembles frames from whatever pieces recv() returns. Small frames are
// parsed out of a staging buffer (one recv can bring many); the payload of
// READ_DATA is received straight into its destination once its header is in.
class FrameDecoder {
 public:
  // max_eager: largest EAGER payload accepted; staging_bytes: the buffer
  // one recv() fills (at least header + max_eager).
  FrameDecoder(size_t max_eager, size_t staging_bytes);

  // Where the next recv() should write; never empty.
  std::span<uint8_t> space();
  // `bytes` were written at the start of space(): deliver every frame they
  // complete. Throws WireError on a malformed stream.
  void consume(size_t bytes, FrameHandler& handler);

  // True between frames: no partial frame is held.
  bool idle() const { return direct_remaining_ == 0 && begin_ == end_; }
  // The request whose READ_DATA is being received straight into its
  // destination, or 0 (requests are never 0).
  uint64_t direct_request() const { return direct_remaining_ != 0 ? direct_request_ : 0; }
  // The rest of that payload is dropped instead (its read was abandoned and
  // the destination may be freed); on_read_data_done still comes at its end.
  void drop_rest_of_direct() { direct_ = nullptr; }

 private:
  void parse(FrameHandler& handler);
  void make_room(size_t frame_bytes);

  size_t max_eager_;
  std::vector<uint8_t> staging_;
  size_t begin_ = 0;  // first unparsed byte in staging_
  size_t end_ = 0;    // one past the last received byte
  // READ_DATA being received into its destination (nullptr: into staging_,
  // which is empty meanwhile, and dropped).
  uint8_t* direct_ = nullptr;
  uint64_t direct_remaining_ = 0;
  uint64_t direct_request_ = 0;
};

// Encodes a header (and, for READ_REQ, its payload) into `out`, returning
// the bytes written (kFrameHeaderBytes, or + sizeof(ReadRequest)).
size_t encode_header(uint8_t* out, FrameKind kind, uint64_t length, uint64_t request);
size_t encode_read_request(uint8_t* out, uint64_t request, const ReadRequest& read);

}  // namespace chorus::transport::tcp
