#include "bootstrap/frame.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cstdio>

namespace chorus::bootstrap::frame {

namespace {

constexpr uint8_t kMagicBytes[4] = {'C', 'H', 'R', 'S'};

void put_u8(Bytes& out, uint8_t value) { out.push_back(value); }
void put_u16(Bytes& out, uint16_t value) {
  out.push_back(static_cast<uint8_t>(value >> 8));
  out.push_back(static_cast<uint8_t>(value));
}
void put_u64(Bytes& out, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(value >> shift));
}
void put_blob(Bytes& out, std::span<const uint8_t> blob) {
  put_u32(out, static_cast<uint32_t>(blob.size()));
  out.insert(out.end(), blob.begin(), blob.end());
}
std::span<const uint8_t> as_bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

std::string hex(uint64_t value, int digits) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%0*llx", digits, static_cast<unsigned long long>(value));
  return text;
}

// Name of a type from the enum, or nullptr for any other byte value.
const char* known_name(uint8_t type) {
  switch (static_cast<Type>(type)) {
    case Type::hello: return "HELLO";
    case Type::set: return "SET";
    case Type::get: return "GET";
    case Type::add: return "ADD";
    case Type::check: return "CHECK";
    case Type::ok: return "OK";
    case Type::value: return "VALUE";
    case Type::counter: return "COUNTER";
    case Type::exists: return "EXISTS";
    case Type::error: return "ERROR";
  }
  return nullptr;
}

bool known_type(uint8_t type) { return known_name(type) != nullptr; }

bool type_has_key(Type type) {
  return type == Type::set || type == Type::get || type == Type::add || type == Type::check;
}

void check_key_for_encoding(const Frame& frame) {
  if (!type_has_key(frame.type)) return;
  if (frame.key.empty()) fail(Status::invalid_argument, "store keys must not be empty (", type_name(frame.type), ")");
  if (frame.key.size() > kMaxKey) {
    fail(Status::invalid_argument, "store key \"", frame.key.substr(0, 64), "...\" is ", frame.key.size(),
         " bytes; keys are limited to ", kMaxKey, " bytes");
  }
}

// Reads a payload field by field; the first problem is kept and every later
// read returns nothing, so parse functions stay linear.
class PayloadReader {
 public:
  PayloadReader(Type type, std::span<const uint8_t> payload) : type_(type), payload_(payload) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  uint8_t u8(const char* field) {
    if (!need(1, field)) return 0;
    return payload_[offset_++];
  }
  uint64_t u64(const char* field) {
    if (!need(8, field)) return 0;
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value = (value << 8) | payload_[offset_++];
    return value;
  }
  std::span<const uint8_t> blob(const char* field, size_t limit) {
    if (!need(kLengthBytes, concat(field, " length").c_str())) return {};
    uint32_t length = get_u32(payload_.data() + offset_);
    offset_ += kLengthBytes;
    size_t remaining = payload_.size() - offset_;
    if (length > remaining) {
      set_error(concat("truncated ", type_name(type_), " payload: ", field, " length ", length, " but ", remaining,
                       " bytes remain"));
      return {};
    }
    if (length > limit) {
      set_error(concat(type_name(type_), " ", field, " of ", length, " bytes exceeds the ", limit, "-byte limit"));
      return {};
    }
    auto bytes = payload_.subspan(offset_, length);
    offset_ += length;
    return bytes;
  }
  std::string key() {
    auto bytes = blob("key", kMaxKey);
    if (ok() && bytes.empty()) set_error(concat(type_name(type_), " key is empty"));
    return std::string(bytes.begin(), bytes.end());
  }
  bool flag(const char* field) {
    uint8_t value = u8(field);
    if (ok() && value > 1) set_error(concat(type_name(type_), " ", field, " flag must be 0 or 1, got ", int{value}));
    return value == 1;
  }
  void expect_end() {
    if (ok() && offset_ != payload_.size()) {
      set_error(concat(type_name(type_), " payload has ", payload_.size() - offset_, " unexpected trailing bytes"));
    }
  }

 private:
  bool need(size_t bytes, const char* field) {
    if (!ok()) return false;
    size_t remaining = payload_.size() - offset_;
    if (bytes <= remaining) return true;
    set_error(concat("truncated ", type_name(type_), " payload: ", field, " needs ", bytes, " bytes but ", remaining,
                     " remain"));
    return false;
  }
  void set_error(std::string message) {
    if (ok()) error_ = std::move(message);
  }

  Type type_;
  std::span<const uint8_t> payload_;
  size_t offset_ = 0;
  std::string error_;
};

