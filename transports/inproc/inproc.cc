#include "transports/inproc/inproc.hpp"

#include "common/error.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace chorus::transport {

namespace {
constexpr size_t kMaxEagerBytes = 64 * 1024;

struct Message {
  int source;
  std::vector<uint8_t> bytes;
};

struct Region {
  uintptr_t base;
  size_t length;
};
}  // namespace

struct InprocFabric::State {
  struct Inbox {
    std::mutex mutex;
    std::deque<Message> messages;
    int event_fd = -1;
  };
  explicit State(int n) : inboxes(static_cast<size_t>(n)), board_memory(static_cast<size_t>(n)) {
    for (auto& area : board_memory) {
      area.reset(new (std::align_val_t(kBoardLine)) uint8_t[kBoardAreaBytes]());
      board_areas.push_back(area.get());
    }
    for (auto& inbox : inboxes) {
      inbox.event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (inbox.event_fd < 0) fail(Status::internal, "inproc: eventfd failed: ", errno_string(errno));
    }
  }
  ~State() {
    for (auto& inbox : inboxes) ::close(inbox.event_fd);
  }

  // Registered regions by key, so reads are checked like a NIC would check them.
  std::mutex regions_mutex;
  std::map<uint64_t, Region> regions;
  std::atomic<uint64_t> next_key{1};
  std::deque<Inbox> inboxes;
  // Threads share memory as processes on one host share boards.
  struct AlignedDelete {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(kBoardLine)); }
  };
  std::vector<std::unique_ptr<uint8_t[], AlignedDelete>> board_memory;
  std::vector<uint8_t*> board_areas;
};

namespace {

class InprocRegion final : public MemoryRegion {
 public:
  InprocRegion(std::shared_ptr<InprocFabric::State> state, void* base, size_t length, uint64_t key)
      : MemoryRegion(base, length, reinterpret_cast<uintptr_t>(base), key), state_(std::move(state)) {}
  ~InprocRegion() override {
    std::lock_guard<std::mutex> lock(state_->regions_mutex);
    state_->regions.erase(remote_key());
  }

 private:
  std::shared_ptr<InprocFabric::State> state_;
};

class InprocTransport final : public Transport {
 public:
  InprocTransport(std::shared_ptr<InprocFabric::State> state, int rank) : state_(std::move(state)), rank_(rank) {
    boards_.areas = state_->board_areas;
  }

  std::string name() const override { return "inproc"; }
  Blob address() override {
    Blob blob(sizeof rank_);
    std::memcpy(blob.data(), &rank_, sizeof rank_);
    return blob;
  }
  void connect(const std::vector<Blob>& peers) override {
    if (peers.size() != state_->inboxes.size()) {
      fail(Status::internal, "inproc: connect got ", peers.size(), " addresses for ", state_->inboxes.size(), " ranks");
    }
  }
  size_t max_eager_bytes() const override { return kMaxEagerBytes; }
  // Each rank its own record (Boards::last_*), the areas shared.
  Boards* boards() override { return &boards_; }

  void post_eager(int peer, const void* header, size_t header_bytes, const void* payload,
                  size_t payload_bytes) override {
    if (peer < 0 || static_cast<size_t>(peer) >= state_->inboxes.size()) {
      fail(Status::invalid_argument, "inproc: send to rank ", peer, " outside the job");
    }
    if (header_bytes + payload_bytes > kMaxEagerBytes) {
      fail(Status::internal, "inproc: eager message of ", header_bytes + payload_bytes, " bytes exceeds ",
           kMaxEagerBytes);
    }
    Message message{rank_, std::vector<uint8_t>(header_bytes + payload_bytes)};
    if (header_bytes != 0) std::memcpy(message.bytes.data(), header, header_bytes);
    if (payload_bytes != 0) std::memcpy(message.bytes.data() + header_bytes, payload, payload_bytes);
    auto& inbox = state_->inboxes[static_cast<size_t>(peer)];
    {
      std::lock_guard<std::mutex> lock(inbox.mutex);
      inbox.messages.push_back(std::move(message));
    }
    uint64_t one = 1;
    if (::write(inbox.event_fd, &one, sizeof one) < 0 && errno != EAGAIN) {
      fail(Status::internal, "inproc: eventfd write failed: ", errno_string(errno));
    }
  }

