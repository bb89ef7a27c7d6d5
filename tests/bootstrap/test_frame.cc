// The store's frame codec on its own: every type round-trips, every prefix of
// a frame asks for more bytes, and every malformed input is refused with a
// precise message and without reading out of bounds.
#include "bootstrap/frame.hpp"
#include "common/error.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <random>

using namespace chorus;
using namespace chorus::bootstrap::frame;

namespace {

Bytes bytes_of(std::string_view text) { return Bytes(text.begin(), text.end()); }

std::vector<Frame> one_of_each_type() {
  Bytes binary = {0, 1, 2, 0xff, 0, 0x7f};
  return {
      Frame::hello(1, "job-secret"),
      Frame::hello(2, ""),
      Frame::set(3, "job/transport/0", binary),
      Frame::set(4, std::string(kMaxKey, 'k'), Bytes{}),
      Frame::get(5, "a", true),
      Frame::get(6, "b", false),
      Frame::add(7, "counter", std::numeric_limits<int64_t>::min()),
      Frame::add(8, "counter", -1),
      Frame::check(9, "x/y/z"),
      Frame::ok(0xffffffff),
      Frame::value(11, binary),
      Frame::value(12, Bytes{}),
      Frame::counter(13, std::numeric_limits<int64_t>::max()),
      Frame::exists_reply(14, true),
      Frame::exists_reply(15, false),
      Frame::error(0, "wrong job secret"),
  };
}

Bytes header(uint32_t magic, uint8_t version, uint8_t type, uint16_t reserved, uint32_t payload, uint32_t id) {
  Bytes out;
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(magic >> s));
  out.push_back(version);
  out.push_back(type);
  out.push_back(static_cast<uint8_t>(reserved >> 8));
  out.push_back(static_cast<uint8_t>(reserved));
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(payload >> s));
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(id >> s));
  return out;
}

void append_u32(Bytes& out, uint32_t value) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(value >> s));
}

// A frame with a hand-written payload of `payload` bytes.
Bytes raw_frame(Type type, const Bytes& payload) {
  Bytes out = header(kMagic, kVersion, static_cast<uint8_t>(type), 0, static_cast<uint32_t>(payload.size()), 1);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::string decode_error(const Bytes& bytes) {
  Decoded decoded = decode(bytes);
  EXPECT_EQ(decoded.status, DecodeStatus::error) << "input of " << bytes.size() << " bytes was not refused";
  return decoded.error;
}

}  // namespace

TEST(Frame, EveryTypeRoundTrips) {
  for (const Frame& original : one_of_each_type()) {
    Bytes encoded = encode(original);
    EXPECT_EQ(encoded.size(), kHeaderBytes + payload_size(original));
    Decoded decoded = decode(encoded);
    ASSERT_EQ(decoded.status, DecodeStatus::frame) << type_name(original.type) << ": " << decoded.error;
    EXPECT_EQ(decoded.consumed, encoded.size());
    EXPECT_EQ(decoded.frame, original) << type_name(original.type);
  }
}

TEST(Frame, HeaderLayoutIsBigEndianWithMagicChrs) {
  Bytes encoded = encode(Frame::check(0x01020304, "k"));
  ASSERT_GE(encoded.size(), kHeaderBytes);
  EXPECT_EQ(std::string(encoded.begin(), encoded.begin() + 4), "CHRS");
  EXPECT_EQ(encoded[4], kVersion);
  EXPECT_EQ(encoded[5], static_cast<uint8_t>(Type::check));
  EXPECT_EQ(encoded[6], 0);
  EXPECT_EQ(encoded[7], 0);
  EXPECT_EQ(encoded[11], 5);  // payload: u32 length + "k"
  EXPECT_EQ((Bytes(encoded.begin() + 12, encoded.begin() + 16)), (Bytes{1, 2, 3, 4}));
}

