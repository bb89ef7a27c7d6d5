// Loading topologies through hwloc (no mocks): the planner's view of the
// hand-written XML machines in data/, where their NICs sit, and failures.
#include "common/error.hpp"
#include "topology/topology.hpp"

#include <gtest/gtest.h>

using namespace chorus;
using namespace chorus::topology;

namespace {
std::string data(const char* file) { return std::string(CHORUS_TOPOLOGY_DATA) + "/" + file; }

std::vector<std::string> core_lists(const Machine& machine) {
  std::vector<std::string> lists;
  for (const Core& core : machine.cores) lists.push_back(std::to_string(core.package) + ":" + format_cpu_list(core.cpus));
  return lists;
}
}  // namespace

TEST(TopologyXml, TwoSocketsOneNicCoresAndPackages) {
  const Topology topology = Topology::from_xml(data("two_sockets_one_nic.xml"), false);
  EXPECT_FALSE(topology.is_this_system());
  EXPECT_EQ(core_lists(topology.machine()), (std::vector<std::string>{"0:0-1", "0:2-3", "0:4-5", "0:6-7", "1:8-9",
                                                                       "1:10-11", "1:12-13", "1:14-15"}));
  EXPECT_EQ(format_cpu_list(topology.osdev_locality("mlx5_0")), "8-15");
  EXPECT_EQ(format_cpu_list(topology.osdev_locality("ib0")), "8-15");
  EXPECT_EQ(format_cpu_list(topology.pci_locality(*parse_pci("0000:81:00.0"))), "8-15");
  EXPECT_TRUE(topology.osdev_locality("rxe0").empty());
  EXPECT_TRUE(topology.pci_locality(*parse_pci("0000:3b:00.0")).empty());
}

TEST(TopologyXml, TwoSocketsTwoNicsOnePerSocket) {
  const Topology topology = Topology::from_xml(data("two_sockets_two_nics.xml"), false);
  EXPECT_EQ(format_cpu_list(topology.osdev_locality("mlx5_0")), "0-7");
  EXPECT_EQ(format_cpu_list(topology.osdev_locality("mlx5_1")), "8-15");
  EXPECT_EQ(format_cpu_list(topology.pci_locality(*parse_pci("0000:17:00.0"))), "0-7");
}

TEST(TopologyXml, OneSocketEightNicsTwoPerNumaNode) {
  const Topology topology = Topology::from_xml(data("one_socket_eight_nics.xml"), false);
  const Machine machine = topology.machine();
  ASSERT_EQ(machine.cores.size(), 16u);
  for (const Core& core : machine.cores) EXPECT_EQ(core.package, 0);
  const char* expected[] = {"0-3", "0-3", "4-7", "4-7", "8-11", "8-11", "12-15", "12-15"};
  for (int nic = 0; nic < 8; ++nic) {
    EXPECT_EQ(format_cpu_list(topology.osdev_locality("mlx5_" + std::to_string(nic))), expected[nic]) << nic;
  }
}

TEST(TopologySynthetic, HasNoIoDevices) {
  const Topology topology = Topology::from_synthetic("package:1 core:2 pu:1");
  EXPECT_EQ(core_lists(topology.machine()), (std::vector<std::string>{"0:0", "0:1"}));
  EXPECT_TRUE(topology.osdev_locality("mlx5_0").empty());
}

TEST(TopologyErrors, NameTheHwlocCall) {
  try {
    Topology::from_xml("/nonexistent/topology.xml", false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hwloc_topology_set_xml(/nonexistent/topology.xml)"), std::string::npos)
        << e.what();
  }
  try {
    Topology::from_synthetic("package:two");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hwloc_topology_set_synthetic"), std::string::npos) << e.what();
  }
}

// Without I/O devices (a shm or tcp rank: no NIC to place near) the topology
// has no PCI or OS device at all, and the same cores as with them; with them,
// whatever this machine's PCI bus shows is there (none in some containers).
TEST(TopologyThisMachine, WithoutIoDevicesHasNoPciOrOsDeviceAndTheSameCores) {
  const Topology with_io = Topology::this_machine();
  const Topology without_io = Topology::this_machine(/*with_io_devices=*/false);
  EXPECT_EQ(hwloc_get_nbobjs_by_type(without_io.get(), HWLOC_OBJ_PCI_DEVICE), 0);
  EXPECT_EQ(hwloc_get_nbobjs_by_type(without_io.get(), HWLOC_OBJ_OS_DEVICE), 0);
  EXPECT_EQ(hwloc_get_nbobjs_by_type(without_io.get(), HWLOC_OBJ_BRIDGE), 0);
  EXPECT_EQ(without_io.allowed_cpus(), with_io.allowed_cpus());
  EXPECT_EQ(without_io.machine().cores.size(), with_io.machine().cores.size());
  RecordProperty("pci_devices_with_io", hwloc_get_nbobjs_by_type(with_io.get(), HWLOC_OBJ_PCI_DEVICE));
}

// This machine: binding to one allowed CPU is read back exactly, then undone.
TEST(TopologyThisMachine, BindsAndReadsBack) {
  const Topology topology = Topology::this_machine();
  ASSERT_TRUE(topology.is_this_system());
  const CpuSet before = topology.process_binding();
  const CpuSet allowed = topology.allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  topology.bind_process({allowed.back()});
  EXPECT_EQ(topology.process_binding(), CpuSet{allowed.back()});
  topology.bind_process(before);
  EXPECT_EQ(topology.process_binding(), before);
}
