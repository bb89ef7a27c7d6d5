// Board collectives: allreduce, broadcast, reduce and barrier of up to
// kBoardDataBytes where every rank of the communicator maps every other's
// memory (the shm transport; inproc in tests), without a message: each rank
// writes its part into its own slot and reads the others' slots (the idea of
// Open MPI's coll/sm and NCCL's LL protocol). Layout: transports/board.hpp.
//
// Call k of a communicator on its board (k: one more than this rank's last,
// which it keeps in private memory) uses slot k % 3 of every rank:
//  1. wait until every peer has written its slot of call k-2: a peer starts
//     call k-2 only once call k-3 is complete, so it no longer reads the
//     slot this rank is about to overwrite. Also compare the digests of
//     call k-1 in the peers' slots that hold it already (below);
//  2. write the payload (allreduce/reduce: this rank's contribution;
//     broadcast: the root's data), the call digest, then k (release);
//  3. wait for the slots of call k it needs (allreduce, barrier: every
//     rank's; broadcast: the root's; reduce: the root every rank's, the
//     others none), comparing each digest with its own;
//  4. compute: reductions run in rank order 0..n-1 on every rank, so every
//     rank gets the same bits.
// Step 1 keeps every peer at most two calls ahead, so while this rank waits
// for call k a peer's slot k % 3 holds call k or k-3, never k+3. A rank
// that read every peer's slot of call k-1 or k-2 exactly (allreduce,
// barrier, a reduce root, a broadcast on 2 ranks) knows they wrote k-2 and
// does not wait: after a barrier or an allreduce, the next two calls start
// without waiting for anyone, where with two slots a call after a broadcast
// waited until every peer had started that broadcast (with ranks sharing a
// CPU, a wait for a rank that is not running; docs/performance.md).
// Disagreements in a call where a rank read nothing (a broadcast root, a
// reduce non-root) are found by comparing call k-1's digests in step 1 of
// call k, without waiting: of two ranks, the one that gets there second
// finds the other's slot of k-1 written, and still there, since neither can
// be more than two calls ahead of the other.
// Cost: one line written and n-1 lines read (broadcast: 1) for a payload of
// up to 48 bytes; no system call, no request, no matching.
//
// Where the call cannot run on a board (payload above kBoardDataBytes, no
// board for the communicator, a non-blocking call on a fiber), it runs the
// message algorithm the table picks for its size: a rank's choice depends
// only on the call, so all ranks choose alike (docs/algorithms.md, "board").
#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"

#include "common/error.hpp"
#include "common/copy.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace chorus::coll {

namespace {

using transport::Boards;

class BoardCall {
 public:
  BoardCall(Context& ctx, Boards& boards, const char* what)
      : ctx_(ctx), boards_(boards), context_(ctx.context_id()), what_(what),
        sequence_(boards.last_sequence[context_] + 1), slot_index_(sequence_ % transport::kBoardSlotsPerContext) {}

  // Steps 1 and 2.
  void publish(const void* payload, size_t bytes) {
    if (sequence_ > 2 && boards_.written_through[context_] < sequence_ - 2) {
      for (int rank = 0; rank < ctx_.size(); ++rank) {
        if (rank != ctx_.rank()) await(rank, sequence_ - 2, /*exact=*/false);
      }
      boards_.written_through[context_] = sequence_ - 2;
    }
    if (sequence_ > 1 && boards_.compared_through[context_] < sequence_ - 1) compare_previous_call();
    write_own_slot(payload, static_cast<uint32_t>(bytes));
  }

