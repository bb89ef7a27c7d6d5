// The verbs transports (docs/transport-verbs.md, docs/transport-ud.md): the
// RC mesh (one RC QP per peer, rc_mesh_*.cc) and the UD scalable mode (one
// UD QP and SRQ per process, ud_*.cc). The transport factory
// (src/front/api/transport_factory.cc) picks one by CHORUS_VERBS_MODE.
#pragma once

#include "transports/transport.hpp"
#include "transports/verbs/verbs_settings.hpp"

#include <chrono>
#include <memory>

namespace chorus::transport {

struct VerbsOptions {
  verbs::Settings settings;
  // The largest eager payload the engine sends (the library default).
  size_t max_eager_bytes = config::default_bytes(config::kVariables, "CHORUS_EAGER_LIMIT");
  // CHORUS_TIMEOUT: bounds rdma_cm connection setup.
  std::chrono::milliseconds timeout{std::chrono::seconds(config::default_int(config::kVariables, "CHORUS_TIMEOUT"))};
  int completion_vector = 0;  // placement's choice (docs/placement.md), taken modulo the device's count
};

// CHORUS_VERBS_MODE=rc.
std::unique_ptr<Transport> make_rc_mesh_transport(int rank, int size, const VerbsOptions& options);
// CHORUS_VERBS_MODE=ud.
std::unique_ptr<Transport> make_ud_transport(int rank, int size, const VerbsOptions& options);

}  // namespace chorus::transport
