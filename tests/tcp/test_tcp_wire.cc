// The TCP transport's frame decoder over a simulated wire: the same byte
// stream of mixed frames cut into recv() pieces at every boundary, at random
// sizes and byte by byte; every frame must come out once, whole and in order,
// and READ_DATA must land in its destination, or nowhere when its read was
// abandoned (before or midway). Malformed streams are refused.
#include "transports/tcp/tcp_wire.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace chorus::transport::tcp;

namespace {

constexpr size_t kMaxEager = 5000;

// What the decoder delivered, in order, as text events.
struct Recorder final : FrameHandler {
  std::vector<std::string> events;
  std::map<uint64_t, std::vector<uint8_t>> destinations;  // READ_DATA targets, by request
  uint64_t dropped = 0;                                   // this request's READ_DATA lands nowhere

  void on_eager(const uint8_t* data, size_t bytes) override {
    events.push_back("eager:" + std::string(reinterpret_cast<const char*>(data), bytes));
  }
  void on_read_request(uint64_t request, const ReadRequest& read) override {
    events.push_back("req:" + std::to_string(request) + ":" + std::to_string(read.address) + ":" +
                     std::to_string(read.key) + ":" + std::to_string(read.bytes));
  }
  uint8_t* read_data_destination(uint64_t request, uint64_t bytes) override {
    auto found = destinations.find(request);
    if (found == destinations.end() || found->second.size() != bytes) throw WireError("unexpected READ_DATA");
    return request == dropped ? nullptr : found->second.data();
  }
  void on_read_data_done(uint64_t request) override {
    const auto& bytes = destinations.at(request);
    events.push_back("data:" + std::to_string(request) + ":" + std::string(bytes.begin(), bytes.end()));
  }
  void on_read_error(uint64_t request, const std::string& reason) override {
    events.push_back("error:" + std::to_string(request) + ":" + reason);
  }
  void on_goodbye() override { events.push_back("goodbye"); }
};

void append_frame(std::vector<uint8_t>& wire, FrameKind kind, const std::string& payload, uint64_t request) {
  uint8_t header[kFrameHeaderBytes];
  encode_header(header, kind, payload.size(), request);
  wire.insert(wire.end(), header, header + sizeof header);
  wire.insert(wire.end(), payload.begin(), payload.end());
}

std::string pattern(size_t bytes, char seed) {
  std::string text(bytes, ' ');
  for (size_t i = 0; i < bytes; ++i) text[i] = static_cast<char>('a' + (seed + i * 7) % 26);
  return text;
}

// A stream of every frame kind, small and large, and what it must decode to.
struct Script {
  std::vector<uint8_t> wire;
  std::vector<std::string> expected;
  std::map<uint64_t, size_t> reads;  // request -> bytes

