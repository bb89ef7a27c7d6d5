// The RC mesh's credits and send-queue accounting (rc::FlowControl) over a
// simulated wire: no device. Each rank's QPs are modelled as in-order send
// queues that a simulated HCA works through; a message needs a posted
// receive at the other end (none: an RNR, which credits must make
// impossible); a credit write lands in the peer's mailbox; a signalled
// completion retires every earlier work request. Every test checks that
// each message arrived once, whole and in order, byte for byte, and the
// bounds at every step.
#include "common/error.hpp"
#include "transports/verbs/rc_mesh_flow_control.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <vector>

using chorus::Error;
using chorus::Status;
using namespace chorus::transport::rc;
using chorus::transport::verbs::ReadJob;

namespace {

enum class Kind { message, credit_write, read };

// One work request as the simulated QP holds it.
struct Posted {
  Posted(Kind kind_, const SendWr& wr_, int32_t buffer_ = -1) : kind(kind_), wr(wr_), buffer(buffer_) {}
  Kind kind;
  SendWr wr;
  int32_t buffer;
  std::vector<uint8_t> bytes;  // message: EagerHeader + header + payload
  uint32_t granted = 0;        // credit write
  ReadJob* job = nullptr;      // read
};

class Wire;

class Rank final : public Poster {
 public:
  Rank(Wire& wire, int rank, const FlowParams& params)
      : flow(params), queues(static_cast<size_t>(params.size)), unretired(static_cast<size_t>(params.size)),
        receives(static_cast<size_t>(params.size), params.credits),
        mailboxes(static_cast<size_t>(params.size), params.initial_count), inbox(static_cast<size_t>(params.size)),
        received(static_cast<size_t>(params.size)), wire_(wire), rank_(rank) {}

  void post_message(const SendWr& wr, int32_t buffer, uint32_t granted, const void* header, size_t header_bytes,
                    const void* payload, size_t payload_bytes) override {
    fail_if_asked();
    Posted posted{Kind::message, wr, buffer};
    EagerHeader eager{granted, 0};
    posted.bytes.resize(kEagerHeaderBytes + header_bytes + payload_bytes);
    std::memcpy(posted.bytes.data(), &eager, kEagerHeaderBytes);
    if (header_bytes != 0) std::memcpy(posted.bytes.data() + kEagerHeaderBytes, header, header_bytes);
    if (payload_bytes != 0) std::memcpy(posted.bytes.data() + kEagerHeaderBytes + header_bytes, payload, payload_bytes);
    if (buffer < 0) {
      EXPECT_LE(posted.bytes.size(), inline_limit) << "inlined beyond the limit";
    } else {
      EXPECT_LT(static_cast<uint32_t>(buffer), flow.params().send_buffers);
      EXPECT_TRUE(buffers_in_use.insert(buffer).second) << "bounce buffer " << buffer << " reused while in flight";
    }
    accept(std::move(posted));
  }
  void post_credit_write(const SendWr& wr, uint32_t granted) override {
    fail_if_asked();
    Posted posted{Kind::credit_write, wr};
    posted.granted = granted;
    accept(std::move(posted));
  }
  void post_read_piece(const SendWr& wr, const PendingRead& read) override {
    fail_if_asked();
    EXPECT_TRUE(wr.signaled) << "every READ is signalled";
    Posted posted{Kind::read, wr};
    posted.job = read.job;
    accept(std::move(posted));
  }
  uint32_t mailbox(int peer) override { return mailboxes[static_cast<size_t>(peer)]; }

  // The simulated HCA's completion of `done` (in queue order).
  void completed(const Posted& done);
  // The application takes what arrived from every peer (reposting each buffer).
  void consume();

