// Clients that break the protocol, over raw loopback sockets: each gets an
// ERROR frame naming its problem and is closed, and is counted, while a
// well-behaved client of the same server keeps being served.
#include "bootstrap/store.hpp"
#include "tests/bootstrap/helpers.hpp"

#include <thread>

using namespace chorus;
using namespace chorus::bootstrap;
using namespace chorus::bootstrap::testing;
using frame::Frame;

namespace {

const std::string kSecret = "hostile-test-secret";
constexpr auto kStall = milliseconds(300);

class HostileClient : public ::testing::Test {
 protected:
  StoreServer server{"127.0.0.1", 0, kSecret, kStall};
  StoreClient good{"127.0.0.1", server.port(), kSecret, milliseconds(5000)};

  // Reads the ERROR the server must send, then expects the connection to end.
  std::string expect_error_and_close(RawConnection& raw) {
    auto reply = raw.read_frame();
    if (!reply) {
      ADD_FAILURE() << "no ERROR frame arrived";
      return "";
    }
    EXPECT_EQ(reply->type, frame::Type::error);
    EXPECT_EQ(reply->request_id, 0u);
    EXPECT_TRUE(raw.closed_by_server()) << "the connection stayed open after: " << reply->message;
    return reply->message;
  }

  void expect_good_client_served(const std::string& key) {
    good.set(key, bytes_of("still-served"));
    EXPECT_EQ(text_of(good.get(key)), "still-served");
  }
};

frame::Bytes header_only(uint8_t type, uint32_t payload_bytes) {
  frame::Bytes bytes = frame::encode(Frame::ok(9));
  bytes[5] = type;
  for (int i = 0; i < 4; ++i) bytes[8 + static_cast<size_t>(i)] = static_cast<uint8_t>(payload_bytes >> (24 - 8 * i));
  return bytes;
}

}  // namespace

TEST_F(HostileClient, GarbageGetsBadMagicAndIsClosed) {
  RawConnection raw(server.port());
  raw.send(bytes_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(expect_error_and_close(raw), "bad magic 0x47455420 (expected 0x43485253 \"CHRS\")");
  expect_good_client_served("after-garbage");
  EXPECT_EQ(server.stats().frames_rejected, 1u);
}

TEST_F(HostileClient, OversizedLengthIsRefusedBeforeAnyPayload) {
  RawConnection raw(server.port());
  raw.authenticate(kSecret);
  raw.send(header_only(static_cast<uint8_t>(frame::Type::set), 0xffffffff));
  EXPECT_EQ(expect_error_and_close(raw), "frame payload of 4294967295 bytes exceeds the 1048576-byte limit");
  expect_good_client_served("after-oversized");
  EXPECT_EQ(server.stats().frames_rejected, 1u);
}

TEST_F(HostileClient, TruncatedInnerFieldIsNamed) {
  RawConnection raw(server.port());
  raw.authenticate(kSecret);
  frame::Bytes bytes = header_only(static_cast<uint8_t>(frame::Type::set), 16);
  frame::Bytes payload = {0, 0, 0x03, 0x84};  // key length 900 ...
  payload.resize(16, 'k');                    // ... but only 12 bytes follow
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  raw.send(bytes);
  EXPECT_EQ(expect_error_and_close(raw), "truncated SET payload: key length 900 but 12 bytes remain");
  expect_good_client_served("after-truncated");
  EXPECT_EQ(server.stats().frames_rejected, 1u);
}

TEST_F(HostileClient, RequestBeforeHelloIsRefused) {
  RawConnection raw(server.port());
  raw.send(Frame::get(1, "secret-data", false));
  std::string message = expect_error_and_close(raw);
  EXPECT_EQ(message, "expected HELLO with the job secret as the first frame, got GET");
  EXPECT_EQ(server.stats().connections_refused, 1u);
  expect_good_client_served("after-no-hello");
}

TEST_F(HostileClient, WrongSecretOverRawSocketGetsErrorThenClose) {
  RawConnection raw(server.port());
  raw.send(Frame::hello(1, "guess"));
  EXPECT_EQ(expect_error_and_close(raw), "wrong job secret");
  EXPECT_EQ(server.stats().connections_refused, 1u);
  EXPECT_EQ(server.stats().frames_rejected, 0u);
}

TEST_F(HostileClient, ReplyTypesFromAClientAreRejected) {
  RawConnection raw(server.port());
  raw.authenticate(kSecret);
  raw.send(Frame::ok(2));
  EXPECT_EQ(expect_error_and_close(raw), "unexpected OK frame: clients send requests only");
  EXPECT_EQ(server.stats().frames_rejected, 1u);
}

TEST_F(HostileClient, RandomGarbageAfterHelloNeverStopsTheServer) {
  uint32_t seed = 7;
  for (int round = 0; round < 20; ++round) {
    RawConnection raw(server.port());
    raw.authenticate(kSecret);
    frame::Bytes junk(64 + static_cast<size_t>(round) * 13);
    for (auto& byte : junk) byte = static_cast<uint8_t>((seed = seed * 1103515245u + 12345u) >> 16);
    raw.send(junk);
    std::string message = expect_error_and_close(raw);
    EXPECT_FALSE(message.empty());
  }
  expect_good_client_served("after-random");
  EXPECT_EQ(server.stats().frames_rejected, 20u);
}

TEST_F(HostileClient, StalledMidFrameIsDroppedWithoutBlockingOthers) {
  RawConnection raw(server.port());
  raw.authenticate(kSecret);
  frame::Bytes partial = frame::encode(Frame::set(2, "key", bytes_of("value")));
  partial.resize(7);
  auto start = Clock::now();
  raw.send(partial);
  // While the stalled client holds half a header, others are served at once.
  for (int i = 0; i < 20; ++i) expect_good_client_served(concat("during-stall-", i));
  EXPECT_LT(elapsed_since(start), kStall) << "the good client waited on the stalled one";

  auto reply = raw.read_frame(milliseconds(3000));
  ASSERT_TRUE(reply.has_value());
  EXPECT_GE(elapsed_since(start), kStall);
  EXPECT_EQ(reply->type, frame::Type::error);
  EXPECT_NE(reply->message.find("connection stalled mid-frame: received 7 of 16 header bytes"), std::string::npos)
      << reply->message;
  EXPECT_TRUE(raw.closed_by_server());
  EXPECT_EQ(server.stats().frames_rejected, 1u);
  expect_good_client_served("after-stall");
}

TEST_F(HostileClient, IdleConnectionWithoutHelloIsClosed) {
  RawConnection raw(server.port());
  auto reply = raw.read_frame(milliseconds(3000));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->message, "no HELLO within 300 ms of connecting");
  EXPECT_TRUE(raw.closed_by_server());
}

TEST_F(HostileClient, ManyBadClientsAtOnceWhileGoodTrafficFlows) {
  std::vector<std::unique_ptr<RawConnection>> bad;
  for (int i = 0; i < 16; ++i) {
    bad.push_back(std::make_unique<RawConnection>(server.port()));
    bad.back()->send(header_only(static_cast<uint8_t>(frame::Type::get), 0x7fffffff));
  }
  for (int i = 0; i < 16; ++i) {
    expect_good_client_served(concat("busy-", i));
    EXPECT_EQ(expect_error_and_close(*bad[static_cast<size_t>(i)]),
              "frame payload of 2147483647 bytes exceeds the 1048576-byte limit");
  }
  EXPECT_EQ(server.stats().frames_rejected, 16u);
}
