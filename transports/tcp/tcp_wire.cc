#include "transports/tcp/tcp_wire.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::transport::tcp {

FrameDecoder::FrameDecoder(size_t max_eager, size_t staging_bytes)
    : max_eager_(max_eager),
      staging_(std::max(staging_bytes, kFrameHeaderBytes + std::max(max_eager, kMaxErrorText))) {}

std::span<uint8_t> FrameDecoder::space() {
  if (direct_remaining_ != 0) {
    if (direct_ == nullptr) return {staging_.data(), static_cast<size_t>(std::min<uint64_t>(direct_remaining_, staging_.size()))};
    return {direct_, static_cast<size_t>(direct_remaining_)};
  }
  if (begin_ == end_) begin_ = end_ = 0;
  if (end_ == staging_.size()) make_room(end_ - begin_ + 1);
  return {staging_.data() + end_, staging_.size() - end_};
}

void FrameDecoder::consume(size_t bytes, FrameHandler& handler) {
  if (direct_remaining_ != 0) {
    if (direct_ != nullptr) direct_ += bytes;
    direct_remaining_ -= bytes;
    if (direct_remaining_ == 0) handler.on_read_data_done(direct_request_);
    return;
  }
  end_ += bytes;
  parse(handler);
}

// Moves the unparsed bytes to the front when a frame of `frame_bytes` would
// not fit behind them.
void FrameDecoder::make_room(size_t frame_bytes) {
  if (begin_ + frame_bytes <= staging_.size()) return;
  std::memmove(staging_.data(), staging_.data() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
}

void FrameDecoder::parse(FrameHandler& handler) {
  while (end_ - begin_ >= kFrameHeaderBytes) {
    FrameHeader header;
    std::memcpy(&header, staging_.data() + begin_, sizeof header);
    const uint8_t* payload = staging_.data() + begin_ + kFrameHeaderBytes;
    const size_t available = end_ - begin_ - kFrameHeaderBytes;
    switch (static_cast<FrameKind>(header.kind)) {
      case FrameKind::read_data: {
        uint8_t* destination = handler.read_data_destination(header.request, header.length);
        const size_t now = static_cast<size_t>(std::min<uint64_t>(available, header.length));
        if (now != 0 && destination != nullptr) std::memcpy(destination, payload, now);
        begin_ += kFrameHeaderBytes + now;
        if (now < header.length) {
          // The rest goes straight to its destination; staging is empty now.
          direct_ = destination != nullptr ? destination + now : nullptr;
          direct_remaining_ = header.length - now;
          direct_request_ = header.request;
          return;
        }
        handler.on_read_data_done(header.request);
        continue;
      }
      case FrameKind::eager:
      case FrameKind::read_request:
      case FrameKind::read_error:
      case FrameKind::goodbye:
        break;
      default:
        throw WireError("frame of unknown kind " + std::to_string(header.kind));
    }
    const FrameKind kind = static_cast<FrameKind>(header.kind);
    const uint64_t limit = kind == FrameKind::eager          ? max_eager_
                           : kind == FrameKind::read_request ? sizeof(ReadRequest)
                           : kind == FrameKind::read_error   ? kMaxErrorText
                                                             : 0;
    if (header.length > limit || (kind == FrameKind::read_request && header.length != sizeof(ReadRequest))) {
      throw WireError("frame of kind " + std::to_string(header.kind) + " with " + std::to_string(header.length) +
                      " payload bytes (at most " + std::to_string(limit) + ")");
    }
    if (available < header.length) {
      make_room(kFrameHeaderBytes + header.length);
      return;
    }
    begin_ += kFrameHeaderBytes + header.length;
    switch (kind) {
      case FrameKind::eager:
        handler.on_eager(payload, header.length);
        break;
      case FrameKind::read_request: {
        ReadRequest read;
        std::memcpy(&read, payload, sizeof read);
        handler.on_read_request(header.request, read);
        break;
      }
      case FrameKind::read_error:
        handler.on_read_error(header.request, std::string(reinterpret_cast<const char*>(payload), header.length));
        break;
      default:
        handler.on_goodbye();
        break;
    }
  }
  make_room(kFrameHeaderBytes);
}

size_t encode_header(uint8_t* out, FrameKind kind, uint64_t length, uint64_t request) {
  FrameHeader header;
  header.kind = static_cast<uint32_t>(kind);
  header.length = length;
  header.request = request;
  std::memcpy(out, &header, sizeof header);
  return sizeof header;
}

size_t encode_read_request(uint8_t* out, uint64_t request, const ReadRequest& read) {
  const size_t header = encode_header(out, FrameKind::read_request, sizeof read, request);
  std::memcpy(out + header, &read, sizeof read);
  return header + sizeof read;
}

}  // namespace chorus::transport::tcp
