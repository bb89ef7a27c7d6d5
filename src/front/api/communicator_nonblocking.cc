// Non-blocking calls (docs/nonblocking.md): each starts a p2p::Operation
// under the session lock and hands it to the engine's Progress; the public
// Request waits on it.
#include "api/block_collectives.hpp"
#include "api/communicator_impl.hpp"
#include "api/user_tag.hpp"

#include "common/error.hpp"

#include <iterator>

namespace chorus {

namespace {
// Operations from this size on wake a napping progress thread at once; below
// it, a wakeup (a context switch on a busy machine) costs more than the
// operation, so the thread's next tick or the caller's wait moves it.
constexpr size_t kLargeOperationBytes = 64 * 1024;
}  // namespace

void Session::enable_operations(p2p::Progress& progress) {
  progress.set_failure_note([this](const p2p::OperationRef& failed) { note_failure(failed); });
  progress.enable_operations(mutex, settings.progress == "thread",
                             p2p::ProgressThreadPlace{progress_cpus, settings.report_bindings, job.rank});
}

p2p::Progress* Session::operations() {
  if (!engine || !engine->progress_engine().operations_enabled()) return nullptr;
  return &engine->progress_engine();
}

RequestRef CommunicatorImpl::completed_request(const char* what) const {
  RequestRef state = make_request_state(*session_, what);
  state->complete.store(true);
  return state;
}

std::shared_ptr<coll::Scratch> CommunicatorImpl::take_scratch() {
  if (!spare_scratch_.empty()) {
    std::shared_ptr<coll::Scratch> scratch = std::move(spare_scratch_.back());
    spare_scratch_.pop_back();
    return scratch;
  }
  auto scratch = std::make_shared<coll::Scratch>();
  scratch->track_with(&session_->engine);
  return scratch;
}

const char* nonblocking_name(Collective op) {
  // Names that outlive the call: messages refer to them later.
  static constexpr const char* kNames[] = {"iallreduce", "ibroadcast", "ibarrier",   "ireduce",    "iallgather",
                                           "ireduce_scatter", "ialltoall", "igather", "igatherv", "iscatter",
                                           "iscatterv", "iallgatherv", "ialltoallv", "iscan", "iexscan"};
  static_assert(std::size(kNames) == kNumCollectives);
  const auto index = static_cast<size_t>(op);
  return index < std::size(kNames) ? kNames[index] : collective_name(op).data();
}

RequestRef CommunicatorImpl::start(Collective op, const coll::Args& args, std::shared_ptr<const void> keep) {
  const char* name = nonblocking_name(op);
  CallScope scope(*this, name);
  std::lock_guard lock(session_->mutex);
  check_usable();
  const Shape& shape = validated_shape(op, args);
  note_collective(op, name, shape, /*nonblocking=*/true);
  if (size() == 1) {
    run_single_rank(op, args);
    return completed_request(name);
  }
  std::shared_ptr<coll::Scratch> scratch = take_scratch();
  PreparedCall prepared = prepare(op, args, shape, *scratch);
  prepared.nonblocking = true;
  if (prepared.call) prepared.digest = nonblocking_digest(prepared.digest);
  if (!prepared.check_call && !prepared.call) {
    spare_scratch_.push_back(std::move(scratch));
    return completed_request(name);
  }
  // Moved, not copied, between the two types (no reference count taken).
  RequestRef operation = make_request_state(*session_, name, [](p2p::Operation& done) {
    // Under the lock. The communicator outlives its operations: finalize
    // completes them first.
    CommunicatorImpl& self = *static_cast<CommunicatorImpl*>(done.owner);
    --self.outstanding_operations_;
    if (std::shared_ptr<void>& resources = done.collective->resources) {
      self.spare_scratch_.push_back(std::static_pointer_cast<coll::Scratch>(std::move(resources)));
    }
    if (done.error && !self.sticky_error_) self.become_unusable(*done.error);  // a detached one's error still counts
  });
  operation->owner = this;
  operation->collective = std::make_unique<p2p::CollectiveState>();
  operation->collective->call = *calls_made_;
  coll::Scratch* const call_scratch = scratch.get();
  operation->collective->resources = std::move(scratch);
  ++outstanding_operations_;
  const bool large = payload_bytes(op, args, size()) >= kLargeOperationBytes;
  session_->nonblocking().start_collective(
      *operation,
      [this, prepared, call_scratch, keep = std::move(keep)] { execute(prepared, *call_scratch, /*on_fiber=*/true); },
      large);
  return operation;
}

namespace {
// Every send complete at its start (eager: the transport copied it) shares
// one completed operation, which has nothing to report, and the request
// holds it without a reference count: such a send makes no RequestState,
// and its wait frees nothing.
RequestRef finished_send_state() {
  static RequestState* const state = [] {  // never destroyed: requests may outlive static destruction
    auto* made = new RequestState(nullptr, "isend");
    made->immortal = true;  // never counted: no request touches a shared count
    made->complete.store(true);
    return made;
  }();
  return RequestRef::adopt(state);
}
}  // namespace

RequestRef CommunicatorImpl::send_operation(int peer, int tag, size_t bytes) {
  RequestRef operation = make_request_state(*session_, "isend", [](p2p::Operation& done) {
    CommunicatorImpl& self = *static_cast<CommunicatorImpl*>(done.owner);
    if (done.error && !self.sticky_error_) {
      done.error = self.become_unusable(Error(
          done.error->status(), concat("isend on rank ", self.rank_, " failed: ", done.error->what()), done.error->peer()));
    }
  });
  operation->owner = this;
  operation->peer = peer;
  operation->tag = tag;
  operation->bytes = bytes;
  return operation;
}

RequestRef CommunicatorImpl::start_send(const void* buf, size_t bytes, int peer, int tag, bool synchronous) {
  std::lock_guard lock(session_->mutex);
  const char* what = synchronous ? "issend" : "isend";
  const int engine_peer = begin_send(what, buf, bytes, peer, tag);
  p2p::Engine& engine = *session_->engine;
  // Made before the send is posted (an allocation failure then posts nothing)
  // unless the send completes as it is posted (the engine's own test).
  RequestRef operation;
  if (synchronous || !engine.sends_at_once(engine_peer, bytes)) operation = send_operation(peer, tag, bytes);
  p2p::Request request;
  guarded(what, [&] {
    const p2p::Tag call_tag = p2p::CallTag::point_to_point(context_id_, tag);
    request = synchronous ? engine.issend(engine_peer, call_tag, buf, bytes)
                          : engine.isend(engine_peer, call_tag, buf, bytes);
  });
  if (!operation) return finished_send_state();
  operation->request = request;
  session_->nonblocking().start_point_to_point(*operation, bytes >= kLargeOperationBytes);
  return operation;
}

// A receive's completion, under the lock: a failure other than truncation
// (a message larger than the buffer is the receiver's mistake and leaves
// the engine consistent, as recv) makes the communicator unusable; the
// source is translated to this communicator's ranks.
void CommunicatorImpl::finish_receive(p2p::Operation& done) {
  CommunicatorImpl& self = *static_cast<CommunicatorImpl*>(done.owner);
  if (done.error) {
    const bool sticky = done.error->status() != Status::truncated;
    done.error = Error(done.error->status(), concat(done.name, " on rank ", self.rank_, " failed: ", done.error->what()),
                       done.error->peer());
    if (sticky && !self.sticky_error_) self.become_unusable(*done.error);
    return;
  }
  const int source = self.rank_of_engine_rank_[static_cast<size_t>(done.completion.source)];
  done.received = Received{source, p2p::CallTag::user_tag_of(done.completion.tag), done.completion.bytes};
}

RequestRef CommunicatorImpl::start_recv(void* buf, size_t bytes, int peer, int tag) {
  std::lock_guard lock(session_->mutex);
  check_usable();
  chorus::check_user_tag("irecv", tag, true);
  check_message("irecv", buf, bytes);
  const int engine_peer = peer == kAnySource ? p2p::kAnySource : engine_rank_of(peer, "irecv");
  note_call(0, "irecv", engine_peer);
  const p2p::Tag mask = tag == kAnyTag ? p2p::CallTag::kAnyUserTagMask : p2p::kExactTag;
  RequestRef operation = make_request_state(*session_, "irecv", &CommunicatorImpl::finish_receive);
  operation->owner = this;
  operation->peer = peer;
  operation->tag = tag;
  operation->bytes = bytes;
  guarded("irecv", [&] {
    operation->request = session_->engine->irecv(
        engine_peer, p2p::CallTag::point_to_point(context_id_, tag == kAnyTag ? 0 : tag), buf, bytes, mask);
  });
  session_->nonblocking().start_point_to_point(*operation, bytes >= kLargeOperationBytes);
  return operation;
}

RequestRef CommunicatorImpl::start_matched_recv(Message& message, void* buf, size_t bytes) {
  std::lock_guard lock(session_->mutex);
  check_usable();
  if (message.id == 0) fail(Status::invalid_argument, "imrecv of an empty message (already received, or none probed)");
  // A copy of a message already received (the C API's messages are plain
  // values): the caller's mistake, refused here, where the engine's refusal
  // would make the communicator unusable.
  if (!session_->engine->holds_claim(message.id)) {
    fail(Status::invalid_argument, "imrecv of message ", message.id,
         ", which was already received (a copy of a received message?) or never probed");
  }
  check_message("imrecv", buf, bytes);
  note_call(0, "imrecv", engine_rank_of(message.info.source, "imrecv"));
  RequestRef operation = make_request_state(*session_, "imrecv", &CommunicatorImpl::finish_receive);
  operation->owner = this;
  operation->peer = message.info.source;
  operation->tag = message.info.tag;
  operation->bytes = bytes;
  // Spent only here: a call refused above leaves the message to receive.
  const Message taken = std::exchange(message, Message{});
  guarded("imrecv", [&] { operation->request = session_->engine->irecv_claimed(taken.id, buf, bytes); });
  session_->nonblocking().start_point_to_point(*operation, bytes >= kLargeOperationBytes);
  return operation;
}

// --- chorus::Request -------------------------------------------------------------

namespace {
// Gives up a request's reference to its state. One still outstanding is
// detached, as MPI_Request_free does: it completes without the request,
// and Progress drops the reference then (Progress::detach, under the
// session lock). Its session is alive: no session goes before its
// operations complete.
void drop_state(RequestState* state) noexcept {
  if (state == nullptr) return;
  if (!state->complete.load(std::memory_order_acquire)) {
    if (p2p::Progress* progress = state->session->operations()) return progress->detach(*state);
  }
  p2p::drop(state);
}
// The reference a wait or test holds while it reports the outcome.
struct HeldState {
  explicit HeldState(RequestState* held) : state(held) {}
  RequestState* state;
  HeldState(const HeldState&) = delete;
  HeldState& operator=(const HeldState&) = delete;
  ~HeldState() { drop_state(state); }
};
}  // namespace

Request::Request(RequestState* state) : state_(state) {}
Request::Request(Request&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)), received_(other.received_) {}
Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    RequestState* const previous = std::exchange(state_, std::exchange(other.state_, nullptr));
    received_ = other.received_;
    drop_state(previous);  // an active request here is detached
  }
  return *this;
}
Request::~Request() { drop_state(state_); }

