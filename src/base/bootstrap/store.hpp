// The bootstrap TCP key/value store (docs/architecture.md §6): served by chorusrun (or
// by rank 0 under another launcher), used by every rank to publish and fetch
// transport addresses.
//
// Every connection starts with a HELLO frame carrying the job secret; the
// server compares it in constant time and closes the connection on mismatch.
// Frames are length-checked (see frame.hpp); a malformed, truncated or
// oversized frame gets an ERROR frame naming the problem and the connection is
// closed, while the server keeps serving every other client.
#pragma once

#include "common/error.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace chorus::bootstrap {

using Bytes = std::vector<uint8_t>;
class Departures;
class PmixClient;
struct PmixFence;

// How often a rank that waits at startup says what it waits for: every few
// seconds, sooner with a short CHORUS_TIMEOUT.
std::chrono::milliseconds startup_report_interval(std::chrono::milliseconds timeout);

struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // wrong secret
  uint64_t frames_rejected = 0;      // malformed / oversized / truncated / stalled
  uint64_t connections_evicted = 0;  // closed without HELLO to admit newer connections
};

class StoreServer {
 public:
  // Listens on bind_address:port (port 0 picks a free port) and serves from a
  // background thread until destroyed. Single-host jobs bind 127.0.0.1.
  // `stall_timeout`: a frame (the HELLO: counted from the connection) must
  // arrive whole within this time of its first byte, or the connection is
  // closed. Before HELLO a connection may hold only a small HELLO, and at most
  // 256 such connections are kept.
  StoreServer(const std::string& bind_address, uint16_t port, std::string secret,
              std::chrono::milliseconds stall_timeout = std::chrono::seconds(10));
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  uint16_t port() const;
  // Sets a key from inside the serving process (e.g. chorusrun publishing a failure).
  void set(const std::string& key, const Bytes& value);
  // Reads a key from inside the serving process; nullopt if it is not set.
  std::optional<Bytes> get(const std::string& key) const;
  // Adds to a counter from inside the serving process, as a client's ADD does
  // (missing = 0); returns the new value. Throws if the value is no counter.
  int64_t add(const std::string& key, int64_t delta);
  // Open connections that presented the secret (the ranks still using it).
  size_t clients() const;
  ServerStats stats() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// What Bootstrap needs from a store: chorus' own (StoreClient) or one the
// caller brought (wrap_external_store).
class StoreAccess {
 public:
  virtual ~StoreAccess() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits until `key` exists, then returns its value.
  virtual Bytes get(const std::string& key) = 0;
  // Waits until every key exists.
  virtual void wait(const std::vector<std::string>& keys) = 0;
  // Atomically adds `delta` to the integer at `key` (missing = 0); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // True if `key` exists now (no waiting).
  virtual bool check(const std::string& key) = 0;
  // get() with its own deadline instead of the store's timeout.
  virtual Bytes get_until(const std::string& key, std::chrono::steady_clock::time_point deadline) = 0;
  // From now on, waits (get, wait) ask `failure` about once a second and end
  // with the Error it returns, if any: chorusrun records a dead rank in the
  // store, so a rank waiting on it during setup says so at once instead of
  // at the timeout. `failure` may use this store; its own waits are plain.
  virtual void set_failure_check(std::function<std::optional<Error>()> failure) = 0;
};

class StoreClient final : public StoreAccess {
 public:
  // Connects (retrying until `timeout`, or `connect_within` if given, while
  // the server is not up yet) and authenticates. Every later call gives up
  // after `timeout`.
  StoreClient(const std::string& host, uint16_t port, const std::string& secret, std::chrono::milliseconds timeout,
              std::optional<std::chrono::milliseconds> connect_within = std::nullopt);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::string& key) override;
  Bytes get_until(const std::string& key, std::chrono::steady_clock::time_point deadline) override;
  void set_failure_check(std::function<std::optional<Error>()> failure) override;
  // The store is served by this rank's process (mpirun, srun, torchrun):
  // a lost connection then fails as Status::peer_failed naming that rank.
  void set_served_by(int rank);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A StoreClient that connects on its first call instead of at once (the
// PMIx bootstrap: docs/bootstrap.md, "No connection to rank 0").
class LazyStore : public StoreAccess {
 public:
  // Whether a call has opened the connection yet.
  virtual bool connected() const = 0;
};
// Where a lazy client connects to, and the secret it presents.
struct StoreLocation {
  std::string host;
  uint16_t port = 0;
  std::string secret;
};
// `served_by`: the rank whose process serves the store (a lost connection
// then names it), or -1.
std::unique_ptr<LazyStore> lazy_store_client(std::string host, uint16_t port, std::string secret,
                                             std::chrono::milliseconds timeout, int rank, int served_by);
// The same, where even the address is looked up on first use (`locate`,
// under PMIx a get of rank 0's record): a failed lookup fails that call and
// every later one the same way, as a connection that failed.
std::unique_ptr<LazyStore> lazy_store_client(std::function<StoreLocation()> locate, std::chrono::milliseconds timeout,
                                             int rank, int served_by);

// A store's waiting get: `get_until` in slices of about a second until
// `deadline`, asking `failure` between slices, so a rank that failed ends the
// wait at once, named. `asking` is true while `failure` runs (its own waits
// are plain). Used by StoreClient and wrap_external_store's store.
Bytes get_checking_failures(const std::function<Bytes(std::chrono::steady_clock::time_point)>& get_until,
                            const std::string& key, std::chrono::steady_clock::time_point deadline,
                            const std::function<std::optional<Error>()>& failure, bool& asking);

// The caller's store (Communicator::init(rank, size, store)) as a StoreAccess:
// keys get "<key_prefix>/", waits run in slices of a second with the failure
// check between them, and whatever the caller's store throws becomes
// Error(Status::bootstrap) naming the key (a timeout: Status::timeout).
std::unique_ptr<StoreAccess> wrap_external_store(std::shared_ptr<KeyValueStore> store, std::string key_prefix,
                                           std::chrono::milliseconds timeout);

// Where this process sits in the job and how to reach the store, detected
// from the launcher's environment, in this order:
//   chorusrun: CHORUS_RANK, CHORUS_SIZE, CHORUS_LOCAL_RANK, CHORUS_LOCAL_SIZE,
//              CHORUS_STORE_ADDR (host:port), CHORUS_JOB_SECRET
//   mpirun:    OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE
//   srun:      SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (or PMI_RANK/PMI_SIZE)
//   torchrun:  RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE + MASTER_ADDR/MASTER_PORT
// Under launchers other than chorusrun, rank 0 serves the store: at
// CHORUS_STORE_ADDR or MASTER_ADDR:MASTER_PORT if given, else on 127.0.0.1
// with its port published in a file under /tmp named after the job id
// (single-host jobs only). Invalid values throw Error(Status::config).
struct JobInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string launcher;    // "chorusrun", "mpirun", "srun", "torchrun", "single"
  std::string store_host;  // empty: this process must serve (rank 0) or find it via the job file
  uint16_t store_port = 0;
  std::string secret;
  bool rank0_serves = false;  // rank 0 must start a StoreServer
  std::string job_id;         // for the port file and key namespacing
  std::string size_variable = "size";  // where `size` came from, e.g. "WORLD_SIZE" (for messages)
  std::string bootstrap = "store";     // "pmix" (PMIx server) or "store" (chorus' TCP store)
};
JobInfo detect_job();

// The job as CHORUS_BOOTSTRAP (`bootstrap_setting`: pmix, store or auto)
// chooses (choose_bootstrap in pmix_client.hpp): for pmix, PMIx_Init, and
// rank, size, local rank and size from PMIx (the launcher's own variables
// are not read); `pmix` is the client the Bootstrap must use. For store,
// detect_job() and no client.
struct DetectedJob {
  JobInfo job;
  std::shared_ptr<PmixClient> pmix;
};
DetectedJob detect_job(const std::string& bootstrap_setting);

// The value rank 0 publishes for an all_gather: per rank a u32 big-endian
// length and the bytes. unpack() trusts nothing it reads from the store and
// throws Error(Status::bootstrap) naming `key` for a value that is not
// exactly `size` such entries.
namespace packed {
Bytes pack(const std::vector<Bytes>& blobs);
std::vector<Bytes> unpack(std::span<const uint8_t> packed, int size, const std::string& key);
}  // namespace packed

// Connects this process to the job's store, starting the server in rank 0 if
// the launcher did not provide one. The returned object owns both.
class Bootstrap {
 public:
  // Under PMIx, a fence that has waited this long opens the store connection
  // (to read departures, or to announce at finalize that this rank leaves).
  // Sooner would open it in many ranks of a large or oversubscribed job,
  // whose fences and arrivals at finalize spread over seconds.
  static constexpr std::chrono::seconds kFenceOpensStoreAfter{5};
  explicit Bootstrap(const JobInfo& job, std::chrono::milliseconds timeout);
  // Through the PMIx server (job.bootstrap "pmix"): all_gather and barrier
  // are PMIx fences; rank 0 still serves a store for the rest (departures,
  // the call ledger, finalize), and publishes its address through PMIx.
  Bootstrap(const JobInfo& job, std::chrono::milliseconds timeout, std::shared_ptr<PmixClient> pmix);
  // Over a store the caller brought (wrap_external_store): nothing to serve or find.
  Bootstrap(const JobInfo& job, std::chrono::milliseconds timeout, std::unique_ptr<StoreAccess> store);
  ~Bootstrap();
  StoreAccess& store();
  // Ranks that announced they left the job (departures.hpp).
  Departures& departures();
  // What chorusrun recorded in the store about the first rank that failed
  // (died or stopped), as Error(Status::peer_failed) naming that rank;
  // nullopt if nothing was recorded, under other launchers, or once the
  // store stopped answering (rank 0 may have served it).
  std::optional<Error> launcher_failure();
  bool store_answers() const { return store_answers_; }
  // Under PMIx in a job across hosts: this host's address that reaches rank
  // 0's store (what CHORUS_TCP_IFACE=auto means; the tcp transport cannot
  // find it in CHORUS_STORE_ADDR there); looks rank 0's record up in PMIx on
  // the first call. Empty otherwise.
  const std::string& address_toward_store();
  // Under PMIx: every rank's node name from the resource manager's map
  // (PMIx_Resolve_nodes/_peers, answered by the local server without a
  // fence), or nullopt, logged, where the server has no usable map. Nullopt
  // under the store.
  std::optional<std::vector<std::string>> pmix_node_of_rank() const;
  // launcher_failure(), else a rank the PMIx server reported dead, else the
  // first rank that left the job after an error (any launcher), as
  // Error(Status::peer_failed) naming it.
  // `may_open_store`: under PMIx, whether this look may open the connection
  // to rank 0's store to read departures (lazy_store_client); without it,
  // departures are read only once something else opened it.
  std::optional<Error> peer_failure(bool may_open_store = true);
  // Under PMIx: the store connection is opened on first use, not at setup.
  bool uses_pmix() const { return pmix_ != nullptr; }
  // The longest a PMIx fence of this job has taken so far (0 under the store).
  std::chrono::steady_clock::duration slowest_fence() const { return slowest_fence_; }
  // Whether the store connection is open (always, except under PMIx before
  // its first use).
  bool store_open() const;
  // Whether any rank passed `mine` = true: every rank must call it (a
  // barrier). Under PMIx one collecting fence; under the store a counter and
  // a barrier. `progress` runs while it waits, as for barrier().
  bool any_rank(const std::string& name, bool mine, const std::function<void()>& progress);
  // Publishes `blob` under "<prefix>/<rank>" and returns every rank's blob.
  std::vector<Bytes> all_gather(const std::string& prefix, const Bytes& blob);
  // Store-based barrier (used at setup and teardown, not on the data path).
  // With `progress`, waits by polling the store and calls `progress` in
  // between, so a transport that repairs losses in software (UD) keeps
  // answering peers that still need it.
  void barrier(const std::string& name, const std::function<void()>& progress = {});

