// Picks and creates the transport named by the settings (CHORUS_TRANSPORT,
// CHORUS_OFI_PROVIDER) for this job.
#pragma once

#include "common/config.hpp"
#include "transports/transport.hpp"

#include <memory>

namespace chorus {

std::unique_ptr<transport::Transport> create_transport(const config::Settings& settings, int rank, int size,
                                                       bool all_ranks_on_one_host);

}  // namespace chorus
