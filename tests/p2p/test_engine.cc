// P2P engine over the in-process transport: matching, unexpected queue,
// eager vs rendezvous, truncation, timeouts, non-overtaking.
#include "tests/harness.hpp"

#include <gtest/gtest.h>

#include <numeric>

using namespace chorus;
using chorus::testing::run_ranks;
using chorus::testing::test_settings;

namespace {
std::vector<uint8_t> pattern(size_t bytes, int seed) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>((i * 131 + static_cast<size_t>(seed) * 7) % 251);
  return data;
}

config::Settings small_eager_settings() {
  auto settings = test_settings();
  settings.eager_limit = 1024;
  settings.rendezvous_chunk = 4096;  // many chunks per message
  settings.reads_in_flight = 3;
  return settings;
}
}  // namespace

class EngineSizes : public ::testing::TestWithParam<size_t> {};

// Every size across the eager limit arrives intact, whether the receive is
// posted first (expected) or last (unexpected).
TEST_P(EngineSizes, SendRecvBothOrders) {
  const size_t bytes = GetParam();
  run_ranks(
      2,
      [&](p2p::Engine& engine, int rank) {
        auto sent = pattern(bytes, 1);
        std::vector<uint8_t> received(bytes + 16, 0xEE);
        if (rank == 0) {
          auto request = engine.isend(1, 7, sent.data(), bytes);
          engine.wait(request);
          // Second round: peer posts its receive only after this send.
          auto second = engine.isend(1, 8, sent.data(), bytes);
          engine.wait(second);
        } else {
          auto request = engine.irecv(0, 7, received.data(), bytes + 16);
          auto done = engine.wait(request);
          EXPECT_EQ(done.bytes, bytes);
          EXPECT_EQ(done.source, 0);
          EXPECT_TRUE(std::equal(sent.begin(), sent.end(), received.begin()));
          EXPECT_EQ(received[bytes], 0xEE) << "wrote past the message";
          // Let the second message arrive before the receive exists.
          while (engine.counters().eager_received + engine.counters().rendezvous_received < 2) engine.progress();
          std::vector<uint8_t> late(bytes);
          auto second = engine.irecv(0, 8, late.data(), bytes);
          engine.wait(second);
          EXPECT_EQ(late, sent);
          EXPECT_GE(engine.counters().unexpected, 1u);
        }
      },
      small_eager_settings());
}

INSTANTIATE_TEST_SUITE_P(AcrossEagerLimit, EngineSizes,
                         ::testing::Values(0, 1, 64, 65, 1000, 1024, 1025, 4096, 4097, 100000, 3 << 20));

TEST(Engine, RendezvousUsesReadsEagerDoesNot) {
  run_ranks(
      2,
      [](p2p::Engine& engine, int rank) {
        std::vector<uint8_t> data(20000, static_cast<uint8_t>(rank));
        if (rank == 0) {
          auto request = engine.isend(1, 1, data.data(), 100);
          engine.wait(request);
          request = engine.isend(1, 2, data.data(), data.size());
          engine.wait(request);
          EXPECT_EQ(engine.counters().eager_sent, 1u);
          EXPECT_EQ(engine.counters().rendezvous_sent, 1u);
        } else {
          auto request = engine.irecv(0, 1, data.data(), 100);
          engine.wait(request);
          request = engine.irecv(0, 2, data.data(), data.size());
          engine.wait(request);
          EXPECT_EQ(engine.counters().reads_posted, 5u);  // 20000 bytes in 4096-byte chunks
          EXPECT_EQ(data[19999], 0);
        }
      },
      small_eager_settings());
}

