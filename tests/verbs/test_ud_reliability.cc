// The UD reliability state machine over a simulated wire that loses,
// reorders, duplicates and delays datagrams (no hardware; the real UD QP is
// exercised in the lab). Every test checks that each message arrived once,
// whole and in order, byte for byte.
#include "transports/verbs/ud_reliability.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

using chorus::Error;
using chorus::Status;
using namespace chorus::transport::ud;

namespace {

constexpr size_t kFrame = 256;  // a small "MTU": messages of a few hundred bytes fragment
constexpr uint64_t kStepNs = 20'000;

struct WireFaults {
  double loss = 0;        // any datagram
  double ack_loss = 0;    // standalone acks only
  double duplicate = 0;
  uint64_t jitter_ns = 0; // uniform extra delay: reorders
  int drop_data = 0;      // the first this many data datagrams are lost
};

class Wire;

// One rank: its state machine, the link it transmits through, what it got.
class Endpoint final : public Link, public Delivery {
 public:
  Endpoint(Wire& wire, int rank, int size, const Params& params)
      : reliability(rank, size, params, kFrame), received(size), wire_(wire), rank_(rank) {}

  void transmit(int peer, int slot, const void* frame, size_t bytes) override;
  void on_message(int peer, uint8_t channel, const void* data, size_t bytes) override {
    EXPECT_EQ(channel, 3);
    const auto* begin = static_cast<const uint8_t*>(data);
    received[peer].emplace_back(begin, begin + bytes);
    if (reply_to_each) reliability.send(peer, 3, data, bytes > 8 ? 8 : bytes, nullptr, 0, *this, now);
  }
  void on_peer_failed(int peer, const Error& error) override {
    failures.emplace_back(peer, error.what());
    EXPECT_EQ(error.peer(), peer);
    EXPECT_EQ(error.status(), Status::peer_failed);
    failed_at = now;
  }

  Reliability reliability;
  std::vector<int> completions;  // slots whose sends finish at the next step
  std::vector<std::vector<std::vector<uint8_t>>> received;  // [peer][message]
  std::vector<std::pair<int, std::string>> failures;
  bool dead = false;             // sends nothing, receives nothing
  bool reply_to_each = false;
  uint64_t now = 0;
  uint64_t failed_at = 0;

 private:
  Wire& wire_;
  int rank_;
};

class Wire {
 public:
  Wire(int size, WireFaults faults, const Params& params = Params{}, uint64_t seed = 1)
      : faults_(faults), random_(seed) {
    for (int rank = 0; rank < size; ++rank)
      endpoints.push_back(std::make_unique<Endpoint>(*this, rank, size, params));
  }

  void post(int from, int to, const void* frame, size_t bytes) {
    if (endpoints[from]->dead) return;
    WireHeader header;
    std::memcpy(&header, frame, sizeof header);
    if ((header.flags & kData) != 0 && faults_.drop_data > 0) {
      --faults_.drop_data;
      return;
    }
    if (chance(faults_.loss) || ((header.flags & kData) == 0 && chance(faults_.ack_loss))) return;
    const int copies = chance(faults_.duplicate) ? 2 : 1;
    for (int copy = 0; copy < copies; ++copy) {
      const uint64_t delay = kStepNs + (faults_.jitter_ns ? random_() % faults_.jitter_ns : 0);
      const auto* begin = static_cast<const uint8_t*>(frame);
      in_flight_.emplace(std::make_pair(now + delay, order_++),
                         Datagram{to, std::vector<uint8_t>(begin, begin + bytes)});
    }
  }

  // One step: sends complete, datagrams due arrive, timers run.
  void step() {
    now += kStepNs;
    for (auto& endpoint : endpoints) {
      endpoint->now = now;
      for (int slot : std::exchange(endpoint->completions, {})) endpoint->reliability.on_sent(slot);
    }
    while (!in_flight_.empty() && in_flight_.begin()->first.first <= now) {
      Datagram datagram = std::move(in_flight_.begin()->second);
      in_flight_.erase(in_flight_.begin());
      Endpoint& to = *endpoints[datagram.to];
      if (!to.dead) to.reliability.on_frame(datagram.bytes.data(), datagram.bytes.size(), to, to, now);
    }
    for (auto& endpoint : endpoints) {
      if (!endpoint->dead) endpoint->reliability.tick(*endpoint, *endpoint, now);
      for (size_t peer = 0; peer < endpoints.size(); ++peer) {
        EXPECT_LE(endpoint->reliability.in_flight(static_cast<int>(peer)), window_seen_limit);
      }
    }
  }

