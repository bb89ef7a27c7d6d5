// chorus-first-hour: ranks that end the way a new user's program does, for
// the launcher tests of issue 21 (first_hour.sh). Modes:
//   leave-early        the last rank returns from main after 1 allreduce (its
//                      Communicator's destructor finalizes); the others call
//                      3 allreduces. Every rank prints "rank R: error: ..." and
//                      exits 3, or "rank R: completed" and exits 0.
//   finalize-early     the same with an explicit finalize()
//   segfault           rank 1 dereferences a null pointer after init
//   sleep              every rank prints "rank R: ready" and sleeps (Ctrl-C tests)
//   exit-after-init    rank 1 calls _exit(1) at once after init, without
//                      destructors; the others wait in a barrier
//   all-sizes          init, then one allreduce, then finalize (for jobs whose
//                      ranks disagree on the size: they must fail at init)
#include <chorus/chorus.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int allreduces(chorus::Communicator& comm, int calls) {
  std::vector<int32_t> data(1024);
  for (int call = 0; call < calls; ++call) {
    for (auto& value : data) value = comm.rank() + 1;
    comm.allreduce(data.data(), data.data(), data.size(), chorus::DataType::int32, chorus::ReduceOp::sum);
    const int32_t expected = comm.size() * (comm.size() + 1) / 2;
    if (data.front() != expected || data.back() != expected) {
      std::printf("rank %d: WRONG RESULT %d (expected %d)\n", comm.rank(), data.front(), expected);
      return 5;
    }
  }
  return 0;
}

int run(const std::string& mode) {
  auto comm = chorus::Communicator::init();
  const int rank = comm.rank();
  const bool last = rank == comm.size() - 1;
  if (mode == "leave-early" || mode == "finalize-early") {
    if (last) {
      int status = allreduces(comm, 1);
      if (mode == "finalize-early") comm.finalize();
      std::printf("rank %d: leaving early\n", rank);
      std::fflush(stdout);
      return status;  // the destructor finalizes (leave-early)
    }
    if (int status = allreduces(comm, 3); status != 0) return status;
  } else if (mode == "segfault") {
    if (rank == 1) {
      // A store to a page with no access: a real SIGSEGV from the kernel
      // (a null store would be UBSan's to report in sanitized builds).
      void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (page == MAP_FAILED) return 5;
      *static_cast<volatile int*>(page) = 1;
    }
    comm.barrier();
  } else if (mode == "sleep") {
    std::printf("rank %d: ready\n", rank);
    std::fflush(stdout);
    for (int i = 0; i < 600; ++i) usleep(100000);
  } else if (mode == "exit-after-init") {
    if (rank == 1) _exit(1);
    comm.barrier();
  } else if (mode == "all-sizes") {
    if (int status = allreduces(comm, 1); status != 0) return status;
  } else {
    std::fprintf(stderr, "unknown mode \"%s\"; see the comment at the top of first_hour_rank.cc\n", mode.c_str());
    return 2;
  }
  comm.finalize();
  std::printf("rank %d: completed\n", rank);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    std::printf("usage: chorus-first-hour MODE (leave-early, finalize-early, segfault, sleep, exit-after-init, "
                "all-sizes)\n");
    return argc < 2 ? 2 : 0;
  }
  try {
    return run(argv[1]);
  } catch (const chorus::Error& e) {
    const char* rank = std::getenv("CHORUS_RANK") ? std::getenv("CHORUS_RANK")
                       : std::getenv("OMPI_COMM_WORLD_RANK") ? std::getenv("OMPI_COMM_WORLD_RANK")
                       : std::getenv("RANK") ? std::getenv("RANK") : "?";
    std::printf("rank %s: error: %s\n", rank, e.what());
    return 3;
  }
}
