// The PMIx client (pmix_client.hpp) and CHORUS_BOOTSTRAP's choice. Built
// against libpmix (Debian's libpmix-dev, PMIx 4.2) when CMake found it
// (CHORUS_HAVE_PMIX); otherwise connect() says this build has no PMIx.
#include "bootstrap/pmix_client.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "common/config.hpp"
#include "common/cpu_time.hpp"
#include "common/log.hpp"

#ifdef CHORUS_HAVE_PMIX
#include <pmix.h>
#endif

namespace chorus::bootstrap {

namespace {

bool is_set(const char* name) { return config::get(name).has_value(); }

constexpr const char* kNoPmixBuild =
    "this build of chorus has no PMIx (libpmix-dev was not found when it was configured, or it was configured with "
    "-DCHORUS_PMIX=OFF)";

}  // namespace

BootstrapChoice choose_bootstrap(const std::string& setting) {
  const bool server = is_set("PMIX_NAMESPACE") && is_set("PMIX_RANK");
  if (setting == "store") return {"store", "CHORUS_BOOTSTRAP=store"};
  if (setting == "pmix") {
    if (!pmix_built()) fail(Status::config, "CHORUS_BOOTSTRAP=pmix: ", kNoPmixBuild, "; use CHORUS_BOOTSTRAP=store or auto");
    if (!server) {
      fail(Status::config, "CHORUS_BOOTSTRAP=pmix, but no PMIx server started this process (PMIX_NAMESPACE and "
                           "PMIX_RANK are not both set): start it with srun --mpi=pmix, Open MPI's mpirun or prterun, "
                           "or use CHORUS_BOOTSTRAP=store or auto");
    }
    return {"pmix", "CHORUS_BOOTSTRAP=pmix"};
  }
  // auto. chorusrun's and torchrun's ranks are their launcher's children: a
  // PMIx identity they see is their parent's (one rank of a step that
  // started the launcher), not theirs, and their launcher serves the job.
  if (is_set("CHORUS_RANK")) return {"store", "auto: chorusrun started this process (CHORUS_RANK is set)"};
  if (is_set("TORCHELASTIC_RUN_ID")) return {"store", "auto: torchrun started this process (TORCHELASTIC_RUN_ID is set)"};
  if (!server) return {"store", "auto: no PMIx server started this process (PMIX_NAMESPACE/PMIX_RANK not set)"};
  if (!pmix_built()) return {"store", "auto: a PMIx server started this process, but this build has no PMIx"};
  // Open MPI 4.1's mpirun (ORTE) deadlocks in PMIx_server_finalize at the
  // end of a job where a rank left while the others' clients were in a
  // fence (seen in 1 of 6 runs of launcher.first_hour.leave-early-mpirun:
  // every rank gone, mpirun stuck for good; with finalize as a fence,
  // mpirun crashed in 3 of 12 runs and hung in the 13th); with the store
  // chorus never talks to its server. CHORUS_BOOTSTRAP=pmix uses it anyway.
  if (is_set("OMPI_COMM_WORLD_RANK")) {
    return {"store", "auto: Open MPI's mpirun started this process (its PMIx server can hang at the end of a job "
                     "whose rank left during a fence; CHORUS_BOOTSTRAP=pmix uses it anyway)"};
  }
  return {"pmix", "auto: a PMIx server started this process (PMIX_NAMESPACE and PMIX_RANK are set)"};
}

#ifndef CHORUS_HAVE_PMIX

bool pmix_built() { return false; }
std::string pmix_description() { return kNoPmixBuild; }

class PmixClient::Impl {};
PmixClient::PmixClient() = default;
PmixClient::~PmixClient() = default;
std::shared_ptr<PmixClient> PmixClient::connect() { fail(Status::config, "the PMIx bootstrap: ", kNoPmixBuild); }
void PmixClient::put(const std::string&, const Bytes&) { fail(Status::internal, "PMIx_Put: ", kNoPmixBuild); }
void PmixClient::commit() { fail(Status::internal, "PMIx_Commit: ", kNoPmixBuild); }
std::shared_ptr<PmixFence> PmixClient::start_fence(bool) { fail(Status::internal, "PMIx_Fence_nb: ", kNoPmixBuild); }
std::optional<Error> PmixClient::fence_error(const PmixFence&, const std::string&) { return std::nullopt; }
Bytes PmixClient::get(int, const std::string&, std::chrono::milliseconds) {
  fail(Status::internal, "PMIx_Get: ", kNoPmixBuild);
}
std::optional<Bytes> PmixClient::get_if_there(int, const std::string&, std::chrono::milliseconds) {
  fail(Status::internal, "PMIx_Get: ", kNoPmixBuild);
}
std::vector<Bytes> PmixClient::get_all(const std::string&, std::chrono::milliseconds) {
  fail(Status::internal, "PMIx_Get_nb: ", kNoPmixBuild);
}
std::optional<Error> PmixClient::terminated() const { return std::nullopt; }
std::optional<std::vector<std::string>> PmixClient::node_of_rank(std::string* why) const {
  *why = kNoPmixBuild;
  return std::nullopt;
}

#else

bool pmix_built() { return true; }
// "OpenPMIx 4.2.2rc2": PMIx_Get_version() without its "(PMIx Standard: ...)" tail.
std::string pmix_description() {
  const std::string version = PMIx_Get_version();
  return version.substr(0, version.find(" ("));
}

namespace {

[[noreturn]] void pmix_failed(pmix_status_t rc, const std::string& call) {
  fail(Status::bootstrap, call, " failed: ", PMIx_Error_string(rc), " (PMIx status ", rc, ")");
}

void check(pmix_status_t rc, const std::string& call) {
  if (rc != PMIX_SUCCESS) pmix_failed(rc, call);
}

std::string rank_text(pmix_rank_t rank) {
  return rank == PMIX_RANK_WILDCARD ? std::string("the job (PMIX_RANK_WILDCARD)") : concat("rank ", rank);
}

// An integer value of any of the types servers use for sizes and ranks.
std::optional<int64_t> as_integer(const pmix_value_t& value) {
  switch (value.type) {
    case PMIX_UINT8: return value.data.uint8;
    case PMIX_UINT16: return value.data.uint16;
    case PMIX_UINT32: return value.data.uint32;
    case PMIX_UINT64: return static_cast<int64_t>(value.data.uint64);
    case PMIX_INT: return value.data.integer;
    case PMIX_INT8: return value.data.int8;
    case PMIX_INT16: return value.data.int16;
    case PMIX_INT32: return value.data.int32;
    case PMIX_INT64: return value.data.int64;
    case PMIX_UINT: return value.data.uint;
    case PMIX_SIZE: return static_cast<int64_t>(value.data.size);
    case PMIX_PROC_RANK: return value.data.rank;
    default: return std::nullopt;
  }
}

// A job-level or per-process integer the server provides (PMIX_JOB_SIZE, ...).
int64_t get_integer(const pmix_proc_t& proc, const char* key) {
  pmix_value_t* value = nullptr;
  const std::string call = concat("PMIx_Get(", key, " of ", rank_text(proc.rank), " in namespace ", proc.nspace, ")");
  check(PMIx_Get(&proc, key, nullptr, 0, &value), call);
  const std::optional<int64_t> number = as_integer(*value);
  const int type = value->type;
  PMIX_VALUE_RELEASE(value);
  if (!number) fail(Status::bootstrap, call, " returned a value of type ", type, ", not an integer");
  return *number;
}

// What the server's termination events said: the first rank it reported dead.
// One PMIx client per process, so one record per process.
struct Terminations {
  std::mutex mutex;
  std::string nspace;
  std::optional<Error> first;
};
Terminations& terminations() {
  static Terminations record;
  return record;
}

const char* what_ended(pmix_status_t status) {
  if (status == PMIX_ERR_PROC_ABORTED) return "was aborted";
  if (status == PMIX_ERR_PROC_TERM_WO_SYNC) return "ended without finalizing";
  return "terminated";
}

// Runs in PMIx's progress thread: records, never calls back into PMIx (a
// blocking call there would wait for the thread it runs in).
void on_termination(size_t, pmix_status_t status, const pmix_proc_t* source, pmix_info_t info[], size_t ninfo,
                    pmix_info_t*, size_t, pmix_event_notification_cbfunc_fn_t done, void* done_data) {
  const pmix_proc_t* affected = source;
  std::optional<int> exit_code;
  for (size_t i = 0; i < ninfo; ++i) {
    if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC) {
      affected = info[i].value.data.proc;
    } else if (PMIX_CHECK_KEY(&info[i], PMIX_EXIT_CODE)) {
      if (auto code = as_integer(info[i].value)) exit_code = static_cast<int>(*code);
    }
  }
  // A normal end (exit status 0 after finalize) is no failure: the others may
  // still be finalizing.
  const bool failure = status != PMIX_EVENT_PROC_TERMINATED || (exit_code && *exit_code != 0);
  if (affected != nullptr && failure) {
    Terminations& record = terminations();
    std::lock_guard lock(record.mutex);
    if (!record.first && PMIX_CHECK_NSPACE(affected->nspace, record.nspace.c_str()) &&
        affected->rank != PMIX_RANK_WILDCARD) {
      const int rank = static_cast<int>(affected->rank);
      record.first = Error(Status::peer_failed,
                           concat("the PMIx server reports that rank ", rank, " ", what_ended(status),
                                  exit_code ? concat(" (exit status ", *exit_code, ")") : std::string(), " [",
                                  PMIx_Error_string(status), "]"),
                           rank);
    }
  }
  if (done != nullptr) done(PMIX_SUCCESS, nullptr, 0, nullptr, nullptr, done_data);  // let other handlers run
}

void fence_done(pmix_status_t status, void* data) {
  auto* fence = static_cast<std::shared_ptr<PmixFence>*>(data);
  (*fence)->finish(status);
  delete fence;
}

}  // namespace

