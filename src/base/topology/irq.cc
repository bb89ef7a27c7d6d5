#include "topology/irq.hpp"

#include "common/config.hpp"

#include <fstream>
#include <sstream>

namespace chorus::topology {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return file ? text.str() : std::string();
}

// "mlx5_comp12@pci:0000:81:00.0" -> 12; -1 when the name is not a vector.
int vector_in_name(std::string_view name) {
  const size_t at = name.find("comp");
  if (at == std::string_view::npos) return -1;
  size_t end = at + 4;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
  auto vector = config::parse_int(name.substr(at + 4, end - at - 4), 0, 1 << 16);
  return vector ? static_cast<int>(*vector) : -1;
}

}  // namespace

std::map<int, int> completion_vector_irqs(std::string_view interrupts, const std::string& pci_address) {
  std::map<int, int> irqs;
  std::istringstream lines{std::string(interrupts)};
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find(pci_address) == std::string::npos) continue;
    std::istringstream words(line);
    std::string first, word, name;
    words >> first;
    while (words >> word) name = word;  // the action name is the last word
    auto irq = first.empty() ? std::nullopt : config::parse_int(std::string_view(first).substr(0, first.size() - 1), 0, 1 << 24);
    const int vector = vector_in_name(name);
    if (first.back() == ':' && irq && vector >= 0) irqs[vector] = static_cast<int>(*irq);
  }
  return irqs;
}

std::vector<CpuSet> read_vector_cpus(const std::optional<PciAddress>& pci, int vectors) {
  std::vector<CpuSet> cpus(static_cast<size_t>(std::max(vectors, 0)));
  if (!pci) return cpus;
  for (auto [vector, irq] : completion_vector_irqs(read_file("/proc/interrupts"), format_pci(*pci))) {
    if (vector >= vectors) continue;
    auto list = parse_cpu_list(read_file("/proc/irq/" + std::to_string(irq) + "/smp_affinity_list"));
    if (list) cpus[static_cast<size_t>(vector)] = *list;
  }
  return cpus;
}

}  // namespace chorus::topology