  FlowControl flow;
  ReadJobs reads;
  std::vector<std::deque<Posted>> queues;     // [peer]: posted, not yet executed
  std::vector<std::deque<Posted>> unretired;  // [peer]: executed or not, not yet retired
  std::vector<uint32_t> receives;             // [peer]: receives posted for that peer
  std::vector<uint32_t> mailboxes;            // [peer]: what it wrote into our mailbox
  std::vector<std::deque<std::vector<uint8_t>>> inbox;     // [peer]: arrived, not consumed
  std::vector<std::vector<std::vector<uint8_t>>> received;  // [peer]: consumed, in order
  std::set<int32_t> buffers_in_use;
  size_t inline_limit = 0;
  bool paused = false;            // the application takes nothing
  bool hca_stopped = false;       // the HCA executes nothing (no completions)
  int fail_post_countdown = -1;   // 0: the next post throws
  int reads_done = 0;
  std::function<void(int peer, const std::vector<uint8_t>&)> on_message;

 private:
  void fail_if_asked() {
    if (fail_post_countdown >= 0 && fail_post_countdown-- == 0) throw Error(Status::transport, "simulated post failure");
  }
  void accept(Posted posted);

  Wire& wire_;
  int rank_;
};

class Wire {
 public:
  Wire(int size, const FlowParams& base, size_t inline_limit = 0, uint64_t seed = 1) : random_(seed) {
    FlowParams params = base;
    params.size = size;
    for (int r = 0; r < size; ++r) {
      ranks.push_back(std::make_unique<Rank>(*this, r, params));
      ranks.back()->inline_limit = inline_limit;
      ranks.back()->flow.set_inline_limit(inline_limit);
    }
    for (int r = 0; r < size; ++r) {
      for (int p = 0; p < size; ++p) ranks[static_cast<size_t>(r)]->flow.connect_peer(p, params.credits, 3);
    }
  }

  Rank& at(int r) { return *ranks[static_cast<size_t>(r)]; }
  int size() const { return static_cast<int>(ranks.size()); }

  // One step: each HCA executes some posted work requests (`executes` per
  // QP, or a random 0..executes), the applications consume, every rank
  // services its flow control; then the bounds are checked.
  void step(int executes = 4, bool random_amounts = false) {
    for (int r = 0; r < size(); ++r) {
      Rank& rank = at(r);
      if (rank.hca_stopped) continue;
      for (int p = 0; p < size(); ++p) {
        const int n = random_amounts ? static_cast<int>(random_() % static_cast<uint64_t>(executes + 1)) : executes;
        for (int i = 0; i < n && !rank.queues[static_cast<size_t>(p)].empty(); ++i) execute(r, p);
      }
    }
    for (auto& rank : ranks) rank->consume();
    for (auto& rank : ranks) rank->flow.service(*rank, rank->reads);
    check_bounds();
  }

  bool busy() const {
    for (const auto& rank : ranks) {
      if (rank->flow.sends_pending() || rank->flow.needs_service()) return true;
      for (const auto& queue : rank->queues) {
        if (!queue.empty()) return true;
      }
      for (const auto& inbox : rank->inbox) {
        if (!inbox.empty()) return true;
      }
    }
    return false;
  }

  bool settle(int max_steps = 100000, bool random_amounts = false) {
    for (int i = 0; i < max_steps; ++i) {
      if (!busy()) return true;
      step(4, random_amounts);
    }
    return false;
  }

  void check_bounds() {
    for (int r = 0; r < size(); ++r) {
      Rank& rank = at(r);
      const FlowParams& params = rank.flow.params();
      EXPECT_LE(rank.flow.free_send_buffers(), params.send_buffers);
      EXPECT_EQ(rank.flow.free_send_buffers() + rank.buffers_in_use.size(), params.send_buffers);
      for (int p = 0; p < size(); ++p) {
        EXPECT_LE(rank.flow.sq_used(p), params.sq_capacity) << "rank " << r << " to " << p;
        EXPECT_EQ(static_cast<size_t>(rank.flow.sq_used(p)), rank.unretired[static_cast<size_t>(p)].size());
        EXPECT_LE(rank.flow.reads_in_flight(p), 3);
        // What is posted or arrived for a receiver never exceeds its receives: no RNR.
        EXPECT_LE(at(p).inbox[static_cast<size_t>(r)].size(), params.credits);
      }
    }
  }

  std::vector<std::unique_ptr<Rank>> ranks;
  int rnr = 0;