void parse_fields(PayloadReader& in, Frame& frame) {
  switch (frame.type) {
    case Type::hello: {
      auto secret = in.blob("secret", kMaxPayload);
      frame.blob.assign(secret.begin(), secret.end());
      break;
    }
    case Type::set: {
      frame.key = in.key();
      auto value = in.blob("value", kMaxPayload);
      frame.blob.assign(value.begin(), value.end());
      break;
    }
    case Type::get:
      frame.key = in.key();
      frame.wait = in.flag("wait");
      break;
    case Type::add:
      frame.key = in.key();
      frame.number = static_cast<int64_t>(in.u64("delta"));
      break;
    case Type::check:
      frame.key = in.key();
      break;
    case Type::ok:
      break;
    case Type::value: {
      auto value = in.blob("value", kMaxPayload);
      frame.blob.assign(value.begin(), value.end());
      break;
    }
    case Type::counter:
      frame.number = static_cast<int64_t>(in.u64("value"));
      break;
    case Type::exists:
      frame.exists = in.flag("exists");
      break;
    case Type::error: {
      auto message = in.blob("message", kMaxPayload);
      frame.message.assign(message.begin(), message.end());
      break;
    }
  }
  in.expect_end();
}

Decoded failure(std::string message) {
  Decoded result;
  result.status = DecodeStatus::error;
  result.error = std::move(message);
  return result;
}

}  // namespace

std::string type_name(uint8_t type) {
  const char* name = known_name(type);
  return name != nullptr ? name : "type " + hex(type, 2);
}

bool is_request(Type type) { return type == Type::hello || type_has_key(type); }

// --- constructors ------------------------------------------------------------

namespace {
Frame make(Type type, uint32_t id) {
  Frame frame;
  frame.type = type;
  frame.request_id = id;
  return frame;
}
Frame make_keyed(Type type, uint32_t id, std::string_view key) {
  Frame frame = make(type, id);
  frame.key = std::string(key);
  return frame;
}
}  // namespace

Frame Frame::hello(uint32_t id, std::string_view secret) {
  Frame frame = make(Type::hello, id);
  auto bytes = as_bytes(secret);
  frame.blob.assign(bytes.begin(), bytes.end());
  return frame;
}
Frame Frame::set(uint32_t id, std::string_view key, std::span<const uint8_t> value) {
  Frame frame = make_keyed(Type::set, id, key);
  frame.blob.assign(value.begin(), value.end());
  return frame;
}
Frame Frame::get(uint32_t id, std::string_view key, bool wait) {
  Frame frame = make_keyed(Type::get, id, key);
  frame.wait = wait;
  return frame;
}
Frame Frame::add(uint32_t id, std::string_view key, int64_t delta) {
  Frame frame = make_keyed(Type::add, id, key);
  frame.number = delta;
  return frame;
}
Frame Frame::check(uint32_t id, std::string_view key) { return make_keyed(Type::check, id, key); }
Frame Frame::ok(uint32_t id) { return make(Type::ok, id); }
Frame Frame::value(uint32_t id, std::span<const uint8_t> value) {
  Frame frame = make(Type::value, id);
  frame.blob.assign(value.begin(), value.end());
  return frame;
}
Frame Frame::counter(uint32_t id, int64_t value) {
  Frame frame = make(Type::counter, id);
  frame.number = value;
  return frame;
}
Frame Frame::exists_reply(uint32_t id, bool exists) {
  Frame frame = make(Type::exists, id);
  frame.exists = exists;
  return frame;
}
Frame Frame::error(uint32_t id, std::string_view message) {
  Frame frame = make(Type::error, id);
  frame.message = std::string(message);
  return frame;
}

// --- encoding ------------------------------------------------------------------

size_t payload_size(const Frame& frame) {
  const size_t key = type_has_key(frame.type) ? kLengthBytes + frame.key.size() : 0;
  switch (frame.type) {
    case Type::hello:
    case Type::value: return kLengthBytes + frame.blob.size();
    case Type::set: return key + kLengthBytes + frame.blob.size();
    case Type::get: return key + 1;
    case Type::add: return key + 8;
    case Type::check: return key;
    case Type::ok: return 0;
    case Type::counter: return 8;
    case Type::exists: return 1;
    case Type::error: return kLengthBytes + frame.message.size();
  }
  return 0;
}

void encode_into(Bytes& out, const Frame& frame) {
  check_key_for_encoding(frame);
  const size_t payload = payload_size(frame);
  if (payload > kMaxPayload) {
    fail(Status::invalid_argument, type_name(frame.type), " frame",
         frame.key.empty() ? std::string() : concat(" for key \"", frame.key, "\""), " needs a payload of ", payload,
         " bytes, more than the store's ", kMaxPayload, "-byte limit");
  }
  out.reserve(out.size() + kHeaderBytes + payload);
  put_u32(out, kMagic);
  put_u8(out, kVersion);
  put_u8(out, static_cast<uint8_t>(frame.type));
  put_u16(out, 0);
  put_u32(out, static_cast<uint32_t>(payload));
  put_u32(out, frame.request_id);
  if (type_has_key(frame.type)) put_blob(out, as_bytes(frame.key));
  switch (frame.type) {
    case Type::hello:
    case Type::set:
    case Type::value: put_blob(out, frame.blob); break;
    case Type::get: put_u8(out, frame.wait ? 1 : 0); break;
    case Type::add:
    case Type::counter: put_u64(out, static_cast<uint64_t>(frame.number)); break;
    case Type::exists: put_u8(out, frame.exists ? 1 : 0); break;
    case Type::error: put_blob(out, as_bytes(frame.message)); break;
    case Type::check:
    case Type::ok: break;
  }
}

