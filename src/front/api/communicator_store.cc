// Communicator::init(rank, size, store): a job the caller numbered, joined
// over the caller's key/value store (torch's c10d::Store behind the PyTorch
// backend) instead of a launcher's environment and chorus' own store.
#include "api/communicator_impl.hpp"

#include "common/foreign_signal_handlers.hpp"

#include <algorithm>

namespace chorus {

void learn_host_layout(Session& session, const std::vector<bootstrap::Bytes>& hosts) {
  bootstrap::JobInfo& job = session.job;
  const bootstrap::Bytes& mine = hosts.at(static_cast<size_t>(job.rank));
  job.local_rank = static_cast<int>(std::count(hosts.begin(), hosts.begin() + job.rank, mine));
  job.local_size = static_cast<int>(std::count(hosts.begin(), hosts.end(), mine));
}

void watch_local_peers(Session& session, const std::vector<bootstrap::Bytes>& hosts) {
  const bootstrap::JobInfo& job = session.job;
  const std::string me = LocalLiveness::describe_self();
  session.local_liveness.emplace(session.bootstrap->all_gather("chorus/process", bootstrap::Bytes(me.begin(), me.end())),
                                 hosts, job.rank);
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::create_from_store(int rank, int size,
                                                                      std::shared_ptr<KeyValueStore> store,
                                                                      const StoreInitOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    fail(Status::invalid_argument, "Communicator::init: rank ", rank, " is not in 0..size-1 (size ", size, ")");
  }
  if (!store) fail(Status::invalid_argument, "Communicator::init: the key/value store is null");
  if (options.timeout && options.timeout->count() <= 0) {
    fail(Status::invalid_argument, "Communicator::init: timeout ", options.timeout->count(), " ms is not positive");
  }
  signals::remove_infinipath_handlers();
  config::Settings settings = config::Settings::from_env();
  if (options.timeout) settings.timeout = *options.timeout;
  if (!options.progress.empty()) {
    if (options.progress != "thread" && options.progress != "caller") {
      fail(Status::invalid_argument, "Communicator::init: progress \"", options.progress,
           "\" is neither \"thread\" nor \"caller\"");
    }
    settings.progress = options.progress;
  }
  bootstrap::JobInfo job;
  job.rank = rank;
  job.size = size;
  job.local_rank = rank;  // until connect() counts the ranks per host: only rank 0 warns about settings
  job.local_size = 1;
  job.launcher = kStoreLauncher;
  job.job_id = options.key_prefix.empty() ? "chorus" : options.key_prefix;
  auto make_bootstrap = [&store, &options](const bootstrap::JobInfo& job, std::chrono::milliseconds timeout) {
    // The job id already prefixes Bootstrap's keys; the store prefix adds nothing to it.
    return std::make_unique<bootstrap::Bootstrap>(job, timeout, bootstrap::wrap_external_store(store, "", timeout));
  };
  return create(std::move(settings), std::move(job), make_bootstrap);
}

Communicator Communicator::init(int rank, int size, std::shared_ptr<KeyValueStore> store,
                                const StoreInitOptions& options) {
  return Communicator(CommunicatorImpl::create_from_store(rank, size, std::move(store), options));
}

}  // namespace chorus
