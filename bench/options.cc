#include "options.hpp"

#include "common/config.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <utility>

namespace bench {

namespace {

template <class T>
T pick(const std::string& option, const std::string& text, const std::vector<std::pair<std::string, T>>& choices) {
  std::string names;
  for (const auto& [name, value] : choices) {
    if (name == text) return value;
    names += (names.empty() ? "" : ", ") + name;
  }
  throw UsageError(option + " \"" + text + "\": expected one of " + names);
}

const std::vector<std::pair<std::string, chorus::Collective>>& collective_names() {
  static const std::vector<std::pair<std::string, chorus::Collective>> names = {
      {"allreduce", chorus::Collective::allreduce}, {"broadcast", chorus::Collective::broadcast},
      {"barrier", chorus::Collective::barrier},     {"reduce", chorus::Collective::reduce},
      {"allgather", chorus::Collective::allgather}, {"reduce_scatter", chorus::Collective::reduce_scatter},
      {"alltoall", chorus::Collective::alltoall},   {"gather", chorus::Collective::gather},
      {"gatherv", chorus::Collective::gatherv},     {"scatter", chorus::Collective::scatter},
      {"scatterv", chorus::Collective::scatterv},   {"allgatherv", chorus::Collective::allgatherv},
      {"alltoallv", chorus::Collective::alltoallv}, {"scan", chorus::Collective::scan},
      {"exscan", chorus::Collective::exscan}};
  return names;
}

std::vector<chorus::Collective> parse_ops(const std::string& text) {
  if (text == "all") {
    std::vector<chorus::Collective> all;
    for (const auto& entry : collective_names()) all.push_back(entry.second);
    return all;
  }
  std::vector<chorus::Collective> ops;
  std::stringstream list(text);
  std::string name;
  auto names = collective_names();
  names.emplace_back("all", chorus::Collective::allreduce);  // listed in the message only
  while (std::getline(list, name, ',')) {
    if (name == "all") throw UsageError("--op \"all\" cannot be combined with other names");
    ops.push_back(pick("--op", name, collective_names()));
  }
  if (ops.empty()) throw UsageError("--op \"\": expected a collective name or a comma-separated list");
  return ops;
}

chorus::DataType parse_dtype(const std::string& text) {
  std::vector<std::pair<std::string, chorus::DataType>> choices;
  for (int i = 0; i < chorus::kNumDataTypes; ++i) {
    auto dtype = static_cast<chorus::DataType>(i);
    choices.emplace_back(std::string(chorus::to_string(dtype)), dtype);
  }
  return pick("--dtype", text, choices);
}

size_t parse_size(const std::string& option, const std::string& text) {
  auto value = chorus::config::parse_bytes(text);
  if (!value || *value > (size_t{1} << 40)) {
    throw UsageError(option + " \"" + text + "\": expected a byte count like 0, 8, 64K, 4M or 1G (at most 1T)");
  }
  return static_cast<size_t>(*value);
}

int parse_int(const std::string& option, const std::string& text, int min, int max) {
  auto value = chorus::config::parse_int(text, min, max);
  if (!value) {
    throw UsageError(option + " \"" + text + "\": expected a whole number from " + std::to_string(min) + " to " +
                     std::to_string(max));
  }
  return static_cast<int>(*value);
}

}  // namespace

const char* usage_text() {
  return R"(Usage: chorusrun -n N chorus-bench [options]

Times chorus collectives over a range of sizes, as nccl-tests does, and
prints per size: bytes moved, elements, the algorithm used, time (mean over
the timed iterations, slowest rank), algbw = bytes / time and busbw = algbw
x the nccl-tests factor (allreduce 2(n-1)/n; allgather, reduce_scatter,
alltoall and gather..alltoallv (n-1)/n; broadcast, reduce, scan, exscan 1),
comparable to the link bandwidth.
See docs/benchmarking.md.

Per size: --warmup untimed calls, then --iters timed calls back to back as
one batch (all ranks start it after a barrier; time = batch / iters), then,
with --check, separate untimed calls whose every element is verified. The
verification never delays a timed call.

Options (nccl-tests' short and long spellings are accepted too):
  --op LIST             allreduce, broadcast, barrier, reduce, allgather,
                        reduce_scatter, alltoall, gather, gatherv, scatter,
                        scatterv, allgatherv, alltoallv, scan, exscan, a
                        comma-separated list, or all (default allreduce)
  --algo NAME           an algorithm of the op (chorus_info lists them), auto
                        (the selection table, default) or all (one table each;
                        hierarchical and multi_leader only where the ranks
                        span hosts with several on some)
  -d, --dtype T         int8 uint8 int16 uint16 int32 uint32 int64 uint64
                        float16 bfloat16 float32 float64 (default float32)
  -o, --redop OP        sum, prod, min or max for reductions (default sum)
  -b, --min-bytes B     smallest size (default 8; K/M/G suffixes; 0 allowed)
  -e, --max-bytes B     largest size (default 64M)
  -f, --step-factor F   multiply the size by F each row (default 2; > 1)
  -n, --iters N         timed iterations per size (default 20)
  -w, --warmup N        untimed iterations first (default 5)
  -c, --check [N]       after the timed iterations, N more (default 1) whose
                        every element is verified (inputs reset before each);
                        exit 1 if anything is wrong. -c 0: no check
  --in-place            run in place (send and receive in one buffer)
  -r, --root R          root of broadcast and reduce (default 0)
  --sync                an untimed barrier before every timed call, each call
                        timed alone; the time is the median over the calls
                        of the slowest rank's time (OSU's method, what
                        bench/compare-openmpi uses); default: one batch
  --roofline            time memcpy on every rank at once and on one rank
                        alone (64 MiB for the header, then each row's size)
                        and give every row two more columns: limit(us), the
                        time the copies the algorithm must make take at the
                        row's rates, and %limit = limit / time (100: at the
                        machine's memory limit; "-" where the model lacks
                        the algorithm). CSV: also op_limit_us, the least
                        over the op's modelled algorithms
  --stats               two more columns: the payload bytes one timed call
                        sent to other hosts' ranks (the network, with the
                        hybrid transport), and received from them, summed
                        over each host's ranks, the busiest host's
                        (Communicator::traffic(); docs/transport-hybrid.md)
  --csv                 comma-separated output
  -h, --help            this text

Sizes: for allgather, reduce_scatter and alltoall the size is the whole
gathered/scattered buffer (nccl-tests' convention), so each rank contributes
size/n bytes; a size that does not divide into whole elements per rank is
rounded down, and the row shows the bytes actually moved (3 ranks, float32:
a requested 16 B allgather moves 12 B).
)";
}

