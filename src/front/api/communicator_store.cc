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

// Layout: the address's length (4 bytes, little endian), the address, the
// description.
bootstrap::Bytes with_process_description(bootstrap::Bytes address) {
  const std::string me = LocalLiveness::describe_self();
  const auto length = static_cast<uint32_t>(address.size());
  bootstrap::Bytes packed;
  packed.reserve(4 + address.size() + me.size());
  for (int shift = 0; shift < 32; shift += 8) packed.push_back(static_cast<uint8_t>(length >> shift));
  packed.insert(packed.end(), address.begin(), address.end());
  packed.insert(packed.end(), me.begin(), me.end());
  return packed;
}

std::vector<bootstrap::Bytes> watch_local_peers(Session& session, const std::vector<bootstrap::Bytes>& hosts,
                                                std::vector<bootstrap::Bytes> gathered) {
  std::vector<bootstrap::Bytes> addresses(gathered.size());
  std::vector<bootstrap::Bytes> descriptions(gathered.size());
  for (size_t r = 0; r < gathered.size(); ++r) {
    const bootstrap::Bytes& packed = gathered[r];
    uint32_t length = 0;
    for (size_t i = 0; i < 4 && i < packed.size(); ++i) length |= static_cast<uint32_t>(packed[i]) << (8 * i);
    if (packed.size() < 4 || packed.size() - 4 < length) {
      fail(Status::bootstrap, "the bootstrap record of rank ", r, " (", packed.size(),
           " bytes) is no transport address and process description: ranks of different chorus builds?");
    }
    const auto address_end = packed.begin() + 4 + static_cast<std::ptrdiff_t>(length);
    addresses[r].assign(packed.begin() + 4, address_end);
    descriptions[r].assign(address_end, packed.end());
  }
  session.local_liveness.emplace(descriptions, hosts, session.job.rank);
  return addresses;
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
