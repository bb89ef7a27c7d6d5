// Communicator::create_group (MPI_Comm_create_group): a communicator made by
// its members alone.
//
// split() agrees on a context id with an allgather over the whole parent;
// here only the members take part, so they agree point-to-point on the
// parent's engine: each member sends the lowest context id it has not used
// to the first member, which sends back the largest. No member uses that id
// yet, so the new communicator's tags match none of theirs; a process that
// is not a member never sees the id, and shares no messages with it. The
// messages carry the library's own point-to-point tag kind
// (CallTag::internal_point_to_point) with the caller's tag, so concurrent
// create_group calls with different tags, and user messages of any tag, never
// match them.
#include "api/communicator_impl.hpp"

#include "common/error.hpp"

#include <algorithm>

namespace chorus {

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::create_group(std::span<const int> members, int tag) {
  CallScope scope(*this, "create_group");
  std::lock_guard lock(session_->mutex);
  check_usable();
  if (tag < 0 || tag > p2p::CallTag::kMaxUserTag) {
    fail(Status::invalid_argument, "create_group: tag ", tag, " outside 0..", p2p::CallTag::kMaxUserTag);
  }
  if (members.empty()) fail(Status::invalid_argument, "create_group: no members");
  std::vector<bool> seen(static_cast<size_t>(size()), false);
  int new_rank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    const int member = members[i];
    if (member < 0 || member >= size()) {
      fail(Status::invalid_argument, "create_group: member ", member, " is not a rank of this communicator (0..",
           size() - 1, ")");
    }
    if (seen[static_cast<size_t>(member)]) fail(Status::invalid_argument, "create_group: rank ", member, " is listed twice");
    seen[static_cast<size_t>(member)] = true;
    if (member == rank_) new_rank = static_cast<int>(i);
  }
  if (new_rank < 0) {
    fail(Status::invalid_argument, "create_group: this rank (", rank_,
         ") is not among the members; only members call create_group");
  }
  note_call(0, "create_group", -1);

  const p2p::Tag agreement = p2p::CallTag::internal_point_to_point(context_id_, tag);
  p2p::Engine& engine = *session_->engine;
  uint32_t context_id = session_->next_context_id;
  guarded("create_group", [&] {
    const int first = engine_ranks_[static_cast<size_t>(members[0])];
    if (new_rank == 0) {
      for (size_t i = 1; i < members.size(); ++i) {
        uint32_t theirs = 0;
        auto request = engine.irecv(engine_ranks_[static_cast<size_t>(members[i])], agreement, &theirs, sizeof theirs);
        engine.wait(request);
        context_id = std::max(context_id, theirs);
      }
      for (size_t i = 1; i < members.size(); ++i) {
        auto request = engine.isend(engine_ranks_[static_cast<size_t>(members[i])], agreement, &context_id,
                                    sizeof context_id);
        engine.wait(request);
      }
    } else {
      auto sent = engine.isend(first, agreement, &context_id, sizeof context_id);
      engine.wait(sent);
      auto received = engine.irecv(first, agreement, &context_id, sizeof context_id);
      engine.wait(received);
    }
  });
  if (context_id > kMaxContextId) {
    // The first member sent every member the same id, so all fail here.
    fail(Status::unsupported, "create_group: all ", kMaxContextId,
         " communicator context ids of this job are used (chorus does not reuse the ids of finalized communicators)");
  }
  session_->next_context_id = context_id + 1;

  std::vector<int> engine_ranks;
  engine_ranks.reserve(members.size());
  for (int member : members) engine_ranks.push_back(engine_ranks_[static_cast<size_t>(member)]);
  return make_child(context_id, std::move(engine_ranks), new_rank);
}

Communicator Communicator::create_group(std::span<const int> members, int tag) {
  return Communicator(impl().create_group(members, tag));
}

}  // namespace chorus