// Same source and tag: messages match in send order, even when eager and
// rendezvous messages are mixed.
TEST(Engine, NonOvertaking) {
  run_ranks(
      2,
      [](p2p::Engine& engine, int rank) {
        constexpr int kMessages = 40;
        std::vector<std::vector<uint8_t>> buffers;
        for (int i = 0; i < kMessages; ++i) buffers.push_back(pattern(i % 2 ? 3000 : 10, i));
        std::vector<p2p::Request> requests;
        if (rank == 0) {
          for (auto& b : buffers) requests.push_back(engine.isend(1, 5, b.data(), b.size()));
          engine.wait_all(requests);
        } else {
          std::vector<std::vector<uint8_t>> received(kMessages, std::vector<uint8_t>(3000));
          for (auto& r : received) requests.push_back(engine.irecv(0, 5, r.data(), r.size()));
          for (int i = 0; i < kMessages; ++i) {
            auto done = engine.wait(requests[static_cast<size_t>(i)]);
            ASSERT_EQ(done.bytes, buffers[static_cast<size_t>(i)].size()) << "message " << i;
            EXPECT_TRUE(std::equal(buffers[static_cast<size_t>(i)].begin(), buffers[static_cast<size_t>(i)].end(),
                                   received[static_cast<size_t>(i)].begin()));
          }
        }
      },
      small_eager_settings());
}

TEST(Engine, AnySourceAndTagMask) {
  run_ranks(4, [](p2p::Engine& engine, int rank) {
    if (rank != 0) {
      int value = rank * 10;
      auto request = engine.isend(0, 0x100 | static_cast<p2p::Tag>(rank), &value, sizeof value);
      engine.wait(request);
      return;
    }
    int seen = 0;
    for (int i = 0; i < 3; ++i) {
      int value = 0;
      auto request = engine.irecv(p2p::kAnySource, 0x100, &value, sizeof value, ~p2p::Tag{0xff});
      auto done = engine.wait(request);
      EXPECT_EQ(value, done.source * 10);
      EXPECT_EQ(done.tag, 0x100u | static_cast<p2p::Tag>(done.source));
      seen |= 1 << done.source;
    }
    EXPECT_EQ(seen, 0b1110);
  });
}

// probe reports what a receive would match (eager and rendezvous alike)
// without taking it; with kAnySource, the earliest arrival.
TEST(Engine, ProbeLeavesTheMessageQueued) {
  run_ranks(
      3,
      [](p2p::Engine& engine, int rank) {
        auto small = pattern(100, rank), large = pattern(20000, rank), tiny = pattern(10, rank);
        if (rank == 2) {
          auto first = engine.isend(0, 5, small.data(), small.size());
          auto second = engine.isend(0, 6, large.data(), large.size());
          engine.wait(first);
          engine.wait(second);
          return;
        }
        if (rank == 1) {
          int go = 0;
          auto request = engine.irecv(0, 9, &go, sizeof go);
          engine.wait(request);
          request = engine.isend(0, 5, tiny.data(), tiny.size());
          engine.wait(request);
          return;
        }
        auto probe_until = [&](int source, p2p::Tag tag, p2p::Tag mask) {
          for (;;) {
            if (auto found = engine.probe(source, tag, mask)) return *found;
          }
        };
        p2p::Completion found = probe_until(2, 6, p2p::kExactTag);  // both of rank 2's have arrived
        EXPECT_EQ(found.bytes, 20000u);
        int go = 1;
        auto request = engine.isend(1, 9, &go, sizeof go);
        engine.wait(request);
        found = probe_until(1, 5, p2p::kExactTag);
        EXPECT_EQ(found.source, 1);
        EXPECT_EQ(found.bytes, 10u);
        found = probe_until(p2p::kAnySource, 5, p2p::kExactTag);
        EXPECT_EQ(found.source, 2) << "the earliest arrival comes first";
        EXPECT_EQ(found.bytes, 100u);
        found = probe_until(p2p::kAnySource, 0, 0);  // any tag
        EXPECT_EQ(found.source, 2);
        EXPECT_EQ(found.tag, 5u);
        EXPECT_FALSE(engine.probe(2, 7, p2p::kExactTag).has_value());
        std::vector<uint8_t> got(20000);
        request = engine.irecv(2, 6, got.data(), got.size());
        EXPECT_EQ(engine.wait(request).bytes, 20000u);
        EXPECT_EQ(got, pattern(20000, 2));
        got.assign(100, 0);
        request = engine.irecv(p2p::kAnySource, 5, got.data(), got.size());
        EXPECT_EQ(engine.wait(request).source, 2);
        EXPECT_EQ(got, pattern(100, 2));
        got.assign(10, 0);
        request = engine.irecv(1, 5, got.data(), got.size());
        engine.wait(request);
        EXPECT_EQ(got, pattern(10, 1));
        EXPECT_FALSE(engine.probe(p2p::kAnySource, 0, 0).has_value()) << "every message was taken";
      },
      small_eager_settings());
}

