// Non-blocking operations of the MPI subset (docs/mpi.md, "Non-blocking
// operations"): the object behind MPI_Request and what the i-calls share.
//
// A request holds the chorus::Request of the operation and, for derived
// datatypes and reductions chorus' collectives cannot compute, staging
// buffers: packed data the operation reads (filled when it starts) or writes
// (unpacked, or combined in rank order, by `finish` on the thread that
// completes the request in MPI_Wait/MPI_Test*, never on chorus' progress
// thread).
#pragma once

#include "api/user_tag.hpp"
#include "mpi/internal.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus::mpi {
// What a request of derived datatypes, a v-collective or a reduction chorus
// lacks needs besides its operation: made on first use (staging()), so the
// request of a contiguous send or receive fits one cache line.
struct RequestStaging {
  Bytes send;
  Bytes recv;
  // A failure MPI_Request_get_status reported without freeing the request:
  // the wait or test that completes it reports it again.
  std::optional<chorus::Error> failed;
  std::function<void(const chorus::Received&)> finish;  // after success, before the status is filled
  // A request of several operations (the non-blocking neighbourhood
  // collectives: a receive and a send per neighbour) has them here and no
  // `operation`: it completes when all have, waited for and tested in
  // order. `keep` holds what they and `finish` use besides send and recv.
  std::vector<chorus::Request> parts;
  size_t parts_done = 0;  // parts[0, parts_done) have finished
  std::shared_ptr<void> keep;
  bool has_parts() const { return !parts.empty(); }
  bool parts_active() const {
    return std::any_of(parts.begin() + static_cast<std::ptrdiff_t>(parts_done), parts.end(),
                       [](const chorus::Request& part) { return part.active(); });
  }
};
// A persistent request's call (MPI_Send_init, MPI_Recv_init), which each
// MPI_Start makes again. The datatype is the request's own copy: the
// caller may free its handle while the request lives.
// MPI's send modes (a ready send is a standard one: its receive is posted,
// so it has nothing to wait for that a standard send would).
enum class SendMode : uint8_t { standard, synchronous, buffered };
struct PersistentCall {
  bool send;
  SendMode mode;  // a send's
  MPI_Comm comm;
  void* buf;  // const for a send (MPI_Send_init's const void*)
  int count;
  chorus_mpi_datatype type;
  int peer;
  int tag;
};
}  // namespace chorus::mpi

struct chorus_mpi_request {
  // Members set one by one: brace-initializing the aggregate zeroed the
  // whole object first with `rep stos`, whose start-up cost on AMD Zen
  // (about 30 cycles) was 4 % of a receiver's time in osu_bw (perf).
  // `start()` makes the chorus::Request in place (no move: a move and the
  // moved-from request's destruction are two calls into libchorus).
  template <class Start>
  chorus_mpi_request(uint32_t request_magic, MPI_Comm owner, bool receives, Start&& start)
      : magic(request_magic), receive(receives), operation(start()), comm(owner) {}

  uint32_t magic;
  bool receive = false;       // the status reports what was received
  bool from_proc_null = false;
  bool blocking = false;      // a blocking call's, never published: its arguments outlive it (run_to_completion)
  bool started = false;       // a persistent request's: between MPI_Start and its completion
  bool cancelled = false;     // MPI_Cancel withdrew its receive (MPI_Test_cancelled)
  bool collective = false;    // a collective's, which MPI_Cancel refuses (MPI-3.1 5.12)
  chorus::Request operation;  // empty once finished (or from the start: MPI_PROC_NULL)
  MPI_Comm comm;              // whose error handler reports its failure
  std::unique_ptr<chorus::mpi::RequestStaging> extra;  // null until staging() is first called
  // Set for a persistent request, which completion leaves in place, inactive.
  std::unique_ptr<chorus::mpi::PersistentCall> persistent;

  chorus::mpi::RequestStaging& staging() {
    if (!extra) extra = std::make_unique<chorus::mpi::RequestStaging>();
    return *extra;
  }
  // No operation to wait for: MPI_REQUEST_NULL, or a persistent request
  // not started (MPI-3.1 3.9: both complete at once with an empty status).
  static bool inactive(const chorus_mpi_request* request) {
    return request == nullptr || (request->persistent && !request->started);
  }
  // Its operations have not all finished (`operation`, or its parts).
  bool active() const { return extra && extra->has_parts() ? extra->parts_active() : operation.active(); }
  chorus::mpi::Bytes& send_staging() { return staging().send; }
  chorus::mpi::Bytes& recv_staging() { return staging().recv; }
  std::function<void(const chorus::Received&)>& finish() { return staging().finish; }

