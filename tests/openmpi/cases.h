/*
 * Shared by the two programs of the Open MPI result comparison
 * (ompi_collectives.c, built with mpicc, and chorus_collectives.cc): the case
 * list, the inputs, the buffer layouts and the digest. Both programs include
 * this one file, so they enumerate the same cases in the same order, fill the
 * same bytes and hash the same regions; only the call itself differs.
 *
 * Inputs are integers (floats: multiples of 1/4) small enough that every sum,
 * product, minimum and maximum over up to 8 ranks is exact in every dtype,
 * whatever the order of reduction, with no integer overflow: any difference
 * between the two outputs is a real difference.
 *
 * Output: one line per case from rank 0,
 *   case <key> => <digest of rank 0> <digest of rank 1> ... | first=<v> last=<v>
 * where a digest is the FNV-1a 64-bit hash of the rank's result region,
 * followed (out of place) by its send buffer, which must be unchanged.
 * first/last are rank 0's first and last result elements.
 */
#ifndef CHORUS_TESTS_OPENMPI_CASES_H
#define CHORUS_TESTS_OPENMPI_CASES_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum cmp_coll {
  CMP_BARRIER,
  CMP_BROADCAST,
  CMP_REDUCE,
  CMP_ALLREDUCE,
  CMP_ALLGATHER,
  CMP_REDUCE_SCATTER, /* the block variant: MPI_Reduce_scatter_block */
  CMP_ALLTOALL,
  CMP_GATHER,
  CMP_GATHERV,
  CMP_SCATTER,
  CMP_SCATTERV,
  CMP_ALLGATHERV,
  CMP_ALLTOALLV,
  CMP_SCAN,
  CMP_EXSCAN,
  CMP_NUM_COLLS
};

/* The dtypes both libraries have (Open MPI 4.1 has no float16/bfloat16). */
enum cmp_dtype {
  CMP_INT8,
  CMP_UINT8,
  CMP_INT16,
  CMP_UINT16,
  CMP_INT32,
  CMP_UINT32,
  CMP_INT64,
  CMP_UINT64,
  CMP_FLOAT32,
  CMP_FLOAT64,
  CMP_NUM_DTYPES
};

enum cmp_op { CMP_SUM, CMP_PROD, CMP_MIN, CMP_MAX, CMP_NUM_OPS };

struct cmp_case {
  int coll;
  int dtype;
  int op;       /* CMP_SUM for collectives that do not reduce */
  int in_place; /* broadcast is always in place (one buffer) */
  int root;     /* -1 unless rooted (broadcast, reduce, gather(v), scatter(v)) */
  size_t count; /* the count argument: elements per rank block for allgather, reduce_scatter, alltoall,
                   gather, scatter; the base of the per-rank counts of the v-variants (cmp_v_layout) */
  uint64_t salt;
};

static const char* const cmp_coll_names[CMP_NUM_COLLS] = {
    "barrier", "broadcast", "reduce",   "allreduce",  "allgather", "reduce_scatter", "alltoall", "gather",
    "gatherv", "scatter",   "scatterv", "allgatherv", "alltoallv", "scan",           "exscan"};
static const char* const cmp_dtype_names[CMP_NUM_DTYPES] = {"int8",  "uint8",  "int16", "uint16",  "int32",
                                                            "uint32", "int64", "uint64", "float32", "float64"};
static const size_t cmp_dtype_sizes[CMP_NUM_DTYPES] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8};
static const char* const cmp_op_names[CMP_NUM_OPS] = {"sum", "prod", "min", "max"};

static inline int cmp_reduces(int coll) {
  return coll == CMP_REDUCE || coll == CMP_ALLREDUCE || coll == CMP_REDUCE_SCATTER || coll == CMP_SCAN ||
         coll == CMP_EXSCAN;
}
static inline int cmp_rooted(int coll) {
  return coll == CMP_BROADCAST || coll == CMP_REDUCE || coll == CMP_GATHER || coll == CMP_GATHERV ||
         coll == CMP_SCATTER || coll == CMP_SCATTERV;
}
/* Gather(v)/scatter(v) run out of place only (MPI_IN_PLACE there is the
 * root's alone, which this one-buffer-per-rank harness does not model). */
static inline int cmp_in_place_allowed(int coll) {
  return coll != CMP_GATHER && coll != CMP_GATHERV && coll != CMP_SCATTER && coll != CMP_SCATTERV;
}
static inline int cmp_is_float(int dtype) { return dtype == CMP_FLOAT32 || dtype == CMP_FLOAT64; }
static inline int cmp_is_signed(int dtype) {
  return dtype == CMP_INT8 || dtype == CMP_INT16 || dtype == CMP_INT32 || dtype == CMP_INT64 || cmp_is_float(dtype);
}