  std::unique_ptr<MemoryRegion> register_memory(void* base, size_t length) override {
    uint64_t key = state_->next_key.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(state_->regions_mutex);
      state_->regions[key] = Region{reinterpret_cast<uintptr_t>(base), length};
    }
    return std::make_unique<InprocRegion>(state_, base, length, key);
  }

  void post_read(int peer, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                 uint64_t context) override {
    if (local_offset + bytes > local.length()) {
      fail(Status::internal, "inproc: read of ", bytes, " bytes at offset ", local_offset, " overruns a ",
           local.length(), "-byte local region");
    }
    // Done here, reported from poll() like a real completion.
    std::string problem;
    {
      std::lock_guard<std::mutex> lock(state_->regions_mutex);
      auto it = state_->regions.find(remote.key);
      if (it == state_->regions.end()) {
        problem = concat("unknown remote key ", remote.key);
      } else if (remote.address < it->second.base || remote.address + bytes > it->second.base + it->second.length) {
        problem = concat("remote range outside the registered region of rank ", peer);
      } else {
        std::memcpy(static_cast<uint8_t*>(local.base()) + local_offset, reinterpret_cast<const void*>(remote.address),
                    bytes);
      }
    }
    completions_.push_back({context, peer, problem});
  }

  int poll(Sink& sink) override {
    auto& inbox = state_->inboxes[static_cast<size_t>(rank_)];
    uint64_t drained;
    [[maybe_unused]] ssize_t ignored = ::read(inbox.event_fd, &drained, sizeof drained);
    int events = 0;
    std::deque<Message> batch;
    {
      std::lock_guard<std::mutex> lock(inbox.mutex);
      batch.swap(inbox.messages);
    }
    for (auto& message : batch) {
      sink.on_eager(message.source, message.bytes.data(), message.bytes.size());
      ++events;
    }
    std::deque<ReadCompletion> done;
    done.swap(completions_);
    for (auto& completion : done) {
      if (completion.problem.empty()) {
        sink.on_read_done(completion.context);
      } else {
        sink.on_error(completion.context, completion.peer,
                      Error(Status::transport, concat("inproc read from rank ", completion.peer, " failed: ",
                                                      completion.problem),
                            completion.peer));
      }
      ++events;
    }
    return events;
  }

  int wait_fd() override { return state_->inboxes[static_cast<size_t>(rank_)].event_fd; }

  bool arm() override {
    if (!completions_.empty()) return false;
    auto& inbox = state_->inboxes[static_cast<size_t>(rank_)];
    std::lock_guard<std::mutex> lock(inbox.mutex);
    return inbox.messages.empty();
  }

 private:
  struct ReadCompletion {
    uint64_t context;
    int peer;
    std::string problem;
  };
  std::shared_ptr<InprocFabric::State> state_;
  int rank_;
  Boards boards_;
  std::deque<ReadCompletion> completions_;
};

}  // namespace

InprocFabric::InprocFabric(int size) : state_(std::make_shared<State>(size)) {}
InprocFabric::~InprocFabric() = default;
int InprocFabric::size() const { return static_cast<int>(state_->inboxes.size()); }
std::unique_ptr<Transport> InprocFabric::make_transport(int rank) {
  if (rank < 0 || rank >= size()) fail(Status::invalid_argument, "inproc: rank ", rank, " outside 0..", size() - 1);
  return std::make_unique<InprocTransport>(state_, rank);
}

}  // namespace chorus::transport
