// Picks and creates the transport named by the settings (CHORUS_TRANSPORT,
// CHORUS_OFI_PROVIDER) for this job, and describes the NIC it will use so
// placement can run before it exists.
#pragma once

#include "common/config.hpp"
#include "topology/nic.hpp"
#include "transports/transport.hpp"

#include <memory>

namespace chorus {

// The NIC the transport create_transport would make uses.
topology::NicDescription describe_nic(const config::Settings& settings, bool all_ranks_on_one_host);

// completion_vector: for the verbs CQ (placement's choice); other transports ignore it.
std::unique_ptr<transport::Transport> create_transport(const config::Settings& settings, int rank, int size,
                                                       bool all_ranks_on_one_host, int completion_vector);

}  // namespace chorus
