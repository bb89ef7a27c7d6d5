// The planner on real hwloc topologies (hand-written XML with PCI devices
// and NICs in data/, synthetic ones without), 1..16 local ranks, cpusets,
// completion vectors and progress cores asserted exactly.
#include "topology/planner.hpp"
#include "topology/topology.hpp"

#include <gtest/gtest.h>

using namespace chorus::topology;

namespace {

constexpr int kMaxLocalRanks = 16;

struct Node {
  Machine machine;
  NicView nic;
};

Node load(const std::string& xml, const std::string& nic, int vectors = 4) {
  const Topology topology = Topology::from_xml(std::string(CHORUS_TOPOLOGY_DATA) + "/" + xml, false);
  Node node;
  node.machine = topology.machine();
  node.nic.name = nic;
  node.nic.locality = topology.osdev_locality(nic);
  node.nic.completion_vectors = vectors;
  return node;
}

std::vector<Plan> plan_ranks(const Node& node, Policy policy, int local_size, CpuSet inherited = {}) {
  std::vector<Plan> plans;
  for (int rank = 0; rank < local_size; ++rank) {
    plans.push_back(plan_placement(node.machine, node.nic, PlanRequest{policy, rank, local_size, inherited}));
  }
  return plans;
}

std::vector<std::string> cpusets(const std::vector<Plan>& plans) {
  std::vector<std::string> lists;
  for (const Plan& plan : plans) lists.push_back(format_cpu_list(plan.cpuset));
  return lists;
}

std::vector<std::string> progress(const std::vector<Plan>& plans) {
  std::vector<std::string> lists;
  for (const Plan& plan : plans) lists.push_back(format_cpu_list(plan.progress_cpus));
  return lists;
}

std::vector<int> vectors(const std::vector<Plan>& plans) {
  std::vector<int> chosen;
  for (const Plan& plan : plans) chosen.push_back(plan.completion_vector);
  return chosen;
}

// The first `count` entries of a per-rank table.
std::vector<std::string> first(const std::vector<std::string>& table, int count) {
  return {table.begin(), table.begin() + count};
}

// Cores near mlx5_0 (package 1), then package 0, repeated when ranks outnumber cores.
const std::vector<std::string> kNicOnSocket1 = {"8-9", "10-11", "12-13", "14-15", "0-1", "2-3", "4-5", "6-7",
                                                "8-9", "10-11", "12-13", "14-15", "0-1", "2-3", "4-5", "6-7"};
const std::vector<std::string> kCoreOrder = {"0-1", "2-3", "4-5", "6-7", "8-9", "10-11", "12-13", "14-15",
                                             "0-1", "2-3", "4-5", "6-7", "8-9", "10-11", "12-13", "14-15"};

}  // namespace

TEST(PlannerTwoSocketsOneNic, NicPolicyFillsTheNicSocketFirst) {
  const Node node = load("two_sockets_one_nic.xml", "mlx5_0");
  for (int size = 1; size <= kMaxLocalRanks; ++size) {
    const auto plans = plan_ranks(node, Policy::nic, size);
    EXPECT_EQ(cpusets(plans), first(kNicOnSocket1, size)) << size << " ranks";
    for (int rank = 0; rank < size; ++rank) {
      EXPECT_TRUE(plans[static_cast<size_t>(rank)].bind);
      EXPECT_EQ(plans[static_cast<size_t>(rank)].completion_vector, rank % 4) << rank;
      EXPECT_EQ(plans[static_cast<size_t>(rank)].nic_local, rank % 8 < 4) << rank;
    }
  }
}

TEST(PlannerTwoSocketsOneNic, CorePolicyIgnoresTheNic) {
  const Node node = load("two_sockets_one_nic.xml", "mlx5_0");
  for (int size = 1; size <= kMaxLocalRanks; ++size) {
    EXPECT_EQ(cpusets(plan_ranks(node, Policy::core, size)), first(kCoreOrder, size)) << size << " ranks";
  }
}

TEST(PlannerTwoSocketsOneNic, AutomaticIsCoreThenPackageThenUnbound) {
  const Node node = load("two_sockets_one_nic.xml", "mlx5_0");
  EXPECT_EQ(cpusets(plan_ranks(node, Policy::automatic, 1)), (std::vector<std::string>{"8-9"}));
  EXPECT_EQ(cpusets(plan_ranks(node, Policy::automatic, 2)), (std::vector<std::string>{"8-9", "10-11"}));
  EXPECT_EQ(cpusets(plan_ranks(node, Policy::automatic, 3)), (std::vector<std::string>{"8-15", "8-15", "8-15"}));
  EXPECT_EQ(cpusets(plan_ranks(node, Policy::automatic, 8)),
            (std::vector<std::string>{"8-15", "8-15", "8-15", "8-15", "0-7", "0-7", "0-7", "0-7"}));
  for (int size = 9; size <= kMaxLocalRanks; ++size) {
    for (const Plan& plan : plan_ranks(node, Policy::automatic, size)) {
      EXPECT_FALSE(plan.bind);
      EXPECT_EQ(format_cpu_list(plan.cpuset), "0-15");
      EXPECT_EQ(plan.policy, Policy::none);
      EXPECT_EQ(plan.note, "more local ranks than cores: not bound");
    }
  }
  EXPECT_EQ(plan_ranks(node, Policy::automatic, 2)[0].policy, Policy::nic);
  EXPECT_EQ(plan_ranks(node, Policy::automatic, 5)[0].policy, Policy::package);
}

