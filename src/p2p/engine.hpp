// P2P engine (docs/p2p.md): tag matching, unexpected queue, eager vs
// rendezvous (RTS -> chunked RDMA READ -> FIN), adaptive progress.
//
// Wire protocol (all control messages are eager messages):
//   EAGER {src, tag, len} + payload           len <= eager limit
//   RTS   {src, tag, len, addr, key, send_id}  sender registered its buffer
//   FIN   {src, send_id}                       receiver finished reading
// Matching is by (source, tag & mask) over per-source queues (matching.hpp);
// messages from one source with the same tag match in send order
// (non-overtaking, as in MPI). The tag layout belongs to call_tag.hpp: the
// engine only compares bits under the masks its callers give it.
//
// Threading: one thread drives an Engine at a time (the communicator holds the
// session lock around each call, and the progress thread takes the same lock).
// Progress, waits and the non-blocking operations: progress.hpp.
#pragma once

#include "common/config.hpp"
#include "p2p/call_tag.hpp"
#include "p2p/matching.hpp"
#include "transports/transport.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace chorus::p2p {

class Progress;

// Handle of an outstanding operation; cheap to copy. A handle is consumed by
// the wait()/test() that reports its completion. An eager send the transport
// copied at once takes no slot: its handle is born finished (slot
// kFinishedSend, the destination in `generation`), which saves a small
// message the slot's allocation, reset and release.
struct Request {
  static constexpr uint32_t kFinishedSend = UINT32_MAX - 1;
  uint32_t slot = UINT32_MAX;
  uint32_t generation = 0;
  bool valid() const { return slot != UINT32_MAX; }
  bool finished_send() const { return slot == kFinishedSend; }
};

// What an operation moved. Receives report the matched message; sends only
// their destination (tag and bytes 0: the caller knows what it sent).
struct Completion {
  int source = -1;   // sender's rank (receives), or the destination (sends)
  Tag tag = 0;       // the matched tag (receives)
  size_t bytes = 0;  // bytes received (receives)
};

struct Counters {
  uint64_t eager_sent = 0, eager_received = 0;
  uint64_t rendezvous_sent = 0, rendezvous_received = 0;
  uint64_t unexpected = 0;  // messages that arrived before their receive
  uint64_t reads_posted = 0;
  uint64_t blocked_waits = 0;  // times progress blocked on the transport's fd
  // Payload bytes to and from the ranks of this host and of other hosts
  // (Engine::set_other_hosts; all "this host" until then): eager messages as
  // sent and as received, a rendezvous payload as the receiver reads it and
  // as the sender's FIN completes it. Headers and FINs are not counted.
  uint64_t bytes_out_this_host = 0, bytes_in_this_host = 0;
  uint64_t bytes_out_other_hosts = 0, bytes_in_other_hosts = 0;
};

// What a wait_until() waits for, for its errors: the peer it depends on
// (-1: none in particular) and a phrase ("rank 2 on the shared-memory board
// (allreduce #7 on context 0)").
struct Waiting {
  int peer = -1;
  std::string what;
};

class Engine {
 public:
  // `local_size` is the number of ranks on this host; with more ranks than
  // cores the progress loop yields instead of spinning.
  Engine(transport::Transport& transport, int rank, int size, int local_size, const config::Settings& settings);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int rank() const;
  int size() const;
  transport::Transport& transport();

  // Non-blocking send of `bytes` at `buf` to `peer`. The buffer must stay
  // untouched until the request completes. `call_check` travels with the
  // message: a digest of the collective call that sends it (0 for none).
  Request isend(int peer, Tag tag, const void* buf, size_t bytes, uint32_t call_check = 0);
  // A synchronous send (MPI_Ssend): completes only once the receiver has
  // matched it, which the rendezvous protocol tells whatever the size (its
  // FIN comes after the match; the read is empty for 0 bytes).
  Request issend(int peer, Tag tag, const void* buf, size_t bytes);
  // Whether isend(peer, ..., bytes) now would return a request born
  // finished (an eager send to a peer not known to have failed).
  bool sends_at_once(int peer, size_t bytes) const;
  // Non-blocking receive into `buf` (capacity `bytes`) from `peer` or
  // kAnySource, of a message whose tag equals `tag` on the bits of `tag_mask`.
  // A larger message fails the request with Status::truncated; a message of
  // the same call (tags equal on check.call_mask) whose non-zero digest
  // differs from check.digest with Status::invalid_argument.
  Request irecv(int peer, Tag tag, void* buf, size_t bytes, Tag tag_mask = kExactTag, CallCheck check = {});

