/*
 * The Open MPI side of the result comparison: runs every case of cases.h
 * through MPI collectives and prints one line per case from rank 0 (see
 * cases.h). Built with mpicc, run with mpirun; compare.sh diffs its output
 * against chorus_collectives'.
 *
 * MPI mapping: broadcast = MPI_Bcast, reduce = MPI_Reduce, allreduce =
 * MPI_Allreduce, allgather = MPI_Allgather, reduce_scatter =
 * MPI_Reduce_scatter_block, alltoall = MPI_Alltoall, barrier = MPI_Barrier,
 * gather(v)/scatter(v)/allgatherv/alltoallv/scan/exscan = MPI_<Name>.
 * In place: MPI_IN_PLACE as the send buffer (reduce: at the root only; the
 * non-roots send their one buffer).
 */
#include "cases.h"

#include <mpi.h>

static MPI_Datatype mpi_dtype(int dtype) {
  switch (dtype) {
    case CMP_INT8: return MPI_INT8_T;
    case CMP_UINT8: return MPI_UINT8_T;
    case CMP_INT16: return MPI_INT16_T;
    case CMP_UINT16: return MPI_UINT16_T;
    case CMP_INT32: return MPI_INT32_T;
    case CMP_UINT32: return MPI_UINT32_T;
    case CMP_INT64: return MPI_INT64_T;
    case CMP_UINT64: return MPI_UINT64_T;
    case CMP_FLOAT32: return MPI_FLOAT;
    default: return MPI_DOUBLE;
  }
}

static MPI_Op mpi_op(int op) {
  switch (op) {
    case CMP_SUM: return MPI_SUM;
    case CMP_PROD: return MPI_PROD;
    case CMP_MIN: return MPI_MIN;
    default: return MPI_MAX;
  }
}

/* Runs case c; returns the error code of the MPI call. */
static int run_case(const struct cmp_case* c, struct cmp_buffers* b, int rank) {
  const MPI_Datatype t = mpi_dtype(c->dtype);
  const MPI_Op op = mpi_op(c->op);
  const int count = (int)c->count;
  const void* send = c->in_place ? MPI_IN_PLACE : (const void*)b->send;
  MPI_Comm w = MPI_COMM_WORLD;
  switch (c->coll) {
    case CMP_BARRIER: return MPI_Barrier(w);
    case CMP_BROADCAST: return MPI_Bcast(b->recv, count, t, c->root, w);
    case CMP_REDUCE:
      if (c->in_place && rank != c->root) return MPI_Reduce(b->recv, NULL, count, t, op, c->root, w);
      return MPI_Reduce(send, b->recv, count, t, op, c->root, w);
    case CMP_ALLREDUCE: return MPI_Allreduce(send, b->recv, count, t, op, w);
    case CMP_ALLGATHER: return MPI_Allgather(send, count, t, b->recv, count, t, w);
    case CMP_REDUCE_SCATTER: return MPI_Reduce_scatter_block(send, b->recv, count, t, op, w);
    case CMP_ALLTOALL: return MPI_Alltoall(send, count, t, b->recv, count, t, w);
    case CMP_GATHER: return MPI_Gather(send, count, t, b->recv, count, t, c->root, w);
    case CMP_SCATTER: return MPI_Scatter(send, count, t, b->recv, count, t, c->root, w);
    case CMP_SCAN: return MPI_Scan(send, b->recv, count, t, op, w);
    case CMP_EXSCAN: return MPI_Exscan(send, b->recv, count, t, op, w);
    default: break;
  }
  /* The v-variants: one layout per rank (cmp_v_layout). */
  int ranks = 0;
  MPI_Comm_size(w, &ranks);
  int* counts = (int*)malloc(2 * (size_t)ranks * sizeof(int));
  if (counts == NULL) return MPI_ERR_NO_MEM;
  int* displs = counts + ranks;
  cmp_v_layout(c, rank, ranks, counts, displs);
  const int mine = (int)cmp_varied_count(c->count, rank);
  int err = MPI_ERR_OTHER;
  switch (c->coll) {
    case CMP_GATHERV: err = MPI_Gatherv(send, mine, t, b->recv, counts, displs, t, c->root, w); break;
    case CMP_SCATTERV: err = MPI_Scatterv(send, counts, displs, t, b->recv, mine, t, c->root, w); break;
    case CMP_ALLGATHERV: err = MPI_Allgatherv(send, mine, t, b->recv, counts, displs, t, w); break;
    case CMP_ALLTOALLV: err = MPI_Alltoallv(send, counts, displs, t, b->recv, counts, displs, t, w); break;
  }
  free(counts);
  return err;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  size_t ncases = cmp_build_cases(ranks, NULL, 0);
  struct cmp_case* cases = (struct cmp_case*)calloc(ncases, sizeof *cases);
  uint64_t* digests = (uint64_t*)calloc((size_t)ranks, sizeof *digests);
  if (cases == NULL || digests == NULL) {
    fprintf(stderr, "ompi_collectives: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  cmp_build_cases(ranks, cases, ncases);
  if (rank == 0) printf("# ompi_collectives: %d ranks, %zu cases\n", ranks, ncases);

  for (size_t i = 0; i < ncases; ++i) {
    const struct cmp_case* c = &cases[i];
    struct cmp_buffers b;
    if (cmp_setup(c, rank, ranks, &b) != 0) {
      fprintf(stderr, "ompi_collectives: out of memory for case %zu\n", i);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int err = run_case(c, &b, rank);
    if (err != MPI_SUCCESS) {
      char key[160], text[MPI_MAX_ERROR_STRING];
      int length = 0;
      cmp_case_key(c, key, sizeof key);
      MPI_Error_string(err, text, &length);
      fprintf(stderr, "ompi_collectives: rank %d: %s failed: %s\n", rank, key, text);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* In place, MPI_Reduce_scatter_block leaves the result in block 0. */
    uint64_t digest = cmp_digest(c, rank, &b, 0);
    if (rank == 0) {
      digests[0] = digest;
      for (int r = 1; r < ranks; ++r) {
        MPI_Recv(&digests[r], 1, MPI_UINT64_T, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
      cmp_print_line(stdout, c, digests, ranks, &b, 0, "");
    } else {
      MPI_Send(&digest, 1, MPI_UINT64_T, 0, 7, MPI_COMM_WORLD);
    }
    cmp_release(&b);
  }
  if (rank == 0) printf("# ompi_collectives: done, %zu cases\n", ncases);
  free(cases);
  free(digests);
  MPI_Finalize();
  /* Every rank's own pass line, after finalize: compare.sh requires one per rank. */
  printf("ompi_collectives: rank %d passed\n", rank);
  return 0;
}