TEST(PlannerTwoSocketsOneNic, ProgressThreadsTakeCoresNoRankHas) {
  const Node node = load("two_sockets_one_nic.xml", "mlx5_0");
  EXPECT_EQ(progress(plan_ranks(node, Policy::nic, 1)), (std::vector<std::string>{"10-11"}));
  EXPECT_EQ(progress(plan_ranks(node, Policy::nic, 2)), (std::vector<std::string>{"12-13", "14-15"}));
  EXPECT_EQ(progress(plan_ranks(node, Policy::nic, 6)),
            (std::vector<std::string>{"4-5", "6-7", "4-5", "6-7", "4-5", "6-7"}));
  for (int size = 8; size <= kMaxLocalRanks; ++size) {
    const auto plans = plan_ranks(node, Policy::nic, size);
    EXPECT_EQ(progress(plans), cpusets(plans)) << "no spare core with " << size << " ranks: share the rank's";
  }
  EXPECT_EQ(progress(plan_ranks(node, Policy::automatic, 3)), (std::vector<std::string>{"8-15", "8-15", "8-15"}));
}

TEST(PlannerTwoSocketsTwoNics, EachNicPullsRanksToItsSocket) {
  const Node near_socket0 = load("two_sockets_two_nics.xml", "mlx5_0");
  const Node near_socket1 = load("two_sockets_two_nics.xml", "mlx5_1");
  for (int size = 1; size <= kMaxLocalRanks; ++size) {
    EXPECT_EQ(cpusets(plan_ranks(near_socket0, Policy::nic, size)), first(kCoreOrder, size)) << size;
    EXPECT_EQ(cpusets(plan_ranks(near_socket1, Policy::nic, size)), first(kNicOnSocket1, size)) << size;
  }
  EXPECT_EQ(cpusets(plan_ranks(near_socket0, Policy::automatic, 4)),
            (std::vector<std::string>{"0-7", "0-7", "0-7", "0-7"}));
  EXPECT_EQ(cpusets(plan_ranks(near_socket1, Policy::automatic, 4)),
            (std::vector<std::string>{"8-15", "8-15", "8-15", "8-15"}));
}

TEST(PlannerOneSocketEightNics, NicLocalNumaNodeFirstThenThePackageInOrder) {
  const std::vector<std::string> near_mlx5_0 = {"0", "1", "2",  "3",  "4",  "5",  "6",  "7",
                                                "8", "9", "10", "11", "12", "13", "14", "15"};
  const std::vector<std::string> near_mlx5_5 = {"8", "9", "10", "11", "0",  "1",  "2",  "3",
                                                "4", "5", "6",  "7",  "12", "13", "14", "15"};
  const std::vector<std::string> near_mlx5_7 = {"12", "13", "14", "15", "0", "1",  "2",  "3",
                                                "4",  "5",  "6",  "7",  "8", "9", "10", "11"};
  for (int size = 1; size <= kMaxLocalRanks; ++size) {
    EXPECT_EQ(cpusets(plan_ranks(load("one_socket_eight_nics.xml", "mlx5_0"), Policy::nic, size)), first(near_mlx5_0, size));
    EXPECT_EQ(cpusets(plan_ranks(load("one_socket_eight_nics.xml", "mlx5_5"), Policy::nic, size)), first(near_mlx5_5, size));
    EXPECT_EQ(cpusets(plan_ranks(load("one_socket_eight_nics.xml", "mlx5_7"), Policy::nic, size)), first(near_mlx5_7, size));
  }
  for (int nic = 0; nic < 8; ++nic) {
    const auto plans = plan_ranks(load("one_socket_eight_nics.xml", "mlx5_" + std::to_string(nic)), Policy::nic, 4);
    const unsigned base = 4u * static_cast<unsigned>(nic / 2);
    EXPECT_EQ(cpusets(plans), (std::vector<std::string>{std::to_string(base), std::to_string(base + 1),
                                                         std::to_string(base + 2), std::to_string(base + 3)}))
        << "mlx5_" << nic;
    for (const Plan& plan : plans) EXPECT_TRUE(plan.nic_local);
  }
  // One package: the automatic policy gives every rank the whole socket.
  for (const Plan& plan : plan_ranks(load("one_socket_eight_nics.xml", "mlx5_3"), Policy::automatic, 16)) {
    EXPECT_EQ(format_cpu_list(plan.cpuset), "0-15");
    EXPECT_TRUE(plan.bind);
  }
}

