// cpulists as the kernel writes them, and /proc/interrupts as mlx5 names
// its completion vectors.
#include "topology/cpu_list.hpp"
#include "topology/irq.hpp"
#include "topology/nic.hpp"

#include <gtest/gtest.h>

using namespace chorus::topology;

TEST(CpuList, FormatsRanges) {
  EXPECT_EQ(format_cpu_list({}), "");
  EXPECT_EQ(format_cpu_list({3}), "3");
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
}

TEST(CpuList, ParsesWhatItFormats) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (CpuSet{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), (CpuSet{5}));
  EXPECT_EQ(parse_cpu_list("3,1-2"), (CpuSet{1, 2, 3}));
}

TEST(CpuList, RejectsWhatIsNotACpuList) {
  EXPECT_FALSE(parse_cpu_list(""));
  EXPECT_FALSE(parse_cpu_list("3-1"));
  EXPECT_FALSE(parse_cpu_list("a"));
  EXPECT_FALSE(parse_cpu_list("1,,2"));
  EXPECT_FALSE(parse_cpu_list("-1"));
}

TEST(CpuList, SetOperations) {
  EXPECT_TRUE(intersects({1, 5, 9}, {2, 9}));
  EXPECT_FALSE(intersects({1, 5}, {2, 6}));
  EXPECT_TRUE(contains_all({0, 1, 2, 3}, {1, 3}));
  EXPECT_FALSE(contains_all({0, 1}, {1, 2}));
  EXPECT_EQ(set_union({0, 2}, {1, 2}), (CpuSet{0, 1, 2}));
}

TEST(Pci, ParsesAndFormatsBusIds) {
  auto pci = parse_pci("0000:81:00.1");
  ASSERT_TRUE(pci);
  EXPECT_EQ(pci->bus, 0x81u);
  EXPECT_EQ(pci->function, 1u);
  EXPECT_EQ(format_pci(*pci), "0000:81:00.1");
  EXPECT_FALSE(parse_pci("rxe0"));
  EXPECT_FALSE(parse_pci("0000:81:00.1x"));
}

TEST(CompletionVectorIrqs, FindsTheDevicesCompletionVectorsOnly) {
  const char* interrupts =
      "            CPU0       CPU1       CPU2       CPU3\n"
      " 120:          0          0          0          0  IR-PCI-MSI 42467328-edge      mlx5_async0@pci:0000:81:00.0\n"
      " 121:       1042          0          0          0  IR-PCI-MSI 42467329-edge      mlx5_comp0@pci:0000:81:00.0\n"
      " 122:          0        977          0          0  IR-PCI-MSI 42467330-edge      mlx5_comp1@pci:0000:81:00.0\n"
      " 130:          0          0         12          0  IR-PCI-MSI 42467331-edge      mlx5_comp12@pci:0000:81:00.0\n"
      " 140:          5          0          0          0  IR-PCI-MSI 42467332-edge      mlx5_comp0@pci:0000:17:00.0\n"
      " NMI:          0          0          0          0   Non-maskable interrupts\n";
  const auto irqs = completion_vector_irqs(interrupts, "0000:81:00.0");
  EXPECT_EQ(irqs, (std::map<int, int>{{0, 121}, {1, 122}, {12, 130}}));
  EXPECT_TRUE(completion_vector_irqs(interrupts, "0000:3b:00.0").empty());
}