/* Every dtype and op at these counts (0 and 1 element, odd counts, and
 * 4097 x 8 B = 32 KiB, past chorus' 16 KiB eager limit). */
static const size_t cmp_small_counts[] = {0, 1, 2, 3, 7, 64, 1023, 4097};
/* A few dtypes and ops at counts of tens to hundreds of KiB per block (past
 * the eager limit and the allreduce/broadcast/allgather algorithm crossovers
 * at 16K, 64K and 256K bytes; all odd, so blocks and chunks are uneven). */
static const size_t cmp_large_counts[] = {20001, 98307};
static const int cmp_large_dtypes[] = {CMP_UINT8, CMP_INT32, CMP_FLOAT32, CMP_FLOAT64};
static const int cmp_large_ops[] = {CMP_SUM, CMP_MAX};
/* gather .. exscan: fewer counts (CI time), every dtype; one large count.
 * Scan and exscan, which also take every op, skip the empty call. */
static const size_t cmp_block_counts[] = {0, 7, 4097};
static const size_t cmp_block_large_counts[] = {20001};
static const int cmp_block_large_dtypes[] = {CMP_INT32, CMP_FLOAT64};

#define CMP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static inline size_t cmp_add_case(struct cmp_case* out, size_t n, size_t cap, int coll, int dtype, int op,
                                  int in_place, int root, size_t count) {
  if (out != NULL && n < cap) {
    struct cmp_case c;
    c.coll = coll;
    c.dtype = dtype;
    c.op = op;
    c.in_place = in_place;
    c.root = root;
    c.count = count;
    c.salt = (uint64_t)n + 1; /* also the case's number in its key */
    out[n] = c;
  }
  return n + 1;
}

/* Adds one collective's cases for the given dtypes, ops and counts. */
static inline size_t cmp_add_cases(struct cmp_case* out, size_t n, size_t cap, int ranks, int coll, const int* dtypes,
                                   size_t ndtypes, const int* ops, size_t nops, const size_t* counts, size_t ncounts,
                                   int all_roots) {
  static const int sum_only[] = {CMP_SUM};
  const int* use_ops = cmp_reduces(coll) ? ops : sum_only;
  size_t use_nops = cmp_reduces(coll) ? nops : 1;
  int roots[2] = {0, ranks - 1};
  int nroots = cmp_rooted(coll) ? (all_roots ? 2 : 1) : 1;
  if (cmp_rooted(coll) && !all_roots) roots[0] = ranks / 2;
  for (size_t d = 0; d < ndtypes; ++d) {
    for (size_t o = 0; o < use_nops; ++o) {
      for (size_t k = 0; k < ncounts; ++k) {
        for (int in_place = 0; in_place <= cmp_in_place_allowed(coll); ++in_place) {
          if (coll == CMP_BROADCAST && in_place == 0) continue; /* one buffer */
          for (int r = 0; r < nroots; ++r) {
            n = cmp_add_case(out, n, cap, coll, dtypes[d], use_ops[o], in_place, cmp_rooted(coll) ? roots[r] : -1,
                             counts[k]);
          }
        }
      }
    }
  }
  return n;
}

/* Fills out[0..cap) with the case list for `ranks` ranks and returns the
 * number of cases (call with out = NULL to count). */