  // Steps until nothing is unacknowledged anywhere (or the step budget ends).
  bool settle(int max_steps = 2'000'000) {
    for (int i = 0; i < max_steps; ++i) {
      bool busy = !in_flight_.empty();
      for (auto& endpoint : endpoints) busy = busy || (!endpoint->dead && endpoint->reliability.sends_pending());
      if (!busy) return true;
      step();
    }
    return false;
  }

  // When the next datagram arrives (UINT64_MAX: none in flight).
  uint64_t next_arrival() const { return in_flight_.empty() ? UINT64_MAX : in_flight_.begin()->first.first; }

  std::vector<std::unique_ptr<Endpoint>> endpoints;
  uint64_t now = 0;
  uint32_t window_seen_limit = Params{}.window;

 private:
  struct Datagram {
    int to;
    std::vector<uint8_t> bytes;
  };
  bool chance(double probability) {
    return probability > 0 && std::uniform_real_distribution<double>(0, 1)(random_) < probability;
  }

  WireFaults faults_;
  std::mt19937_64 random_;
  std::map<std::pair<uint64_t, uint64_t>, Datagram> in_flight_;  // by (arrival, order posted)
  uint64_t order_ = 0;
};

void Endpoint::transmit(int peer, int slot, const void* frame, size_t bytes) {
  EXPECT_LE(bytes, kFrame);
  completions.push_back(slot);
  wire_.post(rank_, peer, frame, bytes);
}

// Message `index` from `from` to `to`: a size that spans 0..4 fragments and
// bytes that identify it, so a misplaced or torn message cannot pass.
std::vector<uint8_t> message(int from, int to, int index) {
  const size_t bytes = static_cast<size_t>((index * 97 + from * 31 + to * 17) % (4 * kFrame));
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(from * 7 + to * 13 + index * 3 + i);
  return data;
}

// Every rank sends `count` messages to every other rank (header = first 8
// bytes, the rest as payload, as the P2P engine does), interleaved.
void send_all_to_all(Wire& wire, int count, int steps_between = 1) {
  const int size = static_cast<int>(wire.endpoints.size());
  for (int index = 0; index < count; ++index) {
    for (int from = 0; from < size; ++from) {
      Endpoint& sender = *wire.endpoints[from];
      if (sender.dead) continue;
      for (int to = 0; to < size; ++to) {
        if (to == from || sender.reliability.peer_failed(to)) continue;
        const std::vector<uint8_t> data = message(from, to, index);
        const size_t header = std::min<size_t>(8, data.size());
        sender.reliability.send(to, 3, data.data(), header, data.data() + header, data.size() - header, sender,
                                wire.now);
      }
    }
    for (int i = 0; i < steps_between; ++i) wire.step();
  }
}

void expect_all_delivered(const Wire& wire, int count) {
  const int size = static_cast<int>(wire.endpoints.size());
  for (int to = 0; to < size; ++to) {
    if (wire.endpoints[to]->dead) continue;
    for (int from = 0; from < size; ++from) {
      if (from == to || wire.endpoints[from]->dead) continue;
      const auto& got = wire.endpoints[to]->received[from];
      ASSERT_EQ(got.size(), static_cast<size_t>(count)) << from << " -> " << to;
      for (int index = 0; index < count; ++index)
        ASSERT_EQ(got[index], message(from, to, index)) << "message " << index << " " << from << " -> " << to;
    }
  }
}

Stats total(const Wire& wire) {
  Stats sum;
  for (const auto& endpoint : wire.endpoints) {
    const Stats& s = endpoint->reliability.stats();
    sum.fragments_sent += s.fragments_sent;
    sum.retransmissions += s.retransmissions;
    sum.timeouts += s.timeouts;
    sum.acks_sent += s.acks_sent;
    sum.gap_acks_sent += s.gap_acks_sent;
    sum.duplicates += s.duplicates;
    sum.out_of_order += s.out_of_order;
    sum.malformed += s.malformed;
    sum.messages_delivered += s.messages_delivered;
  }
  return sum;
}

std::string summary(const Stats& s) {
  return "fragments " + std::to_string(s.fragments_sent) + ", retransmitted " + std::to_string(s.retransmissions) +
         ", timeouts " + std::to_string(s.timeouts) + ", acks " + std::to_string(s.acks_sent) + " (gap " +
         std::to_string(s.gap_acks_sent) + "), duplicates " + std::to_string(s.duplicates) + ", out of order " +
         std::to_string(s.out_of_order);
}

}  // namespace