  // Requests come and go by the window (osu_bw posts 64 at once): glibc's
  // per-thread cache keeps 7 blocks of a size, so a window took malloc's
  // slow path for most of them (about 250 instructions each, measured with
  // callgrind). They are recycled through a free list instead (requests.cc),
  // each on a cache line of its own (RecyclingAllocator).
  static void* operator new(size_t bytes);
  static void operator delete(void* memory, size_t bytes) noexcept;
};
static_assert(sizeof(chorus_mpi_request) <= 64, "a contiguous point-to-point request fits one cache line");

// What MPI_Message names: a message a matched probe took, to be received
// by MPI_Mrecv/MPI_Imrecv on its communicator.
struct chorus_mpi_message {
  uint32_t magic;
  MPI_Comm comm;
  chorus::Message message;
};

namespace chorus::mpi {

inline constexpr uint32_t kRequestMagic = 0x72657173;  // "reqs"
inline constexpr uint32_t kMessageMagic = 0x6d736773;  // "msgs"

using RequestPtr = std::unique_ptr<chorus_mpi_request>;

// A request for an operation on `comm`, not yet started.
inline RequestPtr new_request(MPI_Comm comm) {
  return RequestPtr(new chorus_mpi_request(kRequestMagic, comm, false, [] { return chorus::Request{}; }));
}
// A request for the chorus::Request `start()` returns, which it holds
// without a move (a move and the moved-from request's destruction are two
// calls into libchorus). The memory is taken first: an allocation failure
// starts nothing.
template <class Start>
RequestPtr started_request(MPI_Comm comm, bool receive, Start&& start) {
  void* memory = chorus_mpi_request::operator new(sizeof(chorus_mpi_request));
  try {
    return RequestPtr(::new (memory) chorus_mpi_request(kRequestMagic, comm, receive, start));
  } catch (...) {
    chorus_mpi_request::operator delete(memory, sizeof(chorus_mpi_request));
    throw;
  }
}
// Checks the output handle before an operation starts (MPI_ERR_ARG).
[[noreturn, gnu::cold]] void refuse_request_output();
inline void check_request_output(MPI_Request* request) {
  if (request == nullptr) [[unlikely]] refuse_request_output();
  *request = MPI_REQUEST_NULL;
}
// Hands a started request to the caller.
inline void publish(RequestPtr request, MPI_Request* handle) { *handle = request.release(); }

// Starts point-to-point operations (MPI_PROC_NULL peers complete at once).
RequestPtr start_send(const Comm& comm, const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                      SendMode mode = SendMode::standard);
// A persistent send of `mode` (MPI_Send_init, MPI_Ssend_init, ...), inactive until started.
RequestPtr new_persistent_send(MPI_Comm comm, const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                               SendMode mode);
// The buffered mode (send_modes.cc): the message packed into a copy charged
// against the attached buffer (MPI_ERR_BUFFER if it does not fit) and sent
// from there; the request returned is already complete.
RequestPtr start_buffered_send(const Comm& comm, const void* buf, size_t count, const Datatype& type, int dest,
                               int tag);
// Waits for every buffered send still in flight (MPI_Finalize).
void flush_buffered_sends();
RequestPtr start_recv(const Comm& comm, void* buf, int count, MPI_Datatype datatype, int source, int tag);
// The receive of a matched message (MPI_Mrecv, MPI_Imrecv); its
// chorus::Message is spent once the receive is posted (its id 0).
RequestPtr start_matched_recv(chorus_mpi_message& message, void* buf, int count, MPI_Datatype datatype);
// Waits for a request that was never published (MPI_Sendrecv).
void wait_unpublished(chorus_mpi_request& request, MPI_Status* status);
// A request given up while some of its parts are outstanding (a start that
// failed after posting some): completed later, as MPI_Request_free's.
void detach_request(RequestPtr request);
// Frees a request that failed to start, or detaches it if it had posted parts.
inline void discard_started(RequestPtr request) {
  if (!request->active()) return;
  request->extra->finish = nullptr;  // active: it has parts, so staging
  detach_request(std::move(request));
}

// Reductions chorus lacks (user ops from MPI_Op_create, logical and bitwise
// ops, MINLOC/MAXLOC, long double, complex), blocking and non-blocking
// alike: one strategy (icollectives.cc). Every rank's packed contribution
// is gathered with chorus' own collective, and when the request completes
// the contributions are combined in rank order (combine_in_rank_order:
// x0 op (x1 op (... op x[p-1])), right for non-commutative ops) and the
// result unpacked into `recv`. A blocking call starts the same and waits
// for it (run_to_completion), so both give the same result, bit for bit;
// a user function sees the caller's datatype handle in a blocking call, and
// in a non-blocking one the request's copy of the type (the caller may free
// it before the request completes).
//
// Reduce and allreduce: iallgather of `a.count` elements; the result goes to
// `a.recv` only where `a.receives` (reduce: the root).
void start_gathered_reduction(const Comm& c, chorus_mpi_request& request, const Reduction& a);
// Reduce_scatter_block: `send` holds size blocks of `count` elements (it may
// be `recv`: it is packed before anything is written); ialltoall of the
// blocks, so this rank gets every rank's block `rank`.
void start_gathered_reduce_scatter(const Comm& c, chorus_mpi_request& request, const void* send, size_t count,
                                   const Datatype& type, MPI_Op op, void* recv);
// Reduce_scatter with uneven blocks, any op: every rank's contribution to
// this rank's block arrives by ialltoallv and is combined in rank order.
void start_gathered_reduce_scatter_v(const Comm& c, chorus_mpi_request& request, const void* send,
                                     const std::vector<size_t>& counts, const Datatype& type, MPI_Op op, void* recv);
// MPI_(I)reduce_scatter_block's body, and MPI_Ireduce_scatter's when every
// rank's block has the same count.
void start_reduce_scatter_block(const Comm& c, chorus_mpi_request& request, const void* send, void* recv,
                                size_t count, const Datatype& type, MPI_Op op);

// The checked arguments of MPI_(I)reduce_scatter.
struct ReduceScatterCounts {
  const Datatype& type;
  std::vector<size_t> counts;  // elements of each rank's block
  size_t total;
  const void* send;            // recvbuf in place
  bool even() const {
    return std::all_of(counts.begin(), counts.end(), [&](size_t n) { return n == counts[0]; });
  }
};
ReduceScatterCounts reduce_scatter_counts(const Comm& comm, const void* sendbuf, void* recvbuf, CountArray recvcounts,
                                          MPI_Datatype datatype, MPI_Op op);

// A blocking call's way to a non-blocking strategy: `start(request)` starts
// the operation in a request of `comm` that is never published, then this
// waits for it (and runs its completion step) before returning.
template <class Start>
void run_to_completion(MPI_Comm comm, Start&& start) {
  RequestPtr request = new_request(comm);
  request->blocking = true;
  request->collective = true;
  try {
    start(*request);
  } catch (...) {
    discard_started(std::move(request));
    throw;
  }
  wait_unpublished(*request, MPI_STATUS_IGNORE);
}

// An I-collective: checks the request handle, runs `body(comm, request)`,
// which starts the operation in a new request, and hands it to the caller.
template <class Body>
int start_collective(const char* function, MPI_Comm comm, MPI_Request* request, Body&& body) {
  return call(function, comm, [&] {
    check_request_output(request);
    Comm c = use_comm(comm);
    RequestPtr started = new_request(comm);
    started->collective = true;
    try {
      body(c, *started);
    } catch (...) {
      discard_started(std::move(started));
      throw;
    }
    publish(std::move(started), request);
  });
}

// Point-to-point argument checks (p2p.cc): MPI_ERR_RANK, MPI_ERR_TAG.
// Inline, on every call's path; the failures are out of line.
[[noreturn, gnu::cold]] void refuse_peer(int peer, const Comm& comm);
inline void check_peer(int peer, const Comm& comm, bool wildcard_allowed) {
  if (wildcard_allowed && peer == MPI_ANY_SOURCE) return;
  if (peer < 0 || peer >= comm.size) [[unlikely]] refuse_peer(peer, comm);
}
[[noreturn, gnu::cold]] void refuse_tag(int tag, bool wildcard_allowed);
inline void check_tag(int tag, bool wildcard_allowed) {
  if (!is_user_tag(tag, wildcard_allowed)) [[unlikely]] refuse_tag(tag, wildcard_allowed);
}

// The status of a request with nothing to report (sends, collectives, null
// requests): MPI-3.1 3.7.3's empty status.
// Inline: every completed request fills one.
inline void set_status(MPI_Status* status, int source, int tag, size_t bytes) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = source;
  status->MPI_TAG = tag;
  status->MPI_ERROR = MPI_SUCCESS;
  status->chorus_cancelled = 0;
  status->chorus_bytes = bytes;
}
inline void set_empty_status(MPI_Status* status) { set_status(status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0); }

// Requests given to MPI_Request_free that had not completed: completed by
// later MPI_Wait*/MPI_Test* calls and at the latest by MPI_Finalize, whose
// world finalize cancels what is still unmatched. After it, this settles
// them and returns the first error a freed request met that no MPI call has
// reported since (MPI_Finalize raises it).
std::optional<std::string> settle_detached_requests();

}  // namespace chorus::mpi
