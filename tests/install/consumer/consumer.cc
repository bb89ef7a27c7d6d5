// Links against an installed chorus and runs a 1-rank allreduce.
#include <chorus/chorus.hpp>

#include <cstdio>

int main() {
  auto comm = chorus::Communicator::init();
  double value = 21;
  comm.allreduce(&value, &value, 1, chorus::ReduceOp::sum);
  std::printf("consumer_cmake: rank %d of %d, value %g\n", comm.rank(), comm.size(), value);
  return value == 21 ? 0 : 1;
}