class PmixClient::Impl {
 public:
  pmix_proc_t me{};
  std::optional<size_t> handler;  // the termination handler's registration
};

PmixClient::PmixClient() : impl_(std::make_unique<Impl>()) {}

std::shared_ptr<PmixClient> PmixClient::connect() {
  std::shared_ptr<PmixClient> client(new PmixClient());
  pmix_proc_t& me = client->impl_->me;
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_ms();
  check(PMIx_Init(&me, nullptr, 0), "PMIx_Init");
  log::debug("PMIx_Init took ",
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(), " ms (CPU ",
             process_cpu_ms() - cpu_start, " ms)");
  client->nspace_ = me.nspace;
  client->rank_ = static_cast<int>(me.rank);
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  const int64_t size = get_integer(job, PMIX_JOB_SIZE);
  if (size < 1 || size > INT32_MAX || client->rank_ < 0 || client->rank_ >= size) {
    fail(Status::bootstrap, "PMIx says this process is rank ", me.rank, " of a job of ", size, " (PMIX_JOB_SIZE)");
  }
  client->size_ = static_cast<int>(size);
  client->local_rank_ = static_cast<int>(get_integer(me, PMIX_LOCAL_RANK));
  client->local_size_ = static_cast<int>(get_integer(job, PMIX_LOCAL_SIZE));
  client->node_id_ = static_cast<uint32_t>(get_integer(me, PMIX_NODEID));
  if (client->local_size_ < 1 || client->local_size_ > client->size_ || client->local_rank_ < 0 ||
      client->local_rank_ >= client->local_size_) {
    fail(Status::bootstrap, "PMIx says rank ", client->rank_, " is local rank ", client->local_rank_, " of ",
         client->local_size_, " on its node (PMIX_LOCAL_RANK, PMIX_LOCAL_SIZE) in a job of ", client->size_);
  }
  {
    Terminations& record = terminations();
    std::lock_guard lock(record.mutex);
    record.nspace = client->nspace_;
    record.first.reset();
  }
  // Which of these a server raises differs (PRRTE documents
  // PMIX_EVENT_PROC_TERMINATED and PMIX_ERR_PROC_ABORTED; Open MPI 4.1's ORTE
  // and Debian 12's Slurm sent none to survivors when tried), so all are asked for. A server that refuses
  // costs only the naming (the store's departures still work): a warning.
  pmix_status_t codes[] = {PMIX_ERR_PROC_ABORTED, PMIX_EVENT_PROC_TERMINATED, PMIX_ERR_PROC_TERM_WO_SYNC};
  pmix_info_t name;
  PMIX_INFO_LOAD(&name, PMIX_EVENT_HDLR_NAME, "chorus-termination", PMIX_STRING);
  const pmix_status_t ref = PMIx_Register_event_handler(codes, 3, &name, 1, on_termination, nullptr, nullptr);
  PMIX_INFO_DESTRUCT(&name);
  if (ref >= 0) {
    client->impl_->handler = static_cast<size_t>(ref);
  } else {
    log::warn("PMIx_Register_event_handler(PMIX_ERR_PROC_ABORTED, PMIX_EVENT_PROC_TERMINATED) failed: ",
              PMIx_Error_string(ref), "; a rank that dies is named only by the store's records and local checks");
  }
  return client;
}

