// Wire format of the bootstrap store (docs/bootstrap.md). Pure functions over
// bytes: no sockets, no clocks, so the codec is unit-tested and fuzzed alone.
//
// Every frame is a 16-byte header followed by `payload_bytes` of payload.
// Integers are big-endian (network order):
//
//   offset 0  u32 magic          0x43485253, the ASCII bytes "CHRS"
//          4  u8  version        1
//          5  u8  type           Type below
//          6  u16 reserved       must be 0
//          8  u32 payload_bytes  at most kMaxPayload
//         12  u32 request_id     echoed by the reply
//
// Payloads (blob = u32 length + bytes; key = blob of 1..kMaxKey bytes):
//   HELLO   blob secret          SET     key, blob value
//   GET     key, u8 wait (0/1)   ADD     key, i64 delta
//   CHECK   key                  OK      (empty)
//   VALUE   blob value           COUNTER i64 value
//   EXISTS  u8 exists (0/1)      ERROR   blob message
//
// Decoding never trusts a length: every length is checked against what
// remains and against the limits before anything is copied, and every error
// names the problem precisely (e.g. "truncated SET payload: key length 900 but
// 12 bytes remain").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::bootstrap::frame {

using Bytes = std::vector<uint8_t>;

inline constexpr uint32_t kMagic = 0x43485253;  // "CHRS"
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 16;
inline constexpr size_t kMaxPayload = 1 << 20;
inline constexpr size_t kMaxKey = 512;

// A blob's length prefix, and the big-endian u32 the frames and bootstrap's
// all_gather values (bootstrap.cc) are written with.
inline constexpr size_t kLengthBytes = 4;
inline void put_u32(Bytes& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(value >> shift));
}
inline uint32_t get_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Bytes a store connection (client and server) reads from its socket at a
// time and feeds its Decoder.
inline constexpr size_t kReadChunk = 64 * 1024;

enum class Type : uint8_t {
  hello = 1,
  set = 2,
  get = 3,
  add = 4,
  check = 5,
  ok = 16,
  value = 17,
  counter = 18,
  exists = 19,
  error = 20,
};

// "HELLO", "SET", ...; "type 0x63" for values outside the enum.
std::string type_name(uint8_t type);
inline std::string type_name(Type type) { return type_name(static_cast<uint8_t>(type)); }
bool is_request(Type type);

// One decoded frame. Only the fields of its type are meaningful: `key` for
// SET/GET/ADD/CHECK, `blob` for HELLO (secret), SET and VALUE, `wait` for GET,
// `number` for ADD (delta) and COUNTER, `exists` for EXISTS, `message` for ERROR.
struct Frame {
  Type type = Type::ok;
  uint32_t request_id = 0;
  std::string key;
  Bytes blob;
  bool wait = false;
  bool exists = false;
  int64_t number = 0;
  std::string message;

  static Frame hello(uint32_t id, std::string_view secret);
  static Frame set(uint32_t id, std::string_view key, std::span<const uint8_t> value);
  static Frame get(uint32_t id, std::string_view key, bool wait);
  static Frame add(uint32_t id, std::string_view key, int64_t delta);
  static Frame check(uint32_t id, std::string_view key);
  static Frame ok(uint32_t id);
  static Frame value(uint32_t id, std::span<const uint8_t> value);
  static Frame counter(uint32_t id, int64_t value);
  static Frame exists_reply(uint32_t id, bool exists);
  static Frame error(uint32_t id, std::string_view message);

  bool operator==(const Frame&) const = default;
};

struct Header {
  uint32_t magic = 0;
  uint8_t version = 0;
  uint8_t type = 0;
  uint16_t reserved = 0;
  uint32_t payload_bytes = 0;
  uint32_t request_id = 0;
};

// Payload bytes `frame` encodes to; what the encoder checks against kMaxPayload.
size_t payload_size(const Frame& frame);

// Appends the encoded frame to `out`. Throws Error(Status::invalid_argument)
// if a key is empty or longer than kMaxKey, or the payload exceeds kMaxPayload
// (the message names the key and the sizes).
void encode_into(Bytes& out, const Frame& frame);
Bytes encode(const Frame& frame);

// Parses the 16 header bytes (no validation).
Header read_header(std::span<const uint8_t, kHeaderBytes> bytes);

// Empty if `header` is acceptable, else the reason it is not.
std::string check_header(const Header& header);

// A prefix that already cannot start a valid frame (fewer than 4 bytes whose
// magic is wrong, or a complete header that fails check_header) is rejected
// at once, so garbage is refused without waiting for more bytes.
std::string check_prefix(std::span<const uint8_t> bytes);

enum class DecodeStatus { frame, need_more, error };

struct Decoded {
  DecodeStatus status = DecodeStatus::need_more;
  Frame frame;         // status == frame
  size_t consumed = 0; // status == frame: bytes of this frame (header + payload)
  std::string error;   // status == error
};

// Decodes the payload that follows `header` (the header is checked too).
Decoded decode_payload(const Header& header, std::span<const uint8_t> payload);

// Decodes the first frame at the start of `bytes`. Never reads outside the
// span and never throws on malformed input: safe to drive from a fuzzer.
Decoded decode(std::span<const uint8_t> bytes);

// Incremental decoder for a byte stream: feed() what arrives, then call next()
// until it returns need_more. After an error it keeps returning that error.
class Decoder {
 public:
  void feed(std::span<const uint8_t> bytes);
  Decoded next();
  // True while bytes of an unfinished frame are buffered.
  bool mid_frame() const { return pending() > 0; }
  // How far the unfinished frame got, e.g. "7 of 16 header bytes".
  std::string progress() const;
  // The unfinished frame's header, once its 16 bytes are in (not validated).
  std::optional<Header> pending_header() const;

 private:
  size_t pending() const { return buffer_.size() - start_; }
  std::span<const uint8_t> unread() const { return {buffer_.data() + start_, pending()}; }

  Bytes buffer_;
  size_t start_ = 0;
  std::string error_;
};

}  // namespace chorus::bootstrap::frame
