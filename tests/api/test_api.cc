// The public C++ and C APIs in a 1-rank job: argument validation with clear
// messages, the finalize rules, algorithm overrides, and size-1 semantics.
#include <chorus/chorus.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <numeric>

extern "C" int capi_roundtrip(void);
extern "C" int capi_layout_transport_version(void);
extern "C" int capi_nonblocking_single_rank(void);

using namespace chorus;

namespace {

// Runs `body` expecting a chorus::Error with `status` whose text contains `fragment`.
void expect_error(Status status, const std::string& fragment, const std::function<void()>& body) {
  try {
    body();
    ADD_FAILURE() << "no error; expected " << to_string(status) << " mentioning \"" << fragment << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

class SingleRank : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"CHORUS_RANK", "CHORUS_SIZE", "OMPI_COMM_WORLD_RANK", "RANK", "WORLD_SIZE", "SLURM_PROCID",
                             "PMI_RANK"}) {
      unsetenv(name);
    }
  }
};

}  // namespace

TEST_F(SingleRank, CollectivesOnOneRankCopyOrLeaveData) {
  auto comm = Communicator::init();
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  std::vector<int32_t> in(10), out(10, -1);
  std::iota(in.begin(), in.end(), 1);
  comm.allreduce(in.data(), out.data(), in.size(), ReduceOp::sum);
  EXPECT_EQ(in, out);
  std::fill(out.begin(), out.end(), -1);
  comm.allgather(in.data(), out.data(), in.size());
  EXPECT_EQ(in, out);
  std::fill(out.begin(), out.end(), -1);
  comm.reduce_scatter(in.data(), out.data(), in.size(), ReduceOp::max);
  EXPECT_EQ(in, out);
  std::fill(out.begin(), out.end(), -1);
  comm.alltoall(in.data(), out.data(), in.size());
  EXPECT_EQ(in, out);
  comm.broadcast(std::span<int32_t>(in), 0);
  comm.barrier();
  comm.finalize();
}

TEST_F(SingleRank, InvalidArgumentsNameTheProblem) {
  auto comm = Communicator::init();
  std::vector<float> buffer(8);
  expect_error(Status::invalid_argument, "root 1 is not a rank", [&] { comm.broadcast(std::span<float>(buffer), 1); });
  expect_error(Status::invalid_argument, "root -1", [&] { comm.reduce(std::span<float>(buffer), ReduceOp::sum, -1); });
  expect_error(Status::invalid_argument, "null send buffer",
               [&] { comm.allreduce(nullptr, buffer.data(), 8, DataType::float32, ReduceOp::sum); });
  expect_error(Status::invalid_argument, "null receive buffer",
               [&] { comm.allreduce(buffer.data(), nullptr, 8, DataType::float32, ReduceOp::sum); });
  expect_error(Status::invalid_argument, "invalid datatype value 99",
               [&] { comm.allreduce(buffer.data(), buffer.data(), 8, static_cast<DataType>(99), ReduceOp::sum); });
  expect_error(Status::invalid_argument, "invalid reduction op value 7",
               [&] { comm.allreduce(buffer.data(), buffer.data(), 8, DataType::float32, static_cast<ReduceOp>(7)); });
  expect_error(Status::invalid_argument, "overflows",
               [&] { comm.allgather(buffer.data(), buffer.data(), SIZE_MAX / 2, DataType::float32); });
  expect_error(Status::invalid_argument, "is not an algorithm for allreduce",
               [&] { comm.set_algorithm(Collective::allreduce, "bogus"); });
  expect_error(Status::invalid_argument, "tag -1", [&] { comm.send(buffer.data(), 4, 0, -1); });
  // A null buffer with count 0 is fine, as in MPI.
  comm.allreduce(nullptr, nullptr, 0, DataType::float32, ReduceOp::sum);
  // Validation failures are the caller's: the communicator stays usable.
  comm.barrier();
}