Bytes encode(const Frame& frame) {
  Bytes out;
  encode_into(out, frame);
  return out;
}

// --- decoding ------------------------------------------------------------------

Header read_header(std::span<const uint8_t, kHeaderBytes> bytes) {
  Header header;
  header.magic = get_u32(bytes.data());
  header.version = bytes[4];
  header.type = bytes[5];
  header.reserved = static_cast<uint16_t>((bytes[6] << 8) | bytes[7]);
  header.payload_bytes = get_u32(bytes.data() + 8);
  header.request_id = get_u32(bytes.data() + 12);
  return header;
}

std::string check_header(const Header& header) {
  if (header.magic != kMagic) return concat("bad magic ", hex(header.magic, 8), " (expected ", hex(kMagic, 8), " \"CHRS\")");
  if (header.version != kVersion) {
    return concat("unsupported protocol version ", int{header.version}, " (this build speaks version ", int{kVersion},
                  ")");
  }
  if (header.reserved != 0) return concat("reserved header field is ", hex(header.reserved, 4), ", must be 0");
  if (!known_type(header.type)) return concat("unknown frame type ", hex(header.type, 2));
  if (header.payload_bytes > kMaxPayload) {
    return concat("frame payload of ", header.payload_bytes, " bytes exceeds the ", kMaxPayload, "-byte limit");
  }
  return {};
}

std::string check_prefix(std::span<const uint8_t> bytes) {
  if (bytes.size() >= kHeaderBytes) return check_header(read_header(bytes.first<kHeaderBytes>()));
  const size_t magic_seen = std::min(bytes.size(), sizeof kMagicBytes);
  if (std::equal(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(magic_seen), kMagicBytes)) return {};
  uint64_t seen = 0;
  for (size_t i = 0; i < magic_seen; ++i) seen = (seen << 8) | bytes[i];
  if (magic_seen == sizeof kMagicBytes) return check_header(Header{.magic = static_cast<uint32_t>(seen)});
  return concat("bad magic: first bytes ", hex(seen, static_cast<int>(2 * magic_seen)),
                " do not start the magic ", hex(kMagic, 8), " \"CHRS\"");
}

Decoded decode_payload(const Header& header, std::span<const uint8_t> payload) {
  // Re-checked so this entry point is as safe as decode() for a fuzzer.
  if (auto problem = check_header(header); !problem.empty()) return failure(std::move(problem));
  if (payload.size() != header.payload_bytes) {
    return failure(concat("payload of ", payload.size(), " bytes given for a header announcing ", header.payload_bytes));
  }
  Decoded result;
  result.frame.type = static_cast<Type>(header.type);
  result.frame.request_id = header.request_id;
  PayloadReader in(result.frame.type, payload);
  parse_fields(in, result.frame);
  if (!in.ok()) return failure(in.error());
  result.status = DecodeStatus::frame;
  result.consumed = kHeaderBytes + payload.size();
  return result;
}

Decoded decode(std::span<const uint8_t> bytes) {
  if (auto problem = check_prefix(bytes); !problem.empty()) return failure(std::move(problem));
  if (bytes.size() < kHeaderBytes) return {};
  Header header = read_header(bytes.first<kHeaderBytes>());
  if (bytes.size() - kHeaderBytes < header.payload_bytes) return {};
  return decode_payload(header, bytes.subspan(kHeaderBytes, header.payload_bytes));
}

// --- incremental decoder ---------------------------------------------------------

void Decoder::feed(std::span<const uint8_t> bytes) {
  if (!error_.empty() || bytes.empty()) return;
  // Drop consumed bytes before growing, so the buffer stays about one frame.
  if (start_ > 0 && (start_ == buffer_.size() || start_ >= buffer_.size() / 2)) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(start_));
    start_ = 0;
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

Decoded Decoder::next() {
  if (!error_.empty()) return failure(error_);
  Decoded result = decode(unread());
  if (result.status == DecodeStatus::error) error_ = result.error;
  if (result.status == DecodeStatus::frame) start_ += result.consumed;
  return result;
}

std::string Decoder::progress() const {
  if (pending() < kHeaderBytes) return concat(pending(), " of ", kHeaderBytes, " header bytes");
  Header header = read_header(unread().first<kHeaderBytes>());
  return concat(pending() - kHeaderBytes, " of ", header.payload_bytes, " payload bytes of a ", type_name(header.type),
                " frame");
}

std::optional<Header> Decoder::pending_header() const {
  if (pending() < kHeaderBytes) return std::nullopt;
  return read_header(unread().first<kHeaderBytes>());
}

}  // namespace chorus::bootstrap::frame