void Request::wait() {
  if (!state_) return;
  const HeldState held{std::exchange(state_, nullptr)};  // empty whatever the outcome
  p2p::Operation& operation = *held.state;
  if (!operation.complete.load(std::memory_order_acquire)) {
    p2p::Progress* progress = held.state->session->operations();
    if (progress == nullptr) fail(Status::finalized, "wait on a request whose communicator was finalized");
    try {
      progress->wait(operation);
    } catch (const Error&) {
      operation.error_reported.store(true);
      throw;
    }
  }
  received_ = operation.received;
  if (operation.error) {
    operation.error_reported.store(true);
    throw *operation.error;
  }
}

bool Request::cancel() {
  if (!state_ || state_->complete.load(std::memory_order_acquire)) return false;
  Session& session = *state_->session;
  {
    std::lock_guard lock(session.mutex);
    p2p::Progress* progress = session.operations();
    if (progress == nullptr || !progress->withdraw_receive(*state_)) return false;
  }
  const HeldState held{std::exchange(state_, nullptr)};
  received_ = Received{};
  return true;
}

bool Request::test() {
  if (!state_) return true;
  p2p::Operation& operation = *state_;
  bool done = operation.complete.load(std::memory_order_acquire);
  if (!done) {
    try {
      done = state_->session->operations()->test(operation);
    } catch (const Error&) {
      operation.error_reported.store(true);
      const HeldState held{std::exchange(state_, nullptr)};
      received_ = operation.received;
      throw;
    }
  }
  if (!done) return false;
  const HeldState held{std::exchange(state_, nullptr)};
  received_ = operation.received;
  if (operation.error) {
    operation.error_reported.store(true);
    throw *operation.error;
  }
  return true;
}

