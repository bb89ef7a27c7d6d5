// Collective algorithms over the P2P engine (docs/algorithms.md).
//
// Each algorithm lives in its own file (collectives/<op>_<name>.cc) with a
// comment block giving its steps, bytes on the wire and when it wins, and
// registers itself in the table in registry.cc. The communicator validates
// arguments (buffers, root, count) before calling an algorithm, handles
// count == 0 and size == 1, and picks the algorithm with select().
#pragma once

#include "common/error.hpp"
#include "common/fnv.hpp"
#include "p2p/engine.hpp"

#include <chorus/chorus.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::coll {

// Arguments of one collective call, as the user gave them (in-place already
// resolved: send == recv means in-place; for allgather in-place means
// send == recv + rank*count*elem, for gather (at the root) send == recv +
// root*count*elem, for gatherv/allgatherv send == recv + recv_displs[rank]*elem;
// for scatter (at the root) recv == send + root*count*elem, for scatterv
// recv == send + send_displs[root]*elem; for reduce_scatter recv may alias
// block `rank` of send; alltoallv in place uses the recv layout for both).
struct Args {
  const void* send = nullptr;
  void* recv = nullptr;
  // Elements: per rank for allgather/reduce_scatter/alltoall/gather/scatter;
  // this rank's own block for gatherv/allgatherv (sent) and scatterv
  // (received); unused by alltoallv.
  size_t count = 0;
  DataType dtype = DataType::uint8;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  // v-variants, one entry per rank, in elements (the communicator has
  // checked their lengths and filled omitted displacements): gatherv (root)
  // and allgatherv read recv_*, scatterv (root) send_*, alltoallv all four.
  std::span<const size_t> send_counts = {}, send_displs = {}, recv_counts = {}, recv_displs = {};
};

// Knobs algorithms read; defaults are the tuned values, env may override.
struct Tuning {
  size_t pipeline_chunk_bytes = 256 * 1024;  // ring/tree/chain segment size
};

// Grow-only scratch buffers owned by the communicator, reused across calls
// (fresh large mallocs cost an mmap + page faults every call).
class Scratch {
 public:
  // Returns at least `bytes` bytes for slot `slot` (0..3); contents undefined.
  void* get(int slot, size_t bytes);
  ~Scratch();
  // Keeps scratch registered while it lives (pinning transports cache only
  // memory whose release chorus sees). `engine` points at the owner's slot:
  // once the engine is gone (world finalized) there is nothing to tell.
  void track_with(const std::unique_ptr<p2p::Engine>* engine) { engine_ = engine; }
  void release_all();

 private:
  p2p::Engine* engine() const { return engine_ != nullptr ? engine_->get() : nullptr; }
  const std::unique_ptr<p2p::Engine>* engine_ = nullptr;
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  Buffer buffers_[4];
};

// Whether a call of `bytes` may run on the shared-memory board (board.cc),
// decided here alone (the communicator's choice and the board algorithms
// both ask): the ranks share memory (the transport has boards), the
// communicator's context has a board, the call waits where it is issued (a
// board call waits in call order, which concurrent non-blocking calls on
// fibers cannot promise), and `bytes` fit `limit` (CHORUS_BOARD_BYTES for
// the choice, a slot for the algorithm; 0: the board is off).
inline transport::Boards* usable_board(transport::Transport& transport, uint32_t context_id, size_t bytes, size_t limit,
                                       bool on_fiber) {
  if (limit == 0 || bytes > limit || bytes > transport::kBoardDataBytes || on_fiber ||
      context_id >= transport::kBoardContexts) {
    return nullptr;
  }
  return transport.boards();
}

