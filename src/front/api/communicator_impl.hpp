// The communicator behind chorus::Communicator and the C API: validates every
// call, picks the algorithm and turns the first failure into a sticky error
// (after a failed collective the ranks disagree on what was exchanged, so
// every later call fails too, as NCCL does after an async error).
//
// The world communicator (init) owns a Session: the bootstrap, transport and
// P2P engine of this process. Communicators made by split()/dup() share it
// and differ only in their member list (communicator rank -> engine rank),
// their call sequence and their context id, which is part of every tag they
// use, so their messages never match another communicator's.
#pragma once

#include "api/user_tag.hpp"
#include "bootstrap/departures.hpp"
#include "bootstrap/store.hpp"
#include "collectives/collectives.hpp"
#include "common/config.hpp"
#include "p2p/progress.hpp"
#include "p2p/engine.hpp"
#include "topology/placement.hpp"
#include "transports/transport.hpp"
#include "common/error.hpp"
#include "common/recycling_allocator.hpp"

#include <chorus/chorus.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <vector>
#include <memory>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace chorus {

// Context id 0 is the world communicator; 1..kMaxContextId are handed out by
// split/dup (the tag's context bits, p2p::CallTag).
inline constexpr uint32_t kMaxContextId = p2p::CallTag::kMaxContext;

// The same-host peers of a job joined over a caller's store, watched through
// /proc (local_liveness.cc): nobody else reports a peer that was killed.
class LocalLiveness {
 public:
  // This process as the others look it up: "<pid namespace>|<pid>|<start time>".
  static std::string describe_self();
  // From every rank's describe_self() and host name.
  LocalLiveness(const std::vector<bootstrap::Bytes>& descriptions, const std::vector<bootstrap::Bytes>& hosts, int self);
  // Error(Status::peer_failed) naming the first watched peer that is gone.
  std::optional<Error> dead_peer() const;

 private:
  struct Peer {
    int rank;
    long pid;
    uint64_t start_time;
  };
  std::vector<Peer> peers_;
};

// One collective call of this process, as the ranks compare their calls
// through the store when they disagree (call_ledger.cc).
struct LedgerEntry {
  uint64_t communicator = 0;  // CommunicatorImpl::ledger_id_: its context id and members
  uint64_t calls = 0;         // the call's number on it (Session::calls_made); 0: none
  uint64_t count = 0;
  const coll::Algorithm* algorithm = nullptr;
  uint32_t digest = 0;  // what its messages and board slots carry
  int32_t root = 0;
  int32_t rank = 0;  // this process' rank in the communicator
  Collective op{};
  DataType dtype{};
  ReduceOp redop{};
  bool nonblocking = false;
};

// The last few collective calls of this process, on any communicator. A
// rank writes one entry per call (a few stores: the whole cost of this on
// the call path) and reads them only when a wait stalls or it found that a
// peer made another call: it then publishes them in the store and compares
// them with the other ranks' (docs/errors.md, "How every rank learns of a
// disagreement").
struct CallLedger {
  static constexpr uint64_t kKept = 4;  // a power of two
  std::array<LedgerEntry, kKept> entries{};
  uint64_t next = 0;       // entries written so far
  uint64_t published = 0;  // of them, published in the store
  // Published entries another rank's record of the same call has not yet
  // been compared with (it was not there yet).
  std::vector<LedgerEntry> pending;
  // Disagreements learned, per communicator (the first one each).
  std::vector<std::pair<uint64_t, Error>> mismatches;
  LedgerEntry& add() { return entries[next++ & (kKept - 1)]; }
};

