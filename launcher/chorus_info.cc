// chorus_info: what chorus would do here (as ompi_info/ucx_info): version,
// transports (and the libfabric providers and verbs devices present), every
// CHORUS_* setting's effective value and source, the algorithms and the
// selection table; validates the environment as Communicator::init() does.
#include "bootstrap/pmix_client.hpp"
#include "collectives/collectives.hpp"
#include "common/config.hpp"
#include "transports/shm/shm_transport.hpp"
#include "transports/tcp/tcp_transport.hpp"
#include "transports/verbs/verbs_settings.hpp"

#include <chorus/chorus.hpp>

#ifdef CHORUS_HAVE_OFI
#include <rdma/fabric.h>

#include "transports/ofi/ofi_info.hpp"
#include "transports/ofi/ofi_library.hpp"
#endif

#ifdef CHORUS_HAVE_VERBS
#include "transports/verbs/verbs_device.hpp"
#endif

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace {

// The libfabric providers present here.
struct OfiScan {
  std::vector<std::string> lines;  // "tcp;ofi_rxm (domain lo)", once each
  std::string error;
};

OfiScan scan_ofi() {
  OfiScan scan;
#ifdef CHORUS_HAVE_OFI
  namespace library = chorus::transport::ofi::library;
  try {
    fi_info* hints = library::dupinfo(nullptr);
    if (hints == nullptr) {
      scan.error = "fi_allocinfo failed";
      return scan;
    }
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_RMA;
    fi_info* list = nullptr;
    int ret = library::getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &list);
    if (ret != 0) {
      scan.error = std::string("fi_getinfo: ") + library::strerror(-ret);
    } else {
      std::set<std::string> seen;
      for (fi_info* info = list; info != nullptr; info = info->next) {
        std::string line = std::string(info->fabric_attr->prov_name) + " (domain " + info->domain_attr->name + ")";
        if (seen.insert(line).second) scan.lines.push_back(line);
      }
      library::freeinfo(list);
    }
    library::freeinfo(hints);
  } catch (const chorus::Error& e) {
    scan.error = e.what();  // libfabric cannot be opened
  }
#endif
  return scan;
}

