#pragma once

#include "topology/nic.hpp"
#include "transports/ofi/ofi_resources.hpp"

#include <optional>
#include <string>

namespace chorus::transport::ofi {

// "shm" when every rank is on this host, else "tcp;ofi_rxm".
std::string auto_provider(bool all_ranks_on_one_host);
// The first fi_info of `provider` meeting chorus' needs, or Error naming the
// provider and listing the available ones.
InfoPtr choose_provider(const std::string& provider, bool all_ranks_on_one_host);

// The NIC behind the provider's first fi_info, for placement: its name and,
// when the fabric reports one (fi_info->nic->bus_attr), its PCI address.
struct ProviderNic {
  std::string name;         // "shm", "tcp;ofi_rxm lo", "verbs;ofi_rxm mlx5_0"
  std::optional<topology::PciAddress> pci;  // when the fabric reports one
};
ProviderNic provider_nic(const std::string& provider, bool all_ranks_on_one_host);

}  // namespace chorus::transport::ofi