 private:
  // The HCA of `r` executes the oldest work request on its QP to `p`.
  void execute(int r, int p) {
    Rank& from = at(r);
    Rank& to = at(p);
    Posted posted = std::move(from.queues[static_cast<size_t>(p)].front());
    from.queues[static_cast<size_t>(p)].pop_front();
    switch (posted.kind) {
      case Kind::message:
        if (to.receives[static_cast<size_t>(r)] == 0) {
          ++rnr;
          ADD_FAILURE() << "RNR: rank " << r << " sent to rank " << p << " with no receive posted";
        } else {
          --to.receives[static_cast<size_t>(r)];
          to.inbox[static_cast<size_t>(r)].push_back(posted.bytes);
        }
        break;
      case Kind::credit_write:
        to.mailboxes[static_cast<size_t>(r)] = posted.granted;
        break;
      case Kind::read:
        break;
    }
    if (posted.wr.signaled) from.completed(posted);
  }

  std::mt19937_64 random_;
};

void Rank::accept(Posted posted) {
  unretired[static_cast<size_t>(posted.wr.peer)].push_back(posted);
  queues[static_cast<size_t>(posted.wr.peer)].push_back(std::move(posted));
}

void Rank::completed(const Posted& done) {
  const int peer = done.wr.peer;
  auto& pending = unretired[static_cast<size_t>(peer)];
  // In order: everything up to `done` is retired with it.
  while (!pending.empty() && static_cast<int32_t>(pending.front().wr.sequence - done.wr.sequence) <= 0) {
    if (pending.front().buffer >= 0) buffers_in_use.erase(pending.front().buffer);
    pending.pop_front();
  }
  flow.on_completion(peer, done.wr.sequence);
  if (done.kind == Kind::read) {
    if (--done.job->pieces_left == 0) reads.finish(done.job);
    ++reads_done;
    flow.on_read_done(peer);
  }
}

void Rank::consume() {
  if (paused) return;
  for (int p = 0; p < static_cast<int>(inbox.size()); ++p) {
    auto& arrived = inbox[static_cast<size_t>(p)];
    while (!arrived.empty()) {
      std::vector<uint8_t> bytes = std::move(arrived.front());
      arrived.pop_front();
      EagerHeader header{};
      std::memcpy(&header, bytes.data(), kEagerHeaderBytes);
      flow.on_received(p, header.granted);
      std::vector<uint8_t> message(bytes.begin() + kEagerHeaderBytes, bytes.end());
      received[static_cast<size_t>(p)].push_back(message);
      if (on_message) on_message(p, message);
      ++receives[static_cast<size_t>(p)];  // the buffer is posted again
      flow.on_reposted(p);
    }
  }
}

// Message `index` from `from` to `to`: 0..300 bytes that identify it.
std::vector<uint8_t> message(int from, int to, int index) {
  const size_t bytes = static_cast<size_t>((index * 37 + from * 11 + to * 5) % 301);
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(from * 7 + to * 13 + index * 3 + i);
  return data;
}

// As the P2P engine does: up to 16 bytes of header, the rest as payload.
void send(Wire& wire, int from, int to, int index) {
  const std::vector<uint8_t> data = message(from, to, index);
  const size_t header = std::min<size_t>(16, data.size());
  Rank& rank = wire.at(from);
  rank.flow.send(to, data.data(), header, data.data() + header, data.size() - header, rank);
}

void expect_delivered(Wire& wire, int from, int to, int count) {
  const auto& got = wire.at(to).received[static_cast<size_t>(from)];
  ASSERT_EQ(got.size(), static_cast<size_t>(count)) << "from " << from << " to " << to;
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)], message(from, to, i)) << "message " << i << " from " << from << " to " << to;
  }
}

// Rank 0 sends `count` messages to rank 1 while its HCA executes nothing,
// and `steps` steps pass; `check` looks at the stalled sender's accounting.
// Then the HCA resumes and every message arrives, in order.
void send_while_hca_stopped(Wire& wire, int count, int steps, const std::function<void(const FlowControl&)>& check) {
  Rank& sender = wire.at(0);
  sender.hca_stopped = true;
  for (int i = 0; i < count; ++i) send(wire, 0, 1, i);
  for (int i = 0; i < steps; ++i) wire.step();
  check(sender.flow);
  sender.hca_stopped = false;
  ASSERT_TRUE(wire.settle());
  expect_delivered(wire, 0, 1, count);
}

