// chorus-mismatch: one rank of a mismatch trial (tests/misuse/mismatch_trials.py).
// Every rank makes the collective call --call describes, except rank --odd,
// which makes --odd-call; then every rank calls barrier twice. Each rank
// prints what it called, then one line with its outcome and the seconds since
// its call began:
//   rank R: called allreduce(count 8 of int32, op sum)
//   rank R: error CHORUS_ERR_INVALID_ARGUMENT 1.02 s: <the error's text>
//   rank R: completed 0.00 s
// and exits 3 on an error, 0 otherwise. A call is written
// NAME:COUNT:DTYPE:OP:ROOT, e.g. ibroadcast:8:int32:sum:1; NAME is a
// collective of the API, with an "i" for the non-blocking ones (iallreduce,
// ibroadcast, ibarrier, ireduce, iallgather, ireduce_scatter, ialltoall).
// COUNT is per rank where the collective has blocks (allgather, alltoall,
// gather, scatter, reduce_scatter, the v-variants: each rank's block).
#include <chorus/chorus.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using chorus::Communicator;
using chorus::DataType;
using chorus::ReduceOp;

struct Call {
  std::string name;  // as written, "i" included
  bool nonblocking = false;
  chorus::Collective op{};
  size_t count = 0;
  DataType dtype = DataType::int32;
  ReduceOp redop = ReduceOp::sum;
  int root = 0;
};

std::optional<chorus::Collective> collective_named(const std::string& name) {
  for (int o = 0; o < chorus::kNumCollectives; ++o) {
    const auto op = static_cast<chorus::Collective>(o);
    if (chorus::to_string(op) == name) return op;
  }
  return std::nullopt;
}

template <class Enum>
std::optional<Enum> enum_named(const std::string& name, int how_many) {
  for (int v = 0; v < how_many; ++v) {
    if (chorus::to_string(static_cast<Enum>(v)) == name) return static_cast<Enum>(v);
  }
  return std::nullopt;
}

std::optional<Call> parse_call(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t colon; (colon = text.find(':', start)) != std::string::npos; start = colon + 1) {
    parts.push_back(text.substr(start, colon - start));
  }
  parts.push_back(text.substr(start));
  if (parts.size() != 5) return std::nullopt;
  Call call;
  call.name = parts[0];
  std::optional<chorus::Collective> op = collective_named(call.name);
  if (!op && call.name.size() > 1 && call.name[0] == 'i') {
    op = collective_named(call.name.substr(1));
    call.nonblocking = true;
  }
  const auto dtype = enum_named<DataType>(parts[2], chorus::kNumDataTypes);
  const auto redop = enum_named<ReduceOp>(parts[3], chorus::kNumReduceOps);
  if (!op || !dtype || !redop) return std::nullopt;
  call.op = *op;
  call.count = std::strtoull(parts[1].c_str(), nullptr, 10);
  call.dtype = *dtype;
  call.redop = *redop;
  call.root = std::atoi(parts[4].c_str());
  return call;
}

bool is_reduction(chorus::Collective op) {
  using chorus::Collective;
  return op == Collective::allreduce || op == Collective::reduce || op == Collective::reduce_scatter ||
         op == Collective::scan || op == Collective::exscan;
}

bool has_root(chorus::Collective op) {
  using chorus::Collective;
  return op == Collective::broadcast || op == Collective::reduce || op == Collective::gather ||
         op == Collective::gatherv || op == Collective::scatter || op == Collective::scatterv;
}

// As the library describes a call in its errors (without the algorithm).
std::string describe(const Call& call) {
  if (call.op == chorus::Collective::barrier) return call.name + "()";
  std::string text = call.name + "(count " + std::to_string(call.count) + " of " +
                     std::string(chorus::to_string(call.dtype));
  if (is_reduction(call.op)) text += ", op " + std::string(chorus::to_string(call.redop));
  if (has_root(call.op)) text += ", root " + std::to_string(call.root);
  return text + ")";
}

