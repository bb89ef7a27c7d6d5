#include "communicator_impl.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "transport_factory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>

namespace chorus {

namespace {

// Tag layout (p2p::Tag, 64 bits):
//   collectives:    0 | context id (15) | call sequence (32) | step (16)
//   point-to-point: 1 | context id (15) | unused (17)        | user tag (31)
// The context id (0 = world, then one per split/dup) keeps communicators that
// share the engine apart; the sequence keeps consecutive collectives apart.
constexpr uint64_t kUserTagBit = uint64_t{1} << 63;
constexpr int kContextShift = 48;
constexpr int kMaxUserTag = 0x7fffffff;
// A receive for any tag compares everything but the user tag.
constexpr p2p::Tag kAnyUserTagMask = ~p2p::Tag{kMaxUserTag};

uint64_t context_bits(uint32_t context_id) { return static_cast<uint64_t>(context_id) << kContextShift; }

p2p::Tag user_tag(uint32_t context_id, int tag) {
  return kUserTagBit | context_bits(context_id) | static_cast<uint64_t>(tag);
}

const char* env_name_for(Collective op) {
  static constexpr const char* names[] = {"CHORUS_ALGO_ALLREDUCE", "CHORUS_ALGO_BROADCAST",
                                          "CHORUS_ALGO_BARRIER",   "CHORUS_ALGO_REDUCE",
                                          "CHORUS_ALGO_ALLGATHER", "CHORUS_ALGO_REDUCE_SCATTER",
                                          "CHORUS_ALGO_ALLTOALL"};
  return names[static_cast<int>(op)];
}

std::string algorithm_names(Collective op) {
  std::string names;
  for (const coll::Algorithm* algorithm : coll::algorithms(op)) {
    names += (names.empty() ? "" : ", ") + std::string(algorithm->name);
  }
  return names + ", auto";
}

bool is_reduction(Collective op) {
  return op == Collective::allreduce || op == Collective::reduce || op == Collective::reduce_scatter;
}

bool has_root(Collective op) { return op == Collective::broadcast || op == Collective::reduce; }

std::string this_hostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) fail(Status::internal, "gethostname failed: ", errno_string(errno));
  return name;
}

}  // namespace

