// chorus_info: prints what this build of chorus offers: version, transports
// (and the libfabric providers present), every CHORUS_* variable, and the
// algorithm selection table.
#include "collectives/collectives.hpp"
#include "common/config.hpp"
#include "transports/shm/shm_transport.hpp"
#include "transports/verbs/verbs_settings.hpp"

#include <chorus/chorus.hpp>

#ifdef CHORUS_HAVE_OFI
#include <rdma/fabric.h>
#endif

#ifdef CHORUS_HAVE_VERBS
#include "transports/verbs/verbs_device.hpp"
#endif

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace {

void print_transports() {
  std::printf("Transports:\n");
  std::string why_not;
  if (chorus::transport::shm_cross_memory_attach_allowed(&why_not)) {
    std::printf("  shm      built (native shared memory for ranks of one host; auto's choice there)\n");
  } else {
    std::printf("  shm      built, but not usable here: %s\n", why_not.c_str());
  }
#ifdef CHORUS_HAVE_OFI
  std::printf("  ofi      built (libfabric %u.%u); providers offering FI_EP_RDM with FI_RMA here:\n",
              FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
  fi_info* hints = fi_allocinfo();
  if (hints == nullptr) {
    std::printf("           (fi_allocinfo failed)\n");
  } else {
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_RMA;
    fi_info* list = nullptr;
    int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &list);
    if (ret != 0) {
      std::printf("           none (fi_getinfo: %s)\n", fi_strerror(-ret));
    } else {
      std::set<std::string> seen;
      for (fi_info* info = list; info != nullptr; info = info->next) {
        std::string line = std::string(info->fabric_attr->prov_name) + " (domain " + info->domain_attr->name + ")";
        if (seen.insert(line).second) std::printf("           %s\n", line.c_str());
      }
      fi_freeinfo(list);
    }
    fi_freeinfo(hints);
  }
#else
  std::printf("  ofi      not built (libfabric-dev was not found at configure time)\n");
#endif
#ifdef CHORUS_HAVE_VERBS
  std::printf("  verbs    built (RC mesh); devices here:\n");
  chorus::transport::verbs::Settings verbs;
  try {
    verbs = chorus::transport::verbs::Settings::from_env();
  } catch (const std::exception& e) {
    std::printf("           (settings rejected: %s)\n", e.what());
  }
  for (const std::string& line : chorus::transport::verbs::describe_devices(verbs)) {
    std::printf("           %s\n", line.c_str());
  }
#else
  std::printf("  verbs    not built (libibverbs-dev/librdmacm-dev were not found at configure time)\n");
#endif
  std::printf("  inproc   built (threads of one process; tests and 1-rank jobs)\n");
}

void print_variables() {
  std::printf("\nEnvironment variables:\n");
  const auto print = [](const std::vector<chorus::config::VariableDoc>& list) {
    for (const auto& variable : list) {
      std::printf("  %-28s default %-20s %s\n", variable.name, variable.default_value, variable.meaning);
    }
  };
  print(chorus::config::variables());
  std::printf(" The verbs transports' (docs/transport-verbs.md):\n");
  print(chorus::transport::verbs::variables());
}

void print_algorithms() {
  std::printf("\nAlgorithms (force one with CHORUS_ALGO_<OP>=name):\n");
  for (int i = 0; i < chorus::kNumCollectives; ++i) {
    auto op = static_cast<chorus::Collective>(i);
    std::string names;
    for (const auto* algorithm : chorus::coll::algorithms(op)) names += " " + std::string(algorithm->name);
    std::printf("  %-15s%s\n", std::string(chorus::to_string(op)).c_str(), names.c_str());
  }
  std::printf("\nSelection table:\n%s", chorus::coll::describe_selection_table().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::printf(
          "Usage: chorus_info [-h|--help]\n\n"
          "Prints the chorus version, the transports this build has and the libfabric\n"
          "providers present on this machine, every CHORUS_* environment variable with\n"
          "its default, and the table that picks a collective algorithm by size.\n");
      return 0;
    }
    std::fprintf(stderr, "chorus_info: unknown argument \"%s\"; it takes only --help\n", argv[i]);
    return 2;
  }
  std::printf("chorus %s\n\n", CHORUS_VERSION);
  print_transports();
  print_variables();
  print_algorithms();
  return 0;
}
