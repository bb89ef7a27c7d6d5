// The hybrid transport: routes each call by peer to the shared-memory
// transport (the ranks of this host) or the network transport (the others).
#include "transports/hybrid/hybrid_transport.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::transport {

namespace {

constexpr size_t kLengthBytes = 4;

// A region registered with both transports: a peer on this host reads it
// with the shm transport's address, a peer elsewhere with the network's.
class HybridRegion final : public MemoryRegion {
 public:
  HybridRegion(void* base, size_t length, std::unique_ptr<MemoryRegion> local, std::unique_ptr<MemoryRegion> network,
               const std::vector<int>* local_index)
      : MemoryRegion(base, length, network->remote_address(), network->remote_key()),
        local_(std::move(local)),
        network_(std::move(network)),
        local_index_(local_index) {}

  std::pair<uint64_t, uint64_t> remote_for(int peer) const override {
    const MemoryRegion& region = (*local_index_)[static_cast<size_t>(peer)] >= 0 ? *local_ : *network_;
    return {region.remote_address(), region.remote_key()};
  }
  MemoryRegion& local() { return *local_; }
  MemoryRegion& network() { return *network_; }

 private:
  std::unique_ptr<MemoryRegion> local_;
  std::unique_ptr<MemoryRegion> network_;
  const std::vector<int>* local_index_;
};

// The shm transport's reports name its own indices: the engine hears job ranks.
class LocalSink final : public Sink {
 public:
  LocalSink(Sink& sink, const std::vector<int>& local_ranks) : sink_(sink), local_ranks_(local_ranks) {}
  void on_eager(int peer, const void* data, size_t bytes) override { sink_.on_eager(rank_of(peer), data, bytes); }
  void on_read_done(uint64_t context) override { sink_.on_read_done(context); }
  void on_error(uint64_t context, int peer, const Error& error) override {
    sink_.on_error(context, peer < 0 ? peer : rank_of(peer), error);
  }

 private:
  int rank_of(int index) const { return local_ranks_[static_cast<size_t>(index)]; }
  Sink& sink_;
  const std::vector<int>& local_ranks_;
};

class HybridTransport final : public Transport {
 public:
  HybridTransport(int rank, int size, std::vector<int> local_ranks, std::unique_ptr<Transport> local,
                  std::unique_ptr<Transport> network)
      : rank_(rank),
        size_(size),
        local_ranks_(std::move(local_ranks)),
        local_index_(static_cast<size_t>(size), -1),
        local_(std::move(local)),
        network_(std::move(network)) {
    if (!local_ || !network_) fail(Status::internal, "hybrid transport: a part is missing");
    if (!std::is_sorted(local_ranks_.begin(), local_ranks_.end()) ||
        std::find(local_ranks_.begin(), local_ranks_.end(), rank_) == local_ranks_.end()) {
      fail(Status::internal, "hybrid transport: rank ", rank_, " is not among its host's ranks");
    }
    for (size_t i = 0; i < local_ranks_.size(); ++i) {
      const int r = local_ranks_[i];
      if (r < 0 || r >= size_) fail(Status::internal, "hybrid transport: host rank ", r, " of ", size_);
      local_index_[static_cast<size_t>(r)] = static_cast<int>(i);
    }
  }

  std::string name() const override { return concat(local_->name(), "+", network_->name()); }

  // [4-byte length][the shm address][the network address].
  Blob address() override {
    const Blob local = local_->address();
    const Blob network = network_->address();
    Blob out(kLengthBytes);
    const auto length = static_cast<uint32_t>(local.size());
    std::memcpy(out.data(), &length, kLengthBytes);
    out.insert(out.end(), local.begin(), local.end());
    out.insert(out.end(), network.begin(), network.end());
    return out;
  }

  void connect(const std::vector<Blob>& peers) override {
    if (peers.size() != static_cast<size_t>(size_)) {
      fail(Status::internal, "hybrid transport: connect got ", peers.size(), " addresses for ", size_, " ranks");
    }
    std::vector<Blob> local(local_ranks_.size());
    std::vector<Blob> network(peers.size());
    for (size_t r = 0; r < peers.size(); ++r) {
      const Blob& blob = peers[r];
      uint32_t length = 0;
      if (blob.size() >= kLengthBytes) std::memcpy(&length, blob.data(), kLengthBytes);
      if (blob.size() < kLengthBytes || blob.size() - kLengthBytes < length) {
        fail_peer(Status::transport, static_cast<int>(r), "hybrid transport: rank ", r, " published a ", blob.size(),
                  "-byte address, too short for its parts (does every rank use the same CHORUS_TRANSPORT and "
                  "CHORUS_LOCAL_TRANSPORT?)");
      }
      const auto split = blob.begin() + static_cast<std::ptrdiff_t>(kLengthBytes + length);
      if (local_index_[r] >= 0) local[static_cast<size_t>(local_index_[r])].assign(blob.begin() + kLengthBytes, split);
      network[r].assign(split, blob.end());
    }
    local_->connect(local);
    network_->connect(network);
  }