TEST(UdReliability, LosslessWireDeliversInOrderWithoutRetransmission) {
  Wire wire(3, {});
  send_all_to_all(wire, 200);
  ASSERT_TRUE(wire.settle());
  expect_all_delivered(wire, 200);
  const Stats stats = total(wire);
  EXPECT_EQ(stats.retransmissions, 0u);
  EXPECT_EQ(stats.duplicates + stats.out_of_order + stats.malformed, 0u);
  EXPECT_EQ(stats.messages_delivered, 6u * 200u);
  EXPECT_GT(stats.fragments_sent, stats.messages_delivered) << "messages must fragment at this MTU";
}

TEST(UdReliability, TenPercentLossIsRepaired) {
  Wire wire(3, {.loss = 0.10});
  send_all_to_all(wire, 300);
  ASSERT_TRUE(wire.settle());
  expect_all_delivered(wire, 300);
  const Stats stats = total(wire);
  EXPECT_GT(stats.retransmissions, 0u);
  EXPECT_GT(stats.gap_acks_sent, 0u) << "holes are reported without waiting for the timer";
  RecordProperty("stats", summary(stats));
  std::printf("10%% loss: %s\n", summary(stats).c_str());
}

TEST(UdReliability, ReorderingIsUndone) {
  Wire wire(3, {.jitter_ns = 10 * kStepNs});
  send_all_to_all(wire, 200);
  ASSERT_TRUE(wire.settle());
  expect_all_delivered(wire, 200);
  EXPECT_GT(total(wire).out_of_order, 0u) << "the jitter must actually reorder";
}

TEST(UdReliability, DuplicatesAreDeliveredOnce) {
  Wire wire(3, {.duplicate = 0.25});
  send_all_to_all(wire, 200);
  ASSERT_TRUE(wire.settle());
  expect_all_delivered(wire, 200);
  EXPECT_GT(total(wire).duplicates, 0u);
}

TEST(UdReliability, LostAcksAreRecoveredByRetransmission) {
  // One direction of data only, so every ack is a standalone one; lose most.
  Wire wire(2, {.ack_loss = 0.6});
  for (int index = 0; index < 300; ++index) {
    const std::vector<uint8_t> data = message(0, 1, index);
    wire.endpoints[0]->reliability.send(1, 3, data.data(), 0, data.data(), data.size(), *wire.endpoints[0], wire.now);
    wire.step();
  }
  ASSERT_TRUE(wire.settle());
  const auto& got = wire.endpoints[1]->received[0];
  ASSERT_EQ(got.size(), 300u);
  for (int index = 0; index < 300; ++index) ASSERT_EQ(got[index], message(0, 1, index));
  EXPECT_EQ(wire.endpoints[0]->received[1].size(), 0u);
}

TEST(UdReliability, EverythingAtOnceAcrossSequenceWrapAround) {
  Params params;
  params.initial_seq = 0xffffff00u;  // wraps after 256 fragments
  Wire wire(4, {.loss = 0.08, .ack_loss = 0.2, .duplicate = 0.1, .jitter_ns = 6 * kStepNs}, params, 7);
  send_all_to_all(wire, 250);
  ASSERT_TRUE(wire.settle());
  expect_all_delivered(wire, 250);
  std::printf("loss+dup+reorder: %s\n", summary(total(wire)).c_str());
}

