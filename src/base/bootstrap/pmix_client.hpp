// PMIx (docs/bootstrap.md, "Under a resource manager: PMIx"): which bootstrap
// a process uses (CHORUS_BOOTSTRAP), and the PMIx client behind the pmix one.
// This header names no PMIx type, so it compiles in every build; in a build
// without PMIx (CHORUS_HAVE_PMIX unset) PmixClient::connect() fails with
// Status::config saying so.
#pragma once

#include "common/error.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace chorus::bootstrap {

using Bytes = std::vector<uint8_t>;

// True if this build has the PMIx bootstrap.
bool pmix_built();
// "PMIx 4.2.2rc2" (the library's own version string), or why it is not built.
std::string pmix_description();

// CHORUS_BOOTSTRAP's answer for this process: "pmix" or "store", and why.
struct BootstrapChoice {
  std::string kind;
  std::string why;
};
// `setting` is CHORUS_BOOTSTRAP's value (pmix, store or auto). auto picks
// pmix when this build has it and a PMIx server started the process
// (PMIX_NAMESPACE and PMIX_RANK set), except under chorusrun or torchrun,
// whose ranks may inherit their parent's PMIx identity. pmix where it
// cannot work throws Error(Status::config) saying why.
BootstrapChoice choose_bootstrap(const std::string& setting);

// A fence in flight (PMIx_Fence_nb): PMIx's progress thread sets `done` and
// `status` (finish()); the caller sleeps in wait_for() between its own
// duties (driving its transport, asking whether a rank failed), and the
// fence's end wakes it. A sleeping waiter costs no CPU; one that polled
// every 5 ms made 51 200 wake-ups a second among 256 ranks (docs/bootstrap.md,
// PMIx, "all_gather and barrier").
struct PmixFence {
  std::atomic<bool> done{false};
  std::atomic<int> status{0};  // a pmix_status_t

  void finish(int pmix_status) {
    {
      std::lock_guard lock(mutex);
      status = pmix_status;
      done = true;
    }
    ended.notify_all();
  }
  // True once the fence has ended; returns at the latest after `most`.
  bool wait_for(std::chrono::steady_clock::duration most) {
    std::unique_lock lock(mutex);
    return ended.wait_for(lock, most, [this] { return done.load(); });
  }

 private:
  std::mutex mutex;
  std::condition_variable ended;
};

// This process' PMIx client: initialised once (PMIx_Init) when the job is
// detected, finalised (PMIx_Finalize) when the last owner lets it go. Every
// call's failure throws Error(Status::bootstrap) naming the PMIx call, the
// key and the peer rank where there is one, and PMIx_Error_string.
class PmixClient {
 public:
  // PMIx_Init, then this process' place in the job: PMIX_RANK, PMIX_JOB_SIZE,
  // PMIX_LOCAL_RANK, PMIX_LOCAL_SIZE, PMIX_NODEID; and a handler for the
  // server's process-termination events.
  static std::shared_ptr<PmixClient> connect();
  ~PmixClient();
  PmixClient(const PmixClient&) = delete;
  PmixClient& operator=(const PmixClient&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  uint32_t node_id() const { return node_id_; }
  const std::string& nspace() const { return nspace_; }

  // PMIx_Put(PMIX_GLOBAL) of a byte object; visible to the others after
  // commit() and a collecting fence.
  void put(const std::string& key, const Bytes& value);
  void commit();
  // PMIx_Fence_nb over every process of the namespace; with `collect`, the
  // committed values travel with it (PMIX_COLLECT_DATA), so get() after it
  // answers locally.
  std::shared_ptr<PmixFence> start_fence(bool collect);
  // The fence's outcome as an error naming `what`, or nullopt on success.
  static std::optional<Error> fence_error(const PmixFence& fence, const std::string& what);
  // PMIx_Get of `rank`'s byte object at `key`, waiting at most `timeout`.
  Bytes get(int rank, const std::string& key, std::chrono::milliseconds timeout);
  // The same, but nullopt where the server has no such value (yet): a key
  // of a rank that has not committed it before a fence is not waited for by
  // every server (Slurm's answered NOT-FOUND at once for a rank of its node).
  std::optional<Bytes> get_if_there(int rank, const std::string& key, std::chrono::milliseconds timeout);
  // PMIx_Get_nb of every other rank's byte object at `key`, all in flight at
  // once (PMIx serves each get on its progress thread: one at a time, a
  // job of 256 oversubscribed ranks spent a second per gather in them).
  // The vector has `size()` entries; this rank's (`rank()`) is empty.
  std::vector<Bytes> get_all(const std::string& key, std::chrono::milliseconds timeout);
  // Every rank's node name, from the server's map of the job
  // (PMIx_Resolve_nodes, then PMIx_Resolve_peers per node: answered from
  // the job's data the server handed over at PMIx_Init, no fence). Nullopt,
  // with `why`, where the map is missing or disagrees with PMIX_LOCAL_SIZE.
  std::optional<std::vector<std::string>> node_of_rank(std::string* why) const;
  // The first rank the PMIx server reported dead (aborted, or ended without
  // finalizing), as Error(Status::peer_failed) naming it; nullopt if none.
  std::optional<Error> terminated() const;

  class Impl;

 private:
  PmixClient();
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  uint32_t node_id_ = 0;
  std::string nspace_;
};

}  // namespace chorus::bootstrap