  // Compares the digest of call k-1 in every peer's slot that holds exactly
  // that call with this rank's own, without waiting for the others (they
  // compare this rank's when they get here). A rank that read nothing in
  // call k-1 (a broadcast root, a reduce non-root) learns of a disagreement
  // now, one board call late. Before it fails it marks its slot of call k
  // stopped, so the ranks that wait for that slot fail at once naming the
  // disagreement too, instead of learning of this rank's exit a second later.
  void compare_previous_call() {
    const uint32_t previous = boards_.last_digest[context_];
    int compared = 0;
    for (int rank = 0; rank < ctx_.size(); ++rank) {
      if (rank == ctx_.rank()) continue;
      uint8_t* peer = slot(rank, sequence_ - 1);
      if (transport::board_sequence(peer).load(std::memory_order_acquire) != sequence_ - 1) continue;
      ++compared;
      const uint32_t digest = transport::board_header(peer)->digest;
      if (previous != 0 && digest != previous) {
        if (transport::board_header(peer)->bytes == transport::kBoardStopped) {
          fail_peer(Status::invalid_argument, ctx_.engine_rank(rank), "rank ", rank, " stopped in the previous call on "
                    "the shared-memory board (#", sequence_ - 1, "): it found that a rank made a different call in the "
                    "call before; found at the next one, ", what_);
        }
        write_own_slot(nullptr, transport::kBoardStopped);
        fail_peer(Status::invalid_argument, ctx_.engine_rank(rank), "rank ", rank,
                  " made a different call in the previous call on the shared-memory board (#", sequence_ - 1,
                  ": another collective, count, datatype, op or root); found at the next one, ", what_);
      }
    }
    if (compared == ctx_.size() - 1) boards_.saw_every_peer(context_, sequence_ - 1);
  }

  // Step 2 (or the stop mark); the slot is free (step 1's wait).
  void write_own_slot(const void* payload, uint32_t bytes) {
    uint8_t* own = slot(ctx_.rank(), sequence_);
    if (bytes != 0 && bytes != transport::kBoardStopped) copy_bytes(transport::board_data(own), payload, bytes);
    // The stop mark's digest differs from every reader's, so step 3 looks at
    // it only on its (cold) way to failing.
    transport::board_header(own)->digest = bytes == transport::kBoardStopped ? ~ctx_.call_check() : ctx_.call_check();
    transport::board_header(own)->bytes = bytes;
    transport::board_sequence(own).store(sequence_, std::memory_order_release);
    boards_.last_sequence[context_] = sequence_;
    boards_.last_digest[context_] = ctx_.call_check();
  }

  // Step 3 found `rank`'s slot of this call with another digest: a different
  // call, or the stop mark (whose digest differs from every rank's).
  [[noreturn, gnu::cold, gnu::noinline]] void different_call(int rank, uint8_t* peer) {
    if (transport::board_header(peer)->bytes == transport::kBoardStopped) {
      fail_peer(Status::invalid_argument, ctx_.engine_rank(rank), "rank ", rank, " stopped in ", what_, " #",
                sequence_, " on the shared-memory board: it found that a rank made a different call in the call "
                "before (another collective, count, datatype, op or root)");
    }
    fail_peer(Status::invalid_argument, ctx_.engine_rank(rank), "rank ", rank, " made a different call in ", what_,
              " #", sequence_, " on the shared-memory board (another collective, count, datatype, op or root)");
  }

  // Step 3 for one rank: its payload of this call, once written.
  const uint8_t* contribution(int rank, bool awaiting_root = false) {
    if (rank == ctx_.rank()) return transport::board_data(slot(rank, sequence_));
    uint8_t* peer = await(rank, sequence_, /*exact=*/true, awaiting_root);
    if (ctx_.call_check() != 0 && transport::board_header(peer)->digest != ctx_.call_check()) different_call(rank, peer);
    if (++peers_read_ == ctx_.size() - 1) boards_.saw_every_peer(context_, sequence_);
    return transport::board_data(peer);
  }

 private:
  // `rank`'s slot of this call or of one of the two before it (the index is
  // kept, so no division per slot).
  uint8_t* slot(int rank, uint64_t sequence) const {
    const uint64_t back = sequence_ - sequence;
    const uint64_t index = slot_index_ >= back ? slot_index_ - back : slot_index_ + transport::kBoardSlotsPerContext - back;
    return boards_.slot(ctx_.engine_rank(rank), context_, index);
  }

