// chorus C++ API.
//
// A Communicator is created collectively by every rank of a job (started by
// chorusrun, mpirun, srun or a torchrun-style launcher) and runs collectives
// over the best transport available. Every failure throws chorus::Error,
// which names what failed, the peer involved (if any) and the provider's
// message; no call aborts the process.
//
// Conventions (as in NCCL and MPI):
//  - `count` is a number of elements, not bytes.
//  - In-place: pass the same pointer as send and receive buffer, or use the
//    single-buffer overloads. For allgather the rank's own block inside the
//    receive buffer is the in-place send buffer (recv + rank * count); for
//    reduce_scatter the receive buffer may alias block `rank` of the send
//    buffer.
//  - Calls are blocking and collective: every rank must make the same calls
//    in the same order with matching counts, dtypes, ops and roots.
#pragma once

#include <chorus/chorus.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

enum class DataType : int {
  int8 = CHORUS_INT8,
  uint8 = CHORUS_UINT8,
  int16 = CHORUS_INT16,
  uint16 = CHORUS_UINT16,
  int32 = CHORUS_INT32,
  uint32 = CHORUS_UINT32,
  int64 = CHORUS_INT64,
  uint64 = CHORUS_UINT64,
  float16 = CHORUS_FLOAT16,
  bfloat16 = CHORUS_BFLOAT16,
  float32 = CHORUS_FLOAT32,
  float64 = CHORUS_FLOAT64,
};
inline constexpr int kNumDataTypes = CHORUS_NUM_DATATYPES;

enum class ReduceOp : int { sum = CHORUS_SUM, prod = CHORUS_PROD, min = CHORUS_MIN, max = CHORUS_MAX };
inline constexpr int kNumReduceOps = CHORUS_NUM_OPS;

enum class Status : int {
  success = CHORUS_SUCCESS,
  invalid_argument = CHORUS_ERR_INVALID_ARGUMENT,
  config = CHORUS_ERR_CONFIG,
  transport = CHORUS_ERR_TRANSPORT,
  timeout = CHORUS_ERR_TIMEOUT,
  peer_failed = CHORUS_ERR_PEER_FAILED,
  bootstrap = CHORUS_ERR_BOOTSTRAP,
  unsupported = CHORUS_ERR_UNSUPPORTED,
  finalized = CHORUS_ERR_FINALIZED,
  truncated = CHORUS_ERR_TRUNCATED,
  internal = CHORUS_ERR_INTERNAL,
};

// Collective operations, for algorithm selection and reporting.
enum class Collective : int {
  allreduce,
  broadcast,
  barrier,
  reduce,
  allgather,
  reduce_scatter,
  alltoall,
  gather,
  gatherv,
  scatter,
  scatterv,
  allgatherv,
  alltoallv,
  scan,
  exscan,
};
inline constexpr int kNumCollectives = 15;

// 16-bit float storage types for the typed API (bit patterns, no arithmetic).
struct float16_t {
  uint16_t bits;
};
struct bfloat16_t {
  uint16_t bits;
};

// The exception every chorus call throws.
class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message, int peer = -1)
      : std::runtime_error(message), status_(status), peer_(peer) {}
  Status status() const noexcept { return status_; }
  // World rank of the peer involved, or -1 if none.
  int peer() const noexcept { return peer_; }

 private:
  Status status_;
  int peer_;
};

size_t datatype_size(DataType dtype);
std::string_view to_string(DataType dtype);  // "int8", ..., "float16", "bfloat16", "float32", "float64"
std::string_view to_string(ReduceOp op);     // "sum", "prod", "min", "max"
std::string_view to_string(Collective op);   // "allreduce", ...
std::string_view to_string(Status status);   // "CHORUS_ERR_TIMEOUT", ...

template <class T>
constexpr DataType datatype_of();
template <> constexpr DataType datatype_of<int8_t>() { return DataType::int8; }
template <> constexpr DataType datatype_of<uint8_t>() { return DataType::uint8; }
template <> constexpr DataType datatype_of<int16_t>() { return DataType::int16; }
template <> constexpr DataType datatype_of<uint16_t>() { return DataType::uint16; }
template <> constexpr DataType datatype_of<int32_t>() { return DataType::int32; }
template <> constexpr DataType datatype_of<uint32_t>() { return DataType::uint32; }
template <> constexpr DataType datatype_of<int64_t>() { return DataType::int64; }
template <> constexpr DataType datatype_of<uint64_t>() { return DataType::uint64; }
template <> constexpr DataType datatype_of<float16_t>() { return DataType::float16; }
template <> constexpr DataType datatype_of<bfloat16_t>() { return DataType::bfloat16; }
template <> constexpr DataType datatype_of<float>() { return DataType::float32; }
template <> constexpr DataType datatype_of<double>() { return DataType::float64; }

