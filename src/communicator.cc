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
//   collectives:    0 | comm id (15) | call sequence (32) | step (16)
//   point-to-point: 1 | comm id (15) | unused (17)        | user tag (31)
constexpr uint64_t kUserTagBit = uint64_t{1} << 63;
constexpr int kMaxUserTag = 0x7fffffff;

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
  comm->settings_ = config::Settings::from_env();
  comm->job_ = bootstrap::detect_job();
  log::set_rank(comm->job_.rank);
  for (int i = 0; i < kNumCollectives; ++i) {
    auto op = static_cast<Collective>(i);
    if (auto name = config::get(env_name_for(op)); name && *name != "auto") {
      comm->forced_[static_cast<size_t>(i)] = coll::find(op, *name);
      if (comm->forced_[static_cast<size_t>(i)] == nullptr) {
        fail(Status::config, env_name_for(op), "=\"", *name, "\": expected one of ", algorithm_names(op));
      }
    }
  }
  comm->bootstrap_ = std::make_unique<bootstrap::Bootstrap>(comm->job_, comm->settings_.timeout);
  comm->connect();
  return comm;
}

void CommunicatorImpl::connect() {
  std::string host = this_hostname();
  auto hosts = bootstrap_->all_gather("chorus/host", bootstrap::Bytes(host.begin(), host.end()));
  bool all_local = std::all_of(hosts.begin(), hosts.end(),
                               [&](const bootstrap::Bytes& other) { return std::string(other.begin(), other.end()) == host; });
  transport_ = create_transport(settings_, job_.rank, job_.size, all_local);
  auto addresses = bootstrap_->all_gather("chorus/transport", transport_->address());
  transport_->connect(addresses);
  engine_ = std::make_unique<p2p::Engine>(*transport_, job_.rank, job_.size, job_.local_size, settings_);
  scratch_.track_with(engine_.get());
  world_ranks_.resize(static_cast<size_t>(job_.size));
  std::iota(world_ranks_.begin(), world_ranks_.end(), 0);
  bootstrap_->barrier("chorus/connected");
  log::info("rank ", job_.rank, "/", job_.size, " connected over ", transport_->name(), " (launcher ", job_.launcher,
            ")");
}

CommunicatorImpl::~CommunicatorImpl() {
  try {
    finalize();
  } catch (const std::exception& e) {
    log::warn("finalize during destruction failed: ", e.what());
  }
}

std::string CommunicatorImpl::transport_name() const { return transport_ ? transport_->name() : "none"; }

void CommunicatorImpl::check_usable() const {
  if (finalized_) fail(Status::finalized, "the communicator was used after finalize()");
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
    sticky_error_ = Error(e.status(), concat(what, " on rank ", job_.rank, " failed: ", e.what(), launcher_report(e)),
                          e.peer());
    throw *sticky_error_;
  } catch (const std::exception& e) {
    sticky_error_ = Error(Status::internal, concat(what, " on rank ", job_.rank, " failed: ", e.what()));
    throw *sticky_error_;
  }
}

// A timeout or lost peer is often the echo of a rank that died elsewhere:
// the peer we waited on was itself waiting. chorusrun records the first rank
// that failed in the store; adding it names the real culprit.
std::string CommunicatorImpl::launcher_report(const Error& error) {
  const Status status = error.status();
  if (!bootstrap_ || (status != Status::timeout && status != Status::peer_failed && status != Status::transport)) {
    return "";
  }
  try {
    auto& store = bootstrap_->store();
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

void CommunicatorImpl::run(Collective op, const coll::Args& user_args) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_usable();
  validate(op, user_args);
  if (op != Collective::barrier && user_args.count == 0) return;
  if (size() == 1) return run_single_rank(op, user_args);

  coll::Args args = user_args;
  if (op == Collective::reduce && args.recv == nullptr) {
    // MPI lets non-roots pass no receive buffer; algorithms may still use one.
    args.recv = scratch_.get(3, args.count * datatype_size(args.dtype));
  }
  const coll::Algorithm& algorithm = choose(op, payload_bytes(op, args, size()));
  const uint64_t tag_base = (sequence_++ & 0xffffffffu) << 16;
  coll::Context context(*engine_, world_ranks_, rank(), tag_base, scratch_, tuning_);
  guarded(to_string(op).data(), [&] { algorithm.run(context, args); });
}

void CommunicatorImpl::send(const void* buf, size_t bytes, int peer, int tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_usable();
  if (tag < 0 || tag > kMaxUserTag) fail(Status::invalid_argument, "send: tag ", tag, " outside 0..", kMaxUserTag);
  guarded("send", [&] {
    auto request = engine_->isend(peer, kUserTagBit | static_cast<uint64_t>(tag), buf, bytes);
    engine_->wait(request);
  });
}

void CommunicatorImpl::recv(void* buf, size_t bytes, int peer, int tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_usable();
  if (tag < 0 || tag > kMaxUserTag) fail(Status::invalid_argument, "recv: tag ", tag, " outside 0..", kMaxUserTag);
  guarded("recv", [&] {
    auto request = engine_->irecv(peer, kUserTagBit | static_cast<uint64_t>(tag), buf, bytes);
    engine_->wait(request);
  });
}

void CommunicatorImpl::set_algorithm(Collective op, std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
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
  std::lock_guard<std::mutex> lock(mutex_);
  return std::string(choose(op, bytes).name);
}

void CommunicatorImpl::finalize() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finalized_) return;
  finalized_ = true;
  std::optional<Error> failure;
  try {
    if (!sticky_error_ && bootstrap_) leave_job();
  } catch (const Error& e) {
    failure = e;  // still release everything below
  }
  scratch_.release_all();  // its registrations go with the engine
  scratch_.track_with(nullptr);
  engine_.reset();
  transport_.reset();
  bootstrap_.reset();
  if (failure) throw *failure;
}

void CommunicatorImpl::leave_job() {
  // Nobody tears down its transport while a peer may still read from it.
  bootstrap_->barrier("chorus/finalize");
  if (!job_.rank0_serves) return;
  // Rank 0 hosts the store: it stays up until every rank has left it.
  auto key = [](int r) { return concat("chorus/left/", r); };
  if (job_.rank != 0) {
    bootstrap_->store().set(key(job_.rank), {1});
    return;
  }
  std::vector<std::string> keys;
  for (int r = 1; r < job_.size; ++r) keys.push_back(key(r));
  bootstrap_->store().wait(keys);
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
void Communicator::recv(void* buf, size_t bytes, int peer, int tag) { impl().recv(buf, bytes, peer, tag); }
void Communicator::set_algorithm(Collective op, std::string_view name) { impl().set_algorithm(op, name); }
std::vector<std::string> Communicator::algorithms(Collective op) const { return impl_->algorithms(op); }
std::string Communicator::selected_algorithm(Collective op, size_t bytes) const {
  return impl_->selected_algorithm(op, bytes);
}
void Communicator::finalize() { impl().finalize(); }

}  // namespace chorus