  struct Awaited {
    uint8_t* slot;
    uint64_t sequence;
    bool exact;
    int rank;
    BoardCall* call;
    int keep_on_cpu = -1;  // wait_in_engine: also stop once this rank should keep that CPU
    bool written() const {
      const uint64_t seen = transport::board_sequence(slot).load(std::memory_order_acquire);
      return exact ? seen == sequence : seen >= sequence;
    }
  };

  // Until `rank`'s slot for `sequence` holds it (exact) or a later call.
  // A peer usually gets there within a microsecond: a short spin first
  // (with more ranks than cores, where the peer may need this core, only
  // where keep_cpu_for says so), then the engine's wait, which also
  // progresses everything else.
  uint8_t* await(int rank, uint64_t sequence, bool exact, bool awaiting_root = false) {
    Awaited awaited{slot(rank, sequence), sequence, exact, rank, this};
    if (awaited.written()) return awaited.slot;
    p2p::Engine& engine = ctx_.engine();
    if (!engine.oversubscribed()) {
      for (int spin = 0; spin < kSpinsBeforeWait; ++spin) {
        cpu_relax();
        if (awaited.written()) return awaited.slot;
      }
    } else if (const std::chrono::microseconds keep = keep_cpu_for(rank, awaiting_root); keep.count() != 0) {
      if (keep_cpu(awaited, keep)) return awaited.slot;
    } else if (const int cpu = own_shared_cpu(); cpu >= 0) {
      // Not yet the rank to keep this CPU: the others pinned there may still
      // be on their way into this call. Yield until they are in it, then
      // keep it, so that this rank, not one of them, runs when the call
      // completes (keep_cpu_for); otherwise which rank of the CPU leaves
      // first would be the scheduler's coin toss at every call. (A rank
      // that is not the lowest of its CPU never becomes the one: its wait
      // ends only when the slot is written.)
      awaited.keep_on_cpu = cpu;
      wait_in_engine(awaited);
      if (awaited.written()) return awaited.slot;
      if (keep_cpu(awaited, kKeepCpuWhileOthersWait)) return awaited.slot;
      awaited.keep_on_cpu = -1;
    }
    wait_in_engine(awaited);
    return awaited.slot;
  }

  // Until `awaited` is written or `keep` has passed, without yielding.
  bool keep_cpu(const Awaited& awaited, std::chrono::microseconds keep) const {
    const auto until = std::chrono::steady_clock::now() + keep;
    do {
      for (int spin = 0; spin < kSpinsPerClockRead; ++spin) {
        cpu_relax();
        if (awaited.written()) return true;
      }
    } while (std::chrono::steady_clock::now() < until);
    return false;
  }

  // The engine's wait (it yields at every empty poll where ranks outnumber
  // cores) until `awaited` is written, a message of this call arrived, or,
  // where keep_on_cpu is set, this rank became the one to keep that CPU.
  void wait_in_engine(const Awaited& awaited) {
    // The callables capture one pointer: std::function keeps them inline.
    const Awaited* state = &awaited;
    ctx_.engine().wait_until(
        [state] {
          return state->written() || state->call->stray_message() ||
                 (state->keep_on_cpu >= 0 && state->call->lowest_with_the_others_of_its_cpu_in_this_call(state->keep_on_cpu));
        },
        [state] { return state->call->waiting_for(state->rank, state->sequence); });
  }

  // The CPU this rank is pinned to where it shares it with other ranks, else -1.
  int own_shared_cpu() const {
    return boards_.shared_cpus ? boards_.pinned_cpu[static_cast<size_t>(ctx_.engine_rank(ctx_.rank()))] : -1;
  }

