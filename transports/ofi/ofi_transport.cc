// The libfabric transport. See docs/transport-ofi.md for the design.
#include "transports/ofi/ofi_transport.hpp"

#include "common/log.hpp"
#include "common/shm_regions.hpp"
#include "transports/ofi/eager_order.hpp"
#include "transports/ofi/ofi_info.hpp"
#include "transports/ofi/ofi_library.hpp"
#include "transports/ofi/stall_escape.hpp"

#include <rdma/fi_cm.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <unistd.h>
#include <vector>

namespace chorus::transport {

namespace {

using namespace ofi;

constexpr size_t kSourceHeader = sizeof(EagerHeader);
constexpr size_t kSendBuffers = 256;
constexpr size_t kMinRecvBuffers = 128;
constexpr size_t kRecvBuffersPerPeer = 16;
constexpr size_t kMaxReadsInFlight = 64;
constexpr size_t kCqBatch = 32;

// Why a peer's address blob (from the bootstrap store) cannot go to
// fi_av_insert, or "" if it can. fi_av_insert takes no length: it reads as
// many bytes as the address format implies (a sockaddr, or a C string for
// FI_ADDR_STR), so a short or unterminated blob would be read past its end.
// Every rank runs the same provider, so binary addresses have our length.
std::string unusable_peer_address(const Blob& blob, uint32_t addr_format, size_t own_length) {
  if (addr_format == FI_ADDR_STR) {
    if (std::find(blob.begin(), blob.end(), 0) == blob.end()) {
      return concat("its ", blob.size(), "-byte address is not a NUL-terminated string (FI_ADDR_STR)");
    }
    return {};
  }
  if (blob.size() != own_length) {
    return concat("its address is ", blob.size(), " bytes, this rank's is ", own_length,
                  " (same provider expected on every rank)");
  }
  return {};
}

// Every posted operation owns one of these; its address is the libfabric
// context, so a completion leads straight back to it.
struct Operation {
  fi_context2 context;  // first: providers with FI_CONTEXT(2) mode write here
  enum class Kind : uint8_t { send, recv, read } kind;
  size_t index = 0;        // bounce buffer (send/recv)
  int peer = -1;
  struct ReadJob* job = nullptr;
};

// One post_read, possibly split into several fi_read pieces.
struct ReadJob {
  uint64_t context;
  int peer;
  size_t pieces_left;
  bool failed = false;
};

struct PendingRead {
  ReadJob* job;
  void* local;
  size_t bytes;
  void* desc;
  uint64_t remote_address;
  uint64_t key;
};

class OfiRegion final : public MemoryRegion {
 public:
  OfiRegion(fid_mr* mr, void* base, size_t length, uint64_t remote_address, uint64_t key,
            std::shared_ptr<const std::atomic<bool>> abandoned)
      : MemoryRegion(base, length, remote_address, key), mr_(mr), abandoned_(std::move(abandoned)) {}
  ~OfiRegion() override {
    if (abandoned_->load()) {
      keep_forever({mr_});
    } else {
      fi_close(&mr_->fid);
    }
  }
  void* descriptor() const { return fi_mr_desc(mr_); }

 private:
  fid_mr* mr_;
  std::shared_ptr<const std::atomic<bool>> abandoned_;  // the transport's: provider unusable
};

class OfiTransport final : public Transport {
 public:
  OfiTransport(int rank, int size, const OfiOptions& options)
      : rank_(rank),
        size_(size),
        max_eager_(eager_capacity(options.max_eager_bytes)),
        provider_(options.provider.empty() ? auto_provider(options.all_ranks_on_one_host) : options.provider),
        guard_(provider_, options.stall_cpu_limit, options.test_stall_after_calls) {
    info_ = choose_provider(provider_, options.all_ranks_on_one_host);
    if (std::string_view(info_->fabric_attr->prov_name) == "shm") remove_own_stale_regions();
    open_endpoint();
    const Blob own = address();
    guard_.set_endpoint_address(std::string(own.begin(), std::find(own.begin(), own.end(), 0)));
    create_buffers();
    log::info("ofi: provider ", info_->fabric_attr->prov_name, " domain ", info_->domain_attr->name, ", mr_mode 0x",
              std::hex, info_->domain_attr->mr_mode, std::dec, ", inject ", info_->tx_attr->inject_size,
              " bytes, wait fd ", wait_fd_);
  }

