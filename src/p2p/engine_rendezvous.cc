// The engine's rendezvous (docs/p2p.md#protocol): a matched RTS registers
// the receive buffer and reads the message in chunks, several in flight;
// the last read sends FIN, and a FIN completes the send.
#include "p2p/engine_impl.hpp"

#include <algorithm>

namespace chorus::p2p {

void Engine::Impl::start_rendezvous(uint32_t index, int source, Tag tag, size_t length, const RtsBody& rts) {
  Slot& slot = slots_[index];
  slot.result = Completion{source, tag, length};
  slot.start_rendezvous_state();
  slot.remote_send_id = rts.send_id;
  if (length > slot.capacity) {
    deferred_fins_.push_back({source, rts.send_id});  // the sender's part is over either way
    return fail_slot(slot, truncation_error(slot, source, length));
  }
  if (length != 0) slot.registration = reg_cache_.acquire(slot.buffer, length);  // empty: a synchronous send's
  slot.remote = transport::RemoteBuffer{rts.address, rts.key};
  slot.read_total = length;
  slot.read_next = 0;
  slot.state = Slot::State::reading;
  deferred_reads_.push_back(encode_id(Request{index, slot.generation}));
}

// Issues more reads for each receive whose reads made progress, finishes
// the ones fully read, and sends pending FINs.
int Engine::Impl::flush_deferred() {
  int actions = 0;
  while (!deferred_reads_.empty() || !deferred_fins_.empty()) {
    std::vector<uint64_t> reads;
    reads.swap(deferred_reads_);
    for (uint64_t id : reads) {
      Slot* slot = find_by_id(id);
      if (slot == nullptr || slot->state != Slot::State::reading) continue;
      issue_reads(*slot, id);
      if (slot->reads_outstanding == 0 && slot->read_next == slot->read_total) {
        deferred_fins_.push_back({slot->result.source, slot->remote_send_id});
        slot->registration.reset();
        slot->state = Slot::State::done;
        count_finished(*slot);
      }
      ++actions;
    }
    std::vector<std::pair<int, uint64_t>> fins;
    fins.swap(deferred_fins_);
    for (auto [peer, send_id] : fins) {
      send_fin(peer, send_id);
      ++actions;
    }
  }
  return actions;
}

// Keeps up to reads_in_flight chunked reads outstanding for one receive.
void Engine::Impl::issue_reads(Slot& slot, uint64_t context) {
  const size_t chunk = settings_.rendezvous_chunk;
  while (slot.reads_outstanding < settings_.reads_in_flight && slot.read_next < slot.read_total) {
    size_t bytes = std::min(chunk, slot.read_total - slot.read_next);
    size_t local_offset = static_cast<size_t>(static_cast<uint8_t*>(slot.buffer) -
                                              static_cast<uint8_t*>(slot.registration->base())) +
                          slot.read_next;
    transport::RemoteBuffer remote{slot.remote.address + slot.read_next, slot.remote.key};
    transport_.post_read(slot.result.source, remote, *slot.registration, local_offset, bytes, context);
    slot.read_next += bytes;
    ++slot.reads_outstanding;
    ++counters_.reads_posted;
    count_in(slot.result.source, bytes);
  }
}

void Engine::Impl::send_fin(int peer, uint64_t send_id) {
  FinMessage fin{MessageHeader{MessageType::fin, 0, 0}, FinBody{send_id}};
  transport_.post_eager(peer, &fin, sizeof fin, nullptr, 0);
}

void Engine::Impl::finish_send(int peer, uint64_t send_id) {
  Slot* slot = find_by_id(send_id);
  if (slot == nullptr || slot->kind != Slot::Kind::send || slot->state != Slot::State::awaiting_fin ||
      slot->peer != peer) {
    return report_protocol_error(peer, concat("FIN for unknown send 0x", std::hex, send_id));
  }
  count_out(peer, slot->capacity);
  slot->registration.reset();
  slot->state = Slot::State::done;
  count_finished(*slot);
}

}  // namespace chorus::p2p