// A call repeating the previous call's count, datatype, op and root skips
// the checks of those (the communicator keeps them with the algorithm and
// digest), never the checks of its buffers.
TEST_F(SingleRank, RepeatedCallsHaveTheirBuffersChecked) {
  auto comm = Communicator::init();
  std::vector<float> in(8, 1.0f), out(8, 0.0f);
  for (int round = 0; round < 2; ++round) {
    comm.allreduce(in.data(), out.data(), 8, DataType::float32, ReduceOp::sum);
    EXPECT_EQ(out, in);
    expect_error(Status::invalid_argument, "allreduce: null send buffer",
                 [&] { comm.allreduce(nullptr, out.data(), 8, DataType::float32, ReduceOp::sum); });
    expect_error(Status::invalid_argument, "allreduce: null receive buffer",
                 [&] { comm.allreduce(in.data(), nullptr, 8, DataType::float32, ReduceOp::sum); });
    comm.reduce(in.data(), out.data(), 8, DataType::float32, ReduceOp::sum, 0);
    expect_error(Status::invalid_argument, "reduce: null receive buffer",
                 [&] { comm.reduce(in.data(), nullptr, 8, DataType::float32, ReduceOp::sum, 0); });
    comm.broadcast(out.data(), 8, DataType::float32, 0);
    expect_error(Status::invalid_argument, "broadcast: null buffer",
                 [&] { comm.broadcast(nullptr, 8, DataType::float32, 0); });
    // Count 0 is a shape of its own, whose null buffers are fine.
    comm.allreduce(nullptr, nullptr, 0, DataType::float32, ReduceOp::sum);
    comm.allreduce(nullptr, nullptr, 0, DataType::float32, ReduceOp::sum);
    // A shape that differs in one field is checked whole.
    expect_error(Status::invalid_argument, "root 1 is not a rank",
                 [&] { comm.broadcast(out.data(), 8, DataType::float32, 1); });
    expect_error(Status::invalid_argument, "invalid reduction op value 7",
                 [&] { comm.allreduce(in.data(), out.data(), 8, DataType::float32, static_cast<ReduceOp>(7)); });
  }
}

TEST_F(SingleRank, UseAfterFinalizeFails) {
  auto comm = Communicator::init();
  comm.finalize();
  comm.finalize();  // idempotent
  expect_error(Status::finalized, "after finalize", [&] { comm.barrier(); });
}

// A request points to its session without owning it (docs/nonblocking.md):
// the communicator's destructor (its finalize) must complete the request
// first, so that a wait after the session is gone reads only the request.
// Under ASan a read of the freed session fails this test.
TEST_F(SingleRank, RequestOutlivesItsCommunicator) {
  int value = -1;
  Request pending;
  Request waited_never;
  {
    auto comm = Communicator::init();
    pending = comm.irecv(&value, sizeof value, 0, 7);       // nothing sends it
    waited_never = comm.irecv(&value, sizeof value, 0, 8);  // nor this one
    ASSERT_TRUE(pending.active());
  }  // destroyed without finalize(): its finalize cancels both
  ASSERT_TRUE(pending.active());
  expect_error(Status::invalid_argument, "cancelled", [&] { pending.wait(); });
  EXPECT_FALSE(pending.active());
  EXPECT_EQ(value, -1);
  waited_never = Request();  // released without a wait, after its session
}

TEST_F(SingleRank, AlgorithmsCanBeListedAndForced) {
  auto comm = Communicator::init();
  for (int i = 0; i < kNumCollectives; ++i) {
    auto op = static_cast<Collective>(i);
    auto names = comm.algorithms(op);
    ASSERT_FALSE(names.empty()) << to_string(op);
    for (const auto& name : names) {
      comm.set_algorithm(op, name);
      EXPECT_EQ(comm.selected_algorithm(op, 1 << 20), name);
    }
    comm.set_algorithm(op, "auto");
  }
}

TEST_F(SingleRank, InvalidAlgorithmVariableIsAConfigError) {
  setenv("CHORUS_ALGO_BROADCAST", "teleport", 1);
  expect_error(Status::config, "CHORUS_ALGO_BROADCAST=\"teleport\": expected one of", [] { Communicator::init(); });
  unsetenv("CHORUS_ALGO_BROADCAST");
}

TEST_F(SingleRank, CApiRoundTrip) { EXPECT_EQ(capi_roundtrip(), 0); }
TEST_F(SingleRank, CApiLayoutTransportVersion) { EXPECT_EQ(capi_layout_transport_version(), 0); }
TEST_F(SingleRank, CApiNonBlocking) { EXPECT_EQ(capi_nonblocking_single_rank(), 0); }

