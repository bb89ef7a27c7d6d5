// The engine's wire format, carried inside transport eager messages.
// Little-endian, fixed layout; a header precedes every message.
#pragma once

#include "p2p/engine.hpp"

#include <cstdint>

namespace chorus::p2p {

enum class MessageType : uint8_t { eager = 1, rts = 2, fin = 3 };

struct MessageHeader {
  MessageType type;
  uint8_t reserved[3] = {};
  // Digest of the collective call that sent it (0: not a collective), so a
  // receiver can tell "the ranks disagree on the arguments" from data.
  uint32_t call_check = 0;
  Tag tag;
  uint64_t length;  // payload bytes (eager), message bytes (rts), 0 (fin)

  MessageHeader() = default;
  MessageHeader(MessageType t, Tag g, uint64_t len, uint32_t check = 0)
      : type(t), call_check(check), tag(g), length(len) {}
};
static_assert(sizeof(MessageHeader) == 24);

// Request to send: "read `length` bytes at address/key, then FIN send_id".
struct RtsBody {
  uint64_t address;
  uint64_t key;
  uint64_t send_id;
};
struct RtsMessage {
  MessageHeader header;
  RtsBody body;
};

struct FinBody {
  uint64_t send_id;
};
struct FinMessage {
  MessageHeader header;
  FinBody body;
};

}  // namespace chorus::p2p