// One process' place in the job and its connections, shared by the world
// communicator and every communicator split or duplicated from it. One
// thread drives the engine at a time: every call on any of these
// communicators, and the progress thread, holds `mutex`.
struct Session {
  config::Settings settings;
  bootstrap::JobInfo job;
  std::unique_ptr<bootstrap::Bootstrap> bootstrap;
  std::unique_ptr<transport::Transport> transport;
  std::unique_ptr<p2p::Engine> engine;
  // The host layout: each engine rank's host, 0..hosts-1 in the order of
  // their lowest rank (the hierarchical collectives, transports/hybrid).
  std::vector<int> host_of_engine_rank;
  uint32_t next_context_id = 1;            // lowest id this process has not used
  bool closed = false;                     // the world communicator was finalized
  p2p::DriverMutex mutex;
  std::vector<unsigned> progress_cpus;  // where placement puts the progress thread (empty: not bound)
  std::optional<LocalLiveness> local_liveness;  // no chorusrun: same-host peers to watch
  // Collective calls made per communicator context, and the call in
  // progress: what a rank that left is compared with (departures.hpp).
  std::unordered_map<uint32_t, uint64_t> calls_made;
  bootstrap::CurrentCall current_call;
  // Non-blocking operations that failed. Finalize reports those whose error
  // reached the application neither by a wait or test
  // (Operation::error_reported) nor by a call that failed with it or with
  // what caused it (`reported_failures`: the texts of the communicators'
  // failures that calls have thrown): a detached request's error is
  // reported somewhere, and the echo of a failure already reported is not.
  std::vector<p2p::OperationRef> failed_operations;
  std::vector<std::string> reported_failures;
  // Progress' failure note (enable_operations): every operation that failed.
  void note_failure(const p2p::OperationRef& operation) { failed_operations.push_back(operation); }
  void note_reported(const Error& error) {
    if (std::find(reported_failures.begin(), reported_failures.end(), error.what()) == reported_failures.end()) {
      reported_failures.emplace_back(error.what());
    }
  }
  CallLedger ledger;
  std::chrono::steady_clock::time_point next_departure_probe{};
  // What the engine had received at the last probe, and when that last
  // changed: under PMIx a wait that still receives does not open the store.
  uint64_t received_at_probe = 0;
  std::chrono::steady_clock::time_point received_changed{};
  // Whether the engine has received nothing for a while (departure_probe.cc).
  bool receiving_stopped(std::chrono::steady_clock::time_point now);

  std::optional<Error> launcher_failure();
  // The engine's failure probe: ranks whose calls differ (when `stalled`:
  // call_ledger.cc), chorusrun's record, or a rank that left without
  // joining the call in progress (departure_probe.cc). The last two are
  // asked at most about once a second.
  std::optional<Error> peer_failure(bool stalled);
  // Publishes the ledger's new entries in the store and compares them with
  // the first other rank's record of the same call; reads the disagreements
  // found for the ledger's communicators. The first disagreement, as
  // Error(invalid_argument) naming both calls and ranks; nullopt if none
  // (or the store does not answer).
  std::optional<Error> compare_calls();
  // compare_calls() until it finds a disagreement or `deadline` passes.
  std::optional<Error> await_disagreement(std::chrono::steady_clock::time_point deadline);
  // The disagreement recorded for `communicator`, asking the store.
  std::optional<Error> known_disagreement(uint64_t communicator);
  // Records `error` as `communicator`'s disagreement unless one is known.
  void record_disagreement(uint64_t communicator, const Error& error);
  // Tells the other ranks this one is gone; failures are only logged.
  // `cause`: the peer a failure came from (Departure::cause), or -1.
  void announce_departure(const std::string& how, bool failed, int cause = -1) noexcept;
  // The engine's progress, its non-blocking operations enabled with the
  // first of them (under `mutex`). Inline: every isend and irecv asks.
  p2p::Progress& nonblocking() {
    p2p::Progress& progress = engine->progress_engine();
    if (!progress.operations_enabled()) [[unlikely]] enable_operations(progress);
    return progress;
  }
  void enable_operations(p2p::Progress& progress);
  // The engine's progress once a non-blocking operation was started, else
  // nullptr (nothing outstanding to move along, complete or stop).
  p2p::Progress* operations();
};

