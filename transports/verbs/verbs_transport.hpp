// Verbs RC mesh transport (DESIGN.md §4, docs/transport-verbs.md): one RC QP
// per peer, eager messages through pre-posted receive buffers (per QP or one
// SRQ) under credit flow control, rendezvous by RDMA READ, one CQ with a
// completion channel, an async-event thread, QP numbers and GIDs exchanged
// through the bootstrap store or connections made by rdma_cm.
#pragma once

#include "common/config.hpp"
#include "transports/transport.hpp"

#include <chrono>
#include <memory>

namespace chorus::transport {

struct VerbsOptions {
  config::VerbsSettings settings;
  size_t max_eager_bytes = 16384;  // largest eager payload the engine sends
  std::chrono::milliseconds timeout{300000};  // CHORUS_TIMEOUT: bounds rdma_cm connection setup
  int completion_vector = 0;  // placement's choice (docs/placement.md), taken modulo the device's count
};

// The RC mesh, or the UD scalable mode when settings.mode is "ud" (ud_transport.cc).
std::unique_ptr<Transport> make_verbs_transport(int rank, int size, const VerbsOptions& options);
std::unique_ptr<Transport> make_ud_transport(int rank, int size, const VerbsOptions& options);

}  // namespace chorus::transport
