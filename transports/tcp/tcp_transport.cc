#include "transports/tcp/tcp_transport.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "transports/copies.hpp"
#include "transports/tcp/tcp_connect.hpp"
#include "transports/tcp/tcp_outbound.hpp"
#include "transports/tcp/tcp_wire.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <unordered_map>

namespace chorus::transport {

namespace {

using namespace tcp;

// Reads smaller than this go on one stream: splitting them costs more
// system calls than the parallel streams win.
constexpr uint64_t kMinReadPiece = 256 * 1024;
// One recv() of small frames fills at most this much.
constexpr size_t kStagingBytes = 256 * 1024;
// recv() calls per connection and poll(), so one busy peer cannot starve the others.
constexpr int kRecvsPerPoll = 16;
// Up to this many connections, poll() tries recv() on each instead of asking
// epoll which are ready: one system call per idle poll either way, and one
// fewer per message.
constexpr size_t kDirectPollConnections = 4;

struct Connection {
  Connection(Fd socket, int peer_rank, uint32_t stream_index, size_t max_eager)
      : fd(std::move(socket)), peer(peer_rank), stream(stream_index), decoder(max_eager, kStagingBytes) {}
  Fd fd;
  int peer;
  uint32_t stream;
  FrameDecoder decoder;
  Outbound out;
  bool goodbye = false;        // the peer said it closes on purpose
  bool watch_writable = false;  // EPOLLOUT is in the epoll set
};

struct PeerState {
  std::vector<std::unique_ptr<Connection>> streams;
  std::string address;
  std::optional<Error> failure;
  uint32_t next_stream = 0;
};

// A piece of a read, on one stream; `op` is the read it belongs to.
struct ReadPiece {
  uint8_t* destination;
  uint64_t bytes;
  uint64_t op;
  int peer;
  bool discard = false;  // its read failed already: the bytes still arrive, and go nowhere
};

struct ReadOp {
  uint64_t context;
  int peer;
  int pieces_left;
};

struct Report {
  uint64_t context;
  int peer;
  Error error;
};

// Registrations the owner checks every READ_REQ against; shared with the
// regions so either may go first.
struct Registry {
  std::unordered_map<uint64_t, std::pair<uintptr_t, size_t>> regions;
  uint64_t next_key = 1;
  // Set while the transport lives: a region closed, and READ_DATA replies
  // still queued from its memory must copy it first.
  std::function<void(const uint8_t* base, size_t length)> released;
};

class TcpRegion final : public MemoryRegion {
 public:
  TcpRegion(void* base, size_t length, uint64_t key, std::shared_ptr<Registry> registry)
      : MemoryRegion(base, length, reinterpret_cast<uintptr_t>(base), key), registry_(std::move(registry)) {}
  ~TcpRegion() override {
    registry_->regions.erase(remote_key());
    if (registry_->released) registry_->released(static_cast<const uint8_t*>(base()), length());
  }

 private:
  std::shared_ptr<Registry> registry_;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(int rank, int size, const TcpOptions& options)
      : rank_(rank),
        size_(size),
        options_(options),
        max_eager_(eager_capacity(options.max_eager_bytes)),
        token_(random_token()),
        peers_(static_cast<size_t>(size)),
        registry_(std::make_shared<Registry>()) {
    std::string how;
    local_ = choose_local_address(options.iface, options.all_ranks_on_one_host, &how);
    listener_ = listen_at(local_);
    log::info("tcp: rank ", rank_, " listens on ", local_.to_string(), ", chosen as ", how);
    epoll_ = Fd(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) fail(Status::transport, "tcp: epoll_create1 failed: ", errno_string(errno));
    registry_->released = [this](const uint8_t* base, size_t length) {
      for (Connection* connection : all_) connection->out.copy_bodies_in(base, length);
    };
  }

  ~TcpTransport() override {
    registry_->released = nullptr;
    say_goodbye();
  }

  std::string name() const override { return concat("tcp:", options_.streams, local_.family() == AF_INET6 ? ":ipv6" : ""); }

