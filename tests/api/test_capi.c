/* Compiled as C: the C header must be valid C, and these helpers are
 * called from the GoogleTest file. */
#include <chorus/chorus.h>

#include <stdio.h>
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

/* What the C++ API also gives: local rank and size, the transport's name
 * (with truncation reported), the host and the traffic counts, and the
 * version, which matches the headers'. */
int capi_layout_transport_version(void) {
  chorus_comm_t comm = NULL;
  int local_rank = -1, local_size = -1, major = -1, minor = -1, patch = -1;
  char name[64], tiny[2], expected_version[32];
  size_t length = 0, needed = 0;
  if (chorus_init(&comm) != CHORUS_SUCCESS) return 1;
  if (chorus_comm_local_rank(comm, &local_rank) != CHORUS_SUCCESS || local_rank != 0) return 2;
  if (chorus_comm_local_size(comm, &local_size) != CHORUS_SUCCESS || local_size != 1) return 3;
  if (chorus_comm_transport_name(comm, name, sizeof name, &length) != CHORUS_SUCCESS) return 4;
  if (length == 0 || length != strlen(name)) return 5;
  if (chorus_comm_transport_name(comm, tiny, sizeof tiny, &needed) != CHORUS_ERR_TRUNCATED) return 6;
  if (needed != length || tiny[0] != '\0' || strstr(chorus_last_error(), name) == NULL) return 7;
  if (chorus_comm_local_rank(comm, NULL) != CHORUS_ERR_INVALID_ARGUMENT) return 8;
  if (chorus_comm_local_size(NULL, &local_size) != CHORUS_ERR_INVALID_ARGUMENT) return 9;
  if (strcmp(chorus_version(&major, &minor, &patch), CHORUS_VERSION_STRING) != 0) return 10;
  if (major != CHORUS_VERSION_MAJOR || minor != CHORUS_VERSION_MINOR || patch != CHORUS_VERSION_PATCH) return 11;
  snprintf(expected_version, sizeof expected_version, "%d.%d.%d", major, minor, patch);
  if (strcmp(chorus_version(NULL, NULL, NULL), expected_version) != 0) return 12;
  if (CHORUS_VERSION_NUMBER != major * 10000 + minor * 100 + patch) return 13;
  {
    /* One rank: host 0, and no payload to or from any peer. */
    int host = -1;
    chorus_traffic_t traffic;
    memset(&traffic, 0xff, sizeof traffic);
    if (chorus_comm_host(comm, &host) != CHORUS_SUCCESS || host != 0) return 15;
    if (chorus_comm_traffic(comm, &traffic) != CHORUS_SUCCESS) return 16;
    if (traffic.bytes_out_this_host != 0 || traffic.bytes_in_this_host != 0 || traffic.bytes_out_other_hosts != 0 ||
        traffic.bytes_in_other_hosts != 0) {
      return 17;
    }
    if (chorus_comm_traffic(comm, NULL) != CHORUS_ERR_INVALID_ARGUMENT) return 18;
    if (chorus_comm_host(comm, NULL) != CHORUS_ERR_INVALID_ARGUMENT) return 19;
  }
  if (chorus_finalize(&comm) != CHORUS_SUCCESS) return 14;
  return 0;
}

/* Non-blocking calls in a 1-rank job: complete at once, results in place,
 * handles become NULL, argument errors are immediate. */
int capi_nonblocking_single_rank(void) {
  chorus_comm_t comm = NULL;
  float data[4] = {1, 2, 3, 4}, out[4] = {0};
  chorus_request_t requests[3] = {NULL, NULL, NULL};
  chorus_received_t got = {0, 0, 0};
  size_t index = 0;
  int flag = 0;
  if (chorus_init(&comm) != CHORUS_SUCCESS) return 1;
  if (chorus_iallreduce(comm, data, out, 4, CHORUS_FLOAT32, CHORUS_SUM, &requests[0]) != CHORUS_SUCCESS) return 2;
  if (chorus_ibarrier(comm, &requests[2]) != CHORUS_SUCCESS) return 3;
  if (chorus_waitany(3, requests, &index, &got) != CHORUS_SUCCESS || requests[index] != NULL) return 4;
  if (chorus_testall(3, requests, &flag, NULL) != CHORUS_SUCCESS || flag != 1) return 5;
  if (requests[0] != NULL || requests[2] != NULL || memcmp(data, out, sizeof data) != 0) return 6;
  if (got.source != -1 || got.tag != -1 || got.bytes != 0) return 7;
  if (chorus_waitany(3, requests, &index, NULL) != CHORUS_SUCCESS || index != 3) return 8;
  /* A bad root fails at the start, naming it; no request is made. */
  requests[0] = (chorus_request_t)1;
  if (chorus_ibroadcast(comm, data, 4, CHORUS_FLOAT32, 2, &requests[0]) != CHORUS_ERR_INVALID_ARGUMENT) return 9;
  if (requests[0] != NULL || strstr(chorus_last_error(), "root 2") == NULL) return 10;
  if (chorus_ibarrier(comm, NULL) != CHORUS_ERR_INVALID_ARGUMENT) return 11;
  if (chorus_ibarrier(comm, &requests[1]) != CHORUS_SUCCESS || chorus_request_free(&requests[1]) != CHORUS_SUCCESS ||
      requests[1] != NULL) {
    return 12;
  }
  {
    /* The rooted, v- and prefix forms on one rank: each copies its block. */
    size_t one_count[1] = {4}, one_displ[1] = {0};
    chorus_request_t r = NULL;
    int kind;
    for (kind = 0; kind < 8; ++kind) {
      chorus_status_t status = CHORUS_SUCCESS;
      memset(out, 0, sizeof out);
      switch (kind) {
        case 0: status = chorus_igather(comm, data, out, 4, CHORUS_FLOAT32, 0, &r); break;
        case 1: status = chorus_igatherv(comm, data, 4, out, one_count, one_displ, CHORUS_FLOAT32, 0, &r); break;
        case 2: status = chorus_iscatter(comm, data, out, 4, CHORUS_FLOAT32, 0, &r); break;
        case 3: status = chorus_iscatterv(comm, data, one_count, one_displ, out, 4, CHORUS_FLOAT32, 0, &r); break;
        case 4: status = chorus_iallgatherv(comm, data, 4, out, one_count, NULL, CHORUS_FLOAT32, &r); break;
        case 5: status = chorus_ialltoallv(comm, data, one_count, one_displ, out, one_count, one_displ, CHORUS_FLOAT32, &r); break;
        case 6: status = chorus_iscan(comm, data, out, 4, CHORUS_FLOAT32, CHORUS_SUM, &r); break;
        default: status = chorus_iexscan(comm, data, out, 4, CHORUS_FLOAT32, CHORUS_SUM, &r); break;
      }
      if (status != CHORUS_SUCCESS || chorus_wait(&r, NULL) != CHORUS_SUCCESS || r != NULL) return 20 + kind;
      /* exscan leaves rank 0's receive buffer as it was (zeros). */
      if (kind != 7 && memcmp(data, out, sizeof data) != 0) return 30 + kind;
    }
    if (chorus_igather(comm, data, out, 4, CHORUS_FLOAT32, 1, &r) != CHORUS_ERR_INVALID_ARGUMENT || r != NULL) return 40;
  }
  if (chorus_finalize(&comm) != CHORUS_SUCCESS) return 13;
  return 0;
}
