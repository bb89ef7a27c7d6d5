// chorus-bench command line.
#pragma once

#include <chorus/chorus.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::vector<chorus::Collective> ops{chorus::Collective::allreduce};
  std::string algorithm = "auto";  // a name, "auto" or "all"
  chorus::DataType dtype = chorus::DataType::float32;
  chorus::ReduceOp redop = chorus::ReduceOp::sum;
  size_t min_bytes = 8;
  size_t max_bytes = 64 << 20;
  double step_factor = 2;
  int iters = 20;
  int warmup = 5;
  bool check = false;
  bool in_place = false;
  int root = 0;
  bool csv = false;
  bool sync = false;  // untimed barrier before every timed call
  bool help = false;
  bool inject_error_for_test = false;  // hidden: corrupts one element to test --check
};

Options parse_options(int argc, char** argv);
const char* usage_text();

}  // namespace bench
