#pragma once

#include "transports/ofi/ofi_resources.hpp"

#include <string>

namespace chorus::transport::ofi {

// "shm" when every rank is on this host, else "tcp;ofi_rxm".
std::string auto_provider(bool all_ranks_on_one_host);
// The first fi_info of `provider` meeting chorus' needs, or Error naming the
// provider and listing the available ones.
InfoPtr choose_provider(const std::string& provider, bool all_ranks_on_one_host);

}  // namespace chorus::transport::ofi