  ~OfiTransport() override {
    if (guard_.abandoned()) {
      // A call was interrupted inside the provider, whose locks may still be
      // held: closing would hang. The process is about to report and exit.
      log::warn("ofi: leaving the libfabric objects open after: ", guard_.why());
      send_region_.reset();  // the regions see the guard's flag and keep their MRs too
      recv_region_.reset();
      keep_forever({endpoint_.release(), av_.release(), cq_.release(), domain_.release(), fabric_.release()},
                   {std::move(send_slab_), std::move(recv_slab_)});
      return;
    }
    // Endpoint first (cancels posted operations), then what it was bound to.
    endpoint_.reset();
    av_.reset();
    cq_.reset();
    send_region_.reset();
    recv_region_.reset();
    domain_.reset();
    fabric_.reset();
  }

  std::string name() const override { return "ofi:" + provider_; }

  Blob address() override {
    size_t length = 0;
    int ret = fi_getname(&endpoint_->fid, nullptr, &length);
    if (ret != -FI_ETOOSMALL && ret != 0) fail_call("fi_getname (size query)", ret);
    Blob blob(length);
    check(fi_getname(&endpoint_->fid, blob.data(), &length), "fi_getname");
    blob.resize(length);
    return blob;
  }

  void connect(const std::vector<Blob>& peers) override {
    if (peers.size() != static_cast<size_t>(size_)) {
      fail(Status::internal, "ofi: connect got ", peers.size(), " addresses for ", size_, " ranks");
    }
    next_send_sequence_.assign(peers.size(), 0);
    received_order_.reset(peers.size());
    addresses_.assign(peers.size(), FI_ADDR_UNSPEC);
    const size_t own_length = address().size();
    for (size_t r = 0; r < peers.size(); ++r) {
      if (auto why = unusable_peer_address(peers[r], info_->addr_format, own_length); !why.empty()) {
        throw Error(Status::bootstrap, concat("libfabric: rank ", r, " published an unusable address: ", why),
                    static_cast<int>(r));
      }
      // One at a time so a bad address names its rank.
      int inserted = fi_av_insert(av_.get(), peers[r].data(), 1, &addresses_[r], 0, nullptr);
      if (inserted != 1) {
        throw Error(Status::transport,
                    concat("libfabric: fi_av_insert of rank ", r, "'s address failed: ",
                           inserted < 0 ? library::strerror(-inserted) : "address not accepted"),
                    static_cast<int>(r));
      }
    }
  }

  size_t max_eager_bytes() const override { return max_eager_; }

  void post_eager(int peer, const void* header, size_t header_bytes, const void* payload, size_t payload_bytes) override {
    check_peer(peer);
    const size_t bytes = header_bytes + payload_bytes;
    if (bytes > max_eager_) fail(Status::internal, "ofi: eager message of ", bytes, " bytes exceeds ", max_eager_);
    // Order per peer must hold: once anything waits, everything queues behind it.
    const uint32_t sequence = next_send_sequence_[static_cast<size_t>(peer)]++;
    if (backlog_.empty() && try_send(peer, sequence, header, header_bytes, payload, payload_bytes)) return;
    Backlogged message{peer, sequence, std::vector<uint8_t>(bytes)};
    if (header_bytes != 0) std::memcpy(message.bytes.data(), header, header_bytes);
    if (payload_bytes != 0) std::memcpy(message.bytes.data() + header_bytes, payload, payload_bytes);
    backlog_.push_back(std::move(message));
  }

  bool sends_pending() const override {
    return !guard_.abandoned() && (!backlog_.empty() || free_sends_.size() < send_ops_.size());
  }

  // Software providers copy through sockets or shared memory and pin
  // nothing; any other (verbs, efa, psm3, cxi, ...) registers with hardware.
  bool registration_pins_pages() const override {
    const std::string core = info_->fabric_attr->prov_name;
    for (const char* software : {"tcp", "shm", "udp", "sockets", "net"}) {
      if (core == software || core.rfind(std::string(software) + ";", 0) == 0) return false;
    }
    return true;
  }

