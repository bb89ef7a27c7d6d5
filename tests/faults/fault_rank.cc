// chorus-fault: a rank of a fault test. Every rank runs collectives in a
// loop; the victim kills or stops itself after some iterations (or, with
// CHORUS_TEST_VERBS_QP_ERROR, the transport breaks a QP). A survivor must get
// a chorus::Error naming the failed peer: it prints one line and exits 42 if
// the error names the peer, 43 if it names someone else; 44 means the loop
// ended without any error (the fault went unnoticed).
#include <chorus/chorus.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <optional>
#include <thread>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <span>
#include <vector>

namespace {

struct Options {
  int victim = 1;
  int after = 20;               // iterations before the fault
  int at_ms = -1;               // or: milliseconds after start, from a timer thread (any point of a call)
  bool before_init = false;     // or: before Communicator::init (the others are setting up)
  std::string how = "kill";     // kill, stop, exit0, _exit0, exit3, return, none (the fault comes from elsewhere)
  std::string op = "allreduce"; // allreduce, broadcast, barrier
  size_t bytes = 1 << 20;
  int iterations = 1000000;
  bool nonblocking = false;     // allreduce as 4 outstanding iallreduce, waited in reverse
};

void usage(FILE* out) {
  std::fprintf(out,
               "Usage: chorusrun -n N chorus-fault [options]\n\n"
               "Runs a collective in a loop; the victim rank fails on purpose; the others\n"
               "must report an error naming it.\n"
               "  --victim R       rank that fails (default 1); \"other\" in a 2-rank job:\n"
               "                   each rank expects the other to be named (a broken link)\n"
               "  --after K        iterations before it fails (default 20)\n"
               "  --at-ms T        fail T ms after the loop starts instead, from a timer\n"
               "                   thread, so the fault lands anywhere inside a call\n"
               "  --before-init    fail before calling Communicator::init, while the\n"
               "                   others set up (the rank comes from CHORUS_RANK, or RANK\n"
               "                   under torchrun)\n"
               "  --how H          kill (SIGKILL itself), stop (SIGSTOP itself), exit0\n"
               "                   (std::exit(0): no finalize, the Communicator's destructor\n"
               "                   never runs), _exit0 (_exit(0)), exit3 (std::exit(3)),\n"
               "                   return (return 0 from main: the Communicator is destroyed\n"
               "                   without finalize; with --before-init: init is skipped) or\n"
               "                   none (another mechanism injects the fault; default kill)\n"
               "  --op OP          allreduce, broadcast, barrier, reduce, allgather,\n"
               "                   reduce_scatter or alltoall (default allreduce)\n"
               "  --bytes B        message size in bytes (default 1048576)\n"
               "  --iterations I   upper bound on iterations (default 1000000)\n"
               "  --nonblocking    allreduce as 4 outstanding iallreduce calls on quarters of\n"
               "                   the data, waited for in reverse order (survivors fail in wait)\n"
               "  --label L        ignored; lets a test find its processes with pgrep -f\n"
               "Exit status of a survivor: 42 error names the victim, 43 error names\n"
               "someone else, 44 no error at all; 2 usage error. Lines about the fault\n"
               "start with the wall-clock time (seconds since the epoch).\n");
}

bool is_op(const std::string& name) {
  for (const char* op : {"allreduce", "broadcast", "barrier", "reduce", "allgather", "reduce_scatter", "alltoall"}) {
    if (name == op) return true;
  }
  return false;
}

double wall_seconds() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

void fail_now(int rank, const std::string& how) {
  std::printf("%.3f rank %d: failing now (%s, pid %d)\n", wall_seconds(), rank, how.c_str(), static_cast<int>(getpid()));
  std::fflush(stdout);
  if (how == "kill") std::raise(SIGKILL);
  if (how == "stop") std::raise(SIGSTOP);
  if (how == "exit0") std::exit(0);
  if (how == "_exit0") _exit(0);
  if (how == "exit3") std::exit(3);
}

// One call of `op` over `data` (every rank contributes ones; per-rank blocks
// of `block` elements for the gather/scatter family). False: wrong result.
bool run_once(chorus::Communicator& comm, const std::string& op, std::vector<int32_t>& data, std::vector<int32_t>& out,
              size_t block, int iteration, bool nonblocking) {
  const int size = comm.size();
  if (op == "allreduce" && nonblocking) {
    std::fill(data.begin(), data.end(), 1);
    const size_t quarter = (data.size() + 3) / 4;
    std::vector<chorus::Request> requests;
    for (size_t start = 0; start < data.size(); start += quarter) {
      const size_t count = std::min(quarter, data.size() - start);
      requests.push_back(comm.iallreduce(data.data() + start, data.data() + start, count, chorus::DataType::int32,
                                         chorus::ReduceOp::sum));
    }
    for (auto it = requests.rbegin(); it != requests.rend(); ++it) it->wait();
    return data.front() == size && data.back() == size;
  }
  if (op == "allreduce") {
    std::fill(data.begin(), data.end(), 1);
    comm.allreduce(data.data(), data.data(), data.size(), chorus::ReduceOp::sum);
    return data.front() == size && data.back() == size;
  }
  if (op == "broadcast") {
    comm.broadcast(std::span<int32_t>(data), iteration % size);
    return true;
  }
  if (op == "barrier") {
    comm.barrier();
    return true;
  }
  if (op == "reduce") {
    std::fill(data.begin(), data.end(), 1);
    const int root = iteration % size;
    comm.reduce(data.data(), out.data(), data.size(), chorus::DataType::int32, chorus::ReduceOp::sum, root);
    return comm.rank() != root || (out.front() == size && out[data.size() - 1] == size);
  }
  std::fill(data.begin(), data.end(), 1);
  if (op == "allgather") comm.allgather(data.data(), out.data(), block, chorus::DataType::int32);
  if (op == "reduce_scatter") {
    comm.reduce_scatter(data.data(), out.data(), block, chorus::DataType::int32, chorus::ReduceOp::sum);
    return out.front() == size;
  }
  if (op == "alltoall") comm.alltoall(data.data(), out.data(), block, chorus::DataType::int32);
  return out.front() == 1;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      std::exit(0);
    }
    if (arg == "--before-init") {
      o.before_init = true;
      continue;
    }
    if (arg == "--nonblocking") {
      o.nonblocking = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "chorus-fault: %s needs a value (or is unknown)\n", arg.c_str());
      return false;
    }
    std::string value = argv[++i];
    char* end = nullptr;
    long number = std::strtol(value.c_str(), &end, 10);
    bool numeric = end != value.c_str() && *end == '\0' && number >= 0;
    if (arg == "--victim" && value == "other") o.victim = -1;
    else if (arg == "--victim" && numeric) o.victim = static_cast<int>(number);
    else if (arg == "--after" && numeric) o.after = static_cast<int>(number);
    else if (arg == "--at-ms" && numeric) o.at_ms = static_cast<int>(number);
    else if (arg == "--label") continue;  // only marks the command line
    else if (arg == "--bytes" && numeric) o.bytes = static_cast<size_t>(number);
    else if (arg == "--iterations" && numeric) o.iterations = static_cast<int>(number);
    else if (arg == "--how" && (value == "kill" || value == "stop" || value == "exit0" || value == "_exit0" ||
                                     value == "exit3" || value == "return" || value == "none")) o.how = value;
    else if (arg == "--op" && is_op(value)) o.op = value;
    else {
      std::fprintf(stderr, "chorus-fault: bad option %s \"%s\" (see --help)\n", arg.c_str(), value.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return 2;
  const auto start = std::chrono::steady_clock::now();
  // A rank killed while the others are still setting up must be reported
  // by them too: init fails like a collective would.
  auto report = [&](const chorus::Error& e, int rank, int done) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string text = e.what();
    const bool names_victim = e.peer() == o.victim || text.find("rank " + std::to_string(o.victim)) != std::string::npos;
    std::printf("%.3f rank %d: error after %d iterations, %.2f s: %s the failed peer (peer %d): %s\n", wall_seconds(),
                rank, done, seconds, names_victim ? "names" : "DOES NOT NAME", e.peer(), text.c_str());
    std::fflush(stdout);
    return names_victim ? 42 : 43;
  };
  const char* rank_text = std::getenv("CHORUS_RANK");
  if (rank_text == nullptr) rank_text = std::getenv("RANK");  // torchrun
  const int launched_rank = rank_text != nullptr ? std::atoi(rank_text) : -1;
  if (o.before_init && launched_rank == o.victim) {
    fail_now(launched_rank, o.how);
    if (o.how == "return") return 0;  // the program never calls init
  }
  std::optional<chorus::Communicator> world;
  try {
    world.emplace(chorus::Communicator::init());
  } catch (const chorus::Error& e) {
    return report(e, launched_rank, 0);
  }
  chorus::Communicator& comm = *world;
  const int rank = comm.rank();
  if (o.victim == -1 && comm.size() == 2) o.victim = 1 - rank;
  if (o.victim < 0 || o.victim >= comm.size()) {
    std::fprintf(stderr, "chorus-fault: --victim %d is not a rank of this %d-rank job\n", o.victim, comm.size());
    return 2;
  }
  // The gather/scatter family moves size x block elements.
  const size_t elements = o.bytes / sizeof(int32_t) + 1;
  const size_t block = std::max<size_t>(1, elements / static_cast<size_t>(comm.size()));
  std::vector<int32_t> data(std::max(elements, block * static_cast<size_t>(comm.size())), 1);
  std::vector<int32_t> out(data.size(), 0);
  if (rank == o.victim && o.at_ms >= 0) {
    std::thread([&o, rank] {
      std::this_thread::sleep_for(std::chrono::milliseconds(o.at_ms));
      fail_now(rank, o.how);
    }).detach();
  }
  int done = 0;
  try {
    for (; done < o.iterations; ++done) {
      if (rank == o.victim && o.at_ms < 0 && done == o.after) {
        fail_now(rank, o.how);
        if (o.how == "return") return 0;  // `world` is destroyed on the way out, without finalize
      }
      if (!run_once(comm, o.op, data, out, block, done, o.nonblocking)) {
        std::printf("rank %d: WRONG RESULT at iteration %d of %s\n", rank, done, o.op.c_str());
        return 45;
      }
    }
  } catch (const chorus::Error& e) {
    return report(e, rank, done);
  }
  std::printf("rank %d: no error after %d iterations\n", rank, done);
  return 44;
}