// Runs `call`; buffers are large enough for any call of the trial.
void run(Communicator& comm, const Call& call) {
  using chorus::Collective;
  const size_t ranks = static_cast<size_t>(comm.size());
  const size_t bytes = (call.count + 1) * ranks * 8;
  std::vector<unsigned char> send(bytes, 1), recv(bytes, 0);
  const std::vector<size_t> counts(ranks, call.count);
  void* s = send.data();
  void* r = recv.data();
  if (call.nonblocking) {
    chorus::Request request;
    switch (call.op) {
      case Collective::allreduce: request = comm.iallreduce(s, r, call.count, call.dtype, call.redop); break;
      case Collective::broadcast: request = comm.ibroadcast(s, call.count, call.dtype, call.root); break;
      case Collective::barrier: request = comm.ibarrier(); break;
      case Collective::reduce: request = comm.ireduce(s, r, call.count, call.dtype, call.redop, call.root); break;
      case Collective::allgather: request = comm.iallgather(s, r, call.count, call.dtype); break;
      case Collective::reduce_scatter: request = comm.ireduce_scatter(s, r, call.count, call.dtype, call.redop); break;
      case Collective::alltoall: request = comm.ialltoall(s, r, call.count, call.dtype); break;
      default: std::fprintf(stderr, "no non-blocking %s\n", call.name.c_str()); std::exit(2);
    }
    request.wait();
    return;
  }
  switch (call.op) {
    case Collective::allreduce: comm.allreduce(s, r, call.count, call.dtype, call.redop); break;
    case Collective::broadcast: comm.broadcast(s, call.count, call.dtype, call.root); break;
    case Collective::barrier: comm.barrier(); break;
    case Collective::reduce: comm.reduce(s, r, call.count, call.dtype, call.redop, call.root); break;
    case Collective::allgather: comm.allgather(s, r, call.count, call.dtype); break;
    case Collective::reduce_scatter: comm.reduce_scatter(s, r, call.count, call.dtype, call.redop); break;
    case Collective::alltoall: comm.alltoall(s, r, call.count, call.dtype); break;
    case Collective::gather: comm.gather(s, r, call.count, call.dtype, call.root); break;
    case Collective::scatter: comm.scatter(s, r, call.count, call.dtype, call.root); break;
    case Collective::gatherv: comm.gatherv(s, call.count, r, counts, {}, call.dtype, call.root); break;
    case Collective::scatterv: comm.scatterv(s, counts, {}, r, call.count, call.dtype, call.root); break;
    case Collective::allgatherv: comm.allgatherv(s, call.count, r, counts, {}, call.dtype); break;
    case Collective::scan: comm.scan(s, r, call.count, call.dtype, call.redop); break;
    case Collective::exscan: comm.exscan(s, r, call.count, call.dtype, call.redop); break;
    default: std::fprintf(stderr, "cannot run %s\n", call.name.c_str()); std::exit(2);
  }
}

void usage(FILE* out) {
  std::fprintf(out,
               "Usage: chorusrun -n N chorus-mismatch --call SPEC --odd-call SPEC --odd RANK [--linger SEC]\n\n"
               "Every rank makes the call SPEC, rank RANK makes ODD-SPEC instead; then every rank\n"
               "calls barrier twice. SPEC is NAME:COUNT:DTYPE:OP:ROOT (ibroadcast:8:int32:sum:1).\n"
               "Each rank prints \"rank R: called DESCRIPTION\", then \"rank R: error STATUS SECONDS s: TEXT\"\n"
               "(exit 3) or \"rank R: completed SECONDS s\" (exit 0); SECONDS since its call began.\n"
               "--linger SEC: a rank that failed stays SEC seconds before it exits.\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<Call> normal, odd_call;
  int odd = -1;
  int linger = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      usage(stderr);
      return 2;
    }
    const std::string value = argv[++i];
    if (arg == "--call") {
      normal = parse_call(value);
    } else if (arg == "--odd-call") {
      odd_call = parse_call(value);
    } else if (arg == "--odd") {
      odd = std::atoi(value.c_str());
    } else if (arg == "--linger") {
      linger = std::atoi(value.c_str());
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (!normal || !odd_call || odd < 0) {
    usage(stderr);
    return 2;
  }
  auto comm = Communicator::init();
  const int rank = comm.rank();
  const Call& mine = rank == odd ? *odd_call : *normal;
  comm.barrier();  // every rank starts the case at about the same time
  std::printf("rank %d: called %s\n", rank, describe(mine).c_str());
  std::fflush(stdout);
  const auto started = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  try {
    run(comm, mine);
    comm.barrier();
    comm.barrier();
  } catch (const chorus::Error& e) {
    const double elapsed = seconds();
    std::string text = e.what();
    for (char& c : text) {
      if (c == '\n') c = ' ';
    }
    std::printf("rank %d: error %s %.3f s: %s\n", rank, std::string(chorus::to_string(e.status())).c_str(), elapsed,
                text.c_str());
    std::fflush(stdout);
    if (linger > 0) std::this_thread::sleep_for(std::chrono::seconds(linger));
    return 3;
  }
  std::printf("rank %d: completed %.3f s\n", rank, seconds());
  return 0;
}
