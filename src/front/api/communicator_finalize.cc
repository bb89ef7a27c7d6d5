// World finalize's meeting of the ranks (docs/errors.md, "Finalize with requests
// outstanding"): every rank waits for the others, the operations still
// outstanding anywhere are settled together, and rank 0 (its store) leaves last.
#include <chrono>

#include "api/communicator_impl.hpp"
#include "common/log.hpp"

namespace chorus {

// How long the operations still outstanding when every rank has reached
// finalize may go without any progress before finalize cancels them: they
// could only complete by a message already sent, so a moment is enough.
constexpr auto kFinalizeGrace = std::chrono::milliseconds(1000);

void CommunicatorImpl::leave_job(const std::string& how) {
  Session& session = *session_;
  const bootstrap::JobInfo& job = session.job;
  p2p::Progress* progress = session.operations();
  p2p::Engine* engine = session.engine.get();
  // Nobody tears down its transport while a peer may still read from it, and
  // everyone keeps progressing until all have arrived: a peer may still need
  // a retransmission from us (UD mode repairs losses in software), and the
  // operations still outstanding move on (a peer's receive or send matches
  // them).
  auto drive = [engine, progress] {
    if (progress != nullptr && progress->outstanding() > 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
      while (progress->outstanding() > 0 && std::chrono::steady_clock::now() < until) progress->poll();
    } else if (engine != nullptr) {
      engine->progress();
    }
  };
  // Under PMIx a rank announces that it leaves only once this fence has
  // waited kFenceOpensStoreAfter (or twice the slowest fence of the setup):
  // then a peer may be blocked in a call with it, and reads the announcement
  // when its own wait stalls (departure_probe.cc).
  const bool deferred = session.bootstrap->uses_pmix();
  const auto announce_at = std::chrono::steady_clock::now() +
                           std::max<std::chrono::steady_clock::duration>(bootstrap::Bootstrap::kFenceOpensStoreAfter,
                                                                         2 * session.bootstrap->slowest_fence());
  bool announced = !deferred;
  auto drive_announcing = [&] {
    drive();
    if (!announced && std::chrono::steady_clock::now() >= announce_at) {
      announced = true;
      log::debug("rank ", job.rank,
                 ": finalize's fence is slow; announcing that this rank leaves, for a peer that may wait for it");
      session.announce_departure(how, false);
    }
  };
  // Operations outstanding anywhere in the job: the ranks settle them
  // together after this barrier (under PMIx a fence: no store).
  const bool mine = progress != nullptr && progress->outstanding() > 0;
  if (session.bootstrap->any_rank("chorus/finalize", mine, drive_announcing)) settle_operations(progress, drive);
  // A caller's store (torch's TCPStore) is usually served by rank 0's process too.
  // Under PMIx every rank has passed the fences: none needs the store any more.
  const bool store_launcher = job.launcher == kStoreLauncher;
  if ((!job.rank0_serves && !store_launcher) || session.bootstrap->uses_pmix()) return;
  // Rank 0 hosts the store: it stays up until every rank has left it.
  const std::string prefix = store_launcher ? concat(job.job_id, "/") : std::string();
  auto key = [&prefix](int r) { return concat(prefix, "chorus/left/", r); };
  if (job.rank != 0) {
    session.bootstrap->store().set(key(job.rank), {1});
    return;
  }
  std::vector<std::string> keys;
  for (int r = 1; r < job.size; ++r) keys.push_back(key(r));
  session.bootstrap->store().wait(keys);
}

// Every rank is in finalize, so no new send or receive will be posted: an
// operation still outstanding completes only through what is already on its
// way. Each rank drives its own until they are done or have not moved for
// the grace, then all meet again, so that none cancels a rendezvous send a
// peer is still reading (the sender sees no progress while the receiver
// reads); FINs sent just before that second barrier arrive in a last short
// round. What is left after it is cancelled by finalize.
void CommunicatorImpl::settle_operations(p2p::Progress* progress, const std::function<void()>& drive) {
  Session& session = *session_;
  const auto grace = std::min<std::chrono::milliseconds>(kFinalizeGrace, session.settings.timeout);
  if (progress != nullptr) progress->settle(grace);
  session.bootstrap->barrier("chorus/finalize/settled", drive);  // every rank, with operations or not
  if (progress != nullptr) progress->settle(std::chrono::milliseconds(100));
}

}  // namespace chorus