static inline size_t cmp_build_cases(int ranks, struct cmp_case* out, size_t cap) {
  static const int all_dtypes[] = {CMP_INT8,   CMP_UINT8,  CMP_INT16, CMP_UINT16,  CMP_INT32,
                                   CMP_UINT32, CMP_INT64, CMP_UINT64, CMP_FLOAT32, CMP_FLOAT64};
  static const int all_ops[] = {CMP_SUM, CMP_PROD, CMP_MIN, CMP_MAX};
  size_t n = cmp_add_case(out, 0, cap, CMP_BARRIER, CMP_INT8, CMP_SUM, 0, -1, 0);
  for (int coll = CMP_BROADCAST; coll < CMP_GATHER; ++coll) {
    n = cmp_add_cases(out, n, cap, ranks, coll, all_dtypes, CMP_ARRAY_LEN(all_dtypes), all_ops,
                      CMP_ARRAY_LEN(all_ops), cmp_small_counts, CMP_ARRAY_LEN(cmp_small_counts), 1);
  }
  for (int coll = CMP_BROADCAST; coll < CMP_GATHER; ++coll) {
    n = cmp_add_cases(out, n, cap, ranks, coll, cmp_large_dtypes, CMP_ARRAY_LEN(cmp_large_dtypes), cmp_large_ops,
                      CMP_ARRAY_LEN(cmp_large_ops), cmp_large_counts, CMP_ARRAY_LEN(cmp_large_counts), 0);
  }
  for (int coll = CMP_GATHER; coll < CMP_NUM_COLLS; ++coll) {
    const size_t skip = cmp_reduces(coll) ? 1 : 0;
    n = cmp_add_cases(out, n, cap, ranks, coll, all_dtypes, CMP_ARRAY_LEN(all_dtypes), all_ops,
                      CMP_ARRAY_LEN(all_ops), cmp_block_counts + skip, CMP_ARRAY_LEN(cmp_block_counts) - skip, 1);
    n = cmp_add_cases(out, n, cap, ranks, coll, cmp_block_large_dtypes, CMP_ARRAY_LEN(cmp_block_large_dtypes),
                      cmp_large_ops, CMP_ARRAY_LEN(cmp_large_ops), cmp_block_large_counts,
                      CMP_ARRAY_LEN(cmp_block_large_counts), 0);
  }
  n = cmp_add_case(out, n, cap, CMP_BARRIER, CMP_INT8, CMP_SUM, 0, -1, 0);
  return n;
}

/* "#17 allreduce int32 sum count=17 in-place root=-" (#: position in the list, from 1) */
static inline void cmp_case_key(const struct cmp_case* c, char* text, size_t size) {
  char root[16] = "-";
  if (c->root >= 0) snprintf(root, sizeof root, "%d", c->root);
  snprintf(text, size, "#%" PRIu64 " %s %s %s count=%zu %s root=%s", c->salt, cmp_coll_names[c->coll],
           c->coll == CMP_BARRIER ? "-" : cmp_dtype_names[c->dtype], cmp_reduces(c->coll) ? cmp_op_names[c->op] : "-",
           c->count, c->in_place ? "in-place" : "out-of-place", root);
}

/* --- buffers ---------------------------------------------------------------- */

/* The v-variants' per-rank counts: rank r's block of gatherv, scatterv and
 * allgatherv (none on every third rank), and the elements between ranks i
 * and j of alltoallv (symmetric, so in place works). */
static inline size_t cmp_varied_count(size_t count, int rank) { return rank % 3 == 1 ? 0 : count + (size_t)rank; }
static inline size_t cmp_pair_count(size_t count, int i, int j) {
  return (i + j) % 4 == 3 ? 0 : count + (size_t)((i * j) % 3);
}
/* The layout of a v-variant on `rank` (ranks entries each): the counts of
 * the side that has several blocks (gatherv/allgatherv: receive, scatterv:
 * send, alltoallv: both, which coincide) with a one-element gap after each
 * block (gaps must stay untouched). Returns the extent in elements. */
static inline size_t cmp_v_layout(const struct cmp_case* c, int rank, int ranks, int* counts, int* displs) {
  size_t extent = 0;
  for (int r = 0; r < ranks; ++r) {
    size_t n = c->coll == CMP_ALLTOALLV ? cmp_pair_count(c->count, rank, r) : cmp_varied_count(c->count, r);
    if (counts != NULL) counts[r] = (int)n;
    if (displs != NULL) displs[r] = (int)extent;
    extent += n + 1;
  }
  return extent;
}

/* Elements of the send and receive buffers (out of place), or of the one
 * buffer (in place: max of the two). */
static inline size_t cmp_send_elems(const struct cmp_case* c, int rank, int ranks) {
  switch (c->coll) {
    case CMP_BARRIER: return 0;
    case CMP_REDUCE_SCATTER:
    case CMP_ALLTOALL:
    case CMP_SCATTER: return c->count * (size_t)ranks;
    case CMP_GATHERV:
    case CMP_ALLGATHERV: return cmp_varied_count(c->count, rank);
    case CMP_SCATTERV:
    case CMP_ALLTOALLV: return cmp_v_layout(c, rank, ranks, NULL, NULL);
    default: return c->count;
  }
}
static inline size_t cmp_recv_elems(const struct cmp_case* c, int rank, int ranks) {
  switch (c->coll) {
    case CMP_BARRIER: return 0;
    case CMP_ALLGATHER:
    case CMP_ALLTOALL:
    case CMP_GATHER: return c->count * (size_t)ranks;
    case CMP_SCATTERV: return cmp_varied_count(c->count, rank);
    case CMP_GATHERV:
    case CMP_ALLGATHERV:
    case CMP_ALLTOALLV: return cmp_v_layout(c, rank, ranks, NULL, NULL);
    default: return c->count;
  }
}

