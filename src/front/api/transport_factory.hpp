// Picks and creates the transport named by the settings (CHORUS_TRANSPORT,
// CHORUS_OFI_PROVIDER) for this job, and describes the NIC it will use so
// placement can run before it exists.
#pragma once

#include "api/host_layout.hpp"
#include "common/config.hpp"
#include "topology/nic.hpp"
#include "transports/transport.hpp"

#include <memory>
#include <string>

namespace chorus {

// The NIC the transport create_transport would make uses.
topology::NicDescription describe_nic(const config::Settings& settings, bool all_ranks_on_one_host);

// completion_vector: for the verbs CQ (placement's choice); other transports ignore it.
std::unique_ptr<transport::Transport> create_transport(const config::Settings& settings, int rank, int size,
                                                       bool all_ranks_on_one_host, int completion_vector);

// When the job spans hosts, some host has several ranks and
// CHORUS_LOCAL_TRANSPORT allows, every rank makes the hybrid transport
// (transports/hybrid): its host's ranks over the native shm transport, the
// others over create_transport's choice. It is a job-wide choice (every
// rank's address must have the same form), so a rank alone on its host
// makes it too. Else create_transport's choice for every rank.
std::unique_ptr<transport::Transport> create_transport(const config::Settings& settings, int rank, int size,
                                                       const HostLayout& layout, int completion_vector);

// Whether that form makes the hybrid transport; `why` says why not.
bool uses_hybrid(const config::Settings& settings, const HostLayout& layout, std::string* why);

}  // namespace chorus