// A claimed message (MPI_Improbe) leaves the queue: a receive that would
// have matched it takes the next one, and only irecv_claimed gets it,
// eager and rendezvous alike, once.
TEST(Engine, ClaimedMessageIsReceivedOnlyByItsClaim) {
  for (size_t bytes : {size_t{100}, size_t{50000}}) {  // eager and rendezvous
    run_ranks(
        2,
        [&](p2p::Engine& engine, int rank) {
          auto first = pattern(bytes, 1), second = pattern(bytes, 2);
          if (rank == 0) {
            auto a = engine.isend(1, 5, first.data(), bytes);
            auto b = engine.isend(1, 5, second.data(), bytes);
            engine.wait(a);
            engine.wait(b);
            return;
          }
          std::optional<std::pair<uint64_t, p2p::Completion>> claimed;
          while (!claimed) claimed = engine.claim(p2p::kAnySource, 5, p2p::kExactTag);
          EXPECT_NE(claimed->first, 0u);
          EXPECT_EQ(claimed->second.source, 0);
          EXPECT_EQ(claimed->second.bytes, bytes);
          std::vector<uint8_t> got(bytes);
          auto next = engine.irecv(0, 5, got.data(), bytes);
          engine.wait(next);
          EXPECT_EQ(got, second) << "a plain receive took the claimed message";
          got.assign(bytes, 0);
          auto mine = engine.irecv_claimed(claimed->first, got.data(), bytes);
          EXPECT_EQ(engine.wait(mine).bytes, bytes);
          EXPECT_EQ(got, first);
          EXPECT_THROW(engine.irecv_claimed(claimed->first, got.data(), bytes), Error) << "received twice";
        },
        small_eager_settings());
  }
}

// A withdrawn receive (MPI_Cancel) gets nothing: the message sent after it
// goes to the next receive. A receive that matched cannot be withdrawn.
TEST(Engine, WithdrawnReceiveTakesNoMessage) {
  run_ranks(
      2,
      [](p2p::Engine& engine, int rank) {
        int value = rank == 0 ? 42 : -1;
        if (rank == 0) {
          int go = 0;
          auto request = engine.irecv(1, 9, &go, sizeof go);
          engine.wait(request);
          request = engine.isend(1, 5, &value, sizeof value);
          engine.wait(request);
          return;
        }
        int withdrawn = -1;
        auto request = engine.irecv(0, 5, &withdrawn, sizeof withdrawn);
        EXPECT_TRUE(engine.withdraw_receive(request));
        EXPECT_FALSE(engine.withdraw_receive(request)) << "withdrawn twice";
        int go = 1;
        auto start = engine.isend(0, 9, &go, sizeof go);
        engine.wait(start);
        auto next = engine.irecv(0, 5, &value, sizeof value);
        engine.wait(next);
        EXPECT_EQ(value, 42);
        EXPECT_EQ(withdrawn, -1) << "the withdrawn receive's buffer was written";
        auto send = engine.isend(1, 6, &go, sizeof go);  // to itself
        while (!engine.probe(1, 6, p2p::kExactTag)) {
        }
        int got = 0;  // the message is here: matched as posted
        auto matched = engine.irecv(1, 6, &got, sizeof got);
        EXPECT_FALSE(engine.withdraw_receive(matched));
        engine.wait(matched);
        engine.wait(send);
        EXPECT_FALSE(engine.withdraw_receive(send));
      },
      small_eager_settings());
}

