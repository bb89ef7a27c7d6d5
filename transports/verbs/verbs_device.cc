#include "transports/verbs/verbs_device.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace chorus::transport::verbs {

bool is_ipv4_mapped(const std::array<uint8_t, 16>& gid) {
  static constexpr std::array<uint8_t, 12> prefix{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::equal(prefix.begin(), prefix.end(), gid.begin());
}

std::string gid_to_string(const std::array<uint8_t, 16>& gid) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (inet_ntop(AF_INET6, gid.data(), text, sizeof text) == nullptr) return "?";
  return text;
}

namespace {

bool is_empty(const std::array<uint8_t, 16>& gid) {
  return std::all_of(gid.begin(), gid.end(), [](uint8_t b) { return b == 0; });
}

bool is_link_local(const std::array<uint8_t, 16>& gid) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

int gid_rank(const GidCandidate& c) {
  if (is_empty(c.gid) || is_link_local(c.gid)) return -1;
  const bool v4 = is_ipv4_mapped(c.gid);
  if (c.roce_v2) return v4 ? 3 : 2;
  return v4 ? 1 : 0;
}

struct DeviceList {
  DeviceListPtr list;
  int count = 0;
  DeviceList() {
    errno = 0;
    list.reset(ibv_get_device_list(&count));
    if (!list) count = 0;
  }
  ibv_device* at(int i) const { return list.get()[i]; }
};

ContextPtr open_device(ibv_device* device) {
  return ContextPtr(check_ptr(ibv_open_device(device), concat("ibv_open_device(", ibv_get_device_name(device), ")")));
}

std::vector<GidCandidate> read_gid_table(ibv_context* context, int port, int table_length) {
  std::vector<GidCandidate> table;
  for (int index = 0; index < table_length; ++index) {
    ibv_gid_entry entry{};
    // Unconfigured entries fail with ENODATA: skip them.
    if (ibv_query_gid_ex(context, static_cast<uint32_t>(port), static_cast<uint32_t>(index), &entry, 0) != 0) continue;
    GidCandidate c;
    c.index = index;
    std::copy(entry.gid.raw, entry.gid.raw + 16, c.gid.begin());
    c.roce_v2 = entry.gid_type == IBV_GID_TYPE_ROCE_V2;
    table.push_back(c);
  }
  return table;
}

// Fills choice.gid* for the port; config error when the requested index is unusable.
void choose_port_gid(ibv_context* context, const Settings& settings, PortChoice& choice) {
  auto table = read_gid_table(context, choice.port, choice.attr.gid_tbl_len);
  auto use = [&](const GidCandidate& c) {
    choice.gid_index = c.index;
    choice.gid = c.gid;
    choice.gid_roce_v2 = c.roce_v2;
  };
  if (settings.gid_index >= 0) {
    auto it = std::find_if(table.begin(), table.end(), [&](const GidCandidate& c) { return c.index == settings.gid_index; });
    if (it == table.end() || is_empty(it->gid)) {
      fail(Status::config, "CHORUS_IB_GID_INDEX=\"", settings.gid_index, "\": GID index ", settings.gid_index, " of ",
           choice.device, " port ", choice.port, " is not configured (the port's table has ", choice.attr.gid_tbl_len,
           " entries; `ibv_devinfo -v` lists them)");
    }
    use(*it);
    choice.reason += concat(", GID index ", settings.gid_index, " from CHORUS_IB_GID_INDEX");
    return;
  }
  if (!choice.roce) {
    // InfiniBand: routed by LID; GID 0 (the port GID) only matters across subnets.
    if (!table.empty()) use(table.front());
    choice.reason += ", InfiniBand: LID routing, GID index 0";
    return;
  }
  int best = choose_gid(table);
  if (best < 0) {
    fail(Status::config, "verbs: ", choice.device, " port ", choice.port,
         " is RoCE but has no usable GID (all empty or link-local); give the interface an IP address or set "
         "CHORUS_IB_GID_INDEX");
  }
  use(*std::find_if(table.begin(), table.end(), [&](const GidCandidate& c) { return c.index == best; }));
  choice.reason += concat(", GID index ", best, " chosen (", choice.gid_roce_v2 ? "RoCE v2" : "RoCE v1",
                          is_ipv4_mapped(choice.gid) ? ", IPv4" : "", ")");
}

// sysfs links a PCI device's verbs device to its PCI function; soft-RoCE
// devices have no such link.
std::optional<topology::PciAddress> pci_address_of(const std::string& device) {
  std::error_code error;
  const auto target = std::filesystem::canonical("/sys/class/infiniband/" + device + "/device", error);
  if (error) return std::nullopt;
  return topology::parse_pci(target.filename().string());
}

}  // namespace

int choose_gid(const std::vector<GidCandidate>& table) {
  int best_index = -1;
  int best_rank = -1;
  for (const GidCandidate& c : table) {
    int r = gid_rank(c);
    if (r > best_rank || (r == best_rank && r >= 0 && c.index < best_index)) {
      best_rank = r;
      best_index = c.index;
    }
  }
  return best_rank < 0 ? -1 : best_index;
}

const char* mtu_string(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256: return "256";
    case IBV_MTU_512: return "512";
    case IBV_MTU_1024: return "1024";
    case IBV_MTU_2048: return "2048";
    case IBV_MTU_4096: return "4096";
  }
  return "?";
}

