/* Compiled as C: gather .. exscan through the C API on one rank, with
 * CHORUS_IN_PLACE, NULL displacements and the argument checks. */
#include <chorus/chorus.h>

#include <string.h>

int capi_block_collectives(void) {
  chorus_comm_t comm = NULL;
  int32_t in[3] = {4, 5, 6}, out[8];
  const size_t counts[1] = {3}, gapped[1] = {2}, short_counts[1] = {2};
  if (chorus_init(&comm) != CHORUS_SUCCESS) return 1;
  memset(out, 0, sizeof out);
  if (chorus_gather(comm, in, out, 3, CHORUS_INT32, 0) != CHORUS_SUCCESS || memcmp(in, out, sizeof in) != 0) return 2;
  memset(out, 0, sizeof out);
  if (chorus_scatter(comm, in, out, 3, CHORUS_INT32, 0) != CHORUS_SUCCESS || memcmp(in, out, sizeof in) != 0) return 3;
  if (chorus_scatter(comm, in, (void*)CHORUS_IN_PLACE, 3, CHORUS_INT32, 0) != CHORUS_SUCCESS) return 4;
  memset(out, 0, sizeof out);
  /* NULL displacements: packed. */
  if (chorus_gatherv(comm, in, 3, out, counts, NULL, CHORUS_INT32, 0) != CHORUS_SUCCESS) return 5;
  if (memcmp(in, out, sizeof in) != 0) return 6;
  memset(out, 0, sizeof out);
  if (chorus_allgatherv(comm, in, 3, out, counts, gapped, CHORUS_INT32) != CHORUS_SUCCESS) return 7;
  if (memcmp(in, out + 2, sizeof in) != 0 || out[0] != 0 || out[1] != 0) return 8;
  memset(out, 0, sizeof out);
  if (chorus_scatterv(comm, in, counts, NULL, out, 3, CHORUS_INT32, 0) != CHORUS_SUCCESS) return 9;
  if (memcmp(in, out, sizeof in) != 0) return 10;
  memset(out, 0, sizeof out);
  if (chorus_alltoallv(comm, in, counts, NULL, out, counts, NULL, CHORUS_INT32) != CHORUS_SUCCESS) return 11;
  if (memcmp(in, out, sizeof in) != 0) return 12;
  memset(out, 0, sizeof out);
  if (chorus_scan(comm, in, out, 3, CHORUS_INT32, CHORUS_SUM) != CHORUS_SUCCESS || memcmp(in, out, sizeof in) != 0) {
    return 13;
  }
  /* exscan leaves rank 0's receive buffer as it was. */
  memset(out, 0, sizeof out);
  if (chorus_exscan(comm, in, out, 3, CHORUS_INT32, CHORUS_SUM) != CHORUS_SUCCESS || out[0] != 0) return 14;
  /* The root's own block must match its count; a bad root is named. */
  if (chorus_gatherv(comm, in, 3, out, short_counts, NULL, CHORUS_INT32, 0) != CHORUS_ERR_INVALID_ARGUMENT) return 15;
  if (strstr(chorus_last_error(), "recv_counts[0] is 2") == NULL) return 16;
  if (chorus_scatter(comm, in, out, 3, CHORUS_INT32, 1) != CHORUS_ERR_INVALID_ARGUMENT) return 17;
  if (strstr(chorus_last_error(), "root 1") == NULL) return 18;
  if (chorus_allgatherv(comm, in, 3, out, NULL, NULL, CHORUS_INT32) != CHORUS_ERR_INVALID_ARGUMENT) return 19;
  if (strstr(chorus_last_error(), "recv_counts has 0 entries, expected 1") == NULL) return 20;
  if (chorus_finalize(&comm) != CHORUS_SUCCESS) return 21;
  return 0;
}
