// Tag matching with per-source queues plus one wildcard list (as Open MPI
// ob1's specific_receives / wild_receives / unexpected_frags), so an arrival
// looks only at the receives posted for its source and a receive only at the
// messages that came from its source: the cost does not grow with what is
// outstanding towards other ranks. Pure data structures, no transport: the
// engine (engine.cc) owns the slots, these own the order (docs/p2p.md,
// "Matching"; tests/p2p/test_matching.cc).
//
// MPI's rules hold: a message matches the earliest posted receive that
// matches it, wildcard or not, and messages from one source that match the
// same receive are taken in arrival order (non-overtaking).
#pragma once

#include "p2p/call_tag.hpp"

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

namespace chorus::p2p {

inline constexpr int kAnySource = -1;
inline constexpr Tag kExactTag = ~Tag{0};

inline bool tag_matches(Tag posted, Tag mask, Tag arrived) { return ((posted ^ arrived) & mask) == 0; }

class PostedReceives {
 public:
  explicit PostedReceives(int sources) : by_source_(static_cast<size_t>(sources)) {}

  // A receive (its engine slot) for `source` (or kAnySource) and `tag` on the
  // bits of `mask`.
  void add(uint32_t slot, int source, Tag tag, Tag mask) {
    queue(source).push_back(Entry{slot, tag, mask, next_order_++});
    ++count_;
  }

  static constexpr uint32_t kNoSlot = UINT32_MAX;

  // Removes and returns the earliest posted receive that matches a message
  // from `source` with `tag`; kNoSlot if none. A plain integer: an
  // std::optional<uint32_t> came back through the stack, written as two
  // narrow stores and read as one wide load (a store-forwarding stall, a
  // few percent of a small message's receive in perf).
  uint32_t match_slot(int source, Tag tag) {
    auto& specific = by_source_[static_cast<size_t>(source)];
    auto mine = find(specific, tag);
    if (any_source_.empty()) return take(specific, mine);  // the usual case
    auto wild = find(any_source_, tag);
    if (wild == any_source_.end()) return take(specific, mine);
    if (mine == specific.end() || wild->order < mine->order) return take(any_source_, wild);
    return take(specific, mine);
  }
  std::optional<uint32_t> match(int source, Tag tag) {
    const uint32_t slot = match_slot(source, tag);
    return slot == kNoSlot ? std::nullopt : std::optional<uint32_t>(slot);
  }

  // Forgets a receive that failed (it will never match).
  void remove(uint32_t slot, int source) {
    auto& entries = queue(source);
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (it->slot == slot) {
        entries.erase(it);
        --count_;
        return;
      }
    }
  }

  // Calls f(slot, tag) for each receive posted for `source` itself
  // (wildcards excluded), in post order.
  template <class F>
  void for_each_from(int source, F&& f) const {
    for (const Entry& entry : by_source_[static_cast<size_t>(source)]) f(entry.slot, entry.tag);
  }

  size_t size() const { return count_; }

 private:
  struct Entry {
    uint32_t slot;
    Tag tag;
    Tag mask;
    uint64_t order;
  };
  using Queue = std::deque<Entry>;

  Queue& queue(int source) { return source == kAnySource ? any_source_ : by_source_[static_cast<size_t>(source)]; }
  static Queue::iterator find(Queue& entries, Tag tag) {
    auto it = entries.begin();
    while (it != entries.end() && !tag_matches(it->tag, it->mask, tag)) ++it;
    return it;
  }
  uint32_t take(Queue& entries, Queue::iterator it) {
    if (it == entries.end()) return kNoSlot;
    const uint32_t slot = it->slot;
    if (it == entries.begin()) {
      entries.pop_front();  // receives usually complete in the order posted
    } else {
      entries.erase(it);
    }
    --count_;
    return slot;
  }

  std::vector<Queue> by_source_;
  Queue any_source_;
  uint64_t next_order_ = 0;
  size_t count_ = 0;
};

// Messages that arrived before their receive, per source, each with its
// arrival order so a wildcard receive takes the earliest of all sources.
template <class Message>
class UnexpectedMessages {
 public:
  explicit UnexpectedMessages(int sources) : by_source_(static_cast<size_t>(sources)) {}

  void add(int source, Tag tag, Message message) {
    by_source_[static_cast<size_t>(source)].push_back(Entry{tag, next_order_++, std::move(message)});
    ++count_;
  }

  // Removes and returns (source, tag, message) of the earliest message from
  // `source` (or any source) whose tag matches `tag` on the bits of `mask`.
  std::optional<std::pair<int, Message>> take(int source, Tag tag, Tag mask) {
    auto [from, it] = earliest(source, tag, mask);
    if (from < 0) return std::nullopt;
    return take_from(from, it);
  }

  // The message take() would return, left in place: (source, message), or
  // (-1, nullptr). For MPI_Probe.
  std::pair<int, const Message*> peek(int source, Tag tag, Tag mask) {
    auto [from, it] = earliest(source, tag, mask);
    if (from < 0) return {-1, nullptr};
    return {from, &it->message};
  }

  // True if a message from `source` satisfies pred(tag, message).
  template <class Pred>
  bool any_from(int source, Pred&& pred) const {
    for (const Entry& entry : by_source_[static_cast<size_t>(source)]) {
      if (pred(entry.tag, entry.message)) return true;
    }
    return false;
  }

  // Calls f(source, tag, message) for every message, by source.
  template <class F>
  void for_each(F&& f) const {
    for (size_t s = 0; s < by_source_.size(); ++s) {
      for (const Entry& entry : by_source_[s]) f(static_cast<int>(s), entry.tag, entry.message);
    }
  }

  size_t size() const { return count_; }

 private:
  struct Entry {
    Tag tag;
    uint64_t order;
    Message message;
  };
  using Queue = std::deque<Entry>;

  // The source and position of the earliest match (source -1: none).
  std::pair<int, typename Queue::iterator> earliest(int source, Tag tag, Tag mask) {
    if (count_ == 0) return {-1, {}};
    if (source != kAnySource) {
      auto& entries = by_source_[static_cast<size_t>(source)];
      auto it = find(entries, tag, mask);
      return {it == entries.end() ? -1 : source, it};
    }
    int best = -1;
    typename Queue::iterator best_it;
    for (size_t s = 0; s < by_source_.size(); ++s) {
      auto it = find(by_source_[s], tag, mask);
      if (it != by_source_[s].end() && (best < 0 || it->order < best_it->order)) {
        best = static_cast<int>(s);
        best_it = it;
      }
    }
    return {best, best_it};
  }
  static typename Queue::iterator find(Queue& entries, Tag tag, Tag mask) {
    auto it = entries.begin();
    while (it != entries.end() && !tag_matches(tag, mask, it->tag)) ++it;
    return it;
  }
  std::optional<std::pair<int, Message>> take_from(int source, typename Queue::iterator it) {
    auto& entries = by_source_[static_cast<size_t>(source)];
    if (it == entries.end()) return std::nullopt;
    std::pair<int, Message> found{source, std::move(it->message)};
    entries.erase(it);
    --count_;
    return found;
  }

  std::vector<Queue> by_source_;
  uint64_t next_order_ = 0;
  size_t count_ = 0;
};

}  // namespace chorus::p2p