TEST(Engine, TruncationIsAnErrorOnTheReceiverOnly) {
  for (size_t bytes : {size_t{100}, size_t{50000}}) {  // eager and rendezvous
    run_ranks(
        2,
        [&](p2p::Engine& engine, int rank) {
          std::vector<uint8_t> data(bytes);
          if (rank == 0) {
            auto request = engine.isend(1, 3, data.data(), bytes);
            EXPECT_NO_THROW(engine.wait(request));
          } else {
            auto request = engine.irecv(0, 3, data.data(), bytes / 2);
            try {
              engine.wait(request);
              ADD_FAILURE() << "no truncation error";
            } catch (const Error& e) {
              EXPECT_EQ(e.status(), Status::truncated);
              EXPECT_EQ(e.peer(), 0);
              EXPECT_NE(std::string(e.what()).find("counts or datatypes differ"), std::string::npos) << e.what();
            }
          }
        },
        small_eager_settings());
  }
}

TEST(Engine, TimeoutNamesThePeer) {
  auto settings = test_settings();
  settings.timeout = std::chrono::milliseconds(200);
  run_ranks(
      2,
      [](p2p::Engine& engine, int rank) {
        if (rank == 0) return;  // never sends
        int value;
        auto request = engine.irecv(0, 9, &value, sizeof value);
        auto start = std::chrono::steady_clock::now();
        try {
          engine.wait(request);
          ADD_FAILURE() << "wait returned without a message";
        } catch (const Error& e) {
          EXPECT_EQ(e.status(), Status::timeout);
          EXPECT_EQ(e.peer(), 0);
          EXPECT_NE(std::string(e.what()).find("from rank 0"), std::string::npos) << e.what();
        }
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
      },
      settings);
}

TEST(Engine, BadArgumentsAreRejected) {
  run_ranks(2, [](p2p::Engine& engine, int) {
    int value = 0;
    EXPECT_THROW(engine.isend(2, 0, &value, 4), Error);
    EXPECT_THROW(engine.isend(-1, 0, &value, 4), Error);
    EXPECT_THROW(engine.irecv(5, 0, &value, 4), Error);
    EXPECT_THROW(engine.isend(1, 0, nullptr, 4), Error);
    p2p::Request never_posted;
    EXPECT_THROW(engine.wait(never_posted), Error);
  });
}

// An eager send is finished when isend returns (the transport copied it),
// without a request slot; its handle still behaves as any other: finished(),
// test() and wait() report the destination once, then the handle is spent.
// A rendezvous send is not finished until the peer has read it.
TEST(Engine, CopiedEagerSendIsFinishedAtOnce) {
  run_ranks(
      2,
      [](p2p::Engine& engine, int rank) {
        auto small = pattern(100, 3);
        auto large = pattern(5000, 4);
        if (rank == 0) {
          p2p::Request eager = engine.isend(1, 1, small.data(), small.size());
          ASSERT_TRUE(eager.valid());
          EXPECT_TRUE(eager.finished_send());
          EXPECT_TRUE(engine.finished(eager));
          small.assign(small.size(), 0);  // the buffer is the caller's again
          p2p::Completion done;
          EXPECT_TRUE(engine.test(eager, &done));
          EXPECT_EQ(done.source, 1);
          EXPECT_FALSE(eager.valid());
          EXPECT_THROW(engine.wait(eager), Error);
          p2p::Request second = engine.isend(1, 2, small.data(), small.size());
          EXPECT_EQ(engine.wait(second).source, 1);
          p2p::Request rendezvous = engine.isend(1, 3, large.data(), large.size());
          EXPECT_FALSE(rendezvous.finished_send());
          EXPECT_EQ(engine.wait(rendezvous).source, 1);
        } else {
          std::vector<uint8_t> got(small.size()), zeros(small.size()), got_large(large.size());
          auto first = engine.irecv(0, 1, got.data(), got.size());
          EXPECT_EQ(engine.wait(first).bytes, small.size());
          EXPECT_EQ(got, small) << "the eager message changed after isend returned";
          auto second = engine.irecv(0, 2, got.data(), got.size());
          engine.wait(second);
          EXPECT_EQ(got, zeros);
          auto third = engine.irecv(0, 3, got_large.data(), got_large.size());
          EXPECT_EQ(engine.wait(third).bytes, large.size());
          EXPECT_EQ(got_large, large);
        }
      },
      small_eager_settings());
}