PmixClient::~PmixClient() {
  if (!impl_) return;
  if (impl_->handler) {
    const pmix_status_t rc = PMIx_Deregister_event_handler(*impl_->handler, nullptr, nullptr);
    if (rc != PMIX_SUCCESS) log::warn("PMIx_Deregister_event_handler failed: ", PMIx_Error_string(rc));
  }
  const pmix_status_t rc = PMIx_Finalize(nullptr, 0);
  if (rc != PMIX_SUCCESS) log::warn("PMIx_Finalize failed: ", PMIx_Error_string(rc), " (PMIx status ", rc, ")");
}

void PmixClient::put(const std::string& key, const Bytes& value) {
  if (key.size() > PMIX_MAX_KEYLEN) {
    fail(Status::internal, "PMIx_Put: key \"", key, "\" is longer than PMIX_MAX_KEYLEN (", PMIX_MAX_KEYLEN, ")");
  }
  pmix_byte_object_t bytes;
  // PMIx copies the value (PMIX_VALUE_LOAD), so pointing at ours is enough.
  bytes.bytes = reinterpret_cast<char*>(const_cast<uint8_t*>(value.data()));
  bytes.size = value.size();
  pmix_value_t loaded;
  PMIX_VALUE_LOAD(&loaded, &bytes, PMIX_BYTE_OBJECT);
  const pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &loaded);
  PMIX_VALUE_DESTRUCT(&loaded);
  if (rc != PMIX_SUCCESS) pmix_failed(rc, concat("PMIx_Put(\"", key, "\", ", value.size(), " bytes)"));
}