// What a Request holds: the operation itself, with the session that
// advances it. One object, so a request is one allocation (recycled) and
// one reference count (in the object: p2p::Ref), not two. The session is
// not owned: a request reads it only while its operation is not complete,
// and no session goes before its operations complete (every communicator's
// finalize, which its destructor runs, completes or cancels its own; the
// world's, all). An owning pointer cost every request two locked
// instructions (taking and dropping the session's reference;
// docs/performance.md).
struct RequestState final : p2p::Operation {
  template <class... OnComplete>
  RequestState(Session* owner, const char* what, OnComplete&&... complete)
      : p2p::Operation(what, std::forward<OnComplete>(complete)...), session(owner) {}
  Session* session;
};
static_assert(sizeof(RequestState) <= 192, "a request's state is three cache lines (docs/performance.md)");
using RequestRef = p2p::Ref<RequestState>;
// A request's state, recycled (common/recycling_allocator.hpp), with its
// on_complete if one is given; its last reference gives it back.
template <class... OnComplete>
RequestRef make_request_state(Session& session, const char* what, OnComplete&&... complete) {
  RecyclingAllocator<RequestState> allocator;
  RequestState* memory = allocator.allocate(1);
  RequestState* state;
  try {
    state = ::new (static_cast<void*>(memory)) RequestState(&session, what, std::forward<OnComplete>(complete)...);
  } catch (...) {
    allocator.deallocate(memory, 1);
    throw;
  }
  state->destroy = [](p2p::Operation* done) {
    auto* freed = static_cast<RequestState*>(done);
    freed->~RequestState();
    RecyclingAllocator<RequestState>().deallocate(freed, 1);
  };
  return RequestRef::adopt(state);
}

// The digest of a non-blocking call: its blocking twin's, changed, so that
// a rank calling iallreduce where the others call allreduce is refused by
// their engines (the calls may run the same algorithm). Not the board's
// answer to a stray message (digest ^ 0x80000000, board.cc).
constexpr uint32_t nonblocking_digest(uint32_t digest) {
  const uint32_t changed = digest ^ 0x2545f491u;
  return changed == 0 ? 1 : changed;
}

// A collective call after validation and selection (CommunicatorImpl::prepare).
struct PreparedCall {
  Collective op{};
  bool nonblocking = false;
  coll::Args args;
  const coll::Algorithm* algorithm = nullptr;
  std::optional<p2p::CallTag> check_call;  // CHORUS_CHECK_CALLS' exchange, if on
  std::optional<p2p::CallTag> call;        // nullopt: nothing to move (count 0)
  uint32_t digest = 0;
};

struct CallRecord;  // one rank's call, as CHORUS_CHECK_CALLS compares it

// Every size an algorithm computes (offsets, scratch, chunks) stays below
// SIZE_MAX when a call's whole payload, times the ranks for the per-rank
// collectives, is at most this: no real buffer is larger, and a count beyond
// it is an argument error before any data moves, never a wrapped size later.
inline constexpr size_t kMaxCallBytes = size_t{1} << 60;

// A point-to-point call's buffer and size, checked before the engine sees
// them: an engine error would make the communicator unusable, and a bad
// argument of one rank's send or receive concerns that call alone.
inline void check_message(const char* what, const void* buf, size_t bytes) {
  if (bytes > kMaxCallBytes) {
    fail(Status::invalid_argument, what, ": ", bytes, " bytes is more than the largest message chorus accepts (2^60)");
  }
  if (buf == nullptr && bytes != 0) fail(Status::invalid_argument, what, ": null buffer with ", bytes, " bytes");
}

// JobInfo::launcher of a communicator made by init(rank, size, store).
inline constexpr const char* kStoreLauncher = "store";
// A caller-numbered job learns from every rank's host name its local rank
// and size, and which same-host peers to watch (communicator_store.cc).
void learn_host_layout(Session& session, const std::vector<bootstrap::Bytes>& hosts);
// Same-host peers to look up in /proc when a wait stalls (LocalLiveness):
// every rank's pid and start time ride with its transport address in one
// gather. with_process_description appends this process' to `address`;
// watch_local_peers takes every rank's back off, starts the watch and
// returns the bare addresses.
bootstrap::Bytes with_process_description(bootstrap::Bytes address);
std::vector<bootstrap::Bytes> watch_local_peers(Session& session, const std::vector<bootstrap::Bytes>& hosts,
                                                std::vector<bootstrap::Bytes> gathered);

