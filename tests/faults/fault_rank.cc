// chorus-fault: a rank of a fault test. Every rank runs collectives in a
// loop; the victim kills or stops itself after some iterations (or, with
// CHORUS_TEST_VERBS_QP_ERROR, the transport breaks a QP). A survivor must get
// a chorus::Error naming the failed peer: it prints one line and exits 42 if
// the error names the peer, 43 if it names someone else; 44 means the loop
// ended without any error (the fault went unnoticed).
#include <chorus/chorus.hpp>

#include <chrono>
#include <csignal>
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
  std::string how = "kill";     // kill, stop, none (the fault comes from elsewhere)
  std::string op = "allreduce"; // allreduce, broadcast, barrier
  size_t bytes = 1 << 20;
  int iterations = 1000000;
};

void usage(FILE* out) {
  std::fprintf(out,
               "Usage: chorusrun -n N chorus-fault [options]\n\n"
               "Runs a collective in a loop; the victim rank fails on purpose; the others\n"
               "must report an error naming it.\n"
               "  --victim R       rank that fails (default 1); \"other\" in a 2-rank job:\n"
               "                   each rank expects the other to be named (a broken link)\n"
               "  --after K        iterations before it fails (default 20)\n"
               "  --how H          kill (SIGKILL itself), stop (SIGSTOP itself) or none\n"
               "                   (another mechanism injects the fault; default kill)\n"
               "  --op OP          allreduce, broadcast or barrier (default allreduce)\n"
               "  --bytes B        message size in bytes (default 1048576)\n"
               "  --iterations I   upper bound on iterations (default 1000000)\n"
               "Exit status of a survivor: 42 error names the victim, 43 error names\n"
               "someone else, 44 no error at all; 2 usage error.\n");
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      std::exit(0);
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
    else if (arg == "--bytes" && numeric) o.bytes = static_cast<size_t>(number);
    else if (arg == "--iterations" && numeric) o.iterations = static_cast<int>(number);
    else if (arg == "--how" && (value == "kill" || value == "stop" || value == "none")) o.how = value;
    else if (arg == "--op" && (value == "allreduce" || value == "broadcast" || value == "barrier")) o.op = value;
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
  auto comm = chorus::Communicator::init();
  const int rank = comm.rank();
  if (o.victim == -1 && comm.size() == 2) o.victim = 1 - rank;
  if (o.victim < 0 || o.victim >= comm.size()) {
    std::fprintf(stderr, "chorus-fault: --victim %d is not a rank of this %d-rank job\n", o.victim, comm.size());
    return 2;
  }
  std::vector<int32_t> data(o.bytes / sizeof(int32_t) + 1, 1);
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  try {
    for (; done < o.iterations; ++done) {
      if (rank == o.victim && done == o.after) {
        std::printf("rank %d: failing now (%s)\n", rank, o.how.c_str());
        std::fflush(stdout);
        if (o.how == "kill") std::raise(SIGKILL);
        if (o.how == "stop") std::raise(SIGSTOP);
      }
      if (o.op == "allreduce") {
        std::fill(data.begin(), data.end(), 1);
        comm.allreduce(data.data(), data.data(), data.size(), chorus::ReduceOp::sum);
        if (data.front() != comm.size() || data.back() != comm.size()) {
          std::printf("rank %d: WRONG RESULT %d at iteration %d\n", rank, data.front(), done);
          return 45;
        }
      } else if (o.op == "broadcast") {
        comm.broadcast(std::span<int32_t>(data), done % comm.size());
      } else {
        comm.barrier();
      }
    }
  } catch (const chorus::Error& e) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string text = e.what();
    const bool names_victim = e.peer() == o.victim || text.find("rank " + std::to_string(o.victim)) != std::string::npos;
    std::printf("rank %d: error after %d iterations, %.2f s: %s the failed peer (peer %d): %s\n", rank, done, seconds,
                names_victim ? "names" : "DOES NOT NAME", e.peer(), text.c_str());
    std::fflush(stdout);
    return names_victim ? 42 : 43;
  }
  std::printf("rank %d: no error after %d iterations\n", rank, done);
  return 44;
}