size_t payload_bytes(Collective op, const coll::Args& args, int size) {
  size_t bytes = args.count * datatype_size(args.dtype);
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

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::create_from_environment() {
  std::unique_ptr<CommunicatorImpl> comm(new CommunicatorImpl());
  comm->session_ = std::make_shared<Session>();
  Session& session = *comm->session_;
  session.settings = config::Settings::from_env();
  session.job = bootstrap::detect_job();
  log::set_rank(session.job.rank);
  for (int i = 0; i < kNumCollectives; ++i) {
    auto op = static_cast<Collective>(i);
    if (auto name = config::get(env_name_for(op)); name && *name != "auto") {
      comm->forced_[static_cast<size_t>(i)] = coll::find(op, *name);
      if (comm->forced_[static_cast<size_t>(i)] == nullptr) {
        fail(Status::config, env_name_for(op), "=\"", *name, "\": expected one of ", algorithm_names(op));
      }
    }
  }
  session.bootstrap = std::make_unique<bootstrap::Bootstrap>(session.job, session.settings.timeout);
  comm->connect();
  return comm;
}

void CommunicatorImpl::connect() {
  Session& session = *session_;
  const bootstrap::JobInfo& job = session.job;
  std::string host = this_hostname();
  auto hosts = session.bootstrap->all_gather("chorus/host", bootstrap::Bytes(host.begin(), host.end()));
  bool all_local = std::all_of(hosts.begin(), hosts.end(),
                               [&](const bootstrap::Bytes& other) { return std::string(other.begin(), other.end()) == host; });
  // Bound before the transport exists, so its buffers are allocated near
  // the NIC and its CQ gets the planned completion vector.
  const topology::Placement placement = place(describe_nic(session.settings, all_local), host);
  session.transport =
      create_transport(session.settings, job.rank, job.size, all_local, placement.plan.completion_vector);
  auto addresses = session.bootstrap->all_gather("chorus/transport", session.transport->address());
  session.transport->connect(addresses);
  session.engine = std::make_unique<p2p::Engine>(*session.transport, job.rank, job.size, job.local_size, session.settings);
  std::vector<int> everyone(static_cast<size_t>(job.size));
  std::iota(everyone.begin(), everyone.end(), 0);
  set_members(std::move(everyone), job.rank);
  session.bootstrap->barrier("chorus/connected");
  log::info("rank ", job.rank, "/", job.size, " connected over ", session.transport->name(), " (launcher ",
            job.launcher, ")");
}

topology::Placement CommunicatorImpl::place(const topology::NicDescription& nic, const std::string& host) const {
  const Session& session = *session_;
  topology::PlacementSettings settings;
  settings.bind = session.settings.bind;
  settings.report = session.settings.report_bindings;
  settings.topology_xml = session.settings.topology_xml;
  return topology::place_rank(settings, nic, {host, session.job.rank, session.job.local_rank, session.job.local_size});
}

void CommunicatorImpl::set_members(std::vector<int> engine_ranks, int rank) {
  scratch_.track_with(&session_->engine);
  engine_ranks_ = std::move(engine_ranks);
  rank_ = rank;
  rank_of_engine_rank_.assign(static_cast<size_t>(session_->job.size), -1);
  for (size_t r = 0; r < engine_ranks_.size(); ++r) rank_of_engine_rank_[static_cast<size_t>(engine_ranks_[r])] = static_cast<int>(r);
}

int CommunicatorImpl::engine_rank_of(int peer, const char* what) const {
  if (peer < 0 || peer >= size()) {
    fail(Status::invalid_argument, what, ": peer ", peer, " is not a rank of this communicator (0..", size() - 1, ")");
  }
  return engine_ranks_[static_cast<size_t>(peer)];
}

CommunicatorImpl::~CommunicatorImpl() {
  try {
    finalize();
  } catch (const std::exception& e) {
    log::warn("finalize during destruction failed: ", e.what());
  }
}

std::string CommunicatorImpl::transport_name() const {
  return session_->transport ? session_->transport->name() : "none";
}

void CommunicatorImpl::check_usable() const {
  if (finalized_) fail(Status::finalized, "the communicator was used after finalize()");
  if (session_->closed) {
    fail(Status::finalized, "the communicator was used after the world communicator it was split from was finalized");
  }
  if (sticky_error_) {
    throw Error(sticky_error_->status(),
                concat("the communicator is unusable after an earlier error: ", sticky_error_->what()),
                sticky_error_->peer());
  }
}

template <class Body>
void CommunicatorImpl::guarded(const char* what, Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    sticky_error_ = Error(e.status(), concat(what, " on rank ", rank_, " failed: ", e.what(), launcher_report(e)),
                          e.peer());
    throw *sticky_error_;
  } catch (const std::exception& e) {
    sticky_error_ = Error(Status::internal, concat(what, " on rank ", rank_, " failed: ", e.what()));
    throw *sticky_error_;
  }
}

// A timeout or lost peer is often the echo of a rank that died elsewhere:
// the peer we waited on was itself waiting. chorusrun records the first rank
// that failed in the store; adding it names the real culprit.
std::string CommunicatorImpl::launcher_report(const Error& error) {
  const Status status = error.status();
  if (!session_ || !session_->bootstrap || (status != Status::timeout && status != Status::peer_failed && status != Status::transport)) {
    return "";
  }
  try {
    auto& store = session_->bootstrap->store();
    if (!store.check("chorus/failed")) return "";
    auto report = store.get("chorus/failed");
    return concat("; chorusrun reports: ", std::string(report.begin(), report.end()));
  } catch (const std::exception&) {
    return "";  // the store may be gone with the failed rank
  }
}

