#include "topology/topology.hpp"

#include "common/error.hpp"

#include <cerrno>
#include <functional>

namespace chorus::topology {

namespace {

[[noreturn]] void fail_hwloc(const std::string& what) {
  fail(Status::internal, "hwloc: ", what, " failed: ", errno_string(errno));
}

void check_hwloc(int rc, const std::string& what) {
  if (rc != 0) fail_hwloc(what);
}

BitmapPtr new_bitmap() {
  BitmapPtr bitmap(hwloc_bitmap_alloc());
  if (!bitmap) fail_hwloc("hwloc_bitmap_alloc");
  return bitmap;
}

// init, configure, load; the topology is destroyed if any step fails.
hwloc_topology_t load(const std::string& what, const std::function<int(hwloc_topology_t)>& configure,
                      bool with_io_devices = true) {
  hwloc_topology_t topology = nullptr;
  check_hwloc(hwloc_topology_init(&topology), "hwloc_topology_init");
  std::unique_ptr<hwloc_topology, void (*)(hwloc_topology_t)> guard(topology, hwloc_topology_destroy);
  // PCI devices and OS devices (NICs) are filtered out by default.
  check_hwloc(hwloc_topology_set_io_types_filter(
                  topology, with_io_devices ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT : HWLOC_TYPE_FILTER_KEEP_NONE),
              "hwloc_topology_set_io_types_filter");
  // Only CPUs and PCI NICs matter here. The GPU/display discovery plugins
  // (Debian's libhwloc-plugins: gl opens X displays, opencl loads every ICD)
  // are slow and leak memory that LeakSanitizer then reports in every rank.
  // EINVAL: this hwloc has no such component, nothing to leave out.
  for (const char* component : {"pci", "gl", "opencl", "cuda", "nvml", "rsmi", "levelzero"}) {
    if (hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, component) != 0 &&
        errno != EINVAL) {
      fail_hwloc(concat("hwloc_topology_set_components (leaving out ", component, ")"));
    }
  }
  check_hwloc(configure(topology), what);
  check_hwloc(hwloc_topology_load(topology), concat("hwloc_topology_load (", what, ")"));
  return guard.release();
}

CpuSet non_io_ancestor_cpus(hwloc_topology_t topology, hwloc_obj_t object) {
  if (object == nullptr) return {};
  hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(topology, object);
  return ancestor == nullptr || ancestor->cpuset == nullptr ? CpuSet{} : to_cpu_set(ancestor->cpuset);
}

}  // namespace

BitmapPtr to_bitmap(const CpuSet& cpus) {
  BitmapPtr bitmap = new_bitmap();
  for (unsigned cpu : cpus) check_hwloc(hwloc_bitmap_set(bitmap.get(), cpu), "hwloc_bitmap_set");
  return bitmap;
}

CpuSet to_cpu_set(hwloc_const_bitmap_t bitmap) {
  CpuSet cpus;
  for (int cpu = hwloc_bitmap_first(bitmap); cpu >= 0; cpu = hwloc_bitmap_next(bitmap, cpu)) {
    cpus.push_back(static_cast<unsigned>(cpu));
  }
  return cpus;
}

Topology Topology::this_machine(bool with_io_devices) {
  return Topology(load("this machine", [](hwloc_topology_t) { return 0; }, with_io_devices));
}

Topology Topology::from_xml(const std::string& path, bool of_this_machine) {
  return Topology(load(concat("hwloc_topology_set_xml(", path, ")"), [&](hwloc_topology_t topology) {
    if (of_this_machine && hwloc_topology_set_flags(topology, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM) != 0) return -1;
    return hwloc_topology_set_xml(topology, path.c_str());
  }));
}

Topology Topology::from_synthetic(const std::string& description) {
  return Topology(load(concat("hwloc_topology_set_synthetic(\"", description, "\")"), [&](hwloc_topology_t topology) {
    return hwloc_topology_set_synthetic(topology, description.c_str());
  }));
}

Topology::Topology(Topology&& other) noexcept : topology_(other.topology_) { other.topology_ = nullptr; }

Topology& Topology::operator=(Topology&& other) noexcept {
  std::swap(topology_, other.topology_);
  return *this;
}

Topology::~Topology() {
  if (topology_ != nullptr) hwloc_topology_destroy(topology_);
}

bool Topology::is_this_system() const { return hwloc_topology_is_thissystem(topology_) != 0; }

CpuSet Topology::allowed_cpus() const { return to_cpu_set(hwloc_topology_get_allowed_cpuset(topology_)); }

Machine Topology::machine() const {
  const CpuSet allowed = allowed_cpus();
  // Without core information (some VMs) every hardware thread counts as a core.
  const hwloc_obj_type_t unit = hwloc_get_nbobjs_by_type(topology_, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  Machine machine;
  const int count = hwloc_get_nbobjs_by_type(topology_, unit);
  for (int i = 0; i < count; ++i) {
    hwloc_obj_t object = hwloc_get_obj_by_type(topology_, unit, static_cast<unsigned>(i));
    Core core;
    for (unsigned cpu : to_cpu_set(object->cpuset)) {
      if (contains_all(allowed, {cpu})) core.cpus.push_back(cpu);
    }
    if (core.cpus.empty()) continue;
    hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topology_, HWLOC_OBJ_PACKAGE, object);
    core.package = package == nullptr ? 0 : static_cast<int>(package->logical_index);
    machine.cores.push_back(std::move(core));
  }
  return machine;
}

CpuSet Topology::osdev_locality(const std::string& name) const {
  for (hwloc_obj_t osdev = hwloc_get_next_osdev(topology_, nullptr); osdev != nullptr;
       osdev = hwloc_get_next_osdev(topology_, osdev)) {
    if (osdev->name != nullptr && name == osdev->name) return non_io_ancestor_cpus(topology_, osdev);
  }
  return {};
}

CpuSet Topology::pci_locality(const PciAddress& pci) const {
  return non_io_ancestor_cpus(topology_,
                              hwloc_get_pcidev_by_busid(topology_, pci.domain, pci.bus, pci.device, pci.function));
}

void Topology::bind_process(const CpuSet& cpus) const {
  BitmapPtr wanted = to_bitmap(cpus);
  check_hwloc(hwloc_set_cpubind(topology_, wanted.get(), HWLOC_CPUBIND_PROCESS),
              concat("hwloc_set_cpubind(", format_cpu_list(cpus), ", process)"));
  const CpuSet applied = process_binding();
  if (applied != cpus) {
    fail(Status::internal, "hwloc: bound the process to CPUs ", format_cpu_list(cpus), " but hwloc_get_cpubind reads ",
         format_cpu_list(applied));
  }
}

CpuSet Topology::process_binding() const {
  BitmapPtr bound = new_bitmap();
  check_hwloc(hwloc_get_cpubind(topology_, bound.get(), HWLOC_CPUBIND_PROCESS), "hwloc_get_cpubind(process)");
  return to_cpu_set(bound.get());
}

}  // namespace chorus::topology