  Blob address() override { return encode_address({local_, token_, static_cast<uint32_t>(options_.streams)}); }

  void connect(const std::vector<Blob>& blobs) override {
    if (blobs.size() != static_cast<size_t>(size_)) {
      fail(Status::internal, "tcp: connect got ", blobs.size(), " addresses for ", size_, " ranks");
    }
    std::vector<PeerAddress> addresses;
    for (int peer = 0; peer < size_; ++peer) {
      addresses.push_back(decode_address(blobs[static_cast<size_t>(peer)], peer));
      if (addresses.back().streams != static_cast<uint32_t>(options_.streams)) {
        fail_peer(Status::config, peer, "tcp: rank ", peer, " uses CHORUS_TCP_STREAMS=", addresses.back().streams,
                  " and rank ", rank_, " ", options_.streams, ": every rank must use the same value");
      }
      peers_[static_cast<size_t>(peer)].address = addresses.back().address.to_string();
    }
    ConnectOptions connect_options{rank_, size_, static_cast<uint32_t>(options_.streams), options_.socket_buffer,
                                   options_.timeout};
    auto sockets = connect_all(listener_, token_, addresses, connect_options);
    // Later connection attempts, from inside the job or not, are refused by the kernel.
    listener_.reset();
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      PeerState& state = peers_[static_cast<size_t>(peer)];
      for (uint32_t stream = 0; stream < static_cast<uint32_t>(options_.streams); ++stream) {
        auto connection = std::make_unique<Connection>(std::move(sockets[static_cast<size_t>(peer)][stream]), peer,
                                                       stream, max_eager_);
        epoll_event event{};
        event.events = EPOLLIN;
        event.data.ptr = connection.get();
        if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, connection->fd.get(), &event) != 0) {
          fail_peer(Status::transport, peer, "tcp: epoll_ctl(ADD) for rank ", peer, " failed: ", errno_string(errno));
        }
        all_.push_back(connection.get());
        state.streams.push_back(std::move(connection));
      }
    }
    connected_ = true;
  }

  size_t max_eager_bytes() const override { return max_eager_; }

  void post_eager(int peer, const void* header, size_t header_bytes, const void* payload,
                  size_t payload_bytes) override {
    check_peer(peer, "send to");
    const size_t bytes = header_bytes + payload_bytes;
    if (bytes > max_eager_) fail(Status::internal, "tcp: eager message of ", bytes, " bytes exceeds ", max_eager_);
    if (peer == rank_) {
      to_self_.push_back(joined_copy(header, header_bytes, payload, payload_bytes));
      return;
    }
    PeerState& state = usable_peer(peer);
    // Eager messages all take stream 0: that keeps them in order.
    Connection& connection = *state.streams[0];
    uint8_t frame[kFrameHeaderBytes];
    encode_header(frame, FrameKind::eager, bytes, 0);
    const iovec parts[3] = {{frame, sizeof frame},
                            {const_cast<void*>(header), header_bytes},
                            {const_cast<void*>(payload), payload_bytes}};
    const int err = connection.out.send_or_copy(connection.fd.get(), parts, 3);
    after_send(connection, err);
  }

  bool sends_pending() const override {
    for (const PeerState& state : peers_) {
      if (state.failure) continue;
      for (const auto& connection : state.streams) {
        if (!connection->out.empty()) return true;
      }
    }
    return false;
  }

  std::unique_ptr<MemoryRegion> register_memory(void* base, size_t length) override {
    const uint64_t key = registry_->next_key++;
    registry_->regions[key] = {reinterpret_cast<uintptr_t>(base), length};
    return std::make_unique<TcpRegion>(base, length, key, registry_);
  }

  void post_read(int peer, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                 uint64_t context) override {
    check_peer(peer, "read from");
    uint8_t* destination = local_read_target("tcp", local, local_offset, bytes);
    if (peer == rank_ || bytes == 0) {
      if (bytes != 0) std::memcpy(destination, reinterpret_cast<const void*>(remote.address), bytes);
      finished_reads_.push_back(context);
      return;
    }
    PeerState& state = peers_[static_cast<size_t>(peer)];
    if (state.failure) {
      reports_.push_back({context, peer, *state.failure});
      return;
    }
    const uint64_t streams = state.streams.size();
    const uint64_t pieces = std::clamp<uint64_t>(bytes / kMinReadPiece, 1, streams);
    const uint64_t piece_bytes = (bytes + pieces - 1) / pieces;
    const uint64_t op = next_id_++;
    ops_[op] = ReadOp{context, peer, static_cast<int>((bytes + piece_bytes - 1) / piece_bytes)};
    for (uint64_t offset = 0; offset < bytes; offset += piece_bytes) {
      const uint64_t request = next_id_++;
      const uint64_t length = std::min(piece_bytes, bytes - offset);
      pieces_[request] = ReadPiece{destination + offset, length, op, peer};
      Connection& connection = *state.streams[state.next_stream];
      state.next_stream = (state.next_stream + 1) % static_cast<uint32_t>(streams);
      uint8_t frame[kFrameHeaderBytes + sizeof(ReadRequest)];
      encode_read_request(frame, request, ReadRequest{remote.address + offset, remote.key, length});
      const iovec part{frame, sizeof frame};
      after_send(connection, connection.out.send_or_copy(connection.fd.get(), &part, 1));
      if (state.failure) return;  // the failure reported this read already
    }
  }

  void note_abandoned(const Error& cause) override { abandoned_ = cause.what(); }

  // The read `op` is over (failed or abandoned): its pieces still arrive, and
  // land nowhere, also one whose payload is being received right now (the
  // engine releases the destination as soon as this returns).
  void discard_pieces_of(uint64_t op) {
    for (auto& [id, piece] : pieces_) piece.discard = piece.discard || piece.op == op;
    for (Connection* connection : all_) {
      const uint64_t request = connection->decoder.direct_request();
      if (request == 0) continue;
      const auto found = pieces_.find(request);
      if (found != pieces_.end() && found->second.discard) connection->decoder.drop_rest_of_direct();
    }
  }

  void cancel_reads(uint64_t context) override {
    std::erase_if(finished_reads_, [context](uint64_t done) { return done == context; });
    for (auto op = ops_.begin(); op != ops_.end();) {
      if (op->second.context != context) {
        ++op;
        continue;
      }
      discard_pieces_of(op->first);
      op = ops_.erase(op);
    }
  }

  int poll(Sink& sink) override {
    int events = deliver_local(sink);
    // While frames wait for socket space, epoll says which sockets took
    // some: retrying full ones would only collect EAGAINs.
    if (all_.size() <= kDirectPollConnections && watching_writable_ == 0) {
      for (Connection* connection : all_) {
        if (connection->fd) events += receive(*connection, sink);
      }
      if (!reports_.empty()) events += deliver_local(sink);
      return events;
    }
    epoll_event ready[64];
    const int count = epoll_wait(epoll_.get(), ready, 64, 0);
    if (count < 0 && errno != EINTR) fail(Status::transport, "tcp: epoll_wait failed: ", errno_string(errno));
    for (int i = 0; i < count; ++i) {
      auto* connection = static_cast<Connection*>(ready[i].data.ptr);
      if (!connection->fd) continue;  // closed by an earlier event of this batch
      if ((ready[i].events & EPOLLOUT) != 0) {
        after_send(*connection, connection->out.flush(connection->fd.get()));
        ++events;
      }
      if ((ready[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0 && connection->fd) {
        events += receive(*connection, sink);
      }
    }
    if (!reports_.empty()) events += deliver_local(sink);
    return events;
  }

  int wait_fd() override { return epoll_.get(); }
  // epoll is level-triggered: nothing to re-arm, only local work to check.
  bool arm() override { return to_self_.empty() && finished_reads_.empty() && reports_.empty(); }

  std::string describe_peer(int peer) override {
    if (peer < 0 || peer >= size_ || peer == rank_ || !connected_) return {};
    const PeerState& state = peers_[static_cast<size_t>(peer)];
    size_t frames = 0;
    uint64_t bytes = 0;
    for (const auto& connection : state.streams) {
      frames += connection->out.frames();
      bytes += connection->out.bytes();
    }
    size_t reads = 0;
    for (const auto& [id, op] : ops_) reads += op.peer == peer ? 1 : 0;
    return concat("tcp: rank ", peer, " at ", state.address, ", ", state.streams.size(), " streams, ",
                  state.failure ? "failed" : "connected", ", ", frames, " frames (", bytes,
                  " bytes) waiting for its socket to take them, ", reads, " reads from it in flight");
  }

  MemoryUse memory_use() const override {
    MemoryUse use;
    const size_t staging = kStagingBytes + kFrameHeaderBytes + max_eager_;
    use.per_peer = static_cast<size_t>(options_.streams) * (staging + sizeof(Connection)) + sizeof(PeerState);
    use.detail = concat(options_.streams, " streams of a ", staging, " B receive staging buffer each");
    return use;
  }

 private:
  // What the decoder of one connection found, handed to the sink.
  class Incoming final : public FrameHandler {
   public:
    Incoming(TcpTransport& transport, Connection& connection, Sink& sink)
        : transport_(transport), connection_(connection), sink_(sink) {}
    int delivered = 0;

    void on_eager(const uint8_t* data, size_t bytes) override {
      ++delivered;
      sink_.on_eager(connection_.peer, data, bytes);
    }
    void on_read_request(uint64_t request, const ReadRequest& read) override {
      ++delivered;
      transport_.serve_read(connection_, request, read);
    }
    uint8_t* read_data_destination(uint64_t request, uint64_t bytes) override {
      const ReadPiece* piece = transport_.piece(request, connection_.peer);
      if (piece == nullptr || piece->bytes != bytes) {
        throw WireError(concat("READ_DATA for request ", request, " (", bytes, " bytes) that was not asked for"));
      }
      // The engine may have released the destination when the read failed.
      return piece->discard ? nullptr : piece->destination;
    }
    void on_read_data_done(uint64_t request) override {
      ++delivered;
      transport_.finish_piece(request, nullptr, sink_);
    }
    void on_read_error(uint64_t request, const std::string& reason) override {
      ++delivered;
      const Error error(Status::transport, concat("tcp: rank ", connection_.peer, " refused a read: ", reason),
                        connection_.peer);
      transport_.finish_piece(request, &error, sink_);
    }
    void on_goodbye() override { connection_.goodbye = true; }

   private:
    TcpTransport& transport_;
    Connection& connection_;
    Sink& sink_;
  };

  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_) fail(Status::internal, "tcp: ", what, " rank ", peer, " of ", size_);
    if (!connected_) fail(Status::internal, "tcp: ", what, " rank ", peer, " before connect");
  }

  PeerState& usable_peer(int peer) {
    PeerState& state = peers_[static_cast<size_t>(peer)];
    if (state.failure) throw Error(Status::peer_failed, state.failure->what(), peer);
    return state;
  }

  const ReadPiece* piece(uint64_t request, int peer) const {
    auto found = pieces_.find(request);
    return found == pieces_.end() || found->second.peer != peer ? nullptr : &found->second;
  }

  // A piece arrived (error == nullptr) or was refused: the read completes
  // when its last piece does, and fails once with the first refusal.
  void finish_piece(uint64_t request, const Error* error, Sink& sink) {
    auto found = pieces_.find(request);
    if (found == pieces_.end()) return;
    const uint64_t op_id = found->second.op;
    pieces_.erase(found);
    auto op = ops_.find(op_id);
    if (op == ops_.end()) return;  // failed earlier
    const uint64_t context = op->second.context;
    if (error != nullptr) {
      discard_pieces_of(op_id);
      ops_.erase(op);
      sink.on_error(context, error->peer(), *error);
      return;
    }
    if (--op->second.pieces_left == 0) {
      ops_.erase(op);
      sink.on_read_done(context);
    }
  }

  // The owner's side of a read: stream the range back from registered
  // memory, or say why not.
  void serve_read(Connection& connection, uint64_t request, const ReadRequest& read) {
    std::string refusal;
    auto region = registry_->regions.find(read.key);
    if (region == registry_->regions.end()) {
      refusal = abandoned_ ? concat("rank ", rank_, " gave up its operations (", *abandoned_, ")")
                           : concat("key ", read.key, " names no registration of rank ", rank_);
    } else {
      const auto [base, length] = region->second;
      if (read.address < base || read.address - base > length || read.bytes > length - (read.address - base)) {
        refusal = concat(read.bytes, " bytes at 0x", std::hex, read.address, std::dec,
                         " lie outside registration ", read.key, " of rank ", rank_);
      }
    }
    uint8_t frame[kFrameHeaderBytes];
    if (refusal.empty()) {
      encode_header(frame, FrameKind::read_data, read.bytes, request);
      connection.out.queue_reference(frame, sizeof frame, reinterpret_cast<const uint8_t*>(read.address), read.bytes);
      after_send(connection, connection.out.flush(connection.fd.get()));
      return;
    }
    refusal.resize(std::min(refusal.size(), kMaxErrorText));
    encode_header(frame, FrameKind::read_error, refusal.size(), request);
    const iovec parts[2] = {{frame, sizeof frame}, {refusal.data(), refusal.size()}};
    after_send(connection, connection.out.send_or_copy(connection.fd.get(), parts, 2));
  }

  // Keeps EPOLLOUT in the set exactly while frames wait; a send error fails the peer.
  void after_send(Connection& connection, int err) {
    if (err != 0) return connection_failed(connection, err, "sending to");
    const bool want = !connection.out.empty();
    if (want == connection.watch_writable) return;
    epoll_event event{};
    event.events = want ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
    event.data.ptr = &connection;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, connection.fd.get(), &event) != 0) {
      fail_peer(Status::transport, connection.peer, "tcp: epoll_ctl(MOD) for rank ", connection.peer,
                " failed: ", errno_string(errno));
    }
    connection.watch_writable = want;
    watching_writable_ += want ? 1 : -1;
  }

  int receive(Connection& connection, Sink& sink) {
    Incoming incoming(*this, connection, sink);
    for (int i = 0; i < kRecvsPerPoll && connection.fd; ++i) {
      const std::span<uint8_t> space = connection.decoder.space();
      const ssize_t got = recv(connection.fd.get(), space.data(), space.size(), MSG_DONTWAIT);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (got <= 0) {
        connection_failed(connection, got == 0 ? 0 : errno, "receiving from");
        break;
      }
      try {
        connection.decoder.consume(static_cast<size_t>(got), incoming);
      } catch (const WireError& e) {
        fail_peer_state(connection.peer, Error(Status::transport, concat("tcp: rank ", connection.peer, " (",
                                                                         peers_[static_cast<size_t>(connection.peer)].address,
                                                                         ") sent a malformed stream: ", e.what()),
                                               connection.peer));
        break;
      }
      if (static_cast<size_t>(got) < space.size()) break;  // drained
    }
    return incoming.delivered;
  }

  // err == 0: end of stream. After the peer's GOODBYE that is the end of
  // the job, anything else means the peer is gone.
  void connection_failed(Connection& connection, int err, const char* doing) {
    const int peer = connection.peer;
    if (connection.goodbye) {
      close_connection(connection);
      return;
    }
    const std::string& address = peers_[static_cast<size_t>(peer)].address;
    const bool gone = err == 0 || err == ECONNRESET || err == EPIPE;
    const std::string what =
        err == 0 ? "closed the connection (end of stream)" : concat("failed: ", errno_string(err));
    fail_peer_state(peer, Error(gone ? Status::peer_failed : Status::transport,
                                concat("tcp: ", doing, " rank ", peer, " (", address, ", stream ", connection.stream,
                                       "): ", what, gone ? "; the rank ended or was killed" : ""),
                                peer));
  }

  void close_connection(Connection& connection) {
    if (connection.watch_writable) --watching_writable_;
    connection.watch_writable = false;
    if (connection.fd) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, connection.fd.get(), nullptr);
    connection.fd.reset();
  }

  // Every stream to `peer` closes; its reads and the peer itself are
  // reported to the sink at the next poll().
  void fail_peer_state(int peer, const Error& reported) {
    PeerState& state = peers_[static_cast<size_t>(peer)];
    if (state.failure) return;
    // A rank that fails after another usually ends because of it (it gave
    // up, or the launcher stopped it): name the first failure too, so every
    // survivor's error leads to the root cause.
    const Error error = first_failure_ ? Error(reported.status(),
                                               concat(reported.what(), " (after rank ", first_failure_->peer(),
                                                      " failed first: ", first_failure_->what(), ")"),
                                               peer)
                                       : reported;
    if (!first_failure_) first_failure_ = reported;
    state.failure = error;
    for (auto& connection : state.streams) close_connection(*connection);
    log::info(error.what());
    std::erase_if(pieces_, [peer](const auto& entry) { return entry.second.peer == peer; });
    for (auto it = ops_.begin(); it != ops_.end();) {
      if (it->second.peer != peer) {
        ++it;
        continue;
      }
      reports_.push_back({it->second.context, peer, error});
      it = ops_.erase(it);
    }
    reports_.push_back({0, peer, error});
  }

  int deliver_local(Sink& sink) {
    int events = 0;
    while (!to_self_.empty()) {
      const std::vector<uint8_t> message = std::move(to_self_.front());
      to_self_.pop_front();
      sink.on_eager(rank_, message.data(), message.size());
      ++events;
    }
    std::vector<uint64_t> finished;
    finished.swap(finished_reads_);
    for (uint64_t context : finished) sink.on_read_done(context);
    std::vector<Report> reports;
    reports.swap(reports_);
    for (const Report& report : reports) sink.on_error(report.context, report.peer, report.error);
    return events + static_cast<int>(finished.size() + reports.size());
  }

  // A closing rank tells its peers, so they take the end of stream that
  // follows as the end of the job and not as a failure.
  void say_goodbye() {
    uint8_t frame[kFrameHeaderBytes];
    encode_header(frame, FrameKind::goodbye, 0, 0);
    for (PeerState& state : peers_) {
      for (auto& connection : state.streams) {
        if (!connection->fd || !connection->out.empty()) continue;
        const iovec part{frame, sizeof frame};
        send_parts(connection->fd.get(), &part, 1);
        // Reading what is left before close() keeps the kernel from
        // answering with a reset, which could discard the GOODBYE.
        shutdown(connection->fd.get(), SHUT_WR);
        uint8_t discard[4096];
        while (recv(connection->fd.get(), discard, sizeof discard, MSG_DONTWAIT) > 0) {
        }
      }
    }
  }

  const int rank_;
  const int size_;
  const TcpOptions options_;
  const size_t max_eager_;
  const Token token_;
  SocketAddress local_;
  Fd listener_;
  Fd epoll_;
  bool connected_ = false;
  std::vector<PeerState> peers_;
  std::vector<Connection*> all_;  // every connection of peers_, for poll()
  int watching_writable_ = 0;     // connections with EPOLLOUT in the set
  std::shared_ptr<Registry> registry_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, ReadOp> ops_;
  std::unordered_map<uint64_t, ReadPiece> pieces_;
  std::deque<std::vector<uint8_t>> to_self_;
  std::vector<uint64_t> finished_reads_;
  std::optional<std::string> abandoned_;  // why this rank gave up (note_abandoned)
  std::vector<Report> reports_;
  std::optional<Error> first_failure_;  // the first peer failure this rank saw
};

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(int rank, int size, const TcpOptions& options) {
  return std::make_unique<TcpTransport>(rank, size, options);
}

std::string describe_tcp_choice(const std::string& iface, bool all_ranks_on_one_host) {
  std::string how;
  const SocketAddress address = choose_local_address(iface, all_ranks_on_one_host, &how);
  std::string text = address.to_string();
  return concat(text.substr(0, text.rfind(':')), " (", how, ")");
}

}  // namespace chorus::transport