namespace {

// nccl-tests spellings, mapped to chorus-bench's.
std::string canonical_option(const std::string& arg) {
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"-b", "--min-bytes"},   {"--minbytes", "--min-bytes"},   {"-e", "--max-bytes"},
      {"--maxbytes", "--max-bytes"}, {"-f", "--step-factor"}, {"--stepfactor", "--step-factor"},
      {"-n", "--iters"},       {"-w", "--warmup"},              {"--warmup_iters", "--warmup"},
      {"-c", "--check"},       {"-d", "--dtype"},               {"--datatype", "--dtype"},
      {"-o", "--redop"},       {"-r", "--root"}};
  for (const auto& [alias, name] : aliases) {
    if (arg == alias) return name;
  }
  return arg;
}

bool is_number(const char* text) {
  if (*text == '\0') return false;
  for (; *text != '\0'; ++text) {
    if (*text < '0' || *text > '9') return false;
  }
  return true;
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> attached;  // --name=value, -b8
    if (arg.starts_with("--") && arg.find('=') != std::string::npos) {
      attached = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
    } else if (arg.size() > 2 && arg[0] == '-' && arg[1] != '-' && canonical_option(arg.substr(0, 2)) != arg.substr(0, 2)) {
      attached = arg.substr(2);
      arg = arg.substr(0, 2);
    }
    const std::string spelled = arg;
    arg = canonical_option(arg);
    auto value = [&]() -> std::string {
      if (attached) return *std::exchange(attached, std::nullopt);
      if (i + 1 >= argc) throw UsageError(spelled + " needs a value");
      return argv[++i];
    };
    if (arg == "--op") {
      options.ops = parse_ops(value());
    } else if (arg == "--algo") {
      options.algorithm = value();
    } else if (arg == "--dtype") {
      options.dtype = parse_dtype(value());
    } else if (arg == "--redop") {
      options.redop = pick<chorus::ReduceOp>("--redop", value(), {{"sum", chorus::ReduceOp::sum},
                                                                  {"prod", chorus::ReduceOp::prod},
                                                                  {"min", chorus::ReduceOp::min},
                                                                  {"max", chorus::ReduceOp::max}});
    } else if (arg == "--min-bytes") {
      options.min_bytes = parse_size(spelled, value());
    } else if (arg == "--max-bytes") {
      options.max_bytes = parse_size(spelled, value());
    } else if (arg == "--step-factor") {
      std::string text = value();
      char* end = nullptr;
      options.step_factor = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || !(options.step_factor > 1.0) ||
          !std::isfinite(options.step_factor)) {
        throw UsageError(spelled + " \"" + text + "\": expected a number greater than 1, e.g. 2");
      }
    } else if (arg == "--iters") {
      options.iters = parse_int(spelled, value(), 1, 1000000);
    } else if (arg == "--warmup") {
      options.warmup = parse_int(spelled, value(), 0, 1000000);
    } else if (arg == "--check") {
      // -c takes a count (nccl-tests); --check alone means one iteration.
      if (attached || spelled == "-c" || (i + 1 < argc && is_number(argv[i + 1]))) {
        options.check_iters = parse_int(spelled, value(), 0, 1000000);
      } else {
        options.check_iters = 1;
      }
    } else if (arg == "--in-place") {
      options.in_place = true;
    } else if (arg == "--root") {
      options.root = parse_int(spelled, value(), 0, 1 << 20);
    } else if (arg == "--stats") {
      options.stats = true;
    } else if (arg == "--csv") {
      options.csv = true;
    } else if (arg == "--sync") {
      options.sync = true;
    } else if (arg == "--roofline") {
      options.roofline = true;
    } else if (arg == "--inject-error-for-test") {
      options.inject_error_for_test = true;
    } else if (arg == "--check-delay-for-test") {
      options.check_delay_ms_for_test = parse_int(spelled, value(), 0, 60000);
    } else if (arg == "--delay-one-call-for-test") {
      options.delay_one_call_ms_for_test = parse_int(spelled, value(), 0, 60000);
    } else if (arg == "-h" || arg == "--help") {
      options.help = true;
      return options;
    } else {
      throw UsageError("unknown option \"" + spelled + "\"");
    }
    if (attached) throw UsageError(spelled + "=" + *attached + ": " + spelled + " takes no value");
  }
  if (options.min_bytes > options.max_bytes) {
    throw UsageError("--min-bytes " + std::to_string(options.min_bytes) + " is larger than --max-bytes " +
                     std::to_string(options.max_bytes));
  }
  return options;
}

}  // namespace bench