void PmixClient::commit() { check(PMIx_Commit(), "PMIx_Commit"); }

std::shared_ptr<PmixFence> PmixClient::start_fence(bool collect) {
  auto fence = std::make_shared<PmixFence>();
  pmix_proc_t everyone;
  PMIX_LOAD_PROCID(&everyone, nspace_.c_str(), PMIX_RANK_WILDCARD);
  pmix_info_t info;
  bool yes = true;
  PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  // The callback owns a reference: a fence that outlives a timed-out wait
  // still finds its state.
  auto* handle = new std::shared_ptr<PmixFence>(fence);
  const pmix_status_t rc = PMIx_Fence_nb(&everyone, 1, collect ? &info : nullptr, collect ? 1 : 0, fence_done, handle);
  PMIX_INFO_DESTRUCT(&info);
  if (rc == PMIX_OPERATION_SUCCEEDED) {  // done at once, no callback comes
    delete handle;
    fence->finish(PMIX_SUCCESS);
  } else if (rc != PMIX_SUCCESS) {
    delete handle;
    pmix_failed(rc, concat("PMIx_Fence_nb(", collect ? "PMIX_COLLECT_DATA" : "no data", ")"));
  }
  return fence;
}

std::optional<Error> PmixClient::fence_error(const PmixFence& fence, const std::string& what) {
  const auto rc = static_cast<pmix_status_t>(fence.status.load());
  if (rc == PMIX_SUCCESS) return std::nullopt;
  return Error(Status::bootstrap, concat(what, ": PMIx_Fence_nb failed: ", PMIx_Error_string(rc), " (PMIx status ", rc, ")"));
}

