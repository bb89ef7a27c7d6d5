#include "p2p/call_tag.hpp"

#include "common/error.hpp"

namespace chorus::p2p {

std::string CallTag::describe(Tag tag) {
  if (is_internal(tag)) return concat("internal point-to-point tag ", user_tag_of(tag), " on context ", context_of(tag));
  if (is_point_to_point(tag)) return concat("point-to-point tag ", user_tag_of(tag), " on context ", context_of(tag));
  return concat("collective call ", sequence_of(tag), " step ", step_of(tag), " on context ", context_of(tag));
}

void CallTag::fail_step(uint32_t step) {
  fail(Status::internal, "an algorithm asked for exchange step ", step, " of one call; a call has steps 0..", kMaxStep,
       " (CallTag::kStepBits = ", kStepBits, ")");
}

void CallTag::fail_context(uint32_t context) {
  fail(Status::internal, "communicator context id ", context, " does not fit the tag's ", kContextBits,
       " bits (0..", kMaxContext, ")");
}

void CallTag::fail_user_tag(int user_tag) {
  fail(Status::invalid_argument, "tag ", user_tag, " outside 0..", kMaxUserTag);
}

}  // namespace chorus::p2p