TEST_F(SingleRank, ProbeSeesAMessageWithoutTakingIt) {
  auto comm = Communicator::init();
  EXPECT_FALSE(comm.iprobe(kAnySource, kAnyTag).has_value());
  const int64_t value = 42;
  comm.send(&value, sizeof value, 0, 7);
  const Received probed = comm.probe(0, 7);
  EXPECT_EQ(probed.source, 0);
  EXPECT_EQ(probed.tag, 7);
  EXPECT_EQ(probed.bytes, sizeof value);
  const std::optional<Received> again = comm.iprobe(kAnySource, kAnyTag);
  ASSERT_TRUE(again.has_value()) << "probing must leave the message queued";
  EXPECT_EQ(again->tag, 7);
  EXPECT_FALSE(comm.iprobe(0, 8).has_value());
  int64_t got = 0;
  EXPECT_EQ(comm.recv(&got, sizeof got, 0, 7).bytes, sizeof got);
  EXPECT_EQ(got, value);
  EXPECT_FALSE(comm.iprobe(kAnySource, kAnyTag).has_value());
  expect_error(Status::invalid_argument, "tag -3", [&] { (void)comm.iprobe(0, -3); });
  comm.finalize();
}

TEST_F(SingleRank, SplitAndDupGiveIndependentCommunicators) {
  auto comm = Communicator::init();
  auto copy = comm.dup();
  EXPECT_EQ(copy.rank(), 0);
  EXPECT_EQ(copy.size(), 1);
  auto none = comm.split(-1, 0);
  EXPECT_FALSE(none.has_value());
  auto sub = copy.split(3, 0);
  ASSERT_TRUE(sub.has_value());
  std::vector<int32_t> in = {1, 2, 3}, out(3);
  sub->allreduce(in.data(), out.data(), in.size(), ReduceOp::sum);
  EXPECT_EQ(in, out);
  // A message to self on the dup is not seen by a receive on the parent.
  int32_t value = 7, got = 0;
  copy.send(&value, sizeof value, 0, 1);
  Received received = copy.recv(&got, sizeof got, kAnySource, kAnyTag);
  EXPECT_EQ(got, 7);
  EXPECT_EQ(received.source, 0);
  EXPECT_EQ(received.tag, 1);
  EXPECT_EQ(received.bytes, sizeof got);
  expect_error(Status::invalid_argument, "peer 1 is not a rank", [&] { copy.send(&value, 4, 1, 0); });
  copy.finalize();  // local: the parent is unaffected
  expect_error(Status::finalized, "after finalize", [&] { copy.barrier(); });
  comm.barrier();
  comm.finalize();
  expect_error(Status::finalized, "world communicator it was split from was finalized", [&] { sub->barrier(); });
}

TEST_F(SingleRank, ContextIdsRunOutWithAClearError) {
  auto comm = Communicator::init();
  int created = 0;
  try {
    for (; created < 40000; ++created) comm.dup();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("context ids"), std::string::npos) << e.what();
  }
  EXPECT_EQ(created, 32767);
  comm.barrier();  // the communicator itself still works
}

// --- gather .. exscan -----------------------------------------------------------

extern "C" int capi_block_collectives(void);

TEST_F(SingleRank, BlockCollectivesThroughTheCApi) { EXPECT_EQ(capi_block_collectives(), 0); }

TEST_F(SingleRank, BlockCollectivesOnOneRankCopyOrLeaveData) {
  auto comm = Communicator::init();
  std::vector<int32_t> in = {1, 2, 3}, out(5, -1);
  const std::vector<size_t> counts = {3}, gap = {2};
  comm.gather(in.data(), out.data(), 3, 0);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 3), in);
  out.assign(5, -1);
  comm.allgatherv<int32_t>(in, out.data(), counts, gap);
  EXPECT_EQ(out, (std::vector<int32_t>{-1, -1, 1, 2, 3}));  // displacement 2; the gap untouched
  out.assign(5, -1);
  comm.alltoallv(in.data(), counts, {}, out.data(), counts, gap);
  EXPECT_EQ(out, (std::vector<int32_t>{-1, -1, 1, 2, 3}));
  out.assign(5, -1);
  comm.exscan(in.data(), out.data(), 3, ReduceOp::sum);
  EXPECT_EQ(out, std::vector<int32_t>(5, -1));  // rank 0: unchanged
  comm.scan(in.data(), out.data(), 3, ReduceOp::max);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 3), in);
  comm.finalize();
}