  // Where ranks share CPUs they are pinned to (more ranks than cores, each
  // bound: compare-openmpi's shm-np4, mpirun --bind-to core:overload-allowed),
  // a waiting rank gives up its CPU at every empty poll and the scheduler
  // runs the next rank pinned there. Two waits keep the CPU instead, each
  // for a bounded time (docs/performance.md, "Ranks that share a CPU"):
  //  - the lowest rank of a CPU, while every other rank pinned there is a
  //    member that has published its slot of this call: they have nothing
  //    to do until the call completes (a yield only has them poll and yield
  //    back), and the lowest rank, running when the call completes, leaves
  //    first: the root of a broadcast after a barrier, commonly rank 0,
  //    then publishes before the other ranks of its CPU look for it;
  //  - a broadcast non-root whose root is pinned to another CPU: the root
  //    never waits in a broadcast, so when it runs it publishes within a
  //    fraction of a microsecond, where a yield costs two context switches.
  // Returns how long to spin before the engine's wait; zero: not at all.
  std::chrono::microseconds keep_cpu_for(int awaited, bool awaiting_root) const {
    const int cpu = own_shared_cpu();
    if (cpu < 0) return {};
    if (lowest_with_the_others_of_its_cpu_in_this_call(cpu)) return kKeepCpuWhileOthersWait;
    const int root_cpu = boards_.pinned_cpu[static_cast<size_t>(ctx_.engine_rank(awaited))];
    return awaiting_root && root_cpu >= 0 && root_cpu != cpu ? kKeepCpuForRoot : std::chrono::microseconds{};
  }
  bool lowest_with_the_others_of_its_cpu_in_this_call(int cpu) const {
    const std::vector<int>& pinned = boards_.pinned_cpu;
    const int others = static_cast<int>(std::count(pinned.begin(), pinned.end(), cpu)) - 1;
    int in_this_call = 0;
    for (int rank = 0; rank < ctx_.size() && in_this_call < others; ++rank) {
      if (rank == ctx_.rank() || pinned[static_cast<size_t>(ctx_.engine_rank(rank))] != cpu) continue;
      if (rank < ctx_.rank()) return false;
      if (transport::board_sequence(slot(rank, sequence_)).load(std::memory_order_acquire) != sequence_) return false;
      ++in_this_call;
    }
    return others > 0 && in_this_call == others;  // fewer: some of them are not members
  }
  static constexpr std::chrono::microseconds kKeepCpuWhileOthersWait{50};
  static constexpr std::chrono::microseconds kKeepCpuForRoot{2};
  static constexpr int kSpinsPerClockRead = 64;

  static constexpr int kSpinsBeforeWait = 2000;  // a few microseconds
  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  bool stray_message() {
    if (ctx_.engine().unexpected_count() != 0) check_no_message_of_this_call();
    return false;
  }
  p2p::Waiting waiting_for(int rank, uint64_t sequence) const {
    return p2p::Waiting{ctx_.engine_rank(rank), concat("rank ", rank, " on the shared-memory board (", what_, " #",
                                                        sequence, " on context ", context_, ")")};
  }

  // A peer that runs this call with messages (its count crossed the board's
  // limit where ours did not, or it called the non-blocking collective)
  // would otherwise wait for ours forever: it gets an answer whose digest
  // differs from this call's (it may have the same: a non-blocking call
  // picks the board too, then runs by messages on its fiber), so its
  // engine refuses it naming us rather than taking it for data; and we
  // fail naming it.
  void check_no_message_of_this_call() {
    const p2p::Tag call = ctx_.call().base();
    auto stray = ctx_.engine().find_unexpected(
        [call](int, p2p::Tag tag) { return (tag & p2p::CallTag::kCallMask) == call; });
    if (!stray) return;
    const auto [source, tag] = *stray;
    ctx_.engine().isend(source, tag, nullptr, 0, ctx_.call_check() ^ 0x80000000u);  // reaped when the communicator fails
    int rank = 0;
    while (rank < ctx_.size() && ctx_.engine_rank(rank) != source) ++rank;
    fail_peer(Status::invalid_argument, source, "received from rank ", rank,
              " a message of a collective call with other arguments (", p2p::CallTag::describe(tag), ") while "
              "running ", what_, " on the shared-memory board: the ranks disagree on the collective, count, datatype, "
              "reduction op, root or algorithm, or that rank called the non-blocking collective where this one "
              "called the blocking one");
  }