void print_transports([[maybe_unused]] const OfiScan& ofi) {
  std::printf("Transports:\n");
  std::string why_not;
  if (chorus::transport::shm_cross_memory_attach_allowed(&why_not)) {
    std::printf("  shm      built (native shared memory for ranks of one host; auto's choice there)\n");
  } else {
    std::printf("  shm      built, but not usable here: %s\n", why_not.c_str());
  }
  // The choice a multi-host job would make here (with CHORUS_TCP_IFACE and the store address of this environment).
  std::string tcp_choice;
  try {
    tcp_choice = chorus::transport::describe_tcp_choice(chorus::config::get("CHORUS_TCP_IFACE").value_or(""), false);
  } catch (const std::exception&) {
    tcp_choice = "the address that reaches the store (CHORUS_STORE_ADDR, set by chorusrun; none here)";
  }
  std::printf("  tcp      built (chorus' own sockets transport; auto's choice across hosts without an active RDMA\n"
              "           port unless CHORUS_OFI_PROVIDER is set); ranks on several hosts listen on\n"
              "           %s\n",
              tcp_choice.c_str());
#ifdef CHORUS_HAVE_OFI
  if (ofi.error.empty()) {
    const uint32_t version = chorus::transport::ofi::library::version();
    std::printf("  ofi      built (libfabric %u.%u); providers offering FI_EP_RDM with FI_RMA here:\n", FI_MAJOR(version),
                FI_MINOR(version));
  } else {
    std::printf("  ofi      built; providers offering FI_EP_RDM with FI_RMA here:\n");
  }
  if (!ofi.error.empty()) std::printf("           none (%s)\n", ofi.error.c_str());
  for (const std::string& line : ofi.lines) std::printf("           %s\n", line.c_str());
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

// How the ranks of a job started here would find each other (CHORUS_BOOTSTRAP).
void print_bootstrap() {
  std::printf("\nBootstrap:\n");
  if (chorus::bootstrap::pmix_built()) {
    std::printf("  pmix     built (%s; srun --mpi=pmix, Open MPI's mpirun, prterun)\n",
                chorus::bootstrap::pmix_description().c_str());
  } else {
    std::printf("  pmix     not built (libpmix-dev was not found at configure time, or -DCHORUS_PMIX=OFF)\n");
  }
  std::printf("  store    built (chorus' TCP store: chorusrun's, or rank 0's under mpirun, srun, torchrun)\n");
  try {
    const std::string setting = chorus::config::get("CHORUS_BOOTSTRAP").value_or("auto");
    const chorus::bootstrap::BootstrapChoice choice = chorus::bootstrap::choose_bootstrap(setting);
    std::printf("  here:    bootstrap %s (%s)\n", choice.kind.c_str(), choice.why.c_str());
  } catch (const std::exception& e) {
    std::printf("  here:    none: %s\n", e.what());  // validate_environment reports it as an error
  }
}

// What a variable is now: the environment's value, or the default.
struct Effective {
  std::string value;
  const char* source;
};

Effective effective(const char* name, const char* default_value) {
  if (auto value = chorus::config::get(name)) return {*value, "environment"};
  return {default_value, std::strcmp(default_value, "unset") == 0 ? "not set" : "default"};
}

void print_variable(const char* name, const char* default_value, const char* meaning) {
  const Effective now = effective(name, default_value);
  std::printf("  %-26s %-18s %-13s %s\n", name, now.value.c_str(), ("[" + std::string(now.source) + "]").c_str(),
              meaning);
}

void print_variables(bool with_test_hooks) {
  using chorus::config::VariableKind;
  std::printf("\nSettings (effective value, [where it comes from], meaning):\n");
  for (const auto& variable : chorus::config::variables()) {
    if (chorus::config::kind_of(variable) != VariableKind::user) continue;
    if (std::string_view(variable.name).starts_with("CHORUS_ALGO_")) {
      for (int i = 0; i < chorus::kNumCollectives; ++i) {
        const std::string name = chorus::config::algorithm_variable(static_cast<chorus::Collective>(i));
        print_variable(name.c_str(), variable.default_value, variable.meaning);
      }
      continue;
    }
    print_variable(variable.name, variable.default_value, variable.meaning);
  }
  for (const auto& table : chorus::config::registered_tables()) {
    std::printf(" %s:\n", table.heading);
    for (const auto& variable : table.variables) {
      if (chorus::config::kind_of(variable) == VariableKind::user) {
        print_variable(variable.name, variable.default_value, variable.meaning);
      }
    }
  }
  std::printf("\nSet by the launcher (chorusrun sets them; mpirun, srun and torchrun have their own):\n");
  for (const auto& variable : chorus::config::variables()) {
    if (chorus::config::kind_of(variable) == VariableKind::launcher) {
      print_variable(variable.name, "unset", variable.meaning);
    }
  }
  if (!with_test_hooks) return;
  std::printf("\nTest hooks (chorus' own tests only; never set them in production):\n");
  for (const auto& variable : chorus::config::variables()) {
    if (chorus::config::kind_of(variable) == VariableKind::test_hook) {
      print_variable(variable.name, variable.default_value, variable.meaning);
    }
  }
  for (const auto& table : chorus::config::registered_tables()) {
    for (const auto& variable : table.variables) {
      if (chorus::config::kind_of(variable) == VariableKind::test_hook) {
        print_variable(variable.name, variable.default_value, variable.meaning);
      }
    }
  }
}

void print_algorithms() {
  std::printf("\nAlgorithms (force one with CHORUS_ALGO_<OP>=name):\n");
  for (int i = 0; i < chorus::kNumCollectives; ++i) {
    auto op = static_cast<chorus::Collective>(i);
    std::string names;
    for (const auto* algorithm : chorus::coll::algorithms(op)) names += " " + std::string(algorithm->name);
    std::printf("  %-15s%s\n", std::string(chorus::to_string(op)).c_str(), names.c_str());
  }
  std::printf("\nSelection table:\n"
              "  (first: where every rank of the communicator shares memory (shm), allreduce, broadcast,\n"
              "  reduce and barrier of up to CHORUS_BOARD_BYTES run on the board; where the ranks span hosts\n"
              "  and some host has several, allreduce, broadcast, reduce, barrier, allgather and\n"
              "  reduce_scatter run hierarchical (allreduce from 256K: multi_leader, where every host has\n"
              "  two ranks or more), which uses this table inside each host and among the hosts' leaders;\n"
              "  docs/algorithms.md)\n");
  try {
    std::printf("%s", chorus::coll::describe_selection_table().c_str());
  } catch (const std::exception& e) {  // a malformed CHORUS_SELECT_RULES: reported with the errors
    std::printf("  (not shown: CHORUS_SELECT_RULES is invalid)\n");
  }
}

// Checks the environment as Communicator::init() would, without joining a
// job: every setting's value, every CHORUS_ALGO_<OP>, and names chorus does
// not know. Returns the errors (each stops init); typos are warnings.
std::vector<std::string> validate_environment(std::vector<std::string>& warnings) {
  std::vector<std::string> errors;
  try {
    chorus::config::Settings::from_env();
  } catch (const std::exception& e) {
    errors.push_back(e.what());
  }
  for (int i = 0; i < chorus::kNumCollectives; ++i) {
    const auto op = static_cast<chorus::Collective>(i);
    const std::string name = chorus::config::algorithm_variable(op);
    const auto value = chorus::config::get(name.c_str());
    if (!value || *value == "auto" || chorus::coll::find(op, *value) != nullptr) continue;
    std::string choices;
    for (const auto* algorithm : chorus::coll::algorithms(op)) choices += std::string(algorithm->name) + ", ";
    errors.push_back(name + "=\"" + *value + "\": expected one of " + choices + "auto");
  }
  try {
    chorus::coll::selection_rules();  // CHORUS_SELECT_RULES, parsed as init parses it
  } catch (const std::exception& e) {
    errors.push_back(e.what());
  }
  if (const auto setting = chorus::config::get("CHORUS_BOOTSTRAP")) {
    try {
      chorus::bootstrap::choose_bootstrap(*setting);  // the check init makes (pmix where it cannot work)
    } catch (const std::exception& e) {
      errors.push_back(e.what());
    }
  }
  if (const auto provider = chorus::config::get("CHORUS_OFI_PROVIDER")) {
#ifdef CHORUS_HAVE_OFI
    try {
      chorus::transport::ofi::choose_provider(*provider, true);  // the check init makes
    } catch (const std::exception& e) {
      errors.push_back(e.what());
    }
#else
    errors.push_back("CHORUS_OFI_PROVIDER=\"" + *provider + "\": this build has no libfabric transport");
#endif
  }
  for (const auto& unknown : chorus::config::unknown_variables()) warnings.push_back(chorus::config::describe(unknown));
  return errors;
}

}  // namespace