// Between the application's calls the progress thread sleeps on the UD
// wait fd: it wakes at an arrival or at next_deadline_ns() (the timerfd
// arm() sets), and at nothing else. Those wakeups alone must repair a loss
// and send the owed ack, in a handful of wakeups, and the deadline must say
// "nothing owed" once everything is acknowledged (the thread then sleeps).
TEST(UdReliability, DeadlinesAloneRepairALossBetweenCalls) {
  WireFaults faults;
  faults.drop_data = 1;
  Wire wire(2, faults);
  Endpoint& sender = *wire.endpoints[0];
  Endpoint& receiver = *wire.endpoints[1];
  const Params params;
  EXPECT_EQ(sender.reliability.next_deadline_ns(), UINT64_MAX);
  const std::vector<uint8_t> data = message(0, 1, 0);
  ASSERT_GT(data.size(), 8u);
  sender.reliability.send(1, 3, data.data(), 8, data.data() + 8, data.size() - 8, sender, wire.now);
  EXPECT_EQ(sender.reliability.next_deadline_ns(), wire.now + params.rto_initial_ns);  // the lost one's timer

  int wakeups = 0;
  for (; wakeups < 100; ++wakeups) {
    const uint64_t next = std::min({wire.next_arrival(), sender.reliability.next_deadline_ns(),
                                    receiver.reliability.next_deadline_ns()});
    if (next == UINT64_MAX) break;  // nothing owed anywhere, nothing in flight: both sleep
    wire.now = std::max(wire.now, next - kStepNs);
    wire.step();  // reaches `next`: arrivals, then the timers that are due
  }
  ASSERT_EQ(receiver.received[0].size(), 1u);
  EXPECT_EQ(receiver.received[0][0], data);
  EXPECT_FALSE(sender.reliability.sends_pending());
  EXPECT_EQ(sender.reliability.stats().retransmissions, 1u);
  EXPECT_EQ(receiver.reliability.stats().acks_sent, 1u);  // the delayed ack, sent at its deadline
  // The retransmission timer, its arrival, the ack's deadline, the ack's arrival.
  EXPECT_LE(wakeups, 5) << summary(total(wire));
  EXPECT_LE(wire.now, params.rto_initial_ns + params.ack_delay_ns + 4 * kStepNs);
}

TEST(UdReliability, WindowAndPoolBoundWhatIsInFlight) {
  Params params;
  params.window = 4;
  params.slots = 6;  // smaller than window x peers: the pool is shared
  Wire wire(4, {.loss = 0.05}, params);
  wire.window_seen_limit = params.window;  // checked at every step
  // Many messages at once: most wait in the backlog, in order.
  send_all_to_all(wire, 60, 0);
  EXPECT_TRUE(wire.endpoints[0]->reliability.sends_pending());
  EXPECT_GT(wire.endpoints[0]->reliability.bytes_in_use(), 0u) << "the backlog holds the rest";
  ASSERT_TRUE(wire.settle());
  expect_all_delivered(wire, 60);
  for (const auto& endpoint : wire.endpoints) {
    EXPECT_FALSE(endpoint->reliability.sends_pending());
    EXPECT_EQ(endpoint->reliability.bytes_in_use(), 0u);
  }
}

TEST(UdReliability, RepliesFromInsideDeliveryKeepOrder) {
  // The engine may post a send while a message is being delivered.
  Wire wire(2, {.loss = 0.05, .duplicate = 0.05});
  wire.endpoints[1]->reply_to_each = true;
  for (int index = 0; index < 200; ++index) {
    const std::vector<uint8_t> data = message(0, 1, index);
    wire.endpoints[0]->reliability.send(1, 3, data.data(), 0, data.data(), data.size(), *wire.endpoints[0], wire.now);
    wire.step();
  }
  ASSERT_TRUE(wire.settle());
  const auto& replies = wire.endpoints[0]->received[1];
  ASSERT_EQ(replies.size(), 200u);
  for (int index = 0; index < 200; ++index) {
    const std::vector<uint8_t> sent = message(0, 1, index);
    ASSERT_EQ(replies[index], std::vector<uint8_t>(sent.begin(), sent.begin() + std::min<size_t>(8, sent.size())));
  }
  // Two-way traffic carries most acks on data.
  EXPECT_LT(wire.endpoints[1]->reliability.stats().acks_sent, wire.endpoints[1]->reliability.stats().fragments_sent);
}

