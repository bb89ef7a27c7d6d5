// Probing for point-to-point messages. MPI_Iprobe / MPI_Probe: the engine
// looks at its unexpected queue without taking the message, so the receive
// that follows gets exactly the message probed (same source and tag).
// MPI_Improbe / MPI_Mprobe: the engine takes the message out of the queue
// (Engine::claim), so no receive but the matched one (start_matched_recv)
// can get it, whichever thread posts it first.
#include "api/communicator_impl.hpp"
#include "api/user_tag.hpp"

#include "common/error.hpp"

#include <thread>

namespace chorus {

std::optional<Message> CommunicatorImpl::probe_once(const char* what, int peer, int tag, bool claim) {
  check_usable();
  chorus::check_user_tag(what, tag, true);
  const int engine_peer = peer == kAnySource ? p2p::kAnySource : engine_rank_of(peer, what);
  const p2p::Tag mask = tag == kAnyTag ? p2p::CallTag::kAnyUserTagMask : p2p::kExactTag;
  const p2p::Tag wanted = p2p::CallTag::point_to_point(context_id_, tag == kAnyTag ? 0 : tag);
  std::optional<p2p::Completion> found;
  uint64_t id = 0;
  guarded(what, [&] {
    if (claim) {
      if (auto claimed = session_->engine->claim(engine_peer, wanted, mask)) {
        id = claimed->first;
        found = claimed->second;
      }
    } else {
      found = session_->engine->probe(engine_peer, wanted, mask);
    }
    // Outstanding collectives move on here too (CHORUS_PROGRESS=caller polls with probes).
    if (p2p::Progress* progress = session_->operations()) progress->advance();
  });
  if (!found) return std::nullopt;
  const int source = rank_of_engine_rank_[static_cast<size_t>(found->source)];
  return Message{Received{source, p2p::CallTag::user_tag_of(found->tag), found->bytes}, id};
}

Message CommunicatorImpl::wait_for_message(const char* what, int peer, int tag, bool claim) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_failure_check = start + std::chrono::seconds(1);
  for (;;) {
    {
      std::lock_guard lock(session_->mutex);
      if (auto found = probe_once(what, peer, tag, claim)) return *found;
      const auto now = Clock::now();
      const auto timeout = session_->settings.timeout;
      guarded(what, [&] {
        if (now >= next_failure_check) {
          next_failure_check = now + std::chrono::seconds(1);
          if (auto failure = session_->engine->probe_failure()) throw *failure;
        }
        if (now - start >= timeout) {
          fail(Status::timeout, "no message from ", peer == kAnySource ? std::string("any rank") : concat("rank ", peer),
               " with ", tag == kAnyTag ? std::string("any tag") : concat("tag ", tag), " arrived within CHORUS_TIMEOUT (",
               timeout.count(), " ms)");
        }
      });
      if (now - start < session_->settings.spin) continue;
    }
    // Past the spin window: let the progress thread and other ranks run.
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::optional<Received> CommunicatorImpl::iprobe(int peer, int tag) {
  std::lock_guard lock(session_->mutex);
  if (auto found = probe_once("iprobe", peer, tag, false)) return found->info;
  return std::nullopt;
}

Received CommunicatorImpl::probe(int peer, int tag) { return wait_for_message("probe", peer, tag, false).info; }

std::optional<Message> CommunicatorImpl::improbe(int peer, int tag) {
  std::lock_guard lock(session_->mutex);
  return probe_once("improbe", peer, tag, true);
}

Message CommunicatorImpl::mprobe(int peer, int tag) { return wait_for_message("mprobe", peer, tag, true); }

std::optional<Received> Communicator::iprobe(int peer, int tag) { return impl().iprobe(peer, tag); }
Received Communicator::probe(int peer, int tag) { return impl().probe(peer, tag); }
std::optional<Message> Communicator::improbe(int peer, int tag) { return impl().improbe(peer, tag); }
Message Communicator::mprobe(int peer, int tag) { return impl().mprobe(peer, tag); }

}  // namespace chorus