TEST_F(SingleRank, BlockCollectiveArgumentsAreChecked) {
  auto comm = Communicator::init();
  std::vector<int32_t> buffer(8);
  const std::vector<size_t> two = {1, 1}, one = {4};
  expect_error(Status::invalid_argument, "gather: root 1 is not a rank",
               [&] { comm.gather(buffer.data(), buffer.data(), 1, 1); });
  expect_error(Status::invalid_argument, "gatherv: recv_counts has 2 entries, expected 1 (one per rank)",
               [&] { comm.gatherv(buffer.data(), 1, buffer.data(), two, {}, DataType::int32, 0); });
  expect_error(Status::invalid_argument, "scatterv: send_displs has 2 entries, expected 1",
               [&] { comm.scatterv(buffer.data(), one, two, buffer.data(), 4, DataType::int32, 0); });
  expect_error(Status::invalid_argument, "allgatherv: rank 0 passes 3 elements for its own block but recv_counts[0] is 4",
               [&] { comm.allgatherv(buffer.data(), 3, buffer.data(), one, {}, DataType::int32); });
  const std::vector<size_t> huge = {SIZE_MAX / 2}, far = {SIZE_MAX / 4};
  expect_error(Status::invalid_argument, "alltoallv: block 0 (recv_displs",
               [&] { comm.alltoallv(buffer.data(), huge, far, buffer.data() + 1, huge, far, DataType::int32); });
  expect_error(Status::invalid_argument, "scan: null receive buffer with 2 elements",
               [&] { comm.scan(buffer.data(), nullptr, 2, DataType::int32, ReduceOp::sum); });
  expect_error(Status::invalid_argument, "exscan: invalid reduction op value 9",
               [&] { comm.exscan(buffer.data(), buffer.data(), 2, DataType::int32, static_cast<ReduceOp>(9)); });
  comm.barrier();  // argument errors are not sticky
  comm.finalize();
}

TEST_F(SingleRank, BlockCollectiveAlgorithmVariablesAreRead) {
  setenv("CHORUS_ALGO_GATHER", "binomial", 1);
  setenv("CHORUS_ALGO_EXSCAN", "linear", 1);
  {
    auto comm = Communicator::init();
    EXPECT_EQ(comm.selected_algorithm(Collective::gather, 8), "binomial");
    EXPECT_EQ(comm.selected_algorithm(Collective::exscan, 8), "linear");
    comm.finalize();
  }
  setenv("CHORUS_ALGO_ALLTOALLV", "ring", 1);
  expect_error(Status::config, "CHORUS_ALGO_ALLTOALLV=\"ring\": expected one of pairwise, auto",
               [] { Communicator::init(); });
  for (const char* name : {"CHORUS_ALGO_GATHER", "CHORUS_ALGO_EXSCAN", "CHORUS_ALGO_ALLTOALLV"}) unsetenv(name);
}

// Every call on a moved-from communicator throws Status::finalized, the
// const ones (rank, size, algorithms) too, instead of dereferencing null.
TEST_F(SingleRank, MovedFromCommunicatorThrowsOnEveryCall) {
  auto comm = Communicator::init();
  Communicator moved = std::move(comm);
  expect_error(Status::finalized, "moved-from", [&] { (void)comm.rank(); });
  expect_error(Status::finalized, "moved-from", [&] { (void)comm.size(); });
  expect_error(Status::finalized, "moved-from", [&] { (void)comm.local_rank(); });
  expect_error(Status::finalized, "moved-from", [&] { (void)comm.transport_name(); });
  expect_error(Status::finalized, "moved-from", [&] { (void)comm.algorithms(chorus::Collective::allreduce); });
  expect_error(Status::finalized, "moved-from", [&] { (void)comm.selected_algorithm(chorus::Collective::allreduce, 8); });
  expect_error(Status::finalized, "moved-from", [&] { comm.barrier(); });
  expect_error(Status::finalized, "moved-from", [&] { (void)comm.ibarrier(); });
  EXPECT_EQ(moved.size(), 1);
  moved.finalize();
}