 private:
  JobInfo job_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<PmixClient> pmix_;  // set under the PMIx bootstrap; released last (PMIx_Finalize)
  std::map<std::string, int> pmix_rounds_;  // all_gathers per prefix: each round gets fresh PMIx keys
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<StoreAccess> client_;
  LazyStore* lazy_ = nullptr;  // client_ under PMIx: connected on first use
  std::chrono::steady_clock::duration slowest_fence_{};
  std::unique_ptr<Departures> departures_;
  bool store_answers_ = true;
  std::string address_toward_store_;
  bool address_toward_store_known_ = false;
  bool joined_ = false;  // the first all_gather (which reports missing ranks as "not joined") is done

  void connect_store(const std::string& host, uint16_t port);
  void open_pmix_store();
  // Rank 0's store record under PMIx, read with PMIx_Get (a direct read
  // from rank 0's server before the first collecting fence, local after it).
  StoreLocation pmix_store_location(std::chrono::milliseconds within) const;
  std::vector<Bytes> pmix_all_gather(const std::string& prefix, const Bytes& blob);
  bool pmix_any_rank(const std::string& name, bool mine, const std::function<void()>& progress);
  // Put + commit + a collecting fence (`what` names it) + every rank's value.
  std::vector<Bytes> pmix_exchange(const std::string& name, const Bytes& blob, const std::string& what,
                                   const std::function<void()>& progress);
  // Waits for a PMIx fence, calling `progress` (if any) between looks and
  // failing at once, named, when a rank failed; `what` names it in errors.
  void wait_fence(const std::shared_ptr<PmixFence>& fence, const std::string& what,
                  const std::function<void()>& progress);
  Bytes wait_reporting(const std::string& key, const std::function<std::string()>& what_is_missing,
                       const std::string& hint);
  void linger_until_read(const std::string& counter, int readers);
};

}  // namespace chorus::bootstrap
