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
  int check_iters = 0;  // untimed verification iterations after the timed ones (--check, -c N)
  bool in_place = false;
  int root = 0;
  bool csv = false;
  bool stats = false;  // network bytes per call per host (--stats)
  bool sync = false;  // untimed barrier before every timed call, each call timed alone
  bool roofline = false;  // measure the copy rate and give every row its memory limit (--roofline)
  bool help = false;
  bool inject_error_for_test = false;  // hidden: corrupts one element to test --check
  int check_delay_ms_for_test = 0;     // hidden: the last rank's check takes this long (a slow verification)
  int delay_one_call_ms_for_test = 0;  // hidden: --sync, the last rank's first timed call takes this much longer
  bool check() const { return check_iters > 0; }
};

Options parse_options(int argc, char** argv);
const char* usage_text();

}  // namespace bench
