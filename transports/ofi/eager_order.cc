// Restoring each peer's send order of eager messages (eager_order.hpp).
#include "transports/ofi/eager_order.hpp"

#include "common/error.hpp"

namespace chorus::transport::ofi {

void EagerOrder::deliver(Sink& sink, const EagerHeader& header, const uint8_t* data, size_t bytes) {
  const size_t peer = header.source;
  uint32_t& expected = expected_[peer];
  if (header.sequence != expected) {
    if (static_cast<int32_t>(header.sequence - expected) < 0) {
      sink.on_error(0, static_cast<int>(peer),
                    Error(Status::internal, concat("ofi: duplicate eager message ", header.sequence, " from rank ", peer),
                          static_cast<int>(peer)));
      return;
    }
    early_[peer].emplace(header.sequence, std::vector<uint8_t>(data, data + bytes));
    return;
  }
  sink.on_eager(static_cast<int>(peer), data, bytes);
  ++expected;
  auto& waiting = early_[peer];
  for (auto it = waiting.find(expected); it != waiting.end(); it = waiting.find(expected)) {
    std::vector<uint8_t> message = std::move(it->second);
    waiting.erase(it);
    sink.on_eager(static_cast<int>(peer), message.data(), message.size());
    ++expected;
  }
}

}  // namespace chorus::transport::ofi
