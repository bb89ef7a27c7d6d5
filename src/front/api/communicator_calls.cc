// The call path of a collective and of blocking point-to-point: validate,
// choose the algorithm, the call check (digest, CHORUS_CHECK_CALLS, stray
// messages), execute; send and recv.
#include "api/communicator_impl.hpp"

#include "api/block_collectives.hpp"
#include "api/user_tag.hpp"
#include "common/error.hpp"
#include "common/fnv.hpp"
#include "common/copy.hpp"

#include <algorithm>
#include <cstring>

namespace chorus {

namespace {

bool is_reduction(Collective op) {
  return op == Collective::allreduce || op == Collective::reduce || op == Collective::reduce_scatter ||
         op == Collective::scan || op == Collective::exscan;
}

bool has_root(Collective op) {
  return op == Collective::broadcast || op == Collective::reduce || op == Collective::gather ||
         op == Collective::gatherv || op == Collective::scatter || op == Collective::scatterv;
}

// FNV-1a (64-bit) over the fields every rank must pass alike, a word per
// field, the algorithm by its precomputed name hash (this runs on every call:
// small collectives take a few hundred nanoseconds); 0 is reserved for "not a
// collective".
uint32_t call_digest(Collective op, const coll::Args& args, const coll::Algorithm& algorithm) {
  uint64_t hash = fnv1a::kOffsetBasis;
  auto mix = [&](uint64_t value) { hash = fnv1a::mix(hash, value); };
  mix(static_cast<uint64_t>(op));
  mix(agreed_count(op, args).value_or(0));  // v-variants: counts differ per rank
  mix(static_cast<uint64_t>(args.dtype));
  mix(is_reduction(op) ? static_cast<uint64_t>(args.op) : 0);
  mix(has_root(op) ? static_cast<uint64_t>(args.root) : 0);
  mix(algorithm.hash);
  const auto folded = static_cast<uint32_t>(hash ^ (hash >> 32));
  return folded == 0 ? 1 : folded;
}

}  // namespace

std::string describe_call(Collective op, const coll::Args& args, std::string_view algorithm, bool nonblocking) {
  const std::string_view i = nonblocking ? "i" : "";
  if (op == Collective::barrier) return concat(i, "barrier() with algorithm ", algorithm);
  return concat(i, to_string(op), "(count ", args.count, " of ", to_string(args.dtype),
                is_reduction(op) ? concat(", op ", to_string(args.op)) : std::string(),
                has_root(op) ? concat(", root ", args.root) : std::string(), ") with algorithm ", algorithm);
}

// One rank's call as CHORUS_CHECK_CALLS compares it (fixed layout: it is
// allgathered as bytes).
struct CallRecord {
  int32_t op, dtype, reduce_op, root;
  uint64_t count;
  int32_t algorithm;  // index in coll::algorithms(op)
  int32_t nonblocking;
  bool operator==(const CallRecord&) const = default;
};

namespace {

CallRecord record_of(Collective op, const coll::Args& args, const coll::Algorithm& algorithm, bool nonblocking) {
  const auto all = coll::algorithms(op);
  const auto index = std::find(all.begin(), all.end(), &algorithm) - all.begin();
  return {static_cast<int32_t>(op), static_cast<int32_t>(args.dtype), is_reduction(op) ? static_cast<int32_t>(args.op) : 0,
          has_root(op) ? args.root : 0, agreed_count(op, args).value_or(0), static_cast<int32_t>(index),
          nonblocking ? 1 : 0};
}

std::string describe_record(const CallRecord& r) {
  const auto op = static_cast<Collective>(r.op);
  const auto all = coll::algorithms(op);
  const std::string_view algorithm =
      r.algorithm >= 0 && static_cast<size_t>(r.algorithm) < all.size() ? all[static_cast<size_t>(r.algorithm)]->name : "?";
  coll::Args args{nullptr, nullptr, r.count, static_cast<DataType>(r.dtype), static_cast<ReduceOp>(r.reduce_op), r.root};
  return describe_call(op, args, algorithm, r.nonblocking != 0);
}

}  // namespace

size_t payload_bytes(Collective op, const coll::Args& args, int size) {
  if (is_block_collective(op)) return block_collective_elements(op, args, size) * element_size(args.dtype);
  size_t bytes = args.count * element_size(args.dtype);
  switch (op) {
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::alltoall:
      return bytes * static_cast<size_t>(size);
    case Collective::barrier:
      return 0;
    default:
      return bytes;
  }
}

const CommunicatorImpl::Shape& CommunicatorImpl::validated_shape(Collective op, const coll::Args& args) {
  Shape& last = last_shape_[static_cast<size_t>(op)];
  if (!last.repeated_by(args)) {
    validate_shape(op, args);
    if (is_block_collective(op)) {
      // Its count arrays are part of its shape: checked, chosen and digested every call.
      try {
        validate_block_collective(op, args, rank(), size());
      } catch (const Error& e) {
        fail_everywhere(op, args, e);  // this rank's buffers and counts: the others are in the call
      }
      block_shape_ = make_shape(op, args);
      return block_shape_;
    }
    last = make_shape(op, args);
  }
  if ((last.send_needed && args.send == nullptr) || (last.recv_needed && args.recv == nullptr)) {
    report_null_buffer(op, args);
  }
  return last;
}

CommunicatorImpl::Shape CommunicatorImpl::make_shape(Collective op, const coll::Args& args) const {
  const coll::Algorithm& algorithm = choose(op, payload_bytes(op, args, size()));
  Shape shape{args.count, args.dtype, args.op, args.root, &algorithm, call_digest(op, args, algorithm)};
  if (is_block_collective(op)) return shape;  // validate_block_collective checks their buffers
  const bool moves_data = op != Collective::barrier && args.count != 0;
  shape.send_needed = moves_data && op != Collective::broadcast;
  shape.recv_needed = moves_data && (op != Collective::reduce || rank() == args.root);
  shape.plain = !session_->settings.check_calls && (moves_data || op == Collective::barrier);
  return shape;
}

void CommunicatorImpl::validate_shape(Collective op, const coll::Args& args) const {
  const std::string_view name = collective_name(op);
  if (static_cast<unsigned>(args.dtype) >= static_cast<unsigned>(kNumDataTypes)) {
    fail(Status::invalid_argument, name, ": invalid datatype value ", static_cast<int>(args.dtype));
  }
  if (is_reduction(op) && static_cast<unsigned>(args.op) >= static_cast<unsigned>(kNumReduceOps)) {
    fail(Status::invalid_argument, name, ": invalid reduction op value ", static_cast<int>(args.op));
  }
  if (has_root(op) && (args.root < 0 || args.root >= size())) {
    fail(Status::invalid_argument, name, ": root ", args.root, " is not a rank of this communicator (0..", size() - 1,
         ")");
  }
  const size_t elem = element_size(args.dtype);
  const size_t ranks = static_cast<size_t>(size());
  // count * elem * ranks > 2^60, by a multiplication: two divisions here
  // cost a small call tens of nanoseconds.
  size_t total = 0;
  if (__builtin_mul_overflow(args.count, elem * ranks, &total) || total > kMaxCallBytes) {
    fail(Status::invalid_argument, name, ": count ", args.count, " of ", to_string(args.dtype), " on ", ranks,
         " ranks overflows the largest payload chorus accepts (2^60 bytes in all)");
  }
}

void CommunicatorImpl::report_null_buffer(Collective op, const coll::Args& args) {
  const bool send = args.send == nullptr && op != Collective::broadcast;
  const char* role = send ? "send " : op == Collective::broadcast ? "" : "receive ";
  fail_everywhere(op, args,
                  Error(Status::invalid_argument,
                        concat(collective_name(op), ": null ", role, "buffer with count ", args.count)));
}

// A bad buffer or count array is this rank's alone: the other ranks may
// already be inside the call, waiting for this rank's messages or sending
// it theirs (a gather's root). Failing here alone would leave them waiting
// out CHORUS_TIMEOUT, or complete their side and leave messages that a later
// call of this rank would find. So the call fails on every rank: this
// rank's communicator becomes unusable and its departure, with this error,
// is announced, so each other rank fails within about a second where it
// waits for this rank (docs/errors.md, "Bad arguments"). Alone, nobody waits.
void CommunicatorImpl::refuse_collective(Collective op, int root, const Error& cause) {
  std::lock_guard lock(session_->mutex);
  check_usable();
  fail_everywhere(op, {nullptr, nullptr, 0, DataType::uint8, ReduceOp::sum, root}, cause);
}

void CommunicatorImpl::fail_everywhere(Collective op, const coll::Args& args, const Error& cause) {
  if (size() == 1) throw cause;
  ++*calls_made_;  // the call this rank fails in: the others in it are told
  const bool root = has_root(op) && args.root == rank_;
  const std::string_view name = collective_name(op);
  std::string_view what = cause.what();
  if (what.starts_with(name) && what.substr(name.size()).starts_with(": ")) what.remove_prefix(name.size() + 2);
  const Error& error = become_unusable(
      Error(cause.status(), concat(name, " on rank ", rank_, root ? " (the root)" : "", " failed: ", what,
                                   "; the other ranks cannot complete this call without this rank's part, so it "
                                   "fails on every rank and the communicator is unusable")));
  session_->announce_departure(error.what(), true);
  session_->note_reported(error);
  throw error;
}

// The host layout and the engine's byte counts (docs/transport-hybrid.md).
int CommunicatorImpl::host() const {
  const auto& hosts = session_->host_of_engine_rank;
  const auto me = static_cast<size_t>(session_->job.rank);
  return me < hosts.size() ? hosts[me] : 0;
}

Traffic CommunicatorImpl::traffic() const {
  std::lock_guard lock(session_->mutex);
  if (!session_->engine) return {};
  const p2p::Counters& counted = session_->engine->counters();
  return {counted.bytes_out_this_host, counted.bytes_in_this_host, counted.bytes_out_other_hosts,
          counted.bytes_in_other_hosts};
}

const coll::Algorithm& CommunicatorImpl::choose(Collective op, size_t bytes) const {
  const coll::Algorithm* forced = forced_[static_cast<size_t>(op)];
  if (forced != nullptr) return *forced;
  Choice& last = last_choice_[static_cast<size_t>(op)];
  if (last.bytes == bytes && last.algorithm != nullptr) return *last.algorithm;
  last = Choice{bytes, &choose_from_table(op, bytes)};
  return *last.algorithm;
}

const coll::Algorithm& CommunicatorImpl::choose_from_table(Collective op, size_t bytes) const {
  // Where the ranks share memory, small calls run on the board (board.cc).
  if (coll::usable_board(*session_->transport, context_id_, bytes, session_->settings.board_bytes,
                         /*on_fiber=*/false) != nullptr) {
    static const std::array<const coll::Algorithm*, kNumCollectives> boards = [] {
      std::array<const coll::Algorithm*, kNumCollectives> table{};
      for (int o = 0; o < kNumCollectives; ++o) table[static_cast<size_t>(o)] = coll::find(static_cast<Collective>(o), "board");
      return table;
    }();
    if (const coll::Algorithm* board = boards[static_cast<size_t>(op)]) return *board;
  }
  // Ranks on several hosts, several on some: inside a host over shared
  // memory, one rank per host across the network.
  if (spans_shared_hosts_) {
    static const std::array<const coll::Algorithm*, kNumCollectives> hierarchical = [] {
      std::array<const coll::Algorithm*, kNumCollectives> table{};
      for (int o = 0; o < kNumCollectives; ++o) {
        table[static_cast<size_t>(o)] = coll::find(static_cast<Collective>(o), "hierarchical");
      }
      return table;
    }();
    // Large allreduces: every local rank carries a slice across the network
    // (the leader form funnels the whole vector through one rank per host).
    static const coll::Algorithm* multi_leader = coll::find(Collective::allreduce, "multi_leader");
    if (op == Collective::allreduce && bytes >= coll::kMultiLeaderAllreduceFrom && multi_leader != nullptr) {
      return *multi_leader;
    }
    if (const coll::Algorithm* algorithm = hierarchical[static_cast<size_t>(op)]) return *algorithm;
  }
  return coll::select(op, bytes, size());
}

void CommunicatorImpl::run_single_rank(Collective op, const coll::Args& args) {
  if (is_block_collective(op)) return coll::run_alone(op, args);
  const size_t bytes = payload_bytes(op, args, 1);
  if (bytes == 0 || op == Collective::barrier || op == Collective::broadcast || args.send == args.recv || args.recv == nullptr) return;
  move_bytes(args.recv, args.send, bytes);
}

void CommunicatorImpl::run(Collective op, const coll::Args& args) {
  CallScope scope(*this, collective_name(op).data());
  std::lock_guard lock(session_->mutex);
  check_usable();
  run_locked(op, args);
}

void CommunicatorImpl::run_locked(Collective op, const coll::Args& user_args) {
  const Shape& shape = validated_shape(op, user_args);
  note_collective(op, collective_name(op), shape, /*nonblocking=*/false);
  if (size() == 1) return run_single_rank(op, user_args);
  // Most calls need nothing of prepare() but the shape's algorithm and
  // digest and one sequence number (the one prepare() would take): no copy
  // of the arguments into a PreparedCall, no optional fields.
  if (shape.plain && (op != Collective::reduce || user_args.recv != nullptr)) {
    return run_algorithm(op, *shape.algorithm, user_args, p2p::CallTag::collective(context_id_, sequence_++),
                         shape.digest, scratch_, /*on_fiber=*/false);
  }
  execute(prepare(op, user_args, shape, scratch_), scratch_, /*on_fiber=*/false);
}

PreparedCall CommunicatorImpl::prepare(Collective op, const coll::Args& user_args, const Shape& shape,
                                       coll::Scratch& scratch) {
  PreparedCall prepared;
  prepared.op = op;
  prepared.algorithm = shape.algorithm;
  // Before the count == 0 shortcut: a rank passing 0 where others do not is a mismatch too.
  if (session_->settings.check_calls) prepared.check_call = p2p::CallTag::collective(context_id_, sequence_++);
  prepared.args = user_args;
  // gatherv/scatterv/alltoallv run with per-rank counts (some ranks may pass 0).
  const std::optional<uint64_t> count = agreed_count(op, user_args);
  if (op != Collective::barrier && count && *count == 0) return prepared;
  if (op == Collective::reduce && prepared.args.recv == nullptr) {
    // MPI lets non-roots pass no receive buffer; algorithms may still use one.
    prepared.args.recv = scratch.get(3, prepared.args.count * element_size(prepared.args.dtype));
  }
  prepared.call = p2p::CallTag::collective(context_id_, sequence_++);
  prepared.digest = shape.digest;
  return prepared;
}

void CommunicatorImpl::execute(const PreparedCall& call, coll::Scratch& scratch, bool on_fiber) {
  const char* name = collective_name(call.op).data();
  const coll::Algorithm& algorithm = *call.algorithm;
  if (call.check_call) {
    guarded(name, [&] {
      verify_same_call(record_of(call.op, call.args, algorithm, call.nonblocking), *call.check_call, scratch, on_fiber);
    }, /*to_caller=*/!on_fiber);
  }
  if (!call.call) return;
  run_algorithm(call.op, algorithm, call.args, *call.call, call.digest, scratch, on_fiber);
}

void CommunicatorImpl::run_algorithm(Collective op, const coll::Algorithm& algorithm, const coll::Args& args,
                                     p2p::CallTag call, uint32_t digest, coll::Scratch& scratch,
                                     bool on_fiber) {
  const char* name = on_fiber ? nonblocking_name(op) : collective_name(op).data();
  coll::Context context(*session_->engine, engine_ranks_, rank(), call, scratch, tuning_, digest, on_fiber);
  context.set_hosts(session_->host_of_engine_rank);
  try {
    guarded(name, [&] {
      try {
        algorithm.run(context, args);
        check_no_stray_messages(call, on_fiber);
      } catch (const Error& e) {
        // The engine saw another call's digest, a board slot another call's,
        // or a message of another call was left: name both calls.
        // (Not finalize cancelling the operation: the session is closed then.)
        if (e.status() == Status::invalid_argument && !session_->closed) {
          throw name_disagreement(e, op, args, algorithm, on_fiber);
        }
        // Another call's size: say what this rank called.
        if (e.status() == Status::truncated) {
          throw Error(e.status(), concat(e.what(), "; this rank called ", describe_call(op, args, algorithm.name, on_fiber)),
                      e.peer());
        }
        // A peer that found a disagreement may have left before this rank's
        // probe read it: its record names the cause, not its exit.
        if (e.status() == Status::timeout || e.status() == Status::peer_failed || e.status() == Status::transport) {
          if (std::optional<Error> disagreement = session_->known_disagreement(ledger_id_)) {
            throw Error(Status::invalid_argument, concat(e.what(), "; ", disagreement->what()), disagreement->peer());
          }
        }
        throw;
      }
    }, /*to_caller=*/!on_fiber);
  } catch (const Error& e) {
    // Ranks that disagree on a call: the others may wait for this rank in
    // it, or be past it already. Say so in the store (name_disagreement
    // recorded the disagreement itself; this says that this rank left).
    if ((e.status() == Status::invalid_argument || e.status() == Status::truncated) && !session_->closed) {
      session_->announce_departure(e.what(), true);
    }
    throw;
  }
}

// A message of this call still unreceived when the call is complete, or of
// an earlier call of this communicator that completed without it, was sent
// by a rank that called something else (another root, collective or count):
// an error naming that rank, never a message left behind for ever.
void CommunicatorImpl::check_no_stray_messages(p2p::CallTag call, bool nonblocking) {
  p2p::Engine& engine = *session_->engine;
  if (engine.unexpected_count() == 0) return;
  const uint32_t context = context_id_, sequence = p2p::CallTag::sequence_of(call.base());
  // With non-blocking calls of this communicator outstanding, earlier calls
  // may still be waiting for their messages: only this call's count then.
  const bool earlier_done = !nonblocking && outstanding_operations_ == 0;
  const auto stray = engine.find_unexpected([&](int, p2p::Tag tag) {
    if (p2p::CallTag::is_point_to_point(tag) || p2p::CallTag::context_of(tag) != context) return false;
    const uint32_t behind = sequence - p2p::CallTag::sequence_of(tag);  // wraps with the sequence
    return behind == 0 || (earlier_done && behind < (1u << 31));
  });
  if (!stray) return;
  const int source = rank_of_engine_rank_[static_cast<size_t>(stray->first)];
  fail_peer(Status::invalid_argument, source, "rank ", rank_, " completed ",
            p2p::CallTag::sequence_of(stray->second) == sequence ? "this call" : "an earlier call",
            " without a message rank ", source, " sent for it (", p2p::CallTag::describe(stray->second),
            "): the ranks disagree on the collective, its root or its count");
}

// CHORUS_CHECK_CALLS: every rank learns every rank's call, so all of them
// fail together, naming the ranks that differ, before any data moves.
void CommunicatorImpl::verify_same_call(const CallRecord& mine, p2p::CallTag call, coll::Scratch& scratch,
                                        bool on_fiber) {
  std::vector<CallRecord> everyone(static_cast<size_t>(size()));
  coll::Context context(*session_->engine, engine_ranks_, rank(), call, scratch, tuning_, 0, on_fiber);
  coll::algorithms(Collective::allgather).front()->run(
      context, {&mine, everyone.data(), sizeof(CallRecord), DataType::uint8, ReduceOp::sum, 0});
  std::string differences;
  for (int r = 0; r < size(); ++r) {
    const CallRecord& theirs = everyone[static_cast<size_t>(r)];
    if (theirs == mine) continue;
    differences += concat(differences.empty() ? "" : "; ", "rank ", r, " called ", describe_record(theirs));
  }
  if (!differences.empty()) {
    fail(Status::invalid_argument, "the ranks' calls differ (CHORUS_CHECK_CALLS=1): rank ", rank_, " (this rank) called ",
         describe_record(mine), "; ", differences);
  }
}

void CommunicatorImpl::send(const void* buf, size_t bytes, int peer, int tag) {
  std::lock_guard lock(session_->mutex);
  const int engine_peer = begin_send("send", buf, bytes, peer, tag);
  guarded("send", [&] {
    auto request = session_->engine->isend(engine_peer, p2p::CallTag::point_to_point(context_id_, tag), buf, bytes);
    session_->engine->wait(request);
  });
}

Received CommunicatorImpl::recv(void* buf, size_t bytes, int peer, int tag) {
  std::lock_guard lock(session_->mutex);
  check_usable();
  chorus::check_user_tag("recv", tag, true);
  check_message("recv", buf, bytes);
  const int engine_peer = peer == kAnySource ? p2p::kAnySource : engine_rank_of(peer, "recv");
  note_call(0, "recv", engine_peer);
  const p2p::Tag mask = tag == kAnyTag ? p2p::CallTag::kAnyUserTagMask : p2p::kExactTag;
  p2p::Completion done;
  std::optional<Error> truncated;
  guarded("recv", [&] {
    try {
      auto request = session_->engine->irecv(engine_peer, p2p::CallTag::point_to_point(context_id_, tag == kAnyTag ? 0 : tag), buf, bytes,
                                             mask);
      done = session_->engine->wait(request);
    } catch (const Error& e) {
      // A message larger than the buffer is the receiver's mistake: the
      // sender completed normally and the engine is consistent, so the
      // communicator stays usable (not sticky).
      if (e.status() != Status::truncated) throw;
      truncated = Error(e.status(), concat("recv on rank ", rank_, ": ", e.what()), e.peer());
    }
  });
  if (truncated) throw *truncated;
  const int source = rank_of_engine_rank_[static_cast<size_t>(done.source)];
  if (source < 0) {
    fail(Status::internal, "recv: a message from engine rank ", done.source, " matched context ", context_id_,
         " but that rank is not a member of this communicator");
  }
  return Received{source, p2p::CallTag::user_tag_of(done.tag), done.bytes};
}

}  // namespace chorus