class CommunicatorImpl {
 public:
  using BootstrapFactory =
      std::function<std::unique_ptr<bootstrap::Bootstrap>(const bootstrap::JobInfo&, std::chrono::milliseconds timeout)>;
  // Joins the job described by the environment.
  static std::unique_ptr<CommunicatorImpl> create_from_environment();
  // Joins a caller-numbered job over the caller's store (communicator_store.cc).
  static std::unique_ptr<CommunicatorImpl> create_from_store(int rank, int size, std::shared_ptr<KeyValueStore> store,
                                                             const StoreInitOptions& options);
  ~CommunicatorImpl();

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(engine_ranks_.size()); }
  int local_rank() const { return session_->job.local_rank; }
  int local_size() const { return session_->job.local_size; }
  std::string transport_name() const;
  int host() const;
  Traffic traffic() const;
  uint32_t context_id() const { return context_id_; }
  bool is_world() const { return context_id_ == 0; }

  // Runs one collective (arguments in the public API's conventions).
  void run(Collective op, const coll::Args& args);
  // A bad argument of this rank's that the C API finds before run()
  // (CHORUS_IN_PLACE off the root): as fail_everywhere, under the lock.
  [[noreturn, gnu::cold]] void refuse_collective(Collective op, int root, const Error& cause);
  void send(const void* buf, size_t bytes, int peer, int tag);
  // peer may be kAnySource and tag kAnyTag; returns what was received.
  Received recv(void* buf, size_t bytes, int peer, int tag);

  // Probes (communicator_probe.cc): what a receive for (peer, tag) would
  // get, without taking it; peer may be kAnySource and tag kAnyTag.
  std::optional<Received> iprobe(int peer, int tag);
  Received probe(int peer, int tag);
  std::optional<Message> improbe(int peer, int tag);
  Message mprobe(int peer, int tag);

  // Non-blocking (communicator_nonblocking.cc): start the operation and
  // return it; Progress completes it.
  // `keep`: what args' arrays point into (a v-collective's displacements
  // chorus computed), kept alive until the operation has run.
  RequestRef start(Collective op, const coll::Args& args, std::shared_ptr<const void> keep = {});
  // A v-collective's start: the displacements BlockArgs computes for empty
  // spans live with the operation.
  RequestRef start_block(Collective op, const coll::Args& args);
  RequestRef start_send(const void* buf, size_t bytes, int peer, int tag, bool synchronous = false);
  RequestRef start_recv(void* buf, size_t bytes, int peer, int tag);
  // The receive of a message a matched probe took (`message` is spent).
  RequestRef start_matched_recv(Message& message, void* buf, size_t bytes);

  // Collective over this communicator (see Communicator::split). Returns
  // nullptr to ranks that passed a negative color.
  std::unique_ptr<CommunicatorImpl> split(int color, int key);
  // Collective over `members` only (communicator_create_group.cc).
  std::unique_ptr<CommunicatorImpl> create_group(std::span<const int> members, int tag);

  void set_algorithm(Collective op, std::string_view name);
  std::vector<std::string> algorithms(Collective op) const;
  std::string selected_algorithm(Collective op, size_t bytes) const;

  // World: collective, leaves the job (every communicator of the process
  // becomes unusable). Split/dup communicators: local, releases this one.
  // `how` tells the others how this rank left (e.g. "called finalize()").
  void finalize(const char* how = bootstrap::kFinalizeDeparture);
  bool finalized() const { return finalized_; }

  p2p::Engine& engine() { return *session_->engine; }
  const config::Settings& settings() const { return session_->settings; }

 private:
  CommunicatorImpl() = default;
  // A communicator of this session: `engine_ranks` by new rank, this process `rank`.
  std::unique_ptr<CommunicatorImpl> make_child(uint32_t context_id, std::vector<int> engine_ranks, int rank) const;
  // Both ways of joining: the job is known, `make_bootstrap` connects it to its store.
  static std::unique_ptr<CommunicatorImpl> create(config::Settings settings, bootstrap::JobInfo job,
                                                  const BootstrapFactory& make_bootstrap);
  void connect();
  topology::Placement place(const topology::NicDescription& nic, const std::string& host) const;
  // `how`: the departure to announce (announce_departure) where it was deferred.
  void leave_job(const std::string& how);
  // World finalize with non-blocking operations anywhere in the job: lets
  // them complete, then cancels what cannot (communicator.cc).
  void settle_operations(p2p::Progress* progress, const std::function<void()>& drive);
  std::optional<Error> report_operations(const std::vector<p2p::OperationRef>& cancelled);
  // Throws if the communicator was finalized, its world was, or an earlier
  // error made it unusable; inline, as every call asks.
  void check_usable() const {
    if (finalized_ || session_->closed || sticky_error_) report_unusable();
  }
  [[noreturn, gnu::cold]] void report_unusable() const;
  std::optional<Error> launcher_report(const Error& error);
  // The last shape (count, datatype, reduction op, root) each collective
  // was called with, once validated, and what that shape decides: the
  // algorithm, the call digest, the buffers it needs. Programs repeat a
  // call's shape (a training step's allreduce of one size, a barrier); a
  // repeat has only its buffers checked and skips the selection and the
  // digest (docs/performance.md, "The call path of a small call"). Not kept
  // for the block collectives, whose count arrays are part of the shape;
  // set_algorithm forgets the collective's.
  struct Shape {
    uint64_t count = 0;
    DataType dtype{};
    ReduceOp op{};
    int root = 0;
    const coll::Algorithm* algorithm = nullptr;  // nullptr: nothing kept
    uint32_t digest = 0;
    bool send_needed = false, recv_needed = false;  // buffers that must not be null
    // run_locked needs nothing of prepare(): no CHORUS_CHECK_CALLS, data to
    // move or a barrier, not a block collective.
    bool plain = false;
    bool repeated_by(const coll::Args& args) const {
      return algorithm != nullptr && count == args.count && dtype == args.dtype && op == args.op && root == args.root;
    }
  };
  // Validates the call (the shape's checks once per shape, the buffers
  // every call) and returns its shape. Valid until the next call.
  const Shape& validated_shape(Collective op, const coll::Args& args);
  Shape make_shape(Collective op, const coll::Args& args) const;
  void validate_shape(Collective op, const coll::Args& args) const;  // count, datatype, op, root
  [[noreturn, gnu::cold]] void report_null_buffer(Collective op, const coll::Args& args);
  // A bad argument of this rank's (a buffer, a count array) in a collective
  // of several ranks: fails the call on every rank (communicator_calls.cc).
  // Alone, throws `cause`. Under the lock.
  [[noreturn, gnu::cold]] void fail_everywhere(Collective op, const coll::Args& args, const Error& cause);

  void run_locked(Collective op, const coll::Args& args);
  void run_single_rank(Collective op, const coll::Args& args);
  // Validation done (`shape` is validated_shape's): takes the call's
  // sequence numbers (in call order, so every rank's calls line up) and the
  // shape's algorithm and digest; `scratch` serves a reduce's missing
  // receive buffer.
  PreparedCall prepare(Collective op, const coll::Args& user_args, const Shape& shape, coll::Scratch& scratch);
  // Runs a prepared call; `on_fiber`: a non-blocking operation's (its waits
  // suspend the fiber).
  void execute(const PreparedCall& call, coll::Scratch& scratch, bool on_fiber);
  // The algorithm's run and the checks after it, for execute() and for
  // run_locked()'s calls that need no more of prepare().
  void run_algorithm(Collective op, const coll::Algorithm& algorithm, const coll::Args& args, p2p::CallTag call,
                     uint32_t digest, coll::Scratch& scratch, bool on_fiber);
  void verify_same_call(const CallRecord& mine, p2p::CallTag call, coll::Scratch& scratch, bool on_fiber);
  // Non-blocking helpers.
  RequestRef completed_request(const char* what) const;
  // An isend's operation (a RequestState), to be given its engine request.
  RequestRef send_operation(int peer, int tag, size_t bytes);
  // send's and isend's checks and call record (under the lock): the peer's
  // engine rank. Inline with the helpers below: on every message's path.
  int begin_send(const char* what, const void* buf, size_t bytes, int peer, int tag) {
    check_usable();
    chorus::check_user_tag(what, tag, false);
    check_message(what, buf, bytes);
    const int engine_peer = engine_rank_of(peer, what);
    note_call(0, what, engine_peer);
    return engine_peer;
  }
  std::shared_ptr<coll::Scratch> take_scratch();
  static void finish_receive(p2p::Operation& done);  // on_complete of irecv and imrecv
  void check_no_stray_messages(p2p::CallTag call, bool nonblocking);
  // Under the lock: one look for a message (peer, tag), which `claim`
  // takes out of the engine's queue (a matched probe) and leaves otherwise.
  std::optional<Message> probe_once(const char* what, int peer, int tag, bool claim);
  // probe_once until a message comes, failing as recv does.
  Message wait_for_message(const char* what, int peer, int tag, bool claim);
  const coll::Algorithm& choose(Collective op, size_t bytes) const;
  const coll::Algorithm& choose_from_table(Collective op, size_t bytes) const;
  void set_members(std::vector<int> engine_ranks, int rank);
  // Records the call in progress for the failure probe; `calls` 0 = point-to-point.
  void note_call(uint64_t calls, std::string_view what, int peer) {
    session_->current_call = {context_id_, calls, engine_ranks_, peer, what};
  }
  // note_call for a collective, and its entry in the session's ledger.
  void note_collective(Collective op, std::string_view what, const Shape& shape, bool nonblocking) {
    const uint64_t calls = ++*calls_made_;
    note_call(calls, what, -1);
    LedgerEntry& entry = session_->ledger.add();
    entry.communicator = ledger_id_;
    entry.calls = calls;
    entry.count = shape.count;
    entry.algorithm = shape.algorithm;
    entry.digest = nonblocking ? nonblocking_digest(shape.digest) : shape.digest;
    entry.root = shape.root;
    entry.rank = rank_;
    entry.op = op;
    entry.dtype = shape.dtype;
    entry.redop = shape.op;
    entry.nonblocking = nonblocking;
  }
  // A call's error that says the ranks disagree (a digest, a board slot, a
  // stray message): with both calls named, found through the store within
  // kNameDisagreementWithin, and recorded there for the other ranks.
  Error name_disagreement(const Error& error, Collective op, const coll::Args& args, const coll::Algorithm& algorithm,
                          bool nonblocking);
  int engine_rank_of(int peer, const char* what) const {
    if (peer < 0 || peer >= size()) [[unlikely]] refuse_peer(peer, what);
    return engine_ranks_[static_cast<size_t>(peer)];
  }
  [[noreturn, gnu::cold]] void refuse_peer(int peer, const char* what) const;
  // Runs `body`, remembering the first failure so later calls report it.
  // `to_caller`: the error is thrown to the application's call; false on a
  // non-blocking operation's fiber, where only a wait or test (or, for a
  // detached request, finalize) tells the application.
  template <class Body>
  void guarded(const char* what, Body&& body, bool to_caller = true);
  // Marks this communicator busy with `what` for one call; a second thread
  // arriving meanwhile gets an error instead of a silently reordered call.
  class CallScope;

  std::shared_ptr<Session> session_;
  uint32_t context_id_ = 0;
  int rank_ = 0;
  std::vector<int> engine_ranks_;          // communicator rank -> engine rank
  std::vector<int> rank_of_engine_rank_;   // engine rank -> communicator rank, -1 if not a member
  // Its ranks span hosts and some host has several (and CHORUS_HIERARCHICAL
  // is not off): the table picks the hierarchical algorithms where there
  // are (docs/algorithms.md).
  bool spans_shared_hosts_ = false;
  coll::Scratch scratch_;
  std::vector<std::shared_ptr<coll::Scratch>> spare_scratch_;  // for non-blocking calls, reused
  int outstanding_operations_ = 0;                             // non-blocking collectives not yet complete
  coll::Tuning tuning_;
  std::array<const coll::Algorithm*, kNumCollectives> forced_{};  // nullptr = table
  // choose()'s last table answer per collective: the walk through the rules
  // costs more than the rest of a call's setup. Behind last_shape_, it serves
  // a new shape of the same payload size (a broadcast whose root rotates)
  // and selected_algorithm. The answer depends only on (op, bytes) for a
  // communicator.
  struct Choice {
    size_t bytes = SIZE_MAX;
    const coll::Algorithm* algorithm = nullptr;
  };
  mutable std::array<Choice, kNumCollectives> last_choice_{};
  std::array<Shape, kNumCollectives> last_shape_{};  // see Shape
  Shape block_shape_;  // a block collective's, made anew every call
  uint64_t sequence_ = 0;
  uint64_t* calls_made_ = nullptr;  // this communicator's entry in Session::calls_made
  uint64_t ledger_id_ = 0;          // context id << 32 | a hash of the members (LedgerEntry)
  // The failure that made the communicator unusable (check_usable): set by
  // become_unusable, which also fails every operation still outstanding so
  // that none keeps the application's buffers lent to the transport.
  const Error& become_unusable(Error error);
  std::optional<Error> sticky_error_;
  bool finalized_ = false;
  std::atomic<const char*> active_call_{nullptr};  // the call in progress, if any
};