FlowParams params(uint32_t credits, int sq_capacity, uint32_t send_buffers = 256) {
  FlowParams p;
  p.credits = credits;
  p.sq_capacity = sq_capacity;
  p.send_buffers = send_buffers;
  return p;
}

}  // namespace

// A receiver that takes nothing: the sender posts exactly its credits, then
// queues; nothing is ever sent without a receive behind it. When the
// receiver catches up, credits return by RDMA WRITE (no reverse traffic)
// and everything arrives in order.
TEST(RcFlowControl, CreditExhaustionQueuesAndCreditsReturnByWrite) {
  Wire wire(2, params(4, 4 + 3 + 4));
  wire.at(1).paused = true;
  for (int i = 0; i < 20; ++i) send(wire, 0, 1, i);
  for (int i = 0; i < 50; ++i) wire.step();
  EXPECT_EQ(wire.at(1).inbox[0].size(), 4u);
  EXPECT_EQ(wire.at(0).flow.credits_left(1), 0u);
  EXPECT_EQ(wire.at(0).flow.backlog(1), 16u);
  EXPECT_TRUE(wire.at(0).flow.sends_pending());
  EXPECT_NE(wire.at(0).flow.describe(1).find("0 send credits, 16 sends waiting for credits"), std::string::npos)
      << wire.at(0).flow.describe(1);

  wire.at(1).paused = false;
  ASSERT_TRUE(wire.settle());
  expect_delivered(wire, 0, 1, 20);
  EXPECT_GT(wire.at(1).flow.credit_writes(), 0u);
  EXPECT_EQ(wire.rnr, 0);
  EXPECT_FALSE(wire.at(0).flow.sends_pending());
}

// Replies carry the credits back: 200 round trips with 4 credits need no
// credit write, except at the end, for the last receives no message follows.
TEST(RcFlowControl, CreditsReturnPiggyBackedOnReplies) {
  Wire wire(2, params(4, 4 + 3 + 4));
  int replies = 0;
  wire.at(1).on_message = [&](int peer, const std::vector<uint8_t>&) { send(wire, 1, peer, replies++); };
  int sent = 0;
  wire.at(0).on_message = [&](int, const std::vector<uint8_t>&) {
    if (sent < 200) send(wire, 0, 1, sent++);
  };
  send(wire, 0, 1, sent++);
  ASSERT_TRUE(wire.settle());
  expect_delivered(wire, 0, 1, 200);
  expect_delivered(wire, 1, 0, 200);
  EXPECT_LE(wire.at(0).flow.credit_writes(), 1u);
  EXPECT_EQ(wire.at(1).flow.credit_writes(), 0u);
}

// The HCA completes nothing: the sender fills its send queue, then queues.
TEST(RcFlowControl, FullSendQueueQueuesInOrder) {
  Wire wire(2, params(64, 6));
  send_while_hca_stopped(wire, 20, 10, [](const FlowControl& flow) {
    EXPECT_EQ(flow.sq_used(1), 6);
    EXPECT_EQ(flow.backlog(1), 14u);
  });
}

// Few bounce buffers and nothing inlined: messages wait for a buffer, and a
// buffer is never handed out again before its send is retired (the
// simulated QP checks). Sends are signalled early when buffers run low, so
// they come back even though the send queue never fills.
TEST(RcFlowControl, BounceBuffersRunOutAndComeBack) {
  Wire wire(2, params(64, 64 + 3 + 4, 4));
  send_while_hca_stopped(wire, 30, 1, [](const FlowControl& flow) {
    EXPECT_EQ(flow.free_send_buffers(), 0u);
    EXPECT_EQ(flow.sq_used(1), 4);
    EXPECT_EQ(flow.backlog(1), 26u);
  });
}