  size_t max_eager_bytes() const override { return std::min(local_->max_eager_bytes(), network_->max_eager_bytes()); }

  void post_eager(int peer, const void* header, size_t header_bytes, const void* payload,
                  size_t payload_bytes) override {
    if (const int index = local_index(peer); index >= 0) {
      local_->post_eager(index, header, header_bytes, payload, payload_bytes);
    } else {
      network_->post_eager(peer, header, header_bytes, payload, payload_bytes);
    }
  }

  bool sends_pending() const override { return local_->sends_pending() || network_->sends_pending(); }

  std::unique_ptr<MemoryRegion> register_memory(void* base, size_t length) override {
    return std::make_unique<HybridRegion>(base, length, local_->register_memory(base, length),
                                          network_->register_memory(base, length), &local_index_);
  }

  bool registration_pins_pages() const override {
    return local_->registration_pins_pages() || network_->registration_pins_pages();
  }

  void post_read(int peer, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                 uint64_t context) override {
    auto& region = static_cast<HybridRegion&>(local);
    if (const int index = local_index(peer); index >= 0) {
      local_->post_read(index, remote, region.local(), local_offset, bytes, context);
    } else {
      network_->post_read(peer, remote, region.network(), local_offset, bytes, context);
    }
  }

  void cancel_reads(uint64_t context) override {
    local_->cancel_reads(context);
    network_->cancel_reads(context);
  }

  void note_abandoned(const Error& cause) override {
    local_->note_abandoned(cause);
    network_->note_abandoned(cause);
  }

  int poll(Sink& sink) override {
    LocalSink local_sink(sink, local_ranks_);
    return local_->poll(local_sink) + network_->poll(sink);
  }

  // The shm transport cannot block (a ring write raises no event): when it
  // is one of the two, neither can this one, and the engine yields.
  int wait_fd() override { return local_->wait_fd() < 0 ? -1 : network_->wait_fd(); }
  bool arm() override { return local_->wait_fd() >= 0 && local_->arm() && network_->arm(); }

  bool needs_progress_between_calls() const override {
    return local_->needs_progress_between_calls() || network_->needs_progress_between_calls();
  }

  std::string describe_peer(int peer) override {
    if (peer < 0 || peer >= size_) return {};
    const int index = local_index(peer);
    return index >= 0 ? local_->describe_peer(index) : network_->describe_peer(peer);
  }

  // The boards join every rank of a job through shared memory; here only
  // this host's are, so the flat collectives go without (docs/transport-hybrid.md).
  Boards* boards() override { return nullptr; }

  MemoryUse memory_use() const override {
    const MemoryUse local = local_->memory_use();
    const MemoryUse network = network_->memory_use();
    MemoryUse use;
    // Per peer of the job: the network part for every rank, the shm part
    // for this host's only; shown per peer as their sum over the job.
    use.per_peer = network.per_peer + local.per_peer * local_ranks_.size() / static_cast<size_t>(std::max(size_, 1));
    use.shared = local.shared + network.shared;
    use.on_demand = local.on_demand + network.on_demand;
    use.on_demand_bound = network.on_demand_bound;
    use.detail = concat("shm (", local_ranks_.size(), " ranks of this host): ", local.detail, "; ", network_->name(),
                        " (every rank): ", network.detail);
    return use;
  }

 private:
  int local_index(int peer) const {
    if (peer < 0 || peer >= size_) fail(Status::internal, "hybrid transport: rank ", peer, " of ", size_);
    return local_index_[static_cast<size_t>(peer)];
  }

  const int rank_;
  const int size_;
  const std::vector<int> local_ranks_;
  std::vector<int> local_index_;  // the shm index of each job rank, -1 for another host's
  std::unique_ptr<Transport> local_;
  std::unique_ptr<Transport> network_;
};

}  // namespace

std::unique_ptr<Transport> make_hybrid_transport(int rank, int size, std::vector<int> local_ranks,
                                                 std::unique_ptr<Transport> local, std::unique_ptr<Transport> network) {
  return std::make_unique<HybridTransport>(rank, size, std::move(local_ranks), std::move(local), std::move(network));
}

}  // namespace chorus::transport