PortChoice choose_port(const Settings& settings) {
  DeviceList devices;
  if (devices.count == 0) {
    fail(Status::unsupported, "verbs: no RDMA device found (ibv_get_device_list: ",
         errno != 0 ? std::strerror(errno) : "empty list",
         "); load the driver (e.g. rdma_rxe for soft-RoCE) or use CHORUS_TRANSPORT=ofi");
  }
  std::string names;
  for (int i = 0; i < devices.count; ++i) {
    const char* name = ibv_get_device_name(devices.at(i));
    names += (names.empty() ? "" : ", ") + std::string(name);
    if (!settings.device.empty() && settings.device != name) continue;
    ContextPtr context = open_device(devices.at(i));
    ibv_device_attr device_attr{};
    check_rc(ibv_query_device(context.get(), &device_attr), concat("ibv_query_device(", name, ")"));
    for (int port = 1; port <= device_attr.phys_port_cnt; ++port) {
      if (settings.port != 0 && settings.port != port) continue;
      PortChoice choice;
      choice.device = name;
      choice.port = port;
      check_rc(ibv_query_port(context.get(), static_cast<uint8_t>(port), &choice.attr),
               concat("ibv_query_port(", name, ", ", port, ")"));
      if (choice.attr.state != IBV_PORT_ACTIVE) {
        if (settings.port != 0) {
          fail(Status::config, "CHORUS_IB_PORT=\"", settings.port, "\": port ", port, " of ", name, " is ",
               ibv_port_state_str(choice.attr.state), ", not active");
        }
        continue;
      }
      choice.roce = choice.attr.link_layer == IBV_LINK_LAYER_ETHERNET;
      choice.reason = concat(settings.device.empty() ? "first device with an active port" : "CHORUS_IB_DEVICE",
                             settings.port != 0 ? ", port from CHORUS_IB_PORT" : ", first active port");
      choose_port_gid(context.get(), settings, choice);
      return choice;
    }
    if (settings.port != 0 && settings.port > device_attr.phys_port_cnt) {
      fail(Status::config, "CHORUS_IB_PORT=\"", settings.port, "\": ", name, " has ports 1..",
           static_cast<int>(device_attr.phys_port_cnt));
    }
  }
  if (!settings.device.empty() && names.find(settings.device) == std::string::npos) {
    fail(Status::config, "CHORUS_IB_DEVICE=\"", settings.device, "\": no such RDMA device (devices here: ", names, ")");
  }
  fail(Status::unsupported, "verbs: no active port on ",
       settings.device.empty() ? concat("any device (", names, ")") : settings.device,
       "; check the link with `ibv_devinfo`");
}

bool active_port_present() {
  try {
    Settings defaults;
    choose_port(defaults);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::vector<std::string> describe_devices(const Settings& settings) {
  std::vector<std::string> lines;
  try {
    DeviceList devices;
    if (devices.count == 0) {
      lines.push_back("no RDMA device (verbs transport unavailable on this machine)");
      return lines;
    }
    for (int i = 0; i < devices.count; ++i) {
      const char* name = ibv_get_device_name(devices.at(i));
      ContextPtr context = open_device(devices.at(i));
      ibv_device_attr attr{};
      check_rc(ibv_query_device(context.get(), &attr), "ibv_query_device");
      lines.push_back(concat(name, ": ", static_cast<int>(attr.phys_port_cnt), " port(s), max_qp_wr ", attr.max_qp_wr,
                             ", max_cqe ", attr.max_cqe, ", max_qp_rd_atom ", attr.max_qp_rd_atom, ", max_srq_wr ",
                             attr.max_srq_wr, ", completion vectors ", context->num_comp_vectors));
      for (int port = 1; port <= attr.phys_port_cnt; ++port) {
        ibv_port_attr pa{};
        if (ibv_query_port(context.get(), static_cast<uint8_t>(port), &pa) != 0) continue;
        lines.push_back(concat("  port ", port, ": ", ibv_port_state_str(pa.state), ", ",
                               pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", ", active MTU ",
                               mtu_string(pa.active_mtu), ", LID ", pa.lid));
        for (const GidCandidate& c : read_gid_table(context.get(), port, pa.gid_tbl_len)) {
          if (is_empty(c.gid)) continue;
          lines.push_back(concat("    GID ", c.index, ": ", gid_to_string(c.gid), c.roce_v2 ? " (RoCE v2)" : " (RoCE v1/IB)"));
        }
      }
    }
    PortChoice choice = choose_port(settings);
    lines.push_back(concat("chosen: ", choice.device, " port ", choice.port, " GID ", choice.gid_index, " ",
                           gid_to_string(choice.gid), " (", choice.reason, ")"));
  } catch (const std::exception& e) {
    lines.push_back(concat("chosen: none (", e.what(), ")"));
  }
  return lines;
}

DeviceFacts device_facts(const std::string& device) {
  DeviceList devices;
  for (int i = 0; i < devices.count; ++i) {
    if (device != ibv_get_device_name(devices.at(i))) continue;
    ContextPtr context = open_device(devices.at(i));
    return DeviceFacts{context->num_comp_vectors, pci_address_of(device)};
  }
  fail(Status::transport, "verbs: device ", device, " disappeared while reading its completion vectors");
}

}  // namespace chorus::transport::verbs