TEST(UdReliability, SilentPeerIsReportedOnceAfterGiveUp) {
  Params params;
  params.give_up_ns = 50'000'000;  // 50 ms of simulated time
  Wire wire(3, {}, params);
  wire.endpoints[2]->dead = true;
  send_all_to_all(wire, 20);
  ASSERT_TRUE(wire.settle());
  Endpoint& survivor = *wire.endpoints[0];
  ASSERT_EQ(survivor.failures.size(), 1u);
  EXPECT_EQ(survivor.failures[0].first, 2);
  EXPECT_NE(survivor.failures[0].second.find("rank 2 acknowledged nothing for"), std::string::npos)
      << survivor.failures[0].second;
  EXPECT_GE(survivor.failed_at, params.give_up_ns);
  EXPECT_LE(survivor.failed_at, params.give_up_ns + params.rto_max_ns + 1'000'000);
  EXPECT_GT(survivor.reliability.stats().timeouts, 0u);
  // The live pair was not disturbed, and nothing more goes to the dead rank.
  ASSERT_EQ(wire.endpoints[1]->received[0].size(), 20u);
  EXPECT_TRUE(survivor.reliability.peer_failed(2));
  EXPECT_FALSE(survivor.reliability.sends_pending());
  try {
    survivor.reliability.send(2, 3, "x", 1, nullptr, 0, survivor, wire.now);
    ADD_FAILURE() << "a send to a failed peer must throw";
  } catch (const Error& error) {
    EXPECT_EQ(error.status(), Status::peer_failed);
    EXPECT_EQ(error.peer(), 2);
  }
  for (int step = 0; step < 1000; ++step) wire.step();
  EXPECT_EQ(survivor.failures.size(), 1u) << "reported once";
}

TEST(UdReliability, MalformedFramesAreCountedAndDropped) {
  Wire wire(2, {});
  Endpoint& endpoint = *wire.endpoints[1];
  auto frame = [](uint32_t seq, uint32_t ack, uint32_t src, uint16_t bytes, uint8_t flags) {
    std::vector<uint8_t> out(sizeof(WireHeader) + bytes, 0x5a);
    const WireHeader header{seq, ack, src, bytes, flags, 3};
    std::memcpy(out.data(), &header, sizeof header);
    return out;
  };
  const std::vector<std::vector<uint8_t>> bad = {
      std::vector<uint8_t>(5, 0),                      // shorter than a header
      frame(0, 0, 7, 4, kData | kFirst | kLast),       // no such rank
      frame(0, 0, 0, 0, 0x80),                         // unknown flag
      frame(0, 5, 0, 0, 0),                            // acks what was never sent
  };
  size_t expected_malformed = 0;
  for (size_t i = 0; i < bad.size(); ++i) {
    endpoint.reliability.on_frame(bad[i].data(), bad[i].size(), endpoint, endpoint, wire.now);
    EXPECT_EQ(endpoint.reliability.stats().malformed, ++expected_malformed) << "frame " << i;
  }
  // A length that disagrees with the datagram.
  std::vector<uint8_t> lying = frame(0, 0, 0, 10, kData | kFirst | kLast);
  endpoint.reliability.on_frame(lying.data(), lying.size() - 3, endpoint, endpoint, wire.now);
  EXPECT_EQ(endpoint.reliability.stats().malformed, ++expected_malformed);
  // A middle fragment with no first one before it.
  std::vector<uint8_t> orphan = frame(0, 0, 0, 4, kData | kLast);
  endpoint.reliability.on_frame(orphan.data(), orphan.size(), endpoint, endpoint, wire.now);
  EXPECT_EQ(endpoint.reliability.stats().malformed, ++expected_malformed);
  EXPECT_EQ(endpoint.received[0].size(), 0u);
  // The pair still works afterwards.
  send_all_to_all(wire, 10);
  ASSERT_TRUE(wire.settle());
  expect_all_delivered(wire, 10);
}

TEST(UdReliability, PerPeerStateIsSmallAndSharedStateDoesNotGrowWithPeers) {
  EXPECT_LE(Reliability::bytes_per_peer(), 64u);
  const Reliability small(0, 2, Params{}, 4096);
  const Reliability large(0, 16384, Params{}, 4096);
  EXPECT_EQ(small.bytes_shared(), large.bytes_shared());
  EXPECT_GE(small.bytes_shared(), Params{}.slots * 4096u) << "the retransmission arena is counted";
}

TEST(UdReliability, BadParametersAreRefused) {
  Params params;
  params.window = 0;
  EXPECT_THROW(Reliability(0, 2, params, 4096), Error);
  EXPECT_THROW(Reliability(0, 2, Params{}, sizeof(WireHeader)), Error);
  EXPECT_THROW(Reliability(2, 2, Params{}, 4096), Error);
}