TEST(PlannerCompletionVectors, DistinctPerLocalRankModuloTheCount) {
  const Node four = load("two_sockets_one_nic.xml", "mlx5_0", 4);
  EXPECT_EQ(vectors(plan_ranks(four, Policy::nic, 16)),
            (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
  const Node two = load("two_sockets_one_nic.xml", "mlx5_0", 2);
  EXPECT_EQ(vectors(plan_ranks(two, Policy::nic, 3)), (std::vector<int>{0, 1, 0}));
  const Node none = load("two_sockets_one_nic.xml", "mlx5_0", 0);
  EXPECT_EQ(vectors(plan_ranks(none, Policy::nic, 2)), (std::vector<int>{-1, -1}));
}

TEST(PlannerCompletionVectors, MatchedToTheRanksCoresWhenIrqAffinityIsKnown) {
  Node node = load("two_sockets_one_nic.xml", "mlx5_0", 4);
  // vector -> CPU its interrupt is delivered to (as /proc/irq/N/smp_affinity_list says)
  node.nic.vector_cpus = {{0}, {8}, {10}, {2}};
  // rank cores: 8-9 10-11 12-13 14-15 | 0-1 2-3 4-5 6-7 (all 4 vectors used after rank 3: a new round)
  EXPECT_EQ(vectors(plan_ranks(node, Policy::nic, 8)), (std::vector<int>{1, 2, 0, 3, 0, 3, 1, 2}));
}

// Soft-RoCE, VMs, shm and tcp: no locality, so nic binds by core in order
// (this development machine: 1 package, 2 cores).
TEST(PlannerNoLocality, BindsByCoreRoundRobin) {
  const Topology topology = Topology::from_synthetic("package:1 core:2 pu:1");
  Node node{topology.machine(), NicView{"rxe0", {}, 1, {}}};
  const auto plans = plan_ranks(node, Policy::nic, 4);
  EXPECT_EQ(cpusets(plans), (std::vector<std::string>{"0", "1", "0", "1"}));
  EXPECT_EQ(vectors(plans), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(plans[0].note, "no NIC locality: bound in core order");
  EXPECT_EQ(cpusets(plan_ranks(node, Policy::core, 4)), (std::vector<std::string>{"0", "1", "0", "1"}));
  EXPECT_EQ(cpusets(plan_ranks(node, Policy::automatic, 2)), (std::vector<std::string>{"0", "1"}));
  for (const Plan& plan : plan_ranks(node, Policy::automatic, 4)) EXPECT_FALSE(plan.bind);
  for (const Plan& plan : plan_ranks(node, Policy::none, 2)) {
    EXPECT_FALSE(plan.bind);
    EXPECT_EQ(format_cpu_list(plan.cpuset), "0-1");
  }
}

TEST(PlannerInheritedBinding, AutomaticKeepsItAnExplicitPolicyReplacesIt) {
  const Node node = load("two_sockets_one_nic.xml", "mlx5_0", 4);
  const auto kept = plan_ranks(node, Policy::automatic, 2, {4, 5});
  for (const Plan& plan : kept) {
    EXPECT_FALSE(plan.bind);
    EXPECT_EQ(format_cpu_list(plan.cpuset), "4-5");
    EXPECT_EQ(plan.note, "kept the launcher's binding");
  }
  EXPECT_EQ(vectors(kept), (std::vector<int>{0, 1}));
  EXPECT_EQ(cpusets(plan_ranks(node, Policy::nic, 2, {4, 5})), (std::vector<std::string>{"8-9", "10-11"}));
}

// none, the default since issue 21: never bound by chorus; a launcher's
// binding is kept and reported as such.
TEST(PlannerInheritedBinding, NoneNeverBindsAndKeepsTheLaunchersBinding) {
  const Node node = load("two_sockets_one_nic.xml", "mlx5_0", 4);
  for (const Plan& plan : plan_ranks(node, Policy::none, 2, {4, 5})) {
    EXPECT_FALSE(plan.bind);
    EXPECT_EQ(format_cpu_list(plan.cpuset), "4-5");
    EXPECT_EQ(plan.note, "kept the launcher's binding");
  }
  for (const Plan& plan : plan_ranks(node, Policy::none, 2)) {
    EXPECT_FALSE(plan.bind);
    EXPECT_EQ(format_cpu_list(plan.cpuset), "0-15");
  }
}

// docs/placement.md, "Worked example", figure for figure.
TEST(PlannerWorkedExample, AsDocumented) {
  Node node = load("two_sockets_one_nic.xml", "mlx5_0", 4);
  node.nic.vector_cpus = {{0}, {8}, {10}, {2}};
  const auto plans = plan_ranks(node, Policy::nic, 6);
  EXPECT_EQ(cpusets(plans), (std::vector<std::string>{"8-9", "10-11", "12-13", "14-15", "0-1", "2-3"}));
  EXPECT_EQ(vectors(plans), (std::vector<int>{1, 2, 0, 3, 0, 3}));
  EXPECT_EQ(progress(plans), (std::vector<std::string>{"4-5", "6-7", "4-5", "6-7", "4-5", "6-7"}));
  EXPECT_EQ(cpusets(plan_ranks(node, Policy::automatic, 6)),
            (std::vector<std::string>{"8-15", "8-15", "8-15", "8-15", "0-7", "0-7"}));
  for (const Plan& plan : plan_ranks(node, Policy::automatic, 17)) EXPECT_FALSE(plan.bind);
}