  Script() {
    eager("");
    eager("hello");
    eager(pattern(kMaxEager, 'x'));
    uint8_t request[kFrameHeaderBytes + sizeof(ReadRequest)];
    encode_read_request(request, 7, ReadRequest{0x1000, 3, 65536});
    wire.insert(wire.end(), request, request + sizeof request);
    expected.push_back("req:7:4096:3:65536");
    data(11, pattern(3, 'q'));
    eager("between");
    data(12, pattern(300000, 'r'));  // larger than the staging buffer
    append_frame(wire, FrameKind::read_error, "no such key", 13);
    expected.push_back("error:13:no such key");
    for (int i = 0; i < 50; ++i) eager(pattern(static_cast<size_t>(i * 37), static_cast<char>(i)));
    data(14, "");
    append_frame(wire, FrameKind::goodbye, "", 0);
    expected.push_back("goodbye");
  }
  void eager(const std::string& payload) {
    append_frame(wire, FrameKind::eager, payload, 0);
    expected.push_back("eager:" + payload);
  }
  void data(uint64_t request, const std::string& payload) {
    append_frame(wire, FrameKind::read_data, payload, request);
    reads[request] = payload.size();
    expected.push_back("data:" + std::to_string(request) + ":" + payload);
  }
};

// Feeds `wire` to a decoder in pieces no larger than piece(), as recv()
// would hand them over, and returns what came out.
template <class Piece>
Recorder feed(const Script& script, size_t staging, Piece piece) {
  FrameDecoder decoder(kMaxEager, staging);
  Recorder recorder;
  for (const auto& [request, bytes] : script.reads) recorder.destinations[request].resize(bytes);
  size_t at = 0;
  while (at < script.wire.size()) {
    const std::span<uint8_t> space = decoder.space();
    EXPECT_FALSE(space.empty());
    const size_t bytes = std::min({space.size(), script.wire.size() - at, piece()});
    std::memcpy(space.data(), script.wire.data() + at, bytes);
    at += bytes;
    decoder.consume(bytes, recorder);
  }
  EXPECT_TRUE(decoder.idle());
  return recorder;
}

TEST(TcpWire, WholeStreamInLargePieces) {
  const Script script;
  const Recorder got = feed(script, 1 << 20, [] { return size_t{1} << 30; });
  EXPECT_EQ(got.events, script.expected);
}

TEST(TcpWire, ByteByByte) {
  const Script script;
  const Recorder got = feed(script, 0, [] { return size_t{1}; });
  EXPECT_EQ(got.events, script.expected);
}

TEST(TcpWire, EveryFirstCutPoint) {
  const Script script;
  // The first recv ends at every offset of the first few frames, the rest in big pieces.
  for (size_t cut = 1; cut < 6000; cut += 13) {
    bool first = true;
    const Recorder got = feed(script, 0, [&] {
      const size_t piece = first ? cut : size_t{1} << 20;
      first = false;
      return piece;
    });
    ASSERT_EQ(got.events, script.expected) << "first piece of " << cut << " bytes";
  }
}

TEST(TcpWire, RandomPieces) {
  const Script script;
  std::mt19937 random(20);
  for (int trial = 0; trial < 50; ++trial) {
    std::uniform_int_distribution<size_t> size(1, trial % 2 == 0 ? 100 : 70000);
    const Recorder got = feed(script, 8192 * static_cast<size_t>(1 + trial % 3), [&] { return size(random); });
    ASSERT_EQ(got.events, script.expected) << "trial " << trial;
  }
}

// Request 12's payload (300000 bytes, more than staging) as the decoder
// leaves it in its destination when `cut` of its bytes had arrived before
// the rest was dropped: the frames around it come out unchanged.
std::vector<std::string> expected_with_12_cut(const Script& script, size_t cut) {
  const std::string payload = pattern(300000, 'r');
  std::vector<std::string> expected = script.expected;
  for (std::string& event : expected) {
    if (event.rfind("data:12:", 0) == 0) event = "data:12:" + payload.substr(0, cut) + std::string(300000 - cut, '\0');
  }
  return expected;
}

TEST(TcpWire, ReadDataWithoutDestinationIsDropped) {
  const Script script;
  FrameDecoder decoder(kMaxEager, 0);
  Recorder recorder;
  for (const auto& [request, bytes] : script.reads) recorder.destinations[request].resize(bytes);
  recorder.dropped = 12;
  for (size_t at = 0; at < script.wire.size();) {
    const std::span<uint8_t> space = decoder.space();
    const size_t bytes = std::min(space.size(), script.wire.size() - at);
    std::memcpy(space.data(), script.wire.data() + at, bytes);
    at += bytes;
    decoder.consume(bytes, recorder);
  }
  EXPECT_TRUE(decoder.idle());
  EXPECT_EQ(recorder.events, expected_with_12_cut(script, 0));
}

TEST(TcpWire, RestOfAPayloadIsDroppedWhenAskedMidway) {
  const Script script;
  FrameDecoder decoder(kMaxEager, 0);
  Recorder recorder;
  for (const auto& [request, bytes] : script.reads) recorder.destinations[request].resize(bytes);
  const uint8_t* destination = recorder.destinations[12].data();
  size_t cut = 0;
  for (size_t at = 0; at < script.wire.size();) {
    if (cut == 0 && decoder.direct_request() == 12) {
      // As a cancelled read does: what landed stays, the rest goes nowhere.
      cut = static_cast<size_t>(decoder.space().data() - destination);
      decoder.drop_rest_of_direct();
    }
    const std::span<uint8_t> space = decoder.space();
    EXPECT_FALSE(space.empty());
    const size_t bytes = std::min({space.size(), script.wire.size() - at, size_t{1000}});
    std::memcpy(space.data(), script.wire.data() + at, bytes);
    at += bytes;
    decoder.consume(bytes, recorder);
  }
  EXPECT_TRUE(decoder.idle());
  ASSERT_GT(cut, 0u) << "request 12 was never received straight into its destination";
  EXPECT_EQ(recorder.events, expected_with_12_cut(script, cut));
}

void expect_refused(const std::vector<uint8_t>& wire, const std::string& why) {
  FrameDecoder decoder(kMaxEager, 0);
  Recorder recorder;
  const std::span<uint8_t> space = decoder.space();
  const size_t bytes = std::min(space.size(), wire.size());  // the header decides
  std::memcpy(space.data(), wire.data(), bytes);
  try {
    decoder.consume(bytes, recorder);
    ADD_FAILURE() << "accepted a stream with " << why;
  } catch (const WireError& error) {
    EXPECT_NE(std::string(error.what()).find(why), std::string::npos) << error.what();
  }
}

TEST(TcpWire, MalformedStreamsAreRefused) {
  std::vector<uint8_t> wire;
  append_frame(wire, static_cast<FrameKind>(99), "", 0);
  expect_refused(wire, "unknown kind 99");

  wire.clear();
  append_frame(wire, FrameKind::eager, pattern(kMaxEager + 1, 'a'), 0);
  expect_refused(wire, "5001 payload bytes");

  wire.clear();
  append_frame(wire, FrameKind::read_request, "short", 1);
  expect_refused(wire, "5 payload bytes");

  wire.clear();
  append_frame(wire, FrameKind::read_data, "never asked", 42);
  expect_refused(wire, "unexpected READ_DATA");
}

}  // namespace