TEST(Frame, EveryProperPrefixNeedsMoreBytes) {
  for (const Frame& original : one_of_each_type()) {
    Bytes encoded = encode(original);
    for (size_t length = 0; length < encoded.size(); ++length) {
      Decoded decoded = decode(std::span<const uint8_t>(encoded.data(), length));
      EXPECT_EQ(decoded.status, DecodeStatus::need_more)
          << type_name(original.type) << " cut at " << length << ": " << decoded.error;
    }
  }
}

TEST(Frame, DecoderFedOneByteAtATimeYieldsEveryFrameOnce) {
  Bytes stream;
  auto frames = one_of_each_type();
  for (const Frame& f : frames) encode_into(stream, f);
  Decoder decoder;
  std::vector<Frame> received;
  for (uint8_t byte : stream) {
    decoder.feed({&byte, 1});
    for (Decoded d = decoder.next(); d.status != DecodeStatus::need_more; d = decoder.next()) {
      ASSERT_EQ(d.status, DecodeStatus::frame) << d.error;
      received.push_back(d.frame);
    }
  }
  EXPECT_EQ(received, frames);
  EXPECT_FALSE(decoder.mid_frame());
}

TEST(Frame, DecoderReportsProgressOfAnUnfinishedFrame) {
  Decoder decoder;
  Bytes encoded = encode(Frame::set(1, "key", bytes_of("value")));
  decoder.feed(std::span<const uint8_t>(encoded.data(), 7));
  EXPECT_TRUE(decoder.mid_frame());
  EXPECT_EQ(decoder.progress(), "7 of 16 header bytes");
  decoder.feed(std::span<const uint8_t>(encoded.data() + 7, 13));
  EXPECT_EQ(decoder.next().status, DecodeStatus::need_more);
  EXPECT_EQ(decoder.progress(), "4 of 16 payload bytes of a SET frame");
}

TEST(Frame, OversizedLengthIsRefusedFromTheHeaderAlone) {
  Bytes bytes = header(kMagic, kVersion, static_cast<uint8_t>(Type::set), 0, 0xffffffff, 1);
  EXPECT_EQ(decode_error(bytes), "frame payload of 4294967295 bytes exceeds the 1048576-byte limit");
  Bytes just_over = header(kMagic, kVersion, static_cast<uint8_t>(Type::value), 0, kMaxPayload + 1, 1);
  EXPECT_EQ(decode_error(just_over), "frame payload of 1048577 bytes exceeds the 1048576-byte limit");
}

TEST(Frame, BadMagicIsRefusedAsSoonAsItDiffers) {
  EXPECT_EQ(decode_error(bytes_of("GET / HTTP/1.1\r\n")), "bad magic 0x47455420 (expected 0x43485253 \"CHRS\")");
  EXPECT_EQ(decode_error(bytes_of("CX")), "bad magic: first bytes 0x4358 do not start the magic 0x43485253 \"CHRS\"");
  EXPECT_EQ(decode(bytes_of("CHR")).status, DecodeStatus::need_more);
}

TEST(Frame, BadVersionReservedAndTypeAreRefused) {
  EXPECT_EQ(decode_error(header(kMagic, 2, 1, 0, 0, 1)), "unsupported protocol version 2 (this build speaks version 1)");
  EXPECT_EQ(decode_error(header(kMagic, kVersion, 1, 1, 0, 1)), "reserved header field is 0x0001, must be 0");
  EXPECT_EQ(decode_error(header(kMagic, kVersion, 0x63, 0, 0, 1)), "unknown frame type 0x63");
}

TEST(Frame, InnerLengthsAreCheckedAgainstWhatRemains) {
  Bytes payload;
  append_u32(payload, 900);  // key length, then 12 bytes where 900 were promised
  payload.resize(payload.size() + 12, 'k');
  EXPECT_EQ(decode_error(raw_frame(Type::set, payload)), "truncated SET payload: key length 900 but 12 bytes remain");

  Bytes short_length = {0, 0};
  EXPECT_EQ(decode_error(raw_frame(Type::check, short_length)),
            "truncated CHECK payload: key length needs 4 bytes but 2 remain");

  Bytes add_payload;
  append_u32(add_payload, 1);
  add_payload.push_back('k');
  add_payload.resize(add_payload.size() + 3);  // 3 of the 8 delta bytes
  EXPECT_EQ(decode_error(raw_frame(Type::add, add_payload)), "truncated ADD payload: delta needs 8 bytes but 3 remain");
}