const char* const kUsage =
    "Usage: chorus_info [--all] [--version] [-h|--help]\n\n"
    "Prints what chorus would do in this environment, as ompi_info and ucx_info do:\n"
    "the version, the transports this build has and the libfabric providers and\n"
    "verbs devices present here, the bootstrap (PMIx or chorus' store) a job\n"
    "started here would use, every CHORUS_* setting with its effective value\n"
    "and whether it comes from the environment or is the default, the launcher's\n"
    "variables, the algorithms and the table that picks one by size.\n\n"
    "It checks the environment as Communicator::init() does: an invalid value\n"
    "(e.g. CHORUS_TRANSPORT=foo) is printed as an error and the exit status is 1;\n"
    "an unknown CHORUS_* name (e.g. CHORUS_TIMOUT) is a warning naming the closest\n"
    "known one.\n\n"
    "  --all       also list the test hooks (CHORUS_TEST_*)\n"
    "  --version   print \"chorus_info (chorus) VERSION\" and exit\n"
    "  -h, --help  this text\n";

int main(int argc, char** argv) {
  bool with_test_hooks = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (std::strcmp(argv[i], "--version") == 0) {
      std::printf("chorus_info (chorus) %s\n", CHORUS_VERSION_STRING);
      return 0;
    }
    if (std::strcmp(argv[i], "--all") == 0) {
      with_test_hooks = true;
      continue;
    }
    std::fprintf(stderr, "chorus_info: unknown argument \"%s\" (try --help)\n", argv[i]);
    return 2;
  }
  std::vector<std::string> warnings;
  const OfiScan ofi = scan_ofi();
  const std::vector<std::string> errors = validate_environment(warnings);
  std::printf("chorus %s\n\n", CHORUS_VERSION_STRING);
  print_transports(ofi);
  print_bootstrap();
  print_variables(with_test_hooks);
  print_algorithms();
  for (const auto& warning : warnings) std::fprintf(stderr, "chorus_info: warning: %s\n", warning.c_str());
  for (const auto& error : errors) std::fprintf(stderr, "chorus_info: error: %s\n", error.c_str());
  if (!errors.empty()) {
    std::fprintf(stderr, "chorus_info: the environment is invalid: Communicator::init() would fail with "
                         "CHORUS_ERR_CONFIG\n");
    return 1;
  }
  return 0;
}