// Messages up to the inline limit need no bounce buffer.
TEST(RcFlowControl, InlineMessagesTakeNoBounceBuffer) {
  Wire wire(2, params(64, 64 + 3 + 4, 1), /*inline_limit=*/kEagerHeaderBytes + 300);
  send_while_hca_stopped(wire, 40, 1, [](const FlowControl& flow) {
    EXPECT_EQ(flow.free_send_buffers(), 1u);
    EXPECT_EQ(flow.backlog(1), 0u);
  });
}

// A message sent while earlier ones wait goes behind them, even when a
// credit is free by then.
TEST(RcFlowControl, NewMessagesWaitBehindTheBacklog) {
  Wire wire(2, params(2, 2 + 3 + 4));
  wire.at(1).paused = true;
  for (int i = 0; i < 4; ++i) send(wire, 0, 1, i);  // 2 posted, 2 queued
  wire.step();
  EXPECT_EQ(wire.at(0).flow.backlog(1), 2u);
  // The receiver takes both and writes the credits back; the sender's
  // backlog is not serviced before the next send.
  wire.at(1).paused = false;
  wire.at(1).consume();
  wire.at(1).flow.service(wire.at(1), wire.at(1).reads);
  while (!wire.at(1).queues[0].empty()) {
    wire.at(1).completed(wire.at(1).queues[0].front());  // credit write lands
    wire.at(0).mailboxes[1] = wire.at(1).queues[0].front().granted;
    wire.at(1).queues[0].pop_front();
  }
  EXPECT_GT(wire.at(0).mailbox(1), 2u);
  send(wire, 0, 1, 4);
  EXPECT_EQ(wire.at(0).flow.backlog(1), 3u);
  ASSERT_TRUE(wire.settle());
  expect_delivered(wire, 0, 1, 5);
}

// Three ranks sending to each other and themselves at random, two credits,
// a small send queue, few bounce buffers, random HCA speed and receivers
// that stall, counters starting just below 2^32 so they wrap: everything
// arrives once and in order, within every bound, with no RNR.
TEST(RcFlowControl, RandomTrafficAcrossWrapAround) {
  FlowParams base = params(2, 2 + 3 + 4, 8);
  base.initial_count = 0xffffffffu - 40;
  Wire wire(3, base, /*inline_limit=*/64, /*seed=*/7);
  std::mt19937_64 random(11);
  std::vector<std::vector<int>> sent(3, std::vector<int>(3, 0));
  for (int round = 0; round < 3000; ++round) {
    const int from = static_cast<int>(random() % 3);
    const int to = static_cast<int>(random() % 3);
    send(wire, from, to, sent[static_cast<size_t>(from)][static_cast<size_t>(to)]++);
    if (random() % 50 == 0) wire.at(static_cast<int>(random() % 3)).paused ^= true;
    if (random() % 3 == 0) wire.step(3, true);
  }
  for (int r = 0; r < 3; ++r) wire.at(r).paused = false;
  ASSERT_TRUE(wire.settle(200000, true));
  for (int from = 0; from < 3; ++from) {
    for (int to = 0; to < 3; ++to) expect_delivered(wire, from, to, sent[static_cast<size_t>(from)][static_cast<size_t>(to)]);
  }
  EXPECT_EQ(wire.rnr, 0);
}

// READ pieces: at most max_reads in flight per peer, the rest queued and
// started as earlier ones complete; each job ends when its last piece does.
TEST(RcFlowControl, ReadsAreBoundedAndQueued) {
  Wire wire(2, params(8, 8 + 3 + 4));
  Rank& rank = wire.at(0);
  rank.hca_stopped = true;
  ReadJob& job = rank.reads.start(42);
  std::vector<PendingRead> pieces(10, PendingRead{&job, 0, 0, 4096, 0, 0});
  job.pieces_left = pieces.size();
  rank.flow.read(1, pieces, rank);
  EXPECT_EQ(rank.flow.reads_in_flight(1), 3);
  EXPECT_EQ(rank.flow.reads_queued(1), 7u);
  EXPECT_TRUE(rank.flow.needs_service());
  rank.hca_stopped = false;
  ASSERT_TRUE(wire.settle());
  EXPECT_EQ(rank.reads_done, 10);
  EXPECT_EQ(job.pieces_left, 0u);
  EXPECT_FALSE(job.failed);
  EXPECT_TRUE(rank.reads.any_finished());
}