namespace {
// Rank 0's transport, as the other tests' stubs: it reports at its first
// poll that `failed` has failed (as a transport does when it loses a peer),
// and counts the eager messages posted to it.
class PeerFailingTransport final : public transport::Transport {
 public:
  explicit PeerFailingTransport(int failed) : failed_(failed) {}
  int eager_posted = 0;

  std::string name() const override { return "peer-failing"; }
  transport::Blob address() override { return {}; }
  void connect(const std::vector<transport::Blob>&) override {}
  size_t max_eager_bytes() const override { return 4096; }
  void post_eager(int, const void*, size_t, const void*, size_t) override { ++eager_posted; }
  std::unique_ptr<transport::MemoryRegion> register_memory(void*, size_t) override { return nullptr; }
  void post_read(int, transport::RemoteBuffer, transport::MemoryRegion&, size_t, size_t, uint64_t) override {}
  int poll(transport::Sink& sink) override {
    if (reported_) return 0;
    reported_ = true;
    sink.on_error(0, failed_, Error(Status::peer_failed, "the test's rank 1 is gone", failed_));
    return 1;
  }
  int wait_fd() override { return -1; }
  bool arm() override { return false; }

 private:
  int failed_;
  bool reported_ = false;
};
}  // namespace

// An eager send to a peer the transport has reported failed posts nothing
// and fails with the peer's error (it cannot be born finished); one to a
// live peer is still finished at once.
TEST(Engine, EagerSendToAFailedPeerFails) {
  PeerFailingTransport failing(1);
  p2p::Engine engine(failing, 0, 3, 3, test_settings());
  engine.progress();  // learns that rank 1 failed
  int value = 7;
  p2p::Request to_failed = engine.isend(1, 1, &value, sizeof value);
  EXPECT_FALSE(to_failed.finished_send());
  EXPECT_TRUE(engine.finished(to_failed));
  try {
    engine.wait(to_failed);
    ADD_FAILURE() << "a send to a failed peer succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::peer_failed) << e.what();
    EXPECT_EQ(e.peer(), 1);
  }
  EXPECT_EQ(failing.eager_posted, 0) << "a message was posted to the failed peer";
  p2p::Request to_live = engine.isend(2, 1, &value, sizeof value);
  EXPECT_TRUE(to_live.finished_send());
  EXPECT_EQ(engine.wait(to_live).source, 2);
  EXPECT_EQ(failing.eager_posted, 1);
}

// Many ranks exchanging with everyone at once, mixed sizes.
TEST(Engine, AllToAllMixedSizes) {
  for (int size : {3, 5, 8}) {
    run_ranks(
        size,
        [&](p2p::Engine& engine, int rank) {
          std::vector<std::vector<uint8_t>> out, in;
          std::vector<p2p::Request> requests;
          for (int peer = 0; peer < size; ++peer) {
            size_t bytes = static_cast<size_t>(((rank + peer) % 3) * 3000 + peer);
            out.push_back(pattern(bytes, rank * 100 + peer));
            size_t expect = static_cast<size_t>(((peer + rank) % 3) * 3000 + rank);
            in.emplace_back(expect);
          }
          for (int peer = 0; peer < size; ++peer) {
            requests.push_back(engine.irecv(peer, 11, in[static_cast<size_t>(peer)].data(), in[static_cast<size_t>(peer)].size()));
            requests.push_back(engine.isend(peer, 11, out[static_cast<size_t>(peer)].data(), out[static_cast<size_t>(peer)].size()));
          }
          engine.wait_all(requests);
          for (int peer = 0; peer < size; ++peer) {
            EXPECT_EQ(in[static_cast<size_t>(peer)], pattern(in[static_cast<size_t>(peer)].size(), peer * 100 + rank));
          }
        },
        small_eager_settings());
  }
}