  Context& ctx_;
  Boards& boards_;
  uint32_t context_;
  const char* what_;
  uint64_t sequence_ = 0;
  uint64_t slot_index_ = 0;  // sequence_ % kBoardSlotsPerContext
  int peers_read_ = 0;
};

void run_by_messages(Collective op, size_t bytes, Context& ctx, const Args& args) {
  select(op, bytes, ctx.size()).run(ctx, args);
}

}  // namespace

namespace {

// Called last by every board call that read a peer's slot: what that peer
// sent this rank before writing its slot is in the rings by now (its ring
// records precede its slot's release store), but nothing polled them; one
// poll hands them to the engine, so the communicator's check after the call
// finds a message the ranks' disagreement left behind in this call, not
// never (a board call whose peers were all there polls nothing otherwise).
void deliver_what_peers_sent(Context& ctx) { ctx.engine().progress(); }

// allreduce (every rank keeps the result) and reduce (the root alone): every
// rank publishes its contribution; the keepers reduce all in rank order.
void reduce_on_board(Collective op, Context& ctx, const Args& args, bool keeps_result) {
  const size_t bytes = args.count * element_size(args.dtype);
  Boards* boards = ctx.board_for(bytes);
  if (boards == nullptr) return run_by_messages(op, bytes, ctx, args);
  BoardCall call(ctx, *boards, to_string(op).data());
  call.publish(args.send, bytes);
  if (!keeps_result) return;
  // Rank order 0, 1, ..., n-1 on every rank, the first two in one pass.
  const uint8_t* first = call.contribution(0);
  if (ctx.size() == 1) {
    copy_bytes(args.recv, first, bytes);
  } else {
    reduce_into(args.recv, first, call.contribution(1), args.count, args.dtype, args.op);
  }
  for (int rank = 2; rank < ctx.size(); ++rank) {
    reduce_inplace(args.recv, call.contribution(rank), args.count, args.dtype, args.op);
  }
  deliver_what_peers_sent(ctx);
}

}  // namespace

void allreduce_board(Context& ctx, const Args& args) { reduce_on_board(Collective::allreduce, ctx, args, true); }

void reduce_board(Context& ctx, const Args& args) {
  reduce_on_board(Collective::reduce, ctx, args, ctx.rank() == args.root);
}

void broadcast_board(Context& ctx, const Args& args) {
  const size_t bytes = args.count * element_size(args.dtype);
  Boards* boards = ctx.board_for(bytes);
  if (boards == nullptr) return run_by_messages(Collective::broadcast, bytes, ctx, args);
  BoardCall call(ctx, *boards, "broadcast");
  const bool root = ctx.rank() == args.root;
  call.publish(args.recv, root ? bytes : 0);
  if (root) return;
  copy_bytes(args.recv, call.contribution(args.root, /*awaiting_root=*/true), bytes);
  deliver_what_peers_sent(ctx);
}

void barrier_board(Context& ctx, const Args&) {
  Boards* boards = ctx.board_for(0);
  if (boards == nullptr) return run_by_messages(Collective::barrier, 0, ctx, {});
  BoardCall call(ctx, *boards, "barrier");
  call.publish(nullptr, 0);
  for (int rank = 0; rank < ctx.size(); ++rank) call.contribution(rank);
  deliver_what_peers_sent(ctx);
}

}  // namespace chorus::coll
