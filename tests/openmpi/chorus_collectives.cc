// The chorus side of the Open MPI result comparison: runs every case of
// cases.h through chorus::Communicator and prints one line per case from
// rank 0, in the format ompi_collectives prints (see cases.h); compare.sh
// diffs the two.
//
//   chorusrun -n N chorus_collectives [--algo auto|all]
//
// --algo all runs each case once per algorithm of its collective
// (Communicator::algorithms) and tags each line with " (algorithm)", so every
// algorithm is held against Open MPI; auto (default) uses the selection table.
//
// CHORUS_TEST_COMPARE_INJECT_ERROR=<case number> flips one result byte on the last
// rank in that case (every algorithm): the test that shows compare.sh fails.
//
// In place (include/chorus/chorus.hpp): the same pointer as send and receive
// buffer; allgather's send buffer is the rank's own block of the receive
// buffer; reduce_scatter's receive buffer is block `rank` of the send buffer,
// which is where the result lands (MPI_IN_PLACE puts it in block 0).
#include "cases.h"

#include <chorus/chorus.hpp>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

namespace {

chorus::DataType to_chorus(int dtype) {
  switch (dtype) {
    case CMP_INT8: return chorus::DataType::int8;
    case CMP_UINT8: return chorus::DataType::uint8;
    case CMP_INT16: return chorus::DataType::int16;
    case CMP_UINT16: return chorus::DataType::uint16;
    case CMP_INT32: return chorus::DataType::int32;
    case CMP_UINT32: return chorus::DataType::uint32;
    case CMP_INT64: return chorus::DataType::int64;
    case CMP_UINT64: return chorus::DataType::uint64;
    case CMP_FLOAT32: return chorus::DataType::float32;
    default: return chorus::DataType::float64;
  }
}

chorus::ReduceOp to_chorus_op(int op) {
  switch (op) {
    case CMP_SUM: return chorus::ReduceOp::sum;
    case CMP_PROD: return chorus::ReduceOp::prod;
    case CMP_MIN: return chorus::ReduceOp::min;
    default: return chorus::ReduceOp::max;
  }
}

chorus::Collective to_collective(int coll) {
  switch (coll) {
    case CMP_BARRIER: return chorus::Collective::barrier;
    case CMP_BROADCAST: return chorus::Collective::broadcast;
    case CMP_REDUCE: return chorus::Collective::reduce;
    case CMP_ALLREDUCE: return chorus::Collective::allreduce;
    case CMP_ALLGATHER: return chorus::Collective::allgather;
    case CMP_REDUCE_SCATTER: return chorus::Collective::reduce_scatter;
    case CMP_GATHER: return chorus::Collective::gather;
    case CMP_GATHERV: return chorus::Collective::gatherv;
    case CMP_SCATTER: return chorus::Collective::scatter;
    case CMP_SCATTERV: return chorus::Collective::scatterv;
    case CMP_ALLGATHERV: return chorus::Collective::allgatherv;
    case CMP_ALLTOALLV: return chorus::Collective::alltoallv;
    case CMP_SCAN: return chorus::Collective::scan;
    case CMP_EXSCAN: return chorus::Collective::exscan;
    default: return chorus::Collective::alltoall;
  }
}

// Offset (elements) of the result in the receive buffer.
size_t result_offset(const cmp_case& c, int rank) {
  return c.in_place && c.coll == CMP_REDUCE_SCATTER ? static_cast<size_t>(rank) * c.count : 0;
}

void run_case(chorus::Communicator& comm, const cmp_case& c, cmp_buffers& b) {
  const chorus::DataType t = to_chorus(c.dtype);
  const chorus::ReduceOp op = to_chorus_op(c.op);
  const size_t elem = cmp_dtype_sizes[c.dtype];
  const int rank = comm.rank();
  const void* send = c.in_place ? b.recv : b.send;
  switch (c.coll) {
    case CMP_BARRIER: comm.barrier(); return;
    case CMP_BROADCAST: comm.broadcast(b.recv, c.count, t, c.root); return;
    case CMP_REDUCE: comm.reduce(send, b.recv, c.count, t, op, c.root); return;
    case CMP_ALLREDUCE: comm.allreduce(send, b.recv, c.count, t, op); return;
    case CMP_ALLGATHER:
      if (c.in_place) send = b.recv + static_cast<size_t>(rank) * c.count * elem;
      comm.allgather(send, b.recv, c.count, t);
      return;
    case CMP_REDUCE_SCATTER:
      comm.reduce_scatter(send, b.recv + result_offset(c, rank) * elem, c.count, t, op);
      return;
    case CMP_ALLTOALL: comm.alltoall(send, b.recv, c.count, t); return;
    case CMP_GATHER: comm.gather(send, b.recv, c.count, t, c.root); return;
    case CMP_SCATTER: comm.scatter(send, b.recv, c.count, t, c.root); return;
    case CMP_SCAN: comm.scan(send, b.recv, c.count, t, op); return;
    case CMP_EXSCAN: comm.exscan(send, b.recv, c.count, t, op); return;
  }
  // The v-variants: one layout per rank (cmp_v_layout), in size_t.
  const auto ranks = static_cast<size_t>(comm.size());
  std::vector<int> counts_in(ranks), displs_in(ranks);
  cmp_v_layout(&c, rank, comm.size(), counts_in.data(), displs_in.data());
  const std::vector<size_t> counts(counts_in.begin(), counts_in.end()), displs(displs_in.begin(), displs_in.end());
  const size_t mine = cmp_varied_count(c.count, rank);
  switch (c.coll) {
    case CMP_GATHERV: comm.gatherv(send, mine, b.recv, counts, displs, t, c.root); return;
    case CMP_SCATTERV: comm.scatterv(send, counts, displs, b.recv, mine, t, c.root); return;
    case CMP_ALLGATHERV:
      // In place: the rank's own block inside the receive buffer.
      if (c.in_place) send = b.recv + displs[static_cast<size_t>(rank)] * elem;
      comm.allgatherv(send, mine, b.recv, counts, displs, t);
      return;
    case CMP_ALLTOALLV: comm.alltoallv(send, counts, displs, b.recv, counts, displs, t); return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool all_algorithms = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--algo" && i + 1 < argc && (std::string(argv[i + 1]) == "all" || std::string(argv[i + 1]) == "auto")) {
      all_algorithms = std::string(argv[++i]) == "all";
    } else {
      std::fprintf(stderr, "usage: chorusrun -n N chorus_collectives [--algo auto|all]\n");
      return 2;
    }
  }
  try {
    auto comm = chorus::Communicator::init();
    const int rank = comm.rank();
    const int ranks = comm.size();
    std::vector<cmp_case> cases(cmp_build_cases(ranks, nullptr, 0));
    cmp_build_cases(ranks, cases.data(), cases.size());
    std::vector<uint64_t> digests(static_cast<size_t>(ranks));
    const char* inject = std::getenv("CHORUS_TEST_COMPARE_INJECT_ERROR");
    const uint64_t inject_case = inject != nullptr ? std::strtoull(inject, nullptr, 10) : 0;
    if (rank == 0) {
      std::printf("# chorus_collectives: %d ranks, %zu cases, transport %s\n", ranks, cases.size(),
                  comm.transport_name().c_str());
    }
    for (const cmp_case& c : cases) {
      const chorus::Collective coll = to_collective(c.coll);
      std::vector<std::string> algorithms = {""};
      if (all_algorithms) algorithms = comm.algorithms(coll);
      for (const std::string& algorithm : algorithms) {
        comm.set_algorithm(coll, algorithm);
        cmp_buffers b;
        if (cmp_setup(&c, rank, ranks, &b) != 0) throw std::bad_alloc();
        run_case(comm, c, b);
        const size_t offset = result_offset(c, rank);
        if (c.salt == inject_case && rank == ranks - 1 && cmp_result_elems(&c, rank, &b) > 0) {
          b.recv[offset * cmp_dtype_sizes[c.dtype]] ^= 1;
        }
        const uint64_t digest = cmp_digest(&c, rank, &b, offset);
        // Digests travel point to point: a broken collective cannot hide itself.
        if (rank == 0) {
          digests[0] = digest;
          for (int r = 1; r < ranks; ++r) comm.recv(&digests[static_cast<size_t>(r)], sizeof(uint64_t), r, 7);
          std::string suffix = all_algorithms ? " (" + algorithm + ")" : "";
          cmp_print_line(stdout, &c, digests.data(), ranks, &b, offset, suffix.c_str());
        } else {
          comm.send(&digest, sizeof digest, 0, 7);
        }
        cmp_release(&b);
      }
      comm.set_algorithm(coll, "");
    }
    if (rank == 0) std::printf("# chorus_collectives: done, %zu cases\n", cases.size());
    comm.finalize();
    // Every rank's own pass line, after finalize: compare.sh requires one per rank.
    std::printf("chorus_collectives: rank %d passed\n", rank);
    return 0;
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "chorus_collectives: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "chorus_collectives: out of memory\n");
    return 1;
  }
}