struct cmp_buffers {
  unsigned char* send; /* out of place only */
  unsigned char* recv; /* the one buffer in place */
  size_t send_elems, recv_elems;
};

static inline uint64_t cmp_splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Input element `index` of `rank` as an integer k; floats hold k / 4 (sum,
 * min, max) or k (prod). Ranges keep sums of 8 ranks exact in every dtype. */
static inline int64_t cmp_input(const struct cmp_case* c, int rank, size_t index) {
  uint64_t m = cmp_splitmix(cmp_splitmix(c->salt * 1000003u + (uint64_t)rank) + index);
  if (c->op == CMP_PROD) {
    /* 2 on at most one rank per element (ranks <= 8), -1 now and then: |product| <= 2. */
    int64_t v = ((size_t)rank + index) % 8 == 0 ? 2 : 1;
    if (cmp_is_signed(c->dtype) && m % 7 == 0) v = -v;
    return v;
  }
  int64_t half_range;
  switch (c->dtype) {
    case CMP_INT8:
    case CMP_UINT8: half_range = 7; break; /* |sum of 8| <= 56, unsigned <= 112 */
    case CMP_INT16:
    case CMP_UINT16: half_range = 2000; break;
    default: half_range = 100000; break; /* floats: k/4, |sum| <= 200000 (< 2^24) */
  }
  int64_t v = (int64_t)(m % (uint64_t)(2 * half_range + 1)) - half_range;
  return cmp_is_signed(c->dtype) ? v : v + half_range;
}

static inline void cmp_store(void* buffer, size_t index, int dtype, int64_t k, int op) {
  double f = op == CMP_PROD ? (double)k : (double)k * 0.25;
  switch (dtype) {
    case CMP_INT8: ((int8_t*)buffer)[index] = (int8_t)k; break;
    case CMP_UINT8: ((uint8_t*)buffer)[index] = (uint8_t)k; break;
    case CMP_INT16: ((int16_t*)buffer)[index] = (int16_t)k; break;
    case CMP_UINT16: ((uint16_t*)buffer)[index] = (uint16_t)k; break;
    case CMP_INT32: ((int32_t*)buffer)[index] = (int32_t)k; break;
    case CMP_UINT32: ((uint32_t*)buffer)[index] = (uint32_t)k; break;
    case CMP_INT64: ((int64_t*)buffer)[index] = k; break;
    case CMP_UINT64: ((uint64_t*)buffer)[index] = (uint64_t)k; break;
    case CMP_FLOAT32: ((float*)buffer)[index] = (float)f; break;
    case CMP_FLOAT64: ((double*)buffer)[index] = f; break;
  }
}

static inline void cmp_format(const void* buffer, size_t index, int dtype, char* text, size_t size) {
  switch (dtype) {
    case CMP_INT8: snprintf(text, size, "%d", ((const int8_t*)buffer)[index]); break;
    case CMP_UINT8: snprintf(text, size, "%u", ((const uint8_t*)buffer)[index]); break;
    case CMP_INT16: snprintf(text, size, "%d", ((const int16_t*)buffer)[index]); break;
    case CMP_UINT16: snprintf(text, size, "%u", ((const uint16_t*)buffer)[index]); break;
    case CMP_INT32: snprintf(text, size, "%" PRId32, ((const int32_t*)buffer)[index]); break;
    case CMP_UINT32: snprintf(text, size, "%" PRIu32, ((const uint32_t*)buffer)[index]); break;
    case CMP_INT64: snprintf(text, size, "%" PRId64, ((const int64_t*)buffer)[index]); break;
    case CMP_UINT64: snprintf(text, size, "%" PRIu64, ((const uint64_t*)buffer)[index]); break;
    case CMP_FLOAT32: snprintf(text, size, "%.9g", (double)((const float*)buffer)[index]); break;
    case CMP_FLOAT64: snprintf(text, size, "%.17g", ((const double*)buffer)[index]); break;
  }
}

#define CMP_SENTINEL_BYTE 0xa5 /* every receive byte starts as this */

/* Allocates and fills the buffers of case `c` on `rank`. In place:
 * allgather(v)'s input is the rank's own block of the receive buffer; the
 * others' input fills the whole buffer. Broadcast: only the root has input. */