// A collective call in progress (and split/dup, which are collective): two
// collectives on one communicator from two threads at once would run in a
// different order on different ranks, so the second is refused. Point-to-
// point calls take no scope: any number of threads may send, receive, probe
// and wait on one communicator at once (MPI_THREAD_MULTIPLE's rule; docs/api.md,
// "Threads").
class CommunicatorImpl::CallScope {
 public:
  CallScope(CommunicatorImpl& comm, const char* what) : comm_(comm) {
    const char* busy = nullptr;
    if (!comm.active_call_.compare_exchange_strong(busy, what)) {
      // Not sticky: the call already in progress is unaffected.
      chorus::fail(Status::invalid_argument, what, " on rank ", comm.rank_, " was called while another thread is inside ", busy,
           " on the same communicator; collective calls on one communicator must not overlap (the ranks would run "
           "them in different orders: give each thread its own communicator with dup())");
    }
  }
  ~CallScope() { comm_.active_call_.store(nullptr, std::memory_order_release); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  CommunicatorImpl& comm_;
};

template <class Body>
inline void CommunicatorImpl::guarded(const char* what, Body&& body, bool to_caller) {
  try {
    body();
  } catch (const Error& e) {
    std::optional<Error> cause = launcher_report(e);
    // The rank the launcher saw die is the cause, also when the error names
    // another peer (one that left because of it).
    const int peer = cause && cause->peer() >= 0 ? cause->peer() : e.peer();
    const Error& failure = become_unusable(Error(e.status(),
                                                 concat(what, " on rank ", rank_, " failed: ", e.what(),
                                                        cause ? concat("; ", cause->what()) : std::string()),
                                                 peer));
    if (to_caller) session_->note_reported(failure);
    throw failure;
  } catch (const std::exception& e) {
    const Error& failure = become_unusable(Error(Status::internal, concat(what, " on rank ", rank_, " failed: ", e.what())));
    if (to_caller) session_->note_reported(failure);
    throw failure;
  }
}

// Bytes moved by one call, as the selection table measures them.
size_t payload_bytes(Collective op, const coll::Args& args, int size);

// "allreduce(count 1024 of int32, op sum) with algorithm ring"; a
// non-blocking call's name begins with "i".
std::string describe_call(Collective op, const coll::Args& args, std::string_view algorithm, bool nonblocking = false);
// "iallreduce", ...: the non-blocking collective's name (one that outlives the call).
const char* nonblocking_name(Collective op);

}  // namespace chorus
