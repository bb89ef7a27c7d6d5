// In-process transport: ranks are threads of one process, eager messages are
// queues, reads are memcpy. For testing algorithms and the engine across many
// rank counts in milliseconds; never evidence that a real fabric works.
#pragma once

#include "transports/transport.hpp"

#include <memory>
#include <vector>

namespace chorus::transport {

// Shared state of one in-process "job"; create one per test, then one
// transport per rank thread.
class InprocFabric {
 public:
  explicit InprocFabric(int size);
  ~InprocFabric();
  int size() const;
  // The transport for `rank`; call once per rank.
  std::unique_ptr<Transport> make_transport(int rank);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace chorus::transport