TEST(Frame, FieldLimitsAndFlagsAreEnforced) {
  Bytes long_key;
  append_u32(long_key, 600);
  long_key.resize(long_key.size() + 600, 'k');
  append_u32(long_key, 0);
  EXPECT_EQ(decode_error(raw_frame(Type::set, long_key)), "SET key of 600 bytes exceeds the 512-byte limit");

  Bytes empty_key;
  append_u32(empty_key, 0);
  empty_key.push_back(1);
  EXPECT_EQ(decode_error(raw_frame(Type::get, empty_key)), "GET key is empty");

  Bytes bad_wait;
  append_u32(bad_wait, 1);
  bad_wait.push_back('k');
  bad_wait.push_back(7);
  EXPECT_EQ(decode_error(raw_frame(Type::get, bad_wait)), "GET wait flag must be 0 or 1, got 7");

  Bytes trailing = {0, 0, 0, 0};  // OK has no payload
  EXPECT_EQ(decode_error(raw_frame(Type::ok, trailing)), "OK payload has 4 unexpected trailing bytes");
}

TEST(Frame, EncoderRefusesWhatTheDecoderWouldRefuse) {
  try {
    encode(Frame::get(1, std::string(kMaxKey + 1, 'k'), true));
    FAIL() << "a 513-byte key was encoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("513 bytes"), std::string::npos) << e.what();
  }
  try {
    encode(Frame::set(1, "big", Bytes(kMaxPayload)));
    FAIL() << "an oversized value was encoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("key \"big\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(encode(Frame::check(1, "")), Error);
}

TEST(Frame, DecoderErrorIsSticky) {
  Decoder decoder;
  Bytes garbage = bytes_of("XXXX");
  decoder.feed(garbage);
  Decoded first = decoder.next();
  ASSERT_EQ(first.status, DecodeStatus::error);
  Bytes good = encode(Frame::ok(1));
  decoder.feed(good);
  Decoded second = decoder.next();
  EXPECT_EQ(second.status, DecodeStatus::error);
  EXPECT_EQ(second.error, first.error);
}

// Random bytes, and valid frames with random bytes flipped: decoding never
// crashes, never claims more bytes than it was given, and whatever decodes
// re-encodes to exactly the bytes it consumed (the encoding is canonical).
TEST(Frame, GarbageNeverCrashesAndDecodedFramesAreCanonical) {
  std::mt19937 random(12345);
  auto frames = one_of_each_type();
  int decoded_frames = 0;
  int errors = 0;
  for (int round = 0; round < 40000; ++round) {
    Bytes input;
    if (round % 2 == 0) {
      input.resize(random() % 64);
      for (auto& byte : input) byte = static_cast<uint8_t>(random());
      if (round % 4 == 0 && input.size() >= 4) std::copy_n("CHRS", 4, input.begin());  // get past the magic
    } else {
      input = encode(frames[random() % frames.size()]);
      for (int flips = 1 + static_cast<int>(random() % 3); flips > 0; --flips) {
        input[random() % input.size()] ^= static_cast<uint8_t>(1u << (random() % 8));
      }
      input.resize(input.size() - random() % 3);
    }
    Decoded decoded = decode(input);
    if (decoded.status == DecodeStatus::frame) {
      ++decoded_frames;
      ASSERT_LE(decoded.consumed, input.size());
      Bytes again = encode(decoded.frame);
      ASSERT_EQ(again, Bytes(input.begin(), input.begin() + static_cast<std::ptrdiff_t>(decoded.consumed)));
    } else if (decoded.status == DecodeStatus::error) {
      ++errors;
      ASSERT_FALSE(decoded.error.empty());
    }
  }
  EXPECT_GT(decoded_frames, 100);  // the mutations exercise the payload parsers, not just the header
  EXPECT_GT(errors, 1000);
}