void wait_all(std::span<Request> requests) {
  std::optional<Error> first;
  for (Request& request : requests) {
    try {
      request.wait();
    } catch (const Error& e) {
      if (!first) first = e;
    }
  }
  if (first) throw *first;
}

size_t wait_any(std::span<Request> requests) {
  for (;;) {
    bool any_active = false;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (!requests[i].active()) continue;
      any_active = true;
      if (requests[i].test()) return i;
    }
    if (!any_active) return requests.size();
    // Progress towards all of them at once, then look again.
    std::vector<p2p::Operation*> operations;
    p2p::Progress* progress = nullptr;
    for (Request& request : requests) {
      if (!request.active()) continue;
      RequestState& state = *request.state_;
      operations.push_back(&state);
      progress = state.session->operations();
    }
    if (progress != nullptr) progress->wait_any(operations);
  }
}

bool test_all(std::span<Request> requests) {
  std::optional<Error> first;
  bool all = true;
  for (Request& request : requests) {
    try {
      all = request.test() && all;
    } catch (const Error& e) {
      if (!first) first = e;
    }
  }
  if (first) throw *first;
  return all;
}

std::optional<size_t> test_any(std::span<Request> requests) {
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].active() && requests[i].test()) return i;
  }
  return std::nullopt;
}