  std::unique_ptr<MemoryRegion> register_memory(void* base, size_t length) override {
    fid_mr* mr = nullptr;
    const bool provider_key = (info_->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
    uint64_t requested_key = provider_key ? 0 : next_key_++;
    int ret = fi_mr_reg(domain_.get(), base, length, FI_READ | FI_REMOTE_READ | FI_SEND | FI_RECV, 0, requested_key,
                        0, &mr, nullptr);
    if (ret != 0) fail_call(concat("fi_mr_reg of ", length, " bytes"), ret);
    if (info_->domain_attr->mr_mode & FI_MR_ENDPOINT) {
      int bound = fi_mr_bind(mr, &endpoint_->fid, 0);
      if (bound == 0) bound = fi_mr_enable(mr);
      if (bound != 0) {
        fi_close(&mr->fid);
        fail_call("fi_mr_bind/fi_mr_enable", bound);
      }
    }
    uint64_t remote_address = (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uintptr_t>(base) : 0;
    return std::make_unique<OfiRegion>(mr, base, length, remote_address, fi_mr_key(mr), guard_.abandoned_flag());
  }

  void post_read(int peer, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                 uint64_t context) override {
    check_peer(peer);
    if (local_offset + bytes > local.length()) {
      fail(Status::internal, "ofi: read of ", bytes, " bytes at offset ", local_offset, " overruns a ", local.length(),
           "-byte region");
    }
    // Providers may report max_msg_size as SIZE_MAX: cap it so the piece
    // arithmetic cannot overflow.
    const size_t piece = std::clamp<size_t>(info_->ep_attr->max_msg_size, 4096, size_t{1} << 30);
    const size_t pieces = bytes == 0 ? 0 : 1 + (bytes - 1) / piece;
    auto& job = jobs_.emplace_back(ReadJob{context, peer, pieces, false});
    auto* base = static_cast<uint8_t*>(local.base()) + local_offset;
    void* desc = static_cast<OfiRegion&>(local).descriptor();
    for (size_t done = 0; done < bytes; done += piece) {
      size_t n = std::min(piece, bytes - done);
      pending_reads_.push_back(PendingRead{&job, base + done, n, desc, remote.address + done, remote.key});
    }
    if (bytes == 0) finished_jobs_.push_back(&job);
    start_reads();
  }

  int poll(Sink& sink) override {
    int events = drain_cq(sink);
    events += flush_backlog();
    start_reads();
    for (ReadJob* job : finished_jobs_) {
      if (!job->failed) sink.on_read_done(job->context);
      ++events;
    }
    finished_jobs_.clear();
    retire_jobs();
    return events;
  }

  int wait_fd() override { return wait_fd_; }

  bool arm() override {
    if (wait_fd_ < 0 || !backlog_.empty() || !pending_reads_.empty() || !finished_jobs_.empty()) return false;
    fid* fids[] = {&cq_->fid};
    return guard_.call("fi_trywait", -1, [&] { return fi_trywait(fabric_.get(), fids, 1); }) == FI_SUCCESS;
  }

 private:
  struct Backlogged {
    int peer;
    uint32_t sequence;
    std::vector<uint8_t> bytes;
  };

  // Before this process' first shm endpoint, any region named after its pid
  // was left by a killed process that had the same pid (common/shm_regions.hpp).
  static void remove_own_stale_regions() {
    static std::once_flag once;
    std::call_once(once, [] {
      if (int removed = shm_regions::remove_stale(getpid()); removed > 0) {
        log::info("ofi: removed ", removed, " stale shm region(s) of an earlier process with pid ", getpid());
      }
    });
  }

  void check_peer(int peer) const {
    if (peer < 0 || peer >= size_ || addresses_.empty()) {
      fail(Status::invalid_argument, "ofi: rank ", peer, " is not a connected peer (0..", size_ - 1, ")");
    }
  }

  void open_endpoint() {
    fid_fabric* fabric = nullptr;
    check(library::fabric(info_->fabric_attr, &fabric, nullptr), "fi_fabric");
    fabric_.reset(fabric);
    fid_domain* domain = nullptr;
    check(fi_domain(fabric_.get(), info_.get(), &domain, nullptr), "fi_domain");
    domain_.reset(domain);

    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_DATA;
    cq_attr.size = kSendBuffers + recv_buffer_count() + kMaxReadsInFlight + 64;
    cq_attr.wait_obj = FI_WAIT_FD;
    fid_cq* cq = nullptr;
    if (fi_cq_open(domain_.get(), &cq_attr, &cq, nullptr) != 0) {
      // No fd wait object on this provider: poll and yield instead.
      cq_attr.wait_obj = FI_WAIT_NONE;
      check(fi_cq_open(domain_.get(), &cq_attr, &cq, nullptr), "fi_cq_open");
    }
    cq_.reset(cq);
    if (cq_attr.wait_obj == FI_WAIT_FD && fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) != 0) wait_fd_ = -1;

    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    av_attr.count = static_cast<size_t>(size_);
    fid_av* av = nullptr;
    check(fi_av_open(domain_.get(), &av_attr, &av, nullptr), "fi_av_open");
    av_.reset(av);

    fid_ep* endpoint = nullptr;
    check(fi_endpoint(domain_.get(), info_.get(), &endpoint, nullptr), "fi_endpoint");
    endpoint_.reset(endpoint);
    check(fi_ep_bind(endpoint_.get(), &av_->fid, 0), "fi_ep_bind (address vector)");
    check(fi_ep_bind(endpoint_.get(), &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind (completion queue)");
    check(fi_enable(endpoint_.get()), "fi_enable");
  }

  size_t recv_buffer_count() const {
    return std::max(kMinRecvBuffers, kRecvBuffersPerPeer * static_cast<size_t>(size_));
  }
  size_t slot_bytes() const { return kSourceHeader + max_eager_; }

  // One registered slab each for send and receive bounce buffers.
  void create_buffers() {
    send_slab_.resize(kSendBuffers * slot_bytes());
    recv_slab_.resize(recv_buffer_count() * slot_bytes());
    send_region_ = register_memory(send_slab_.data(), send_slab_.size());
    recv_region_ = register_memory(recv_slab_.data(), recv_slab_.size());
    send_ops_.resize(kSendBuffers);
    for (size_t i = 0; i < kSendBuffers; ++i) {
      send_ops_[i].kind = Operation::Kind::send;
      send_ops_[i].index = i;
      free_sends_.push_back(i);
    }
    recv_ops_.resize(recv_buffer_count());
    for (size_t i = 0; i < recv_ops_.size(); ++i) {
      recv_ops_[i].kind = Operation::Kind::recv;
      recv_ops_[i].index = i;
      post_receive(i);
    }
  }

  void post_receive(size_t index) {
    void* desc = static_cast<OfiRegion&>(*recv_region_).descriptor();
    for (;;) {
      ssize_t ret = guard_.call("fi_recv", -1, [&] {
        return fi_recv(endpoint_.get(), &recv_slab_[index * slot_bytes()], slot_bytes(), desc, FI_ADDR_UNSPEC,
                       &recv_ops_[index].context);
      });
      if (ret == 0) return;
      if (ret != -FI_EAGAIN) fail_call("fi_recv (reposting an eager buffer)", ret);
      guard_.call("fi_cq_read", -1, [&] { return fi_cq_read(cq_.get(), nullptr, 0); });  // progress, then retry
    }
  }

  // Sends now if possible; false means "queue it" (nothing was sent).
  bool try_send(int peer, uint32_t sequence, const void* header, size_t header_bytes, const void* payload,
                size_t payload_bytes) {
    const size_t bytes = kSourceHeader + header_bytes + payload_bytes;
    const EagerHeader source{static_cast<uint32_t>(rank_), sequence};
    const fi_addr_t address = addresses_[static_cast<size_t>(peer)];
    if (bytes <= info_->tx_attr->inject_size) {
      uint8_t staging[512];
      if (bytes <= sizeof staging) {
        std::memcpy(staging, &source, kSourceHeader);
        if (header_bytes) std::memcpy(staging + kSourceHeader, header, header_bytes);
        if (payload_bytes) std::memcpy(staging + kSourceHeader + header_bytes, payload, payload_bytes);
        ssize_t ret = guard_.call("fi_inject", peer, [&] { return fi_inject(endpoint_.get(), staging, bytes, address); });
        if (ret == 0) return true;
        if (ret != -FI_EAGAIN) fail_call(concat("fi_inject of ", bytes, " bytes to rank ", peer), ret, peer);
        return false;
      }
    }
    if (free_sends_.empty()) return false;
    size_t index = free_sends_.back();
    uint8_t* slot = &send_slab_[index * slot_bytes()];
    std::memcpy(slot, &source, kSourceHeader);
    if (header_bytes) std::memcpy(slot + kSourceHeader, header, header_bytes);
    if (payload_bytes) std::memcpy(slot + kSourceHeader + header_bytes, payload, payload_bytes);
    send_ops_[index].peer = peer;
    void* desc = static_cast<OfiRegion&>(*send_region_).descriptor();
    ssize_t ret = guard_.call("fi_send", peer, [&] {
      return fi_send(endpoint_.get(), slot, bytes, desc, address, &send_ops_[index].context);
    });
    if (ret == -FI_EAGAIN) return false;
    if (ret != 0) fail_call(concat("fi_send of ", bytes, " bytes to rank ", peer), ret, peer);
    free_sends_.pop_back();
    return true;
  }

  int flush_backlog() {
    int sent = 0;
    while (!backlog_.empty()) {
      Backlogged& message = backlog_.front();
      if (!try_send(message.peer, message.sequence, message.bytes.data(), message.bytes.size(), nullptr, 0)) break;
      backlog_.pop_front();
      ++sent;
    }
    return sent;
  }

  void start_reads() {
    while (!pending_reads_.empty() && reads_in_flight_ < kMaxReadsInFlight) {
      PendingRead& read = pending_reads_.front();
      Operation* op = allocate_read_op(read.job);
      const int peer = read.job->peer;
      ssize_t ret = guard_.call("fi_read", peer, [&] {
        return fi_read(endpoint_.get(), read.local, read.bytes, read.desc, addresses_[static_cast<size_t>(peer)],
                       read.remote_address, read.key, &op->context);
      });
      if (ret == -FI_EAGAIN) {
        free_read_ops_.push_back(op);
        return;  // retried from the next poll()
      }
      if (ret != 0) {
        free_read_ops_.push_back(op);
        fail_call(concat("fi_read of ", read.bytes, " bytes from rank ", read.job->peer), ret, read.job->peer);
      }
      ++reads_in_flight_;
      pending_reads_.pop_front();
    }
  }

  Operation* allocate_read_op(ReadJob* job) {
    if (free_read_ops_.empty()) {
      read_ops_.emplace_back();
      free_read_ops_.push_back(&read_ops_.back());
    }
    Operation* op = free_read_ops_.back();
    free_read_ops_.pop_back();
    op->kind = Operation::Kind::read;
    op->job = job;
    op->peer = job->peer;
    return op;
  }

  int drain_cq(Sink& sink) {
    int events = 0;
    fi_cq_data_entry entries[kCqBatch];
    for (;;) {
      ssize_t n = guard_.call("fi_cq_read", -1, [&] { return fi_cq_read(cq_.get(), entries, kCqBatch); });
      if (n == -FI_EAGAIN) return events;
      if (n == -FI_EAVAIL) {
        handle_error_entry(sink);
        ++events;
        continue;
      }
      if (n < 0) fail_call("fi_cq_read", n);
      for (ssize_t i = 0; i < n; ++i) complete(sink, *static_cast<Operation*>(entries[i].op_context), entries[i].len);
      events += static_cast<int>(n);
      if (static_cast<size_t>(n) < kCqBatch) return events;
    }
  }

  void complete(Sink& sink, Operation& op, size_t length) {
    switch (op.kind) {
      case Operation::Kind::send:
        free_sends_.push_back(op.index);
        return;
      case Operation::Kind::recv: {
        const uint8_t* slot = &recv_slab_[op.index * slot_bytes()];
        EagerHeader header{};
        if (length >= kSourceHeader) std::memcpy(&header, slot, kSourceHeader);
        if (length < kSourceHeader || header.source >= static_cast<uint32_t>(size_)) {
          post_receive(op.index);
          sink.on_error(0, -1, Error(Status::internal, concat("ofi: malformed eager message of ", length, " bytes")));
          return;
        }
        received_order_.deliver(sink, header, slot + kSourceHeader, length - kSourceHeader);
        post_receive(op.index);  // after the sink is done with the bytes
        return;
      }
      case Operation::Kind::read:
        --reads_in_flight_;
        if (--op.job->pieces_left == 0) finished_jobs_.push_back(op.job);
        free_read_ops_.push_back(&op);
        return;
    }
  }

  void handle_error_entry(Sink& sink) {
    fi_cq_err_entry error{};
    ssize_t ret = guard_.call("fi_cq_readerr", -1, [&] { return fi_cq_readerr(cq_.get(), &error, 0); });
    if (ret < 0) fail_call("fi_cq_readerr", ret);
    char provider_text[256] = {0};
    const char* detail = fi_cq_strerror(cq_.get(), error.prov_errno, error.err_data, provider_text, sizeof provider_text);
    auto* op = static_cast<Operation*>(error.op_context);
    if (op == nullptr) {
      sink.on_error(0, -1, Error(Status::transport, concat("libfabric completion error without context: ",
                                                           library::strerror(error.err), " (", detail ? detail : "", ")")));
      return;
    }
    std::string what = op->kind == Operation::Kind::read ? concat("fi_read from rank ", op->peer)
                       : op->kind == Operation::Kind::send ? concat("eager send to rank ", op->peer)
                                                           : std::string("eager receive");
    Error failure(op->kind == Operation::Kind::recv ? Status::transport : Status::peer_failed,
                  concat(what, " failed: ", library::strerror(error.err), " (provider: ", detail ? detail : "?", ")"), op->peer);
    switch (op->kind) {
      case Operation::Kind::send:
        free_sends_.push_back(op->index);
        sink.on_error(0, op->peer, failure);
        return;
      case Operation::Kind::recv:
        if (error.err == FI_ECANCELED) return;  // teardown
        post_receive(op->index);
        sink.on_error(0, -1, failure);
        return;
      case Operation::Kind::read:
        --reads_in_flight_;
        op->job->failed = true;
        if (--op->job->pieces_left == 0) finished_jobs_.push_back(op->job);
        free_read_ops_.push_back(op);
        sink.on_error(op->job->context, op->peer, failure);
        return;
    }
  }

  // Jobs are referenced by pending pieces until they finish; drop finished ones from the front.
  void retire_jobs() {
    while (!jobs_.empty() && jobs_.front().pieces_left == 0) jobs_.pop_front();
  }

  int rank_;
  int size_;
  size_t max_eager_;
  std::string provider_;
  ProviderGuard guard_;  // every data-path provider call goes through it (stall_escape.hpp)
  InfoPtr info_;
  Owned<fid_fabric> fabric_;
  Owned<fid_domain> domain_;
  Owned<fid_cq> cq_;
  Owned<fid_av> av_;
  Owned<fid_ep> endpoint_;
  int wait_fd_ = -1;
  std::vector<fi_addr_t> addresses_;
  std::vector<uint32_t> next_send_sequence_;     // per destination
  EagerOrder received_order_;                    // per source: restores the send order
  uint64_t next_key_ = 1;

  std::vector<uint8_t> send_slab_, recv_slab_;
  std::unique_ptr<MemoryRegion> send_region_, recv_region_;
  std::vector<Operation> send_ops_, recv_ops_;
  std::vector<size_t> free_sends_;
  std::deque<Backlogged> backlog_;

  std::deque<ReadJob> jobs_;  // deque: pointers stay valid
  std::deque<PendingRead> pending_reads_;
  std::deque<Operation> read_ops_;
  std::vector<Operation*> free_read_ops_;
  std::vector<ReadJob*> finished_jobs_;
  size_t reads_in_flight_ = 0;
};

}  // namespace

std::unique_ptr<Transport> make_ofi_transport(int rank, int size, const OfiOptions& options) {
  return std::make_unique<OfiTransport>(rank, size, options);
}

}  // namespace chorus::transport
