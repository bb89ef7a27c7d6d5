/* Compiled as C: the C header must be valid C, and these helpers are
 * called from the GoogleTest file. */
#include <chorus/chorus.h>

#include <string.h>

int capi_roundtrip(void) {
  chorus_comm_t comm = NULL;
  int rank = -1, size = -1;
  float data[4] = {1, 2, 3, 4}, out[4] = {0};
  if (chorus_init(&comm) != CHORUS_SUCCESS) return 1;
  if (chorus_comm_rank(comm, &rank) != CHORUS_SUCCESS || rank != 0) return 2;
  if (chorus_comm_size(comm, &size) != CHORUS_SUCCESS || size != 1) return 3;
  if (chorus_allreduce(comm, data, out, 4, CHORUS_FLOAT32, CHORUS_SUM) != CHORUS_SUCCESS) return 4;
  if (memcmp(data, out, sizeof data) != 0) return 5;
  if (chorus_allreduce(comm, CHORUS_IN_PLACE, out, 4, CHORUS_FLOAT32, CHORUS_MAX) != CHORUS_SUCCESS) return 6;
  if (chorus_barrier(comm) != CHORUS_SUCCESS) return 7;
  /* A bad root is refused with a message naming it. */
  if (chorus_broadcast(comm, data, 4, CHORUS_FLOAT32, 3) != CHORUS_ERR_INVALID_ARGUMENT) return 8;
  if (strstr(chorus_last_error(), "root 3") == NULL) return 9;
  if (chorus_finalize(&comm) != CHORUS_SUCCESS || comm != NULL) return 10;
  if (chorus_finalize(&comm) != CHORUS_ERR_INVALID_ARGUMENT) return 11;
  if (strcmp(chorus_status_string(CHORUS_ERR_TIMEOUT), "CHORUS_ERR_TIMEOUT") != 0) return 12;
  return 0;
}
