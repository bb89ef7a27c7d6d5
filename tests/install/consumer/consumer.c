/* Links against an installed chorus through pkg-config (chorus-c) and uses
 * the C API: a 1-rank job, its layout, transport and version. */
#include <chorus/chorus.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  chorus_comm_t comm;
  if (chorus_init(&comm) != CHORUS_SUCCESS) {
    fprintf(stderr, "consumer_c: %s\n", chorus_last_error());
    return 1;
  }
  int size = 0, local_size = 0;
  char transport[64];
  chorus_comm_size(comm, &size);
  chorus_comm_local_size(comm, &local_size);
  if (chorus_comm_transport_name(comm, transport, sizeof transport, NULL) != CHORUS_SUCCESS) {
    fprintf(stderr, "consumer_c: %s\n", chorus_last_error());
    return 1;
  }
  const char* version = chorus_version(NULL, NULL, NULL);
  printf("consumer_c: size %d, local size %d, transport %s, chorus %s (headers %s)\n", size, local_size, transport,
         version, CHORUS_VERSION_STRING);
  int ok = size == 1 && local_size == 1 && strcmp(version, CHORUS_VERSION_STRING) == 0;
  return chorus_finalize(&comm) == CHORUS_SUCCESS && ok ? 0 : 1;
}