  // Blocks until done (progressing everything), or throws: Status::timeout
  // after the configured timeout, or the error that failed the request. On
  // the fiber of a non-blocking operation it suspends the fiber instead.
  Completion wait(Request& request);
  void wait_all(std::span<Request> requests);
  // Progresses once; true (and fills `done`) if the request completed.
  bool test(Request& request, Completion* done = nullptr);
  // True once the request has completed or failed (wait/test then return at
  // once); polls nothing. The request must be outstanding.
  bool finished(const Request& request) const;
  // The error a wait on `request` that made no progress for the whole
  // timeout reports (which peer, what it waited for, the transport's view).
  Error timeout_error(const Request& request);
  // Asks the failure probe now (see set_failure_probe), as a stalled wait.
  std::optional<Error> probe_failure();
  // Messages that arrived and match no receive yet. A collective that has
  // completed with one of its own still queued, or with one of a call that
  // completed earlier, was called differently by the sender: the communicator
  // asks after each call (cheap while nothing is queued).
  size_t unexpected_count() const;
  // The first queued message (source, tag) that satisfies `match`.
  std::optional<std::pair<int, Tag>> find_unexpected(const std::function<bool(int, Tag)>& match) const;

  // The engine's progress (progress.hpp): every wait runs its loop, and it
  // holds the non-blocking operations, which every wait's polls move along
  // (a blocking call never starves an outstanding one).
  Progress& progress_engine();

  // Polls the transport once, then looks for a message that a receive for
  // (`peer` or kAnySource, `tag` on the bits of `tag_mask`) posted now would
  // match, without taking it (MPI_Iprobe): its source, tag and length.
  std::optional<Completion> probe(int peer, Tag tag, Tag tag_mask = kExactTag);
  // A matched probe (MPI_Improbe): as probe(), but the message found is
  // taken out of the unexpected queue, so no receive matches it any more;
  // only irecv_claimed(id) receives it. Its id (never 0) and what it is.
  std::optional<std::pair<uint64_t, Completion>> claim(int peer, Tag tag, Tag tag_mask = kExactTag);
  // Receives the claimed message `id` into `buf` (capacity `bytes`) as the
  // irecv that would have matched it: truncation and rendezvous alike.
  Request irecv_claimed(uint64_t id, void* buf, size_t bytes);
  // Whether claimed message `id` is still to be received (a caller's check
  // before irecv_claimed, whose refusal would be the engine's failure).
  bool holds_claim(uint64_t id) const;
  // Withdraws a receive no message has matched yet (MPI_Cancel): true, and
  // the request is gone (its slot freed, nothing will be written to its
  // buffer); false for a send, or a receive that matched or finished.
  bool withdraw_receive(const Request& request);
  // Drives the transport once without blocking; returns how many events it
  // handled (0: nothing happened).
  int progress();
  // Progresses (spinning, then blocking on the transport, running the
  // progress hook) until `request` is finished or no longer outstanding, or
  // `stop()` returns true. Throws as wait() does on a timeout or a failure
  // the probe reports; does not reap the request.
  void progress_until(const Request& request, const std::function<bool()>& stop);
  // More local ranks than cores: a waiter should give its core away at once.
  bool oversubscribed() const;
  // Progresses as progress_until does until `done()` is true, for what
  // arrives by memory, not by the transport (the shm boards): it yields
  // when idle and never sleeps on the transport's fd. `waiting_for` is
  // asked only for an error (timeout, a failed peer).
  void wait_until(const std::function<bool()>& done, const std::function<Waiting()>& waiting_for);
  // Called once a wait has made no progress for a second, then four times a
  // second (`stalled` true), and about once a second by the progress thread
  // while non-blocking operations are outstanding (`stalled` true only when
  // one has waited a second); an error it returns (a rank the launcher saw
  // die, ranks whose calls differ) ends the wait with that error.
  void set_failure_probe(std::function<std::optional<Error>(bool stalled)> probe);
  // Before teardown: progresses for at least `linger` and until the
  // transport has no send left to push out, at most `limit`. Errors are
  // ignored (the caller is leaving). A rank that exits on an error thus still
  // delivers what it sent, so its peers see the real cause, not a timeout.
  void flush_sends(std::chrono::milliseconds linger, std::chrono::milliseconds limit) noexcept;

  // The caller gave up on everything outstanding (its communicator failed):
  // every unfinished request fails with `cause`, and no transport keeps
  // reading from or writing into its buffer (peers acting on it are refused).
  void abandon_all(const Error& cause);
  // Fails one outstanding request with `cause` (finalize cancels what can no
  // longer be matched), taking back what it lent the transport.
  void cancel(const Request& request, const Error& cause);

  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const;
  const Counters& counters() const;
  // Which engine ranks are on another host than this one (the counters above).
  void set_other_hosts(std::vector<bool> other_host);

  // Memory chorus owns (collective scratch) stays registered while it lives:
  // call persist_memory after allocating it and forget_memory before freeing.
  void persist_memory(const void* base, size_t bytes);
  void forget_memory(const void* base, size_t bytes);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace chorus::p2p
