// Sets of CPUs (OS processor numbers, as the kernel and taskset count them)
// in the planner's terms: a sorted list without duplicates. Kept free of
// hwloc so the planner stays a pure function that tests can reason about.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::topology {

using CpuSet = std::vector<unsigned>;  // sorted, unique

// "0-3,8,10-11" (the kernel's cpulist format, as in smp_affinity_list).
std::string format_cpu_list(const CpuSet& cpus);
// Parses the kernel's cpulist format; nullopt when the text is not one.
std::optional<CpuSet> parse_cpu_list(std::string_view text);

bool intersects(const CpuSet& a, const CpuSet& b);
bool contains_all(const CpuSet& outer, const CpuSet& inner);
CpuSet set_union(const CpuSet& a, const CpuSet& b);

}  // namespace chorus::topology
