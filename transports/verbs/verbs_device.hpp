// Device, port and GID selection for the verbs transports
// (docs/transport-verbs.md, "Device, port, GID"): CHORUS_IB_DEVICE /
// CHORUS_IB_PORT / CHORUS_IB_GID_INDEX, else the first active port and, on
// RoCE, the best GID (choose_gid).
#pragma once

#include "transports/verbs/verbs_settings.hpp"
#include "topology/nic.hpp"
#include "transports/verbs/verbs_resources.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chorus::transport::verbs {

// One GID table entry as choose_gid sees it.
struct GidCandidate {
  int index = 0;
  std::array<uint8_t, 16> gid{};
  bool roce_v2 = false;
};

// Picks the GID a RoCE port should use: skips empty and link-local (fe80::/10)
// entries and prefers, in order, RoCE v2 with an IPv4-mapped address, RoCE v2
// with another address, RoCE v1 with an IPv4-mapped address, RoCE v1; the
// lowest index wins a tie. Returns -1 when no entry is usable. Pure, so it is
// unit tested without hardware.
int choose_gid(const std::vector<GidCandidate>& table);

bool is_ipv4_mapped(const std::array<uint8_t, 16>& gid);
std::string gid_to_string(const std::array<uint8_t, 16>& gid);

// The port the transport will use and why.
struct PortChoice {
  std::string device;
  int port = 0;
  ibv_port_attr attr{};
  bool roce = false;  // Ethernet link layer: addressed by GID, not LID
  int gid_index = 0;
  std::array<uint8_t, 16> gid{};
  bool gid_roce_v2 = false;
  std::string reason;  // how the choice was made, for the log and chorus_info
};

// Applies the settings to the machine's devices. Throws Error(Status::config)
// when a named device/port/GID does not exist or is not usable, and
// Error(Status::unsupported) when there is no RDMA device at all.
PortChoice choose_port(const Settings& settings);

// True when some device has an active port (CHORUS_TRANSPORT=auto uses verbs
// for multi-host jobs then). Never throws.
bool active_port_present();

// Lines describing every device and port, with the choice the settings lead
// to (chorus_info prints them). Never throws.
std::vector<std::string> describe_devices(const Settings& settings);

const char* mtu_string(ibv_mtu mtu);

// What placement needs to know about a device before the transport opens it.
struct DeviceFacts {
  int completion_vectors = 0;  // ibv_context::num_comp_vectors
  std::optional<topology::PciAddress> pci;  // none for soft-RoCE (no PCI device)
};
DeviceFacts device_facts(const std::string& device);

}  // namespace chorus::transport::verbs
