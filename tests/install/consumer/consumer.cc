// Links against an installed chorus and runs a 1-rank allreduce. Built with
// no C++ standard of its own: std::span in chorus.hpp needs the C++20 that
// find_package's target and chorus.pc give.
#include <chorus/chorus.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  auto comm = chorus::Communicator::init();
  std::vector<double> values(3, 21);
  comm.allreduce(std::span<double>(values), chorus::ReduceOp::sum);
  const char* version = chorus_version(nullptr, nullptr, nullptr);
  std::printf("consumer_cxx: rank %d of %d, value %g, chorus %s\n", comm.rank(), comm.size(), values[0], version);
  return values[0] == 21 && std::strcmp(version, CHORUS_VERSION_STRING) == 0 ? 0 : 1;
}