// Point-to-point wildcards for Communicator::recv (as MPI_ANY_SOURCE/MPI_ANY_TAG).
inline constexpr int kAnySource = -1;
inline constexpr int kAnyTag = -1;

// What a receive got: the sender's rank in the communicator, the message's
// tag and its length in bytes (at most the receive buffer's capacity).
struct Received {
  int source = -1;
  int tag = -1;
  size_t bytes = 0;
};

// A message a matched probe took (Communicator::improbe / mprobe, as
// MPI_Improbe / MPI_Mprobe): no receive matches it any more, and only
// imrecv / mrecv of this object, on the communicator that probed it,
// receives it (once). One never received stays with the communicator's
// engine until it goes, as MPI's.
struct Message {
  Received info;     // its source, tag and length
  uint64_t id = 0;   // the engine's name for it (0: none)
};

class CommunicatorImpl;
struct RequestState;

// An operation started by one of Communicator's i-calls (iallreduce, isend,
// ...), as MPI_Request or a torch Work: the operation moves on by itself
// (docs/nonblocking.md) and the buffers it was given belong to chorus until
// wait() or test() reports it complete. Move-only. An empty Request (default
// constructed, moved from, or already reported complete) waits for nothing.
// Destroying a request that has not completed detaches it, as
// MPI_Request_free does: the operation still completes, its buffers stay
// chorus' until then, and an error it meets makes the communicator report
// that error on its next call.
class Request {
 public:
  Request() = default;
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  // Blocks until the operation completes, progressing it (and every other
  // outstanding operation of the process). Throws chorus::Error as the
  // blocking call would (peer failed, timeout, truncation, mismatched
  // calls); either way the request is then empty.
  void wait();
  // Progresses once; true (and the request empty) once the operation has
  // completed, throwing its error if it failed.
  bool test();
  // True while the request holds an operation not yet reported complete.
  bool active() const { return state_ != nullptr; }
  // What the last completed receive got (irecv); {-1, -1, 0} otherwise.
  const Received& received() const { return received_; }
  // Withdraws a receive (irecv, imrecv is never one: its message matched)
  // that no message has matched yet, as MPI_Cancel: true, and the request
  // is empty, nothing was received (received() {-1, -1, 0}) and nothing
  // will be written to its buffer. False for a send, a collective, a
  // receive that matched or finished: the request goes on as before.
  bool cancel();

 private:
  friend class Communicator;
  friend size_t wait_any(std::span<Request> requests);
  friend struct ::chorus_request;  // the C API's handle
  // Takes over one reference to `state` (counted in the object).
  explicit Request(RequestState* state);
  RequestState* state_ = nullptr;
  Received received_;
};

// Waits for every request (errors: all are still waited for, the first is
// then thrown). Returns when all are empty.
void wait_all(std::span<Request> requests);
// Waits until one active request completes and returns its index (the
// request is then empty); requests.size() when none is active.
size_t wait_any(std::span<Request> requests);
// Progresses once; true when every request has completed (each is then
// empty). The first error met is thrown after the others were tested.
bool test_all(std::span<Request> requests);
// Progresses once; the index of a request that has completed, if any.
std::optional<size_t> test_any(std::span<Request> requests);

// A key/value store the caller already has (torch's c10d::Store, a
// framework's rendezvous service), for Communicator::init(rank, size, store):
// chorus then bootstraps over it, with no store or listening port of its
// own. Every rank's store must reach the same key space. Calls may come from
// chorus' progress thread as well as the caller's (never two at once per
// communicator). Any exception a call throws becomes Error(Status::bootstrap)
// naming the key.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // Stores (or overwrites) `value` under `key`.
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Waits at most `timeout` for `key` to exist and returns its value; throws
  // when it does not appear in time (chorus waits in slices of about a
  // second, checking for failed peers in between).
  virtual std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds `delta` to the integer at `key` (missing = 0) and returns
  // the new value. chorus reads counters only through add.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // True if `key` exists now (no waiting).
  virtual bool check(const std::string& key) = 0;
};

