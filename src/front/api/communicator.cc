// A communicator's life: creation from the environment, connecting the
// transport, split/dup, algorithm settings, finalize and leaving the job;
// the chorus::Communicator facade. The call path: communicator_calls.cc.
#include "api/communicator_impl.hpp"

#include "api/transport_factory.hpp"
#include "common/error.hpp"
#include "common/fnv.hpp"
#include "common/foreign_signal_handlers.hpp"
#include "common/log.hpp"

#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <thread>

namespace chorus {

namespace {

const char* env_name_for(Collective op) {
  static constexpr const char* names[] = {
      "CHORUS_ALGO_ALLREDUCE", "CHORUS_ALGO_BROADCAST",  "CHORUS_ALGO_BARRIER",    "CHORUS_ALGO_REDUCE",
      "CHORUS_ALGO_ALLGATHER", "CHORUS_ALGO_REDUCE_SCATTER", "CHORUS_ALGO_ALLTOALL", "CHORUS_ALGO_GATHER",
      "CHORUS_ALGO_GATHERV",   "CHORUS_ALGO_SCATTER",    "CHORUS_ALGO_SCATTERV",   "CHORUS_ALGO_ALLGATHERV",
      "CHORUS_ALGO_ALLTOALLV", "CHORUS_ALGO_SCAN",       "CHORUS_ALGO_EXSCAN"};
  static_assert(std::size(names) == kNumCollectives);
  return names[static_cast<int>(op)];
}

std::string algorithm_names(Collective op) {
  std::string names;
  for (const coll::Algorithm* algorithm : coll::algorithms(op)) {
    names += (names.empty() ? "" : ", ") + std::string(algorithm->name);
  }
  return names + ", auto";
}

// A non-blocking operation as finalize names it: "irecv from rank 1 (tag 5,
// 64-byte buffer)", "iallreduce (collective call 3 of its communicator)".
std::string describe_operation(const p2p::Operation& operation) {
  const std::string_view name = operation.name;
  if (name == "isend" || name == "irecv") {
    const bool send = name == "isend";
    return concat(name, send ? " to " : " from ",
                  operation.peer == kAnySource ? std::string("any rank") : concat("rank ", operation.peer), " (",
                  operation.tag == kAnyTag ? std::string("any tag") : concat("tag ", operation.tag), ", ",
                  operation.bytes, send ? " bytes)" : "-byte buffer)");
  }
  return concat(name, " (collective call ", operation.collective ? operation.collective->call : 0, " of its communicator)");
}

// The host identity of the host layout: CHORUS_HOST_ID, else the hostname.
std::string this_hostname() {
  if (std::optional<std::string> id = config::get("CHORUS_HOST_ID"); id && !id->empty()) return *id;
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) fail(Status::internal, "gethostname failed: ", errno_string(errno));
  return name;
}

// Every rank's host identity (docs/bootstrap.md, "Host layout"): under PMIx
// the resource manager's map, read without a fence; otherwise, or where
// CHORUS_HOST_ID names the hosts (tests, containers: set it for every rank
// or for none), a gather of each rank's name.
std::vector<bootstrap::Bytes> host_of_each_rank(Session& session, const std::string& host) {
  const std::optional<std::string> id = config::get("CHORUS_HOST_ID");
  if (!id || id->empty()) {
    if (std::optional<std::vector<std::string>> nodes = session.bootstrap->pmix_node_of_rank()) {
      std::vector<bootstrap::Bytes> hosts;
      hosts.reserve(nodes->size());
      for (const std::string& node : *nodes) hosts.emplace_back(node.begin(), node.end());
      return hosts;
    }
  }
  return session.bootstrap->all_gather("chorus/host", bootstrap::Bytes(host.begin(), host.end()));
}

}  // namespace

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::create_from_environment() {
  signals::remove_infinipath_handlers();  // the real signal and status must reach the launcher
  config::Settings settings = config::Settings::from_env();
  // CHORUS_BOOTSTRAP: under pmix the job comes from the PMIx server (PMIx_Init here).
  bootstrap::DetectedJob detected = bootstrap::detect_job(settings.bootstrap);
  std::shared_ptr<bootstrap::PmixClient> pmix = std::move(detected.pmix);
  return create(std::move(settings), std::move(detected.job),
                [pmix](const bootstrap::JobInfo& job, std::chrono::milliseconds timeout) {
                  if (pmix) return std::make_unique<bootstrap::Bootstrap>(job, timeout, pmix);
                  return std::make_unique<bootstrap::Bootstrap>(job, timeout);
                });
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::create(config::Settings settings, bootstrap::JobInfo job,
                                                           const BootstrapFactory& make_bootstrap) {
  std::unique_ptr<CommunicatorImpl> comm(new CommunicatorImpl());
  comm->session_ = std::make_shared<Session>();
  Session& session = *comm->session_;
  session.settings = std::move(settings);
  session.job = std::move(job);
  log::set_rank(session.job.rank);
  // Typos (CHORUS_TIMOUT) are named once per host: every rank has the same environment there.
  if (session.job.local_rank == 0) config::warn_unknown_variables();
  for (int i = 0; i < kNumCollectives; ++i) {
    auto op = static_cast<Collective>(i);
    if (auto name = config::get(env_name_for(op)); name && *name != "auto") {
      comm->forced_[static_cast<size_t>(i)] = coll::find(op, *name);
      if (comm->forced_[static_cast<size_t>(i)] == nullptr) {
        fail(Status::config, env_name_for(op), "=\"", *name, "\": expected one of ", algorithm_names(op));
      }
    }
  }
  coll::selection_rules();  // a malformed CHORUS_SELECT_RULES fails here, naming the rule
  session.bootstrap = make_bootstrap(session.job, session.settings.timeout);
  try {
    comm->connect();
  } catch (const Error& e) {
    // A rank that could not join reports at once: it does not wait in the
    // finalize barrier for ranks that are still waiting for it (chorusrun,
    // or the others' timeouts, stops them).
    comm->become_unusable(e);
    throw;
  } catch (const std::exception& e) {
    comm->become_unusable(Error(Status::internal, e.what()));
    throw;
  }
  return comm;
}

void CommunicatorImpl::connect() {
  Session& session = *session_;
  const bootstrap::JobInfo& job = session.job;
  std::string host = this_hostname();
  const std::vector<bootstrap::Bytes> hosts = host_of_each_rank(session, host);
  std::vector<std::string> host_names;
  for (const bootstrap::Bytes& name : hosts) host_names.emplace_back(name.begin(), name.end());
  session.host_of_engine_rank = number_hosts(host_names);
  const HostLayout layout = host_layout(session.host_of_engine_rank, job.rank);
  const bool all_local = layout.hosts == 1;
  // A caller-numbered job (init over a store) learns its host layout here.
  if (job.launcher == kStoreLauncher) learn_host_layout(session, hosts);
  // Without chorusrun no launcher tells the ranks that a peer died (mpirun,
  // srun and torchrun stop the job, or wait, without a word to chorus):
  // same-host peers are watched in /proc, so a survivor names a dead one in
  // about a second (docs/errors.md). What to watch travels with the
  // transport addresses below.
  const bool watch_peers = job.launcher != "chorusrun" && job.size > 1;
  // Bound before the transport exists, so its buffers are allocated near
  // the NIC and its CQ gets the planned completion vector.
  // Under PMIx no CHORUS_STORE_ADDR tells the tcp transport which of this
  // host's addresses the others reach: the one toward rank 0's store does.
  if (!all_local && session.settings.tcp.iface.empty() && !session.bootstrap->address_toward_store().empty()) {
    session.settings.tcp.iface = session.bootstrap->address_toward_store();
  }
  const topology::Placement placement = place(describe_nic(session.settings, all_local), host);
  // The progress thread follows the plan only when the rank is bound: an
  // unbound rank's thread stays wherever the rank's threads may run.
  if (placement.plan.bind) session.progress_cpus = placement.plan.progress_cpus;
  // This host's ranks: shm between them when the job spans hosts (hybrid).
  session.transport = create_transport(session.settings, job.rank, job.size, layout, placement.plan.completion_vector);
  bootstrap::Bytes mine = session.transport->address();
  if (watch_peers) mine = with_process_description(std::move(mine));
  std::vector<bootstrap::Bytes> addresses = session.bootstrap->all_gather("chorus/transport", mine);
  if (watch_peers) addresses = watch_local_peers(session, hosts, std::move(addresses));
  session.transport->connect(addresses);
  session.engine = std::make_unique<p2p::Engine>(*session.transport, job.rank, job.size, job.local_size, session.settings);
  session.engine->set_failure_probe([&session](bool stalled) { return session.peer_failure(stalled); });
  std::vector<bool> other_host(static_cast<size_t>(job.size));
  for (size_t r = 0; r < other_host.size(); ++r) {
    other_host[r] = session.host_of_engine_rank[r] != session.host_of_engine_rank[static_cast<size_t>(job.rank)];
  }
  session.engine->set_other_hosts(std::move(other_host));
  session.nonblocking();  // the engine's waits know the session's lock from the first call
  std::vector<int> everyone(static_cast<size_t>(job.size));
  std::iota(everyone.begin(), everyone.end(), 0);
  set_members(std::move(everyone), job.rank);
  session.bootstrap->barrier("chorus/connected");
  log::info("rank ", job.rank, "/", job.size, " connected over ", session.transport->name(), " (launcher ",
            job.launcher, ", bootstrap ", job.bootstrap, ")");
  // A transport that acks and retransmits in software (UD) needs progress
  // between calls from the start, not only after a non-blocking call
  // (CHORUS_PROGRESS=caller: nothing between calls, by request).
  if (session.settings.progress == "thread" && session.transport->needs_progress_between_calls()) {
    std::lock_guard lock(session.mutex);
    session.nonblocking().serve_between_calls();
  }
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
  calls_made_ = &session_->calls_made[context_id_];
  engine_ranks_ = std::move(engine_ranks);
  rank_ = rank;
  // Disjoint groups of a split may share a context id: the members tell them apart.
  uint64_t members = fnv1a::kOffsetBasis;
  for (const int r : engine_ranks_) members = fnv1a::mix(members, static_cast<uint64_t>(r));
  ledger_id_ = (static_cast<uint64_t>(context_id_) << 32) | static_cast<uint32_t>(members ^ (members >> 32));
  rank_of_engine_rank_.assign(static_cast<size_t>(session_->job.size), -1);
  for (size_t r = 0; r < engine_ranks_.size(); ++r) rank_of_engine_rank_[static_cast<size_t>(engine_ranks_[r])] = static_cast<int>(r);
  spans_shared_hosts_ =
      session_->settings.hierarchical != "off" && spans_shared_hosts(session_->host_of_engine_rank, engine_ranks_);
}

void CommunicatorImpl::refuse_peer(int peer, const char* what) const {
  fail(Status::invalid_argument, what, ": peer ", peer, " is not a rank of this communicator (0..", size() - 1, ")");
}

CommunicatorImpl::~CommunicatorImpl() {
  try {
    finalize("destroyed its Communicator without finalize()");
  } catch (const std::exception& e) {
    log::warn("finalize during destruction failed: ", e.what());
  }
}

std::string CommunicatorImpl::transport_name() const {
  return session_->transport ? session_->transport->name() : "none";
}

void CommunicatorImpl::report_unusable() const {
  if (finalized_) fail(Status::finalized, "the communicator was used after finalize()");
  if (session_->closed) {
    fail(Status::finalized, "the communicator was used after the world communicator it was split from was finalized");
  }
  if (sticky_error_) {
    session_->note_reported(*sticky_error_);  // a detached operation's failure reaches the application here
    throw Error(sticky_error_->status(),
                concat("the communicator is unusable after an earlier error: ", sticky_error_->what()),
                sticky_error_->peer());
  }
  fail(Status::internal, "report_unusable() called for a usable communicator");
}


// What chorusrun recorded in the store about the first rank that failed
// (its death or stop), as an error naming that rank; nullopt if nothing.
std::optional<Error> Session::launcher_failure() {
  return bootstrap ? bootstrap->launcher_failure() : std::nullopt;
}

// A timeout or lost peer is often the echo of a rank that died elsewhere:
// the peer we waited on was itself waiting. chorusrun records the first rank
// that failed in the store; adding it names the real culprit.
std::optional<Error> CommunicatorImpl::launcher_report(const Error& error) {
  const Status status = error.status();
  if (!session_ || (status != Status::timeout && status != Status::peer_failed && status != Status::transport)) {
    return std::nullopt;
  }
  if (std::string_view(error.what()).find("chorusrun reports:") != std::string_view::npos) return std::nullopt;
  // Only chorusrun reports into the store: under another launcher nothing will come.
  if (session_->job.launcher != "chorusrun") return std::nullopt;
  // An error that names no peer (a provider's completion error without
  // context) often comes before the launcher has even reaped the dead rank:
  // give its report a moment to arrive. So does a broken connection to a
  // named peer: that peer may be a survivor that failed because of the dead
  // rank and left, its endpoint gone (a read from it "canceled") a few
  // milliseconds after the kill, before the launcher's record.
  // A peer_failed naming its peer came from the store or /proc (a departure,
  // a dead process): that is the cause itself, nothing to wait for.
  const auto patience = error.peer() < 0                 ? std::chrono::milliseconds(2000)
                        : status == Status::transport ? std::chrono::milliseconds(500)
                                                         : std::chrono::milliseconds(0);
  const auto give_up = std::chrono::steady_clock::now() + std::min(patience, session_->settings.timeout);
  for (;;) {
    if (auto failure = session_->launcher_failure()) return failure;
    if (std::chrono::steady_clock::now() >= give_up || !session_->bootstrap || !session_->bootstrap->store_answers()) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::split(int color, int key) {
  CallScope scope(*this, "split");
  std::lock_guard lock(session_->mutex);
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
  return make_child(context_id, std::move(engine_ranks), new_rank);
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::make_child(uint32_t context_id, std::vector<int> engine_ranks,
                                                               int rank) const {
  std::unique_ptr<CommunicatorImpl> child(new CommunicatorImpl());
  child->session_ = session_;
  child->context_id_ = context_id;
  child->forced_ = forced_;
  child->tuning_ = tuning_;
  child->set_members(std::move(engine_ranks), rank);
  return child;
}

void CommunicatorImpl::set_algorithm(Collective op, std::string_view name) {
  std::lock_guard lock(session_->mutex);
  if (static_cast<unsigned>(op) >= static_cast<unsigned>(kNumCollectives)) {
    fail(Status::invalid_argument, "set_algorithm: invalid collective value ", static_cast<int>(op));
  }
  last_shape_[static_cast<size_t>(op)] = {};  // its algorithm may change
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
  std::lock_guard lock(session_->mutex);
  return std::string(choose(op, bytes).name);
}

namespace {
// The rank a failure came from, for this rank's departure record
// (Departure::cause): the peer of a peer failure or of a broken link; -1 for
// this rank's own errors (a bad argument, a disagreement, a timeout: who
// failed first is not known there).
int caused_by(const Error& error) {
  return error.status() == Status::peer_failed || error.status() == Status::transport ? error.peer() : -1;
}
}  // namespace

void CommunicatorImpl::finalize(const char* how) {
  if (!session_) return;  // construction failed before the session existed
  std::unique_lock lock(session_->mutex);
  if (finalized_) return;
  if (!is_world()) {
    // Local (as MPI_Comm_free): its outstanding operations complete first,
    // their buffers and scratch are in use until then. Errors stay with them.
    if (p2p::Progress* progress = session_->operations()) progress->complete_all(lock, this);
    finalized_ = true;
    return;  // split/dup: nothing to tear down; the session outlives it
  }
  Session& session = *session_;
  p2p::Progress* progress = session.operations();
  if (progress != nullptr) {
    // The progress thread may be waiting for the lock: stop it without it.
    // From here this thread drives the operations still outstanding.
    lock.unlock();
    progress->stop_thread();
    lock.lock();
  }
  if (session.engine) {
    // What this rank moved, split by where its peers are (docs/transport-hybrid.md, "Bytes").
    const p2p::Counters& counted = session.engine->counters();
    log::info("rank ", session.job.rank, " payload bytes: this host's ranks out ", counted.bytes_out_this_host, " in ",
              counted.bytes_in_this_host, ", other hosts' ranks out ", counted.bytes_out_other_hosts, " in ",
              counted.bytes_in_other_hosts);
  }
  std::optional<Error> failure;
  std::vector<p2p::OperationRef> cancelled;
  if (sticky_error_ || !session.bootstrap) {
    // Failed: every operation was abandoned with the error and completes at once.
    if (progress != nullptr) progress->complete_all(lock, nullptr);
    session.closed = true;
    session.announce_departure(sticky_error_ ? sticky_error_->what() : how, sticky_error_.has_value(),
                               sticky_error_ ? caused_by(*sticky_error_) : -1);
  } else {
    session.closed = true;
    // Under PMIx the announcement waits until finalize's fence stalls: it
    // would open the store connection in every rank (leave_job).
    if (!session.bootstrap->uses_pmix()) session.announce_departure(how, false);
    try {
      leave_job(how);
    } catch (const Error& e) {
      failure = e;  // still release everything below
    }
    if (progress != nullptr && progress->outstanding() > 0) {
      // What is left could not complete (or the barrier failed): cancelled,
      // so no transport keeps using its buffers, and named below.
      cancelled = progress->outstanding_operations();
      const std::string cause = failure ? concat("finalize failed: ", failure->what())
                                        : std::string("it was still unmatched after every rank had reached finalize");
      progress->cancel_all([&](const p2p::Operation& operation) {
        return Error(Status::invalid_argument,
                     concat("finalize on rank ", rank_, " cancelled ", describe_operation(operation), ": ", cause));
      });
    }
  }
  finalized_ = true;
  if (!failure) failure = report_operations(cancelled);
  if (session.engine) {
    // After an error, peers may still need our last messages to learn what
    // went wrong (injected sends leave on later progress): linger briefly.
    using std::chrono::milliseconds;
    session.engine->flush_sends(sticky_error_ || failure ? milliseconds(100) : milliseconds(0), milliseconds(1000));
  }
  scratch_.release_all();  // its registrations go with the engine
  spare_scratch_.clear();
  session.engine.reset();
  session.transport.reset();
  session.bootstrap.reset();
  if (failure) throw *failure;
}

// What finalize tells the application about its non-blocking operations:
// those it cancelled, and those that failed with nobody told (a detached
// request's error).
std::optional<Error> CommunicatorImpl::report_operations(
    const std::vector<p2p::OperationRef>& cancelled) {
  std::vector<std::string> lines;
  for (const auto& operation : cancelled) lines.push_back(describe_operation(*operation));
  std::optional<Error> unreported;
  size_t unreported_count = 0;
  auto reported = [this](const Error& error) {
    const std::string_view text = error.what();
    return std::any_of(session_->reported_failures.begin(), session_->reported_failures.end(),
                       [&](const std::string& failure) { return text.find(failure) != std::string_view::npos; });
  };
  for (const auto& operation : session_->failed_operations) {
    if (operation->error_reported.load() || reported(*operation->error) ||
        std::find(cancelled.begin(), cancelled.end(), operation) != cancelled.end()) {
      continue;
    }
    if (unreported_count++ == 0) unreported = *operation->error;
  }
  session_->failed_operations.clear();
  if (lines.empty() && unreported_count == 0) return std::nullopt;
  std::string text = concat("finalize on rank ", rank_, " failed: ");
  if (!lines.empty()) {
    text += concat(lines.size(), lines.size() == 1 ? " request was" : " requests were",
                   " still unmatched after every rank had reached finalize and ", lines.size() == 1 ? "was" : "were",
                   " cancelled: ");
    for (size_t i = 0; i < lines.size(); ++i) text += concat(i == 0 ? "" : "; ", lines[i]);
    text += " (every request must be matched and completed before finalize)";
  }
  if (unreported_count > 0) {
    text += concat(lines.empty() ? "" : "; and ", unreported_count,
                   unreported_count == 1 ? " operation" : " operations",
                   " failed earlier with nobody waiting for ", unreported_count == 1 ? "it" : "them",
                   " (a detached request): ", unreported->what());
  }
  // Cancelled requests are the application's mistake; otherwise the
  // failure's own status and peer.
  if (lines.empty()) return Error(unreported->status(), text, unreported->peer());
  return Error(Status::invalid_argument, text);
}

const Error& CommunicatorImpl::become_unusable(Error error) {
  sticky_error_ = std::move(error);
  if (session_->engine) session_->engine->abandon_all(*sticky_error_);
  return *sticky_error_;
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
const CommunicatorImpl& Communicator::impl() const {
  if (!impl_) fail(Status::finalized, "use of a moved-from chorus::Communicator");
  return *impl_;
}

int Communicator::rank() const { return impl().rank(); }
int Communicator::size() const { return impl().size(); }
int Communicator::local_rank() const { return impl().local_rank(); }
int Communicator::local_size() const { return impl().local_size(); }
std::string Communicator::transport_name() const { return impl().transport_name(); }
int Communicator::host() const { return impl().host(); }
Traffic Communicator::traffic() const { return impl().traffic(); }

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
std::vector<std::string> Communicator::algorithms(Collective op) const { return impl().algorithms(op); }
std::string Communicator::selected_algorithm(Collective op, size_t bytes) const {
  return impl().selected_algorithm(op, bytes);
}
void Communicator::finalize() { impl().finalize(); }

}  // namespace chorus
