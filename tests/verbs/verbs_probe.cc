// verbs-probe: exits 0 and prints the port chorus would use when an RDMA
// device with an active port is present; otherwise prints why the verbs
// tests are skipped and exits 77 (ctest's SKIP_RETURN_CODE here).
#include "transports/verbs/verbs_device.hpp"

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    std::printf("Usage: verbs-probe\nExit 0 when a verbs device with an active port is usable, 77 otherwise.\n");
    return 0;
  }
  try {
    auto choice = chorus::transport::verbs::choose_port(chorus::transport::verbs::Settings::from_env());
    std::printf("verbs device: %s port %d GID %d %s\n", choice.device.c_str(), choice.port, choice.gid_index,
                chorus::transport::verbs::gid_to_string(choice.gid).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::printf("SKIPPED: no usable RDMA device here (%s). The verbs tests run in the soft-RoCE lab: "
                "ctest -L lab (tests/lab, docs/lab.md)\n", e.what());
    return 77;
  }
}