// --- chorus::Communicator, non-blocking calls ------------------------------------

Request Communicator::iallreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  return Request(impl().start(Collective::allreduce, {send, recv, count, dtype, op, 0}).release());
}
Request Communicator::ibroadcast(void* buf, size_t count, DataType dtype, int root) {
  return Request(impl().start(Collective::broadcast, {buf, buf, count, dtype, ReduceOp::sum, root}).release());
}
Request Communicator::ibarrier() { return Request(impl().start(Collective::barrier, {}).release()); }
Request Communicator::ireduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root) {
  return Request(impl().start(Collective::reduce, {send, recv, count, dtype, op, root}).release());
}
Request Communicator::iallgather(const void* send, void* recv, size_t count, DataType dtype) {
  return Request(impl().start(Collective::allgather, {send, recv, count, dtype, ReduceOp::sum, 0}).release());
}
Request Communicator::ireduce_scatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  return Request(impl().start(Collective::reduce_scatter, {send, recv, count, dtype, op, 0}).release());
}
Request Communicator::ialltoall(const void* send, void* recv, size_t count, DataType dtype) {
  return Request(impl().start(Collective::alltoall, {send, recv, count, dtype, ReduceOp::sum, 0}).release());
}
Request Communicator::igather(const void* send, void* recv, size_t count, DataType dtype, int root) {
  return Request(impl().start(Collective::gather, {send, recv, count, dtype, ReduceOp::sum, root}).release());
}
Request Communicator::iscatter(const void* send, void* recv, size_t count, DataType dtype, int root) {
  return Request(impl().start(Collective::scatter, {send, recv, count, dtype, ReduceOp::sum, root}).release());
}
Request Communicator::iscan(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  return Request(impl().start(Collective::scan, {send, recv, count, dtype, op, 0}).release());
}
Request Communicator::iexscan(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  return Request(impl().start(Collective::exscan, {send, recv, count, dtype, op, 0}).release());
}

// The v-collectives: the displacements chorus computes for an empty span
// live with the operation.
RequestRef CommunicatorImpl::start_block(Collective op, const coll::Args& args) {
  auto block = std::make_shared<const BlockArgs>(args);
  return start(op, block->args(), block);
}
Request Communicator::igatherv(const void* send, size_t send_count, void* recv, std::span<const size_t> recv_counts,
                               std::span<const size_t> recv_displs, DataType dtype, int root) {
  return Request(
      impl()
          .start_block(Collective::gatherv, gatherv_args(send, send_count, recv, recv_counts, recv_displs, dtype, root))
          .release());
}
Request Communicator::iscatterv(const void* send, std::span<const size_t> send_counts,
                                std::span<const size_t> send_displs, void* recv, size_t recv_count, DataType dtype,
                                int root) {
  return Request(
      impl()
          .start_block(Collective::scatterv,
                       scatterv_args(send, send_counts, send_displs, recv, recv_count, dtype, root))
          .release());
}
Request Communicator::iallgatherv(const void* send, size_t send_count, void* recv, std::span<const size_t> recv_counts,
                                  std::span<const size_t> recv_displs, DataType dtype) {
  return Request(
      impl()
          .start_block(Collective::allgatherv, allgatherv_args(send, send_count, recv, recv_counts, recv_displs, dtype))
          .release());
}
Request Communicator::ialltoallv(const void* send, std::span<const size_t> send_counts,
                                 std::span<const size_t> send_displs, void* recv, std::span<const size_t> recv_counts,
                                 std::span<const size_t> recv_displs, DataType dtype) {
  return Request(impl()
                     .start_block(Collective::alltoallv, alltoallv_args(send, send_counts, send_displs, recv,
                                                                        recv_counts, recv_displs, dtype))
                     .release());
}

Request Communicator::isend(const void* buf, size_t bytes, int peer, int tag) {
  return Request(impl().start_send(buf, bytes, peer, tag).release());
}
Request Communicator::issend(const void* buf, size_t bytes, int peer, int tag) {
  return Request(impl().start_send(buf, bytes, peer, tag, /*synchronous=*/true).release());
}
Request Communicator::irecv(void* buf, size_t bytes, int peer, int tag) {
  return Request(impl().start_recv(buf, bytes, peer, tag).release());
}
Request Communicator::imrecv(Message& message, void* buf, size_t bytes) {
  return Request(impl().start_matched_recv(message, buf, bytes).release());
}
Received Communicator::mrecv(Message& message, void* buf, size_t bytes) {
  Request request = imrecv(message, buf, bytes);
  request.wait();
  return request.received();
}

}  // namespace chorus