// Settings of Communicator::init(rank, size, store, options) that the
// caller's framework decides instead of the environment.
struct StoreInitOptions {
  // Every wait's deadline (as CHORUS_TIMEOUT, which it overrides); unset:
  // CHORUS_TIMEOUT or its default.
  std::optional<std::chrono::milliseconds> timeout;
  // Prefix of every key chorus writes, for several jobs or communicators
  // sharing one store (each init over the same keys needs its own).
  std::string key_prefix = "chorus";
  // Who advances non-blocking operations (as CHORUS_PROGRESS, which it
  // overrides): "thread" (chorus' progress thread) or "caller" (only threads
  // inside chorus calls: for a framework whose own thread always waits on
  // the oldest outstanding request); empty: CHORUS_PROGRESS or its default.
  std::string progress;
};

// Communicator::traffic(): payload bytes to and from this host's ranks
// (shared memory with the hybrid transport) and other hosts' (the network).
struct Traffic {
  uint64_t bytes_out_this_host = 0, bytes_in_this_host = 0;
  uint64_t bytes_out_other_hosts = 0, bytes_in_other_hosts = 0;
};

class Communicator {
 public:
  // Joins the job described by the environment (see README: CHORUS_*,
  // OMPI_COMM_WORLD_*, SLURM_*/PMI_*, RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT).
  // Collective over all ranks of the job.
  static Communicator init();
  // Joins a job whose ranks the caller numbered (0 <= rank < size), bootstrapping
  // over the caller's key/value store instead of detecting a launcher; the
  // other CHORUS_* settings still apply. Collective over all `size` ranks;
  // the store must outlive the communicator's finalize().
  static Communicator init(int rank, int size, std::shared_ptr<KeyValueStore> store,
                           const StoreInitOptions& options = {});

  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  // Finalizes if finalize() was not called; errors there are logged, not thrown.
  ~Communicator();

  int rank() const;
  int size() const;
  int local_rank() const;  // rank among the processes on this host
  int local_size() const;
  std::string transport_name() const;  // e.g. "ofi:tcp;ofi_rxm", "ofi:shm"
  // This rank's host, numbered 0.. by the lowest rank of the job on each
  // (hostname, or CHORUS_HOST_ID: docs/transport-hybrid.md).
  int host() const;
  // Payload bytes this process sent and received since init, over every
  // communicator of the job, split by where the peer is (docs/
  // transport-hybrid.md, "Bytes"): headers and protocol messages not counted.
  Traffic traffic() const;