void CommunicatorImpl::validate(Collective op, const coll::Args& args) const {
  const std::string_view name = to_string(op);
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
  const size_t elem = datatype_size(args.dtype);
  const size_t ranks = static_cast<size_t>(size());
  if (args.count > SIZE_MAX / elem / ranks) {
    fail(Status::invalid_argument, name, ": count ", args.count, " of ", to_string(args.dtype), " overflows size_t");
  }
  if (op == Collective::barrier || args.count == 0) return;
  bool send_needed = op != Collective::broadcast;
  bool recv_needed = op != Collective::reduce || rank() == args.root;
  if (send_needed && args.send == nullptr) fail(Status::invalid_argument, name, ": null send buffer with count ", args.count);
  if (recv_needed && args.recv == nullptr) {
    fail(Status::invalid_argument, name, ": null ", op == Collective::broadcast ? "" : "receive ", "buffer with count ",
         args.count);
  }
}

const coll::Algorithm& CommunicatorImpl::choose(Collective op, size_t bytes) const {
  const coll::Algorithm* forced = forced_[static_cast<size_t>(op)];
  return forced != nullptr ? *forced : coll::select(op, bytes, size());
}

void CommunicatorImpl::run_single_rank(Collective op, const coll::Args& args) {
  const size_t bytes = payload_bytes(op, args, 1);
  if (op == Collective::barrier || op == Collective::broadcast || args.send == args.recv || args.recv == nullptr) return;
  std::memmove(args.recv, args.send, bytes);
}

void CommunicatorImpl::run(Collective op, const coll::Args& args) {
  std::lock_guard<std::mutex> lock(session_->mutex);
  check_usable();
  run_locked(op, args);
}

void CommunicatorImpl::run_locked(Collective op, const coll::Args& user_args) {
  validate(op, user_args);
  if (op != Collective::barrier && user_args.count == 0) return;
  if (size() == 1) return run_single_rank(op, user_args);

  coll::Args args = user_args;
  if (op == Collective::reduce && args.recv == nullptr) {
    // MPI lets non-roots pass no receive buffer; algorithms may still use one.
    args.recv = scratch_.get(3, args.count * datatype_size(args.dtype));
  }
  const coll::Algorithm& algorithm = choose(op, payload_bytes(op, args, size()));
  const uint64_t tag_base = context_bits(context_id_) | ((sequence_++ & 0xffffffffu) << 16);
  coll::Context context(*session_->engine, engine_ranks_, rank(), tag_base, scratch_, tuning_);
  guarded(to_string(op).data(), [&] { algorithm.run(context, args); });
}

void CommunicatorImpl::send(const void* buf, size_t bytes, int peer, int tag) {
  std::lock_guard<std::mutex> lock(session_->mutex);
  check_usable();
  if (tag < 0 || tag > kMaxUserTag) fail(Status::invalid_argument, "send: tag ", tag, " outside 0..", kMaxUserTag);
  const int engine_peer = engine_rank_of(peer, "send");
  guarded("send", [&] {
    auto request = session_->engine->isend(engine_peer, user_tag(context_id_, tag), buf, bytes);
    session_->engine->wait(request);
  });
}