Bytes PmixClient::get(int rank, const std::string& key, std::chrono::milliseconds timeout) {
  std::optional<Bytes> value = get_if_there(rank, key, timeout);
  if (!value) pmix_failed(PMIX_ERR_NOT_FOUND, concat("PMIx_Get(\"", key, "\" of rank ", rank, ")"));
  return std::move(*value);
}

std::optional<Bytes> PmixClient::get_if_there(int rank, const std::string& key, std::chrono::milliseconds timeout) {
  pmix_proc_t peer;
  PMIX_LOAD_PROCID(&peer, nspace_.c_str(), static_cast<pmix_rank_t>(rank));
  pmix_info_t info;
  int seconds = static_cast<int>(std::max<int64_t>(1, (timeout.count() + 999) / 1000));
  PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &seconds, PMIX_INT);
  pmix_value_t* value = nullptr;
  const pmix_status_t rc = PMIx_Get(&peer, key.c_str(), &info, 1, &value);
  PMIX_INFO_DESTRUCT(&info);
  const std::string call = concat("PMIx_Get(\"", key, "\" of rank ", rank, ")");
  if (rc == PMIX_ERR_NOT_FOUND) return std::nullopt;
  if (rc != PMIX_SUCCESS) pmix_failed(rc, call);
  if (value->type != PMIX_BYTE_OBJECT) {
    const int type = value->type;
    PMIX_VALUE_RELEASE(value);
    fail(Status::bootstrap, call, " returned a value of type ", type, ", not the byte object chorus put");
  }
  const auto* begin = reinterpret_cast<const uint8_t*>(value->data.bo.bytes);
  Bytes bytes(begin, begin + value->data.bo.size);
  PMIX_VALUE_RELEASE(value);
  return bytes;
}

namespace {

// The gets of one get_all(): PMIx's progress thread fills them in; the
// caller waits until none is pending. Shared with every callback, so a get
// that answers after the caller gave up still finds it.
struct GetAll {
  std::mutex mutex;
  std::condition_variable answered;
  int pending = 0;
  std::vector<Bytes> values;
  std::vector<pmix_status_t> status;
  std::vector<int> types;  // the type of a value that was no byte object, else 0
  pmix_info_t timeout_info;
  GetAll() { PMIX_INFO_CONSTRUCT(&timeout_info); }
  ~GetAll() { PMIX_INFO_DESTRUCT(&timeout_info); }
};

struct OneGet {
  std::shared_ptr<GetAll> all;
  size_t index;
};

// PMIx releases `value` when this returns: the bytes are copied.
void got_value(pmix_status_t status, pmix_value_t* value, void* data) {
  std::unique_ptr<OneGet> get(static_cast<OneGet*>(data));
  GetAll& all = *get->all;
  {
    std::lock_guard lock(all.mutex);
    all.status[get->index] = status;
    if (status == PMIX_SUCCESS && value != nullptr) {
      if (value->type == PMIX_BYTE_OBJECT) {
        const auto* begin = reinterpret_cast<const uint8_t*>(value->data.bo.bytes);
        all.values[get->index].assign(begin, begin + value->data.bo.size);
      } else {
        all.types[get->index] = value->type;
      }
    } else if (status == PMIX_SUCCESS) {
      all.status[get->index] = PMIX_ERR_NOT_FOUND;
    }
    --all.pending;
    if (all.pending != 0) return;  // the waiter wakes once, for the last answer
  }
  all.answered.notify_all();
}

}  // namespace