  // Raw (untyped) collectives.
  void allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  void broadcast(void* buf, size_t count, DataType dtype, int root);
  void barrier();
  void reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root);
  void allgather(const void* send, void* recv, size_t count, DataType dtype);
  void reduce_scatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  void alltoall(const void* send, void* recv, size_t count, DataType dtype);

  // Typed collectives.
  template <class T>
  void allreduce(const T* send, T* recv, size_t count, ReduceOp op) {
    allreduce(send, recv, count, datatype_of<T>(), op);
  }
  template <class T>
  void allreduce(std::span<T> inout, ReduceOp op) {
    allreduce(inout.data(), inout.data(), inout.size(), datatype_of<T>(), op);
  }
  template <class T>
  void broadcast(std::span<T> buf, int root) {
    broadcast(buf.data(), buf.size(), datatype_of<T>(), root);
  }
  template <class T>
  void reduce(const T* send, T* recv, size_t count, ReduceOp op, int root) {
    reduce(send, recv, count, datatype_of<T>(), op, root);
  }
  template <class T>
  void reduce(std::span<T> inout, ReduceOp op, int root) {
    reduce(inout.data(), inout.data(), inout.size(), datatype_of<T>(), op, root);
  }
  template <class T>
  void allgather(const T* send, T* recv, size_t count) {
    allgather(send, recv, count, datatype_of<T>());
  }
  template <class T>
  void reduce_scatter(const T* send, T* recv, size_t count, ReduceOp op) {
    reduce_scatter(send, recv, count, datatype_of<T>(), op);
  }
  template <class T>
  void alltoall(const T* send, T* recv, size_t count) {
    alltoall(send, recv, count, datatype_of<T>());
  }

  // Non-blocking collectives: the same arguments and rules as the blocking
  // calls; they start now and complete in wait()/test() (docs/nonblocking.md).
  // Every rank starts a communicator's collectives, blocking and not, in the
  // same order; they may complete, and be waited for, in any order.
  [[nodiscard]] Request iallreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  [[nodiscard]] Request ibroadcast(void* buf, size_t count, DataType dtype, int root);
  [[nodiscard]] Request ibarrier();
  [[nodiscard]] Request ireduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root);
  [[nodiscard]] Request iallgather(const void* send, void* recv, size_t count, DataType dtype);
  [[nodiscard]] Request ireduce_scatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  [[nodiscard]] Request ialltoall(const void* send, void* recv, size_t count, DataType dtype);
  // The rooted, v- and prefix collectives, as gather .. exscan below. The
  // count and displacement arrays, like the buffers, must stay untouched
  // until the request completes.
  [[nodiscard]] Request igather(const void* send, void* recv, size_t count, DataType dtype, int root);
  [[nodiscard]] Request igatherv(const void* send, size_t send_count, void* recv, std::span<const size_t> recv_counts,
                                 std::span<const size_t> recv_displs, DataType dtype, int root);
  [[nodiscard]] Request iscatter(const void* send, void* recv, size_t count, DataType dtype, int root);
  [[nodiscard]] Request iscatterv(const void* send, std::span<const size_t> send_counts,
                                  std::span<const size_t> send_displs, void* recv, size_t recv_count, DataType dtype,
                                  int root);
  [[nodiscard]] Request iallgatherv(const void* send, size_t send_count, void* recv,
                                    std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                                    DataType dtype);
  [[nodiscard]] Request ialltoallv(const void* send, std::span<const size_t> send_counts,
                                   std::span<const size_t> send_displs, void* recv,
                                   std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                                   DataType dtype);
  [[nodiscard]] Request iscan(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  [[nodiscard]] Request iexscan(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  template <class T>
  [[nodiscard]] Request iallreduce(std::span<T> inout, ReduceOp op) {
    return iallreduce(inout.data(), inout.data(), inout.size(), datatype_of<T>(), op);
  }
  template <class T>
  [[nodiscard]] Request ibroadcast(std::span<T> buf, int root) {
    return ibroadcast(buf.data(), buf.size(), datatype_of<T>(), root);
  }

  // Non-blocking point-to-point, as send/recv below.
  [[nodiscard]] Request isend(const void* buf, size_t bytes, int peer, int tag);
  [[nodiscard]] Request irecv(void* buf, size_t bytes, int peer, int tag);
  // A synchronous send (MPI_Issend): completes only once the receiver has
  // matched it, whatever the size.
  [[nodiscard]] Request issend(const void* buf, size_t bytes, int peer, int tag);

  // Rooted, variable-size and prefix collectives (as MPI's). Counts and
  // displacements are elements, one entry per rank; an empty displacement
  // span means blocks packed one after another (displs[r] = sum of counts
  // before r). Arrays and buffers marked "root" are read only at the root
  // (others may pass empty spans / nullptr). In place:
  //  - gather/gatherv: at the root, send = the root's own block inside recv
  //    (recv + root * count, recv + recv_displs[root]);
  //  - scatter/scatterv: at the root, recv = the root's own block inside
  //    send (send + root * count, send + send_displs[root]);
  //  - allgatherv: send = recv + recv_displs[rank];
  //  - alltoallv: send == recv; the receive counts/displacements describe
  //    both sides (send_counts/send_displs are ignored);
  //  - scan/exscan: send == recv.
  // exscan leaves rank 0's receive buffer unchanged (MPI: undefined).
  // gather: recv (root) holds size*count elements, rank r's block at r*count.
  void gather(const void* send, void* recv, size_t count, DataType dtype, int root);
  // gatherv: rank r sends send_count elements; they land at recv + recv_displs[r]
  // at the root, whose recv_counts[r] must equal rank r's send_count.
  void gatherv(const void* send, size_t send_count, void* recv, std::span<const size_t> recv_counts,
               std::span<const size_t> recv_displs, DataType dtype, int root);
  // scatter: block r (count elements at send + r*count) of the root goes to rank r.
  void scatter(const void* send, void* recv, size_t count, DataType dtype, int root);
  // scatterv: send_counts[r] elements at send + send_displs[r] (root) go to
  // rank r, whose recv_count must equal them.
  void scatterv(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_displs,
                void* recv, size_t recv_count, DataType dtype, int root);
  // allgatherv: every rank ends with rank r's send_count elements at
  // recv + recv_displs[r]; every rank passes the same recv_counts.
  void allgatherv(const void* send, size_t send_count, void* recv, std::span<const size_t> recv_counts,
                  std::span<const size_t> recv_displs, DataType dtype);
  // alltoallv: send_counts[j] elements at send + send_displs[j] go to rank j;
  // recv_counts[i] elements from rank i land at recv + recv_displs[i]. Rank
  // i's send_counts[j] must equal rank j's recv_counts[i].
  void alltoallv(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_displs,
                 void* recv, std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                 DataType dtype);
  // scan: rank r gets the reduction of ranks 0..r's inputs; exscan: of 0..r-1.
  void scan(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  void exscan(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);

  template <class T>
  void gather(const T* send, T* recv, size_t count, int root) {
    gather(send, recv, count, datatype_of<T>(), root);
  }
  template <class T>
  void scatter(const T* send, T* recv, size_t count, int root) {
    scatter(send, recv, count, datatype_of<T>(), root);
  }
  template <class T>
  void allgatherv(std::span<const T> send, T* recv, std::span<const size_t> recv_counts,
                  std::span<const size_t> recv_displs = {}) {
    allgatherv(send.data(), send.size(), recv, recv_counts, recv_displs, datatype_of<T>());
  }
  template <class T>
  void alltoallv(const T* send, std::span<const size_t> send_counts, std::span<const size_t> send_displs, T* recv,
                 std::span<const size_t> recv_counts, std::span<const size_t> recv_displs) {
    alltoallv(send, send_counts, send_displs, recv, recv_counts, recv_displs, datatype_of<T>());
  }
  template <class T>
  void scan(const T* send, T* recv, size_t count, ReduceOp op) {
    scan(send, recv, count, datatype_of<T>(), op);
  }
  template <class T>
  void exscan(const T* send, T* recv, size_t count, ReduceOp op) {
    exscan(send, recv, count, datatype_of<T>(), op);
  }

  // Blocking point-to-point of raw bytes; tag in [0, 2^31). Messages between
  // two ranks with the same tag arrive in send order. recv takes a message of
  // at most `bytes` bytes (a longer one fails with Status::truncated, which
  // does not make the communicator unusable); peer may be kAnySource and tag
  // kAnyTag.
  void send(const void* buf, size_t bytes, int peer, int tag);
  Received recv(void* buf, size_t bytes, int peer, int tag);
  // What recv(buf, bytes, peer, tag) called now would receive, without
  // receiving it (as MPI_Iprobe / MPI_Probe): its source, tag and length.
  // iprobe polls once and returns nullopt if no such message has arrived;
  // probe waits for one (failing as recv does on a timeout or a lost peer).
  // A recv from the returned source with the returned tag takes that message.
  std::optional<Received> iprobe(int peer, int tag);
  Received probe(int peer, int tag);
  // Matched probes (MPI_Improbe / MPI_Mprobe): as iprobe / probe, but the
  // message found is taken, so that no other receive (another thread's)
  // gets it; receive it with imrecv / mrecv into at most `bytes` bytes (a
  // longer one fails with Status::truncated). `message` is spent (id 0) once the
  // receive is posted, whatever its outcome; a call refused before that leaves it.
  std::optional<Message> improbe(int peer, int tag);
  Message mprobe(int peer, int tag);
  [[nodiscard]] Request imrecv(Message& message, void* buf, size_t bytes);
  Received mrecv(Message& message, void* buf, size_t bytes);

  // Sub-communicators (as MPI_Comm_split / MPI_Comm_dup). Collective over
  // this communicator. Ranks passing the same color >= 0 form a new
  // communicator, ranked by (key, rank here); a negative color joins none
  // and gets std::nullopt. The new communicator shares this process' engine
  // and connections but has its own tag space, so its collectives and
  // messages never match this one's or any other communicator's; it may be
  // used from any point on (it does not need this one to stay alive, only
  // the world communicator). dup() is split(0, rank()).
  std::optional<Communicator> split(int color, int key);
  Communicator dup();
  // A communicator of `members` (ranks of this one, in the new one's rank
  // order; this rank among them), as MPI_Comm_create_group: collective over
  // the members only, the others need not call. Concurrent calls on this
  // communicator whose member lists overlap must pass different `tag`s
  // (0..2^31-1); the library's messages never match a user receive.
  Communicator create_group(std::span<const int> members, int tag);

  // Algorithm choice. Names per collective are listed by algorithms(op);
  // "" (or "auto") returns to the built-in table. Overrides CHORUS_ALGO_<OP>.
  void set_algorithm(Collective op, std::string_view name);
  std::vector<std::string> algorithms(Collective op) const;
  // The algorithm the table picks for `bytes` of payload on this communicator.
  std::string selected_algorithm(Collective op, size_t bytes) const;

  // World communicator (init): collective, leaves the job; after it every
  // call on it and on every communicator split from it throws
  // Status::finalized. A split/dup communicator: local, releases just that
  // one (as MPI_Comm_free).
  void finalize();

 private:
  // The implementation, or Status::finalized for a moved-from communicator.
  CommunicatorImpl& impl();
  const CommunicatorImpl& impl() const;
  explicit Communicator(std::unique_ptr<CommunicatorImpl> impl);
  std::unique_ptr<CommunicatorImpl> impl_;
};

}  // namespace chorus