Received CommunicatorImpl::recv(void* buf, size_t bytes, int peer, int tag) {
  std::lock_guard<std::mutex> lock(session_->mutex);
  check_usable();
  if (tag != kAnyTag && (tag < 0 || tag > kMaxUserTag)) {
    fail(Status::invalid_argument, "recv: tag ", tag, " outside 0..", kMaxUserTag, " (or kAnyTag)");
  }
  const int engine_peer = peer == kAnySource ? p2p::kAnySource : engine_rank_of(peer, "recv");
  const p2p::Tag mask = tag == kAnyTag ? kAnyUserTagMask : p2p::kExactTag;
  p2p::Completion done;
  std::optional<Error> truncated;
  guarded("recv", [&] {
    try {
      auto request = session_->engine->irecv(engine_peer, user_tag(context_id_, tag == kAnyTag ? 0 : tag), buf, bytes,
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
  return Received{source, static_cast<int>(done.tag & kMaxUserTag), done.bytes};
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::split(int color, int key) {
  std::lock_guard<std::mutex> lock(session_->mutex);
  check_usable();
  // One allgather over this communicator tells every rank each rank's
  // (color, key) and lowest unused context id. The new context id is the
  // largest of those: no member uses it for any communicator yet, so the new
  // communicator's tags cannot match any other communicator it shares a
  // process with. Disjoint color groups may share the id (they share no process).
  const int32_t mine[3] = {color < 0 ? -1 : color, key, static_cast<int32_t>(session_->next_context_id)};
  std::vector<int32_t> everyone(3 * static_cast<size_t>(size()));
  run_locked(Collective::allgather, {mine, everyone.data(), 3, DataType::int32, ReduceOp::sum, 0});
  uint32_t context_id = 0;
  for (int r = 0; r < size(); ++r) {
    context_id = std::max(context_id, static_cast<uint32_t>(everyone[3 * static_cast<size_t>(r) + 2]));
  }
  if (context_id > kMaxContextId) {
    // Every rank of this communicator sees the same maximum, so all fail here.
    fail(Status::unsupported, "split: all ", kMaxContextId,
         " communicator context ids of this job are used (chorus does not reuse the ids of finalized communicators)");
  }
  session_->next_context_id = context_id + 1;
  if (color < 0) return nullptr;

  std::vector<int> members;  // ranks of this communicator with my color, by (key, rank)
  for (int r = 0; r < size(); ++r) {
    if (everyone[3 * static_cast<size_t>(r)] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return everyone[3 * static_cast<size_t>(a) + 1] < everyone[3 * static_cast<size_t>(b) + 1];
  });
  std::vector<int> engine_ranks;
  int new_rank = -1;
  for (int member : members) {
    if (member == rank_) new_rank = static_cast<int>(engine_ranks.size());
    engine_ranks.push_back(engine_ranks_[static_cast<size_t>(member)]);
  }
  std::unique_ptr<CommunicatorImpl> child(new CommunicatorImpl());
  child->session_ = session_;
  child->context_id_ = context_id;
  child->forced_ = forced_;
  child->tuning_ = tuning_;
  child->set_members(std::move(engine_ranks), new_rank);
  return child;
}

void CommunicatorImpl::set_algorithm(Collective op, std::string_view name) {
  std::lock_guard<std::mutex> lock(session_->mutex);
  if (static_cast<unsigned>(op) >= static_cast<unsigned>(kNumCollectives)) {
    fail(Status::invalid_argument, "set_algorithm: invalid collective value ", static_cast<int>(op));
  }
  if (name.empty() || name == "auto") {
    forced_[static_cast<size_t>(op)] = nullptr;
    return;
  }
  const coll::Algorithm* algorithm = coll::find(op, name);
  if (algorithm == nullptr) {
    fail(Status::invalid_argument, "set_algorithm: \"", name, "\" is not an algorithm for ", to_string(op),
         "; expected one of ", algorithm_names(op));
  }
  forced_[static_cast<size_t>(op)] = algorithm;
}

std::vector<std::string> CommunicatorImpl::algorithms(Collective op) const {
  std::vector<std::string> names;
  for (const coll::Algorithm* algorithm : coll::algorithms(op)) names.emplace_back(algorithm->name);
  return names;
}

std::string CommunicatorImpl::selected_algorithm(Collective op, size_t bytes) const {
  std::lock_guard<std::mutex> lock(session_->mutex);
  return std::string(choose(op, bytes).name);
}

void CommunicatorImpl::finalize() {
  if (!session_) return;  // construction failed before the session existed
  std::lock_guard<std::mutex> lock(session_->mutex);
  if (finalized_) return;
  finalized_ = true;
  if (!is_world()) return;  // split/dup: nothing to tear down; the session outlives it
  Session& session = *session_;
  session.closed = true;
  std::optional<Error> failure;
  try {
    if (!sticky_error_ && session.bootstrap) leave_job();
  } catch (const Error& e) {
    failure = e;  // still release everything below
  }
  scratch_.release_all();  // its registrations go with the engine
  session.engine.reset();
  session.transport.reset();
  session.bootstrap.reset();
  if (failure) throw *failure;
}

void CommunicatorImpl::leave_job() {
  Session& session = *session_;
  const bootstrap::JobInfo& job = session.job;
  // Nobody tears down its transport while a peer may still read from it.
  session.bootstrap->barrier("chorus/finalize");
  if (!job.rank0_serves) return;
  // Rank 0 hosts the store: it stays up until every rank has left it.
  auto key = [](int r) { return concat("chorus/left/", r); };
  if (job.rank != 0) {
    session.bootstrap->store().set(key(job.rank), {1});
    return;
  }
  std::vector<std::string> keys;
  for (int r = 1; r < job.size; ++r) keys.push_back(key(r));
  session.bootstrap->store().wait(keys);
}

// --- chorus::Communicator ------------------------------------------------------

Communicator Communicator::init() { return Communicator(CommunicatorImpl::create_from_environment()); }
Communicator::Communicator(std::unique_ptr<CommunicatorImpl> impl) : impl_(std::move(impl)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

CommunicatorImpl& Communicator::impl() {
  if (!impl_) fail(Status::finalized, "use of a moved-from chorus::Communicator");
  return *impl_;
}

int Communicator::rank() const { return impl_->rank(); }
int Communicator::size() const { return impl_->size(); }
int Communicator::local_rank() const { return impl_->local_rank(); }
int Communicator::local_size() const { return impl_->local_size(); }
std::string Communicator::transport_name() const { return impl_->transport_name(); }

void Communicator::allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  impl().run(Collective::allreduce, {send, recv, count, dtype, op, 0});
}
void Communicator::broadcast(void* buf, size_t count, DataType dtype, int root) {
  impl().run(Collective::broadcast, {buf, buf, count, dtype, ReduceOp::sum, root});
}
void Communicator::barrier() { impl().run(Collective::barrier, {}); }
void Communicator::reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root) {
  impl().run(Collective::reduce, {send, recv, count, dtype, op, root});
}
void Communicator::allgather(const void* send, void* recv, size_t count, DataType dtype) {
  impl().run(Collective::allgather, {send, recv, count, dtype, ReduceOp::sum, 0});
}
void Communicator::reduce_scatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  impl().run(Collective::reduce_scatter, {send, recv, count, dtype, op, 0});
}
void Communicator::alltoall(const void* send, void* recv, size_t count, DataType dtype) {
  impl().run(Collective::alltoall, {send, recv, count, dtype, ReduceOp::sum, 0});
}
void Communicator::send(const void* buf, size_t bytes, int peer, int tag) { impl().send(buf, bytes, peer, tag); }
Received Communicator::recv(void* buf, size_t bytes, int peer, int tag) { return impl().recv(buf, bytes, peer, tag); }
std::optional<Communicator> Communicator::split(int color, int key) {
  auto child = impl().split(color, key);
  if (!child) return std::nullopt;
  return Communicator(std::move(child));
}
Communicator Communicator::dup() { return std::move(*split(0, rank())); }
void Communicator::set_algorithm(Collective op, std::string_view name) { impl().set_algorithm(op, name); }
std::vector<std::string> Communicator::algorithms(Collective op) const { return impl_->algorithms(op); }
std::string Communicator::selected_algorithm(Collective op, size_t bytes) const {
  return impl_->selected_algorithm(op, bytes);
}
void Communicator::finalize() { impl().finalize(); }

}  // namespace chorus