// A failed peer: its backlog is dropped, its queued READs fail, and it no
// longer counts as having sends pending; other peers are unaffected.
TEST(RcFlowControl, FailedPeerDropsItsQueues) {
  Wire wire(3, params(2, 2 + 3 + 4));
  Rank& rank = wire.at(0);
  wire.at(1).paused = true;
  rank.hca_stopped = true;
  for (int i = 0; i < 6; ++i) send(wire, 0, 1, i);
  ReadJob& job = rank.reads.start(7);
  std::vector<PendingRead> pieces(5, PendingRead{&job, 0, 0, 4096, 0, 0});
  job.pieces_left = pieces.size();
  rank.flow.read(1, pieces, rank);
  ASSERT_GT(rank.flow.reads_queued(1), 0u);
  rank.flow.fail_peer(1);
  EXPECT_TRUE(rank.flow.failed(1));
  EXPECT_FALSE(rank.flow.sends_pending());
  rank.flow.service(rank, rank.reads);
  EXPECT_EQ(rank.flow.backlog(1), 0u);
  EXPECT_EQ(rank.flow.reads_queued(1), 0u);
  EXPECT_TRUE(job.failed);
  for (int i = 0; i < 3; ++i) send(wire, 0, 2, i);
  rank.hca_stopped = false;
  wire.at(1).paused = false;
  ASSERT_TRUE(wire.settle());
  expect_delivered(wire, 0, 2, 3);
}

// A post that fails posted nothing: the accounting is as before, and the
// next message goes out normally.
TEST(RcFlowControl, FailedPostLeavesNoTrace) {
  Wire wire(2, params(4, 4 + 3 + 4));
  Rank& rank = wire.at(0);
  send(wire, 0, 1, 0);
  const int sq_used = rank.flow.sq_used(1);
  const uint32_t credits = rank.flow.credits_left(1);
  const size_t buffers = rank.flow.free_send_buffers();
  rank.fail_post_countdown = 0;
  const std::vector<uint8_t> data = message(0, 1, 1);
  EXPECT_THROW(rank.flow.send(1, data.data(), data.size(), nullptr, 0, rank), Error);
  EXPECT_EQ(rank.flow.sq_used(1), sq_used);
  EXPECT_EQ(rank.flow.credits_left(1), credits);
  EXPECT_EQ(rank.flow.free_send_buffers(), buffers);
  EXPECT_EQ(rank.flow.backlog(1), 0u);
  send(wire, 0, 1, 1);
  ASSERT_TRUE(wire.settle());
  expect_delivered(wire, 0, 1, 2);
}

TEST(RcFlowControl, RefusesBadParameters) {
  const auto refused = [](FlowParams p) {
    try {
      FlowControl flow(p);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::internal);
      EXPECT_NE(std::string(e.what()).find("bad parameters"), std::string::npos) << e.what();
      return true;
    }
    return false;
  };
  FlowParams p;
  EXPECT_FALSE(refused(p));
  p.size = 0;
  EXPECT_TRUE(refused(p));
  p = FlowParams{};
  p.credits = 0;
  EXPECT_TRUE(refused(p));
  p = FlowParams{};
  p.sq_capacity = 0;
  EXPECT_TRUE(refused(p));
  p = FlowParams{};
  p.send_buffers = 0;
  EXPECT_TRUE(refused(p));

  FlowControl flow(params(4, 11));
  EXPECT_THROW(flow.connect_peer(1, 4, 1), Error);  // a 1-rank flow has no rank 1
  EXPECT_THROW(flow.connect_peer(0, 0, 1), Error);  // no credits
  EXPECT_THROW(flow.connect_peer(0, 4, 0), Error);  // no reads
  EXPECT_THROW(flow.on_completion(-1, 0), Error);
}