static inline int cmp_setup(const struct cmp_case* c, int rank, int ranks, struct cmp_buffers* b) {
  const size_t elem = cmp_dtype_sizes[c->dtype];
  b->send_elems = cmp_send_elems(c, rank, ranks);
  b->recv_elems = cmp_recv_elems(c, rank, ranks);
  const int one_buffer = c->in_place || c->coll == CMP_BROADCAST;
  size_t recv_bytes = (one_buffer && b->send_elems > b->recv_elems ? b->send_elems : b->recv_elems) * elem;
  b->recv = (unsigned char*)malloc(recv_bytes + 8);
  b->send = one_buffer ? NULL : (unsigned char*)malloc(b->send_elems * elem + 8);
  if (b->recv == NULL || (!one_buffer && b->send == NULL)) return -1;
  memset(b->recv, CMP_SENTINEL_BYTE, recv_bytes + 8);
  if (c->coll == CMP_BARRIER) return 0;
  if (c->coll == CMP_BROADCAST) {
    if (rank == c->root) {
      for (size_t i = 0; i < c->count; ++i) cmp_store(b->recv, i, c->dtype, cmp_input(c, rank, i), c->op);
    }
    return 0;
  }
  if (one_buffer && (c->coll == CMP_ALLGATHER || c->coll == CMP_ALLGATHERV)) {
    size_t own_offset = (size_t)rank * c->count;
    if (c->coll == CMP_ALLGATHERV) {
      own_offset = 0;
      for (int r = 0; r < rank; ++r) own_offset += cmp_varied_count(c->count, r) + 1;
    }
    unsigned char* own = b->recv + own_offset * elem;
    for (size_t i = 0; i < b->send_elems; ++i) cmp_store(own, i, c->dtype, cmp_input(c, rank, i), c->op);
    return 0;
  }
  unsigned char* input = one_buffer ? b->recv : b->send;
  for (size_t i = 0; i < b->send_elems; ++i) cmp_store(input, i, c->dtype, cmp_input(c, rank, i), c->op);
  return 0;
}

static inline void cmp_release(struct cmp_buffers* b) {
  free(b->send);
  free(b->recv);
  b->send = b->recv = NULL;
}

/* Where the result is, in elements from the start of the receive buffer, and
 * how many elements: reduce's result only exists at the root. In-place
 * reduce_scatter: MPI leaves the result in block 0, chorus in block `rank`;
 * the caller says which (result_block). */
static inline size_t cmp_result_elems(const struct cmp_case* c, int rank, const struct cmp_buffers* b) {
  if ((c->coll == CMP_REDUCE || c->coll == CMP_GATHER || c->coll == CMP_GATHERV) && rank != c->root) return 0;
  if (c->coll == CMP_EXSCAN && rank == 0) return 0; /* undefined in MPI */
  return b->recv_elems;
}

static inline uint64_t cmp_fnv1a(uint64_t hash, const void* data, size_t bytes) {
  const unsigned char* p = (const unsigned char*)data;
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

/* The rank's digest: its result region, then (out of place, or a non-root of
 * an in-place reduce, whose one buffer is a send buffer) its input, which
 * must come back unchanged. */
static inline uint64_t cmp_digest(const struct cmp_case* c, int rank, const struct cmp_buffers* b,
                                  size_t result_offset_elems) {
  const size_t elem = cmp_dtype_sizes[c->dtype];
  uint64_t hash = 0xcbf29ce484222325ull;
  hash = cmp_fnv1a(hash, b->recv + result_offset_elems * elem, cmp_result_elems(c, rank, b) * elem);
  if (b->send != NULL) hash = cmp_fnv1a(hash, b->send, b->send_elems * elem);
  if (c->in_place && c->coll == CMP_REDUCE && rank != c->root) hash = cmp_fnv1a(hash, b->recv, b->send_elems * elem);
  return hash;
}

/* Formats rank 0's line: "case <key> => <h0> ... <hn-1> | first=.. last=..". */
static inline void cmp_print_line(FILE* out, const struct cmp_case* c, const uint64_t* digests, int ranks,
                                  const struct cmp_buffers* b0, size_t result_offset_elems, const char* suffix) {
  char key[160];
  char first[48] = "-", last[48] = "-";
  cmp_case_key(c, key, sizeof key);
  size_t n = cmp_result_elems(c, 0, b0);
  if (n > 0) {
    const unsigned char* result = b0->recv + result_offset_elems * cmp_dtype_sizes[c->dtype];
    cmp_format(result, 0, c->dtype, first, sizeof first);
    cmp_format(result, n - 1, c->dtype, last, sizeof last);
  }
  fprintf(out, "case %s =>", key);
  for (int r = 0; r < ranks; ++r) fprintf(out, " %016" PRIx64, digests[r]);
  fprintf(out, " | first=%s last=%s%s\n", first, last, suffix);
}

#endif /* CHORUS_TESTS_OPENMPI_CASES_H */