// What an algorithm sees: ranks 0..size-1 of its communicator, tagged
// point-to-point, waits, scratch and tuning. Steps are distinct message
// tags inside one collective call (0..CallTag::kMaxStep: a larger step
// throws); messages with the same step between the same pair of ranks match
// in order.
class Context {
 public:
  // `call_check` is a digest of the call's arguments and algorithm; it rides
  // on every message so a rank whose call differs is told so, not fed data.
  // `on_fiber`: a non-blocking call's algorithm, whose waits suspend its
  // fiber (the engine does that: the algorithm waits the same way).
  Context(p2p::Engine& engine, std::span<const int> engine_ranks, int rank, p2p::CallTag call, Scratch& scratch,
          const Tuning& tuning, uint32_t call_check = 0, bool on_fiber = false)
      : engine_(engine), engine_ranks_(engine_ranks), rank_(rank), call_(call), scratch_(scratch), tuning_(tuning),
        call_check_(call_check), on_fiber_(on_fiber) {}

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(engine_ranks_.size()); }
  const Tuning& tuning() const { return tuning_; }
  void* scratch(int slot, size_t bytes) { return scratch_.get(slot, bytes); }

  p2p::Request isend(int to, uint32_t step, const void* buf, size_t bytes) {
    return engine_.isend(engine_ranks_[static_cast<size_t>(to)], tag(step), buf, bytes, call_check_);
  }
  p2p::Request irecv(int from, uint32_t step, void* buf, size_t bytes) {
    return engine_.irecv(engine_ranks_[static_cast<size_t>(from)], tag(step), buf, bytes, p2p::kExactTag,
                         p2p::CallCheck{call_check_, p2p::CallTag::kCallMask});
  }
  void wait(p2p::Request& request) { engine_.wait(request); }
  void wait_all(std::span<p2p::Request> requests) { engine_.wait_all(requests); }
  // The board algorithms (board.cc): this call's board, or nullptr (see
  // usable_board).
  transport::Boards* board_for(size_t bytes) const {
    if (part_of_call_) return nullptr;  // the board serves the whole communicator, not a subset
    return usable_board(engine_.transport(), context_id(), bytes, transport::kBoardDataBytes, on_fiber_);
  }

  // The host layout (hierarchical.cc): the host of every engine rank, as
  // indices 0..hosts-1; empty when not known (then one host).
  void set_hosts(std::span<const int> host_of_engine_rank) { hosts_ = host_of_engine_rank; }
  int host_of(int rank) const {
    return hosts_.empty() ? 0 : hosts_[static_cast<size_t>(engine_ranks_[static_cast<size_t>(rank)])];
  }
  // A part of this call among some of its ranks (`engine_ranks`, this rank
  // being `rank` of them), for an algorithm made of others: its steps start
  // at `first_step`, so its messages never match another part's between the
  // same two ranks, and it never uses the board.
  Context part(std::span<const int> engine_ranks, int rank, uint32_t first_step) const {
    Context sub(engine_, engine_ranks, rank, call_, scratch_, tuning_, call_check_, on_fiber_);
    sub.hosts_ = hosts_;
    sub.first_step_ = first_step_ + first_step;
    sub.part_of_call_ = true;
    return sub;
  }
  uint32_t context_id() const { return p2p::CallTag::context_of(call_.base()); }
  p2p::CallTag call() const { return call_; }
  uint32_t call_check() const { return call_check_; }
  int engine_rank(int rank) const { return engine_ranks_[static_cast<size_t>(rank)]; }
  p2p::Engine& engine() { return engine_; }

  // Blocking exchange: send to `to` and receive from `from` concurrently.
  void sendrecv(int to, const void* send, size_t send_bytes, int from, void* recv, size_t recv_bytes,
                uint32_t step) {
    p2p::Request requests[2] = {irecv(from, step, recv, recv_bytes), isend(to, step, send, send_bytes)};
    wait_all(requests);
  }

 private:
  p2p::Tag tag(uint32_t step) const { return call_.step(first_step_ + step); }

  p2p::Engine& engine_;
  std::span<const int> engine_ranks_;
  int rank_;
  p2p::CallTag call_;
  Scratch& scratch_;
  const Tuning& tuning_;
  uint32_t call_check_;
  bool on_fiber_;
  std::span<const int> hosts_;
  uint32_t first_step_ = 0;
  bool part_of_call_ = false;
};

using AlgorithmFn = void (*)(Context& ctx, const Args& args);

struct Algorithm {
  std::string_view name;  // e.g. "ring", "tree", "recursive_doubling"
  Collective op;
  AlgorithmFn run;
  uint64_t hash = fnv1a::hash(name);  // for call digests; constexpr: the table's at compile time
};

// Every algorithm for `op`, in table order.
std::vector<const Algorithm*> algorithms(Collective op);
// The algorithm named `name` for `op`, or nullptr.
const Algorithm* find(Collective op, std::string_view name);
// The built-in table (op, bytes of the whole payload, ranks) -> algorithm.
const Algorithm& select(Collective op, size_t bytes, int ranks);
// Ranks on several hosts, several on some: allreduces of at least this many
// bytes take the multi-leader form of the hierarchical allreduce (every
// local rank carries a slice across the network), smaller ones the leader
// form; the same crossover as the flat table's tree to ring.
constexpr size_t kMultiLeaderAllreduceFrom = 256 * 1024;
// Human-readable table for chorus_info (CHORUS_SELECT_RULES' rules first).
std::string describe_selection_table();

// A rule the user puts before the built-in table (CHORUS_SELECT_RULES,
// docs/algorithms.md "Selection table"): payload bytes [min_bytes,
// max_bytes), ranks [min_ranks, max_ranks].
struct SelectionRule {
  Collective op;
  size_t min_bytes = 0;
  size_t max_bytes = SIZE_MAX;
  int min_ranks = 1;
  int max_ranks = 1 << 30;
  const Algorithm* algorithm = nullptr;
};
// Parses "OP:BYTES:RANKS=ALGORITHM[,...]" (BYTES "MIN-MAX" with K/M/G,
// either end open, or "*"; RANKS "N", "N-M", "N-" or "*"). A malformed rule
// fails with Status::config naming it and what was expected.
std::vector<SelectionRule> parse_selection_rules(std::string_view text);
// CHORUS_SELECT_RULES, parsed once per process (select() consults them
// first). Communicator::init calls it so that a bad value fails there.
const std::vector<SelectionRule>& selection_rules();

// One rank alone: what gather..exscan leave in the receive buffer (local
// copies only; the communicator calls this instead of an algorithm).
void run_alone(Collective op, const Args& args);

}  // namespace chorus::coll
