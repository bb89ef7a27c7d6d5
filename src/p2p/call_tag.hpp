// The one owner of the 64-bit message tag (docs/p2p.md, "Tags").
//
//   bit 63      62..48        47..16              15..0
//   kind = 0 | context (15) | call sequence (32) | step (16)     collectives
//   kind = 1 | context (15) | zero (16) | 0 | user tag (31)     point-to-point
//   kind = 1 | context (15) | zero (16) | 1 | tag (31)          the library's own
//                                                              point-to-point
//
// The context id (0 = world, then one per split/dup) keeps communicators that
// share the engine apart; the sequence keeps a communicator's calls apart
// (blocking and non-blocking alike: it is taken when a call starts, so
// consecutive and concurrent calls never match each other's messages); the
// step names one exchange inside a call. The engine knows none of this: it
// matches on (source, tag & mask) and compares call digests on the bits of a
// caller-supplied call mask (CallCheck).
#pragma once

#include <chorus/chorus.hpp>

#include <cstdint>
#include <string>

namespace chorus::p2p {

using Tag = uint64_t;

class CallTag {
 public:
  static constexpr int kKindBits = 1;
  static constexpr int kContextBits = 15;
  static constexpr int kSequenceBits = 32;
  static constexpr int kStepBits = 16;
  static_assert(kKindBits + kContextBits + kSequenceBits + kStepBits == 64, "the tag layout must fill 64 bits");
  static constexpr int kUserTagBits = 31;
  static_assert(kUserTagBits <= kSequenceBits + kStepBits, "a user tag must fit below the context");

  static constexpr uint32_t kMaxContext = (uint32_t{1} << kContextBits) - 1;
  static constexpr uint32_t kMaxStep = (uint32_t{1} << kStepBits) - 1;
  static constexpr int kMaxUserTag = static_cast<int>((uint32_t{1} << kUserTagBits) - 1);

  // The bits that name one collective call: everything but the step.
  static constexpr Tag kCallMask = ~Tag{kMaxStep};
  // A point-to-point receive for any user tag of one context.
  static constexpr Tag kAnyUserTagMask = ~Tag{static_cast<uint32_t>(kMaxUserTag)};

  // The tag base of call `sequence` on communicator `context` (the sequence
  // wraps at 2^32: calls that far apart are never outstanding together).
  static CallTag collective(uint32_t context, uint64_t sequence) {
    check_context(context);
    return CallTag(context_bits(context) | ((sequence & 0xffffffffu) << kStepBits));
  }
  // A point-to-point message's tag; `user_tag` is 0..kMaxUserTag.
  static Tag point_to_point(uint32_t context, int user_tag) {
    check_context(context);
    if (user_tag < 0 || user_tag > kMaxUserTag) fail_user_tag(user_tag);
    return kKindBit | context_bits(context) | static_cast<uint32_t>(user_tag);
  }

  // A message the library sends point-to-point among some members of a
  // communicator (MPI_Comm_create_group's agreement): bit 31 set, so no
  // user receive matches it, not even one for any tag.
  static Tag internal_point_to_point(uint32_t context, int tag) {
    return point_to_point(context, tag) | kInternalBit;
  }

  // The tag of exchange `step` of this call. A step past kMaxStep is an
  // algorithm bug (a ring uses 2(n-1) steps): it throws, never wraps into a
  // step that another exchange of the same call uses.
  Tag step(uint32_t step) const {
    if (step > kMaxStep) [[unlikely]] fail_step(step);
    return base_ | step;
  }
  Tag base() const { return base_; }

  static bool is_point_to_point(Tag tag) { return (tag & kKindBit) != 0; }
  static bool is_internal(Tag tag) { return is_point_to_point(tag) && (tag & kInternalBit) != 0; }
  static uint32_t context_of(Tag tag) { return static_cast<uint32_t>(tag >> (kSequenceBits + kStepBits)) & kMaxContext; }
  static uint32_t sequence_of(Tag tag) { return static_cast<uint32_t>(tag >> kStepBits); }
  static uint32_t step_of(Tag tag) { return static_cast<uint32_t>(tag) & kMaxStep; }
  static int user_tag_of(Tag tag) { return static_cast<int>(tag & static_cast<uint32_t>(kMaxUserTag)); }
  // "collective call 12 step 3 on context 0", "point-to-point tag 7 on context 2".
  static std::string describe(Tag tag);

 private:
  static constexpr Tag kKindBit = Tag{1} << 63;
  static constexpr Tag kInternalBit = Tag{1} << kUserTagBits;
  explicit CallTag(Tag base) : base_(base) {}
  static Tag context_bits(uint32_t context) { return static_cast<Tag>(context) << (kSequenceBits + kStepBits); }
  static void check_context(uint32_t context) {
    if (context > kMaxContext) [[unlikely]] fail_context(context);
  }
  [[noreturn]] static void fail_step(uint32_t step);
  [[noreturn]] static void fail_context(uint32_t context);
  [[noreturn]] static void fail_user_tag(int user_tag);

  Tag base_;
};

// What a receive compares on a message of another call: `digest` is the
// call's argument digest (0: none), `call_mask` the tag bits that name the
// call (CallTag::kCallMask for collectives). A message whose tag agrees with
// the receive's on `call_mask` but carries another non-zero digest means the
// ranks disagree on the call; it fails the receive instead of feeding it data.
struct CallCheck {
  uint32_t digest = 0;
  Tag call_mask = 0;
};

}  // namespace chorus::p2p