std::vector<Bytes> PmixClient::get_all(const std::string& key, std::chrono::milliseconds timeout) {
  auto all = std::make_shared<GetAll>();
  const auto count = static_cast<size_t>(size_);
  all->values.resize(count);
  all->status.assign(count, PMIX_SUCCESS);
  all->types.assign(count, 0);
  int seconds = static_cast<int>(std::max<int64_t>(1, (timeout.count() + 999) / 1000));
  PMIX_INFO_LOAD(&all->timeout_info, PMIX_TIMEOUT, &seconds, PMIX_INT);
  auto call = [&](size_t r) { return concat("PMIx_Get_nb(\"", key, "\" of rank ", r, ")"); };
  for (size_t r = 0; r < count; ++r) {
    if (static_cast<int>(r) == rank_) continue;
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, nspace_.c_str(), static_cast<pmix_rank_t>(r));
    {
      std::lock_guard lock(all->mutex);
      ++all->pending;
    }
    auto* get = new OneGet{all, r};
    const pmix_status_t rc = PMIx_Get_nb(&peer, key.c_str(), &all->timeout_info, 1, got_value, get);
    if (rc != PMIX_SUCCESS) {
      delete get;
      {
        std::lock_guard lock(all->mutex);
        --all->pending;
      }
      pmix_failed(rc, call(r));  // the gets already in flight keep `all` alive until they answer
    }
  }
  std::unique_lock lock(all->mutex);
  if (!all->answered.wait_until(lock, std::chrono::steady_clock::now() + timeout, [&] { return all->pending == 0; })) {
    fail(Status::timeout, "PMIx_Get_nb(\"", key, "\"): ", all->pending, " of ", count - 1,
         " ranks' values did not arrive within ", timeout.count(), " ms (CHORUS_TIMEOUT)");
  }
  for (size_t r = 0; r < count; ++r) {
    if (all->status[r] != PMIX_SUCCESS) pmix_failed(all->status[r], call(r));
    if (all->types[r] != 0) {
      fail(Status::bootstrap, call(r), " returned a value of type ", all->types[r], ", not the byte object chorus put");
    }
  }
  return std::move(all->values);
}

std::optional<std::vector<std::string>> PmixClient::node_of_rank(std::string* why) const {
  char* list = nullptr;
  const pmix_status_t rc = PMIx_Resolve_nodes(nspace_.c_str(), &list);
  if (rc != PMIX_SUCCESS || list == nullptr) {
    *why = concat("PMIx_Resolve_nodes failed: ", PMIx_Error_string(rc), " (PMIx status ", rc, ")");
    return std::nullopt;
  }
  const std::string nodes(list);
  free(list);  // NOLINT: PMIx allocated it with malloc
  std::vector<std::string> node_of(static_cast<size_t>(size_));
  size_t begin = 0;
  while (begin <= nodes.size()) {
    size_t end = nodes.find(',', begin);
    if (end == std::string::npos) end = nodes.size();
    const std::string node = nodes.substr(begin, end - begin);
    begin = end + 1;
    if (node.empty()) continue;
    pmix_proc_t* procs = nullptr;
    size_t count = 0;
    const pmix_status_t peers = PMIx_Resolve_peers(node.c_str(), nspace_.c_str(), &procs, &count);
    if (peers != PMIX_SUCCESS) {
      *why = concat("PMIx_Resolve_peers(\"", node, "\") failed: ", PMIx_Error_string(peers));
      return std::nullopt;
    }
    std::string problem;
    for (size_t i = 0; i < count && problem.empty(); ++i) {
      const pmix_rank_t rank = procs[i].rank;
      if (rank >= static_cast<pmix_rank_t>(size_)) {
        problem = concat("PMIx_Resolve_peers(\"", node, "\") lists rank ", rank, " of a job of ", size_);
      } else if (!node_of[rank].empty()) {
        problem = concat("PMIx's map puts rank ", rank, " on both ", node_of[rank], " and ", node);
      } else {
        node_of[rank] = node;
      }
    }
    if (procs != nullptr) PMIX_PROC_FREE(procs, count);
    if (!problem.empty()) {
      *why = problem;
      return std::nullopt;
    }
  }
  for (size_t r = 0; r < node_of.size(); ++r) {
    if (node_of[r].empty()) {
      *why = concat("PMIx's map (nodes \"", nodes, "\") puts rank ", r, " on no node");
      return std::nullopt;
    }
  }
  const std::string& mine = node_of[static_cast<size_t>(rank_)];
  const auto local = std::count(node_of.begin(), node_of.end(), mine);
  if (local != local_size_) {
    *why = concat("PMIx's map puts ", local, " ranks on ", mine, " but PMIX_LOCAL_SIZE is ", local_size_);
    return std::nullopt;
  }
  return node_of;
}

std::optional<Error> PmixClient::terminated() const {
  Terminations& record = terminations();
  std::lock_guard lock(record.mutex);
  return record.first;
}

#endif  // CHORUS_HAVE_PMIX

}  // namespace chorus::bootstrap
