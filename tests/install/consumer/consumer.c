/* Links against an installed chorus through pkg-config and uses the C API. */
#include <chorus/chorus.h>

#include <stdio.h>

int main(void) {
  chorus_comm_t comm;
  if (chorus_init(&comm) != CHORUS_SUCCESS) {
    fprintf(stderr, "consumer_pkgconfig: %s\n", chorus_last_error());
    return 1;
  }
  int size = 0;
  chorus_comm_size(comm, &size);
  printf("consumer_pkgconfig: size %d\n", size);
  return chorus_finalize(&comm) == CHORUS_SUCCESS && size == 1 ? 0 : 1;
}
