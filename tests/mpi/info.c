/*
 * Info objects and the communicator calls that take them: MPI_Info_create,
 * _set (a key set twice keeps its place), _get (a value cut to valuelen),
 * _get_valuelen, _get_nkeys, _get_nthkey, _delete, _dup (independent of
 * the original), _free, keys and values of the longest length and one
 * character more, and MPI_Comm_dup_with_info, MPI_Comm_set_info,
 * MPI_Comm_get_info (a working communicator; hint values are not printed:
 * an MPI may add hints of its own). Every result is checked; what is
 * printed is the same under Open MPI.
 */
#include "report.h"

static int rank, size;

static const char* outcome(int code) { return code == MPI_SUCCESS ? "accepted" : "refused"; }

static void info_objects(void) {
  MPI_Info info, copy;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alpha", "1");
  MPI_Info_set(info, "beta", "two");
  MPI_Info_set(info, "gamma", "three3");
  MPI_Info_set(info, "alpha", "one again"); /* replaced in place */
  int nkeys = -1;
  MPI_Info_get_nkeys(info, &nkeys);
  char line[512], key[MPI_MAX_INFO_KEY], value[MPI_MAX_INFO_VAL];
  int used = snprintf(line, sizeof line, "keys %d:", nkeys);
  for (int n = 0; n < nkeys; ++n) {
    int valuelen = -1, flag = 0;
    MPI_Info_get_nthkey(info, n, key);
    MPI_Info_get_valuelen(info, key, &valuelen, &flag);
    MPI_Info_get(info, key, MPI_MAX_INFO_VAL - 1, value, &flag);
    expect(flag == 1 && (int)strlen(value) == valuelen, "key %s: valuelen %d, value %s", key, valuelen, value);
    used += snprintf(line + used, sizeof line - (size_t)used, " %s=%s(%d)", key, value, valuelen);
  }
  say("%s", line);
  expect(nkeys == 3, "three keys, not %d", nkeys);

  int flag = -1;
  char cut[8];
  memset(cut, 'x', sizeof cut);
  MPI_Info_get(info, "alpha", 3, cut, &flag);
  expect(flag == 1 && strcmp(cut, "one") == 0, "a value cut to 3 characters: %s", cut);
  flag = -1;
  MPI_Info_get(info, "missing", MPI_MAX_INFO_VAL - 1, value, &flag);
  expect(flag == 0, "a missing key's flag is %d", flag);

  MPI_Info_dup(info, &copy);
  MPI_Info_delete(info, "beta");
  int copy_keys = -1;
  MPI_Info_get_nkeys(info, &nkeys);
  MPI_Info_get_nkeys(copy, &copy_keys);
  expect(nkeys == 2 && copy_keys == 3, "after deleting from the original: %d and %d keys", nkeys, copy_keys);
  const int deleted_again = MPI_Info_delete(info, "beta");
  expect(deleted_again != MPI_SUCCESS, "deleting a missing key must fail");
  int error_class = -1;
  MPI_Error_class(deleted_again, &error_class);
  expect(error_class == MPI_ERR_INFO_NOKEY, "deleting a missing key: class %d", error_class);

  /* The longest key and value, and one character more. */
  char long_key[MPI_MAX_INFO_KEY + 1], long_value[MPI_MAX_INFO_VAL + 1];
  memset(long_key, 'k', sizeof long_key);
  memset(long_value, 'v', sizeof long_value);
  long_key[MPI_MAX_INFO_KEY - 1] = '\0';
  long_value[MPI_MAX_INFO_VAL - 1] = '\0';
  const int longest = MPI_Info_set(info, long_key, long_value);
  long_key[MPI_MAX_INFO_KEY - 1] = 'k';
  long_key[MPI_MAX_INFO_KEY] = '\0';
  const int key_too_long = MPI_Info_set(info, long_key, "x");
  long_value[MPI_MAX_INFO_VAL - 1] = 'v';
  long_value[MPI_MAX_INFO_VAL] = '\0';
  const int value_too_long = MPI_Info_set(info, "short", long_value);
  say("longest key and value %s; a key one longer %s; a value one longer %s", outcome(longest),
      outcome(key_too_long), outcome(value_too_long));
  expect(longest == MPI_SUCCESS && key_too_long != MPI_SUCCESS && value_too_long != MPI_SUCCESS, "length limits");

  MPI_Info_free(&info);
  MPI_Info_free(&copy);
  expect(info == MPI_INFO_NULL && copy == MPI_INFO_NULL, "freed handles are MPI_INFO_NULL");
}

static void communicators(void) {
  MPI_Info hints;
  MPI_Info_create(&hints);
  MPI_Info_set(hints, "chorus_test_hint", "on");
  MPI_Comm dup;
  MPI_Comm_dup_with_info(MPI_COMM_WORLD, hints, &dup);
  int dup_size = -1, dup_rank = -1, sum = 0;
  MPI_Comm_size(dup, &dup_size);
  MPI_Comm_rank(dup, &dup_rank);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, dup);
  expect(dup_size == size && dup_rank == rank && sum == size * (size - 1) / 2, "dup_with_info's communicator works");
  MPI_Comm_set_info(dup, hints);
  MPI_Info used = MPI_INFO_NULL;
  MPI_Comm_get_info(dup, &used);
  int nkeys = -1;
  MPI_Info_get_nkeys(used, &nkeys);
  expect(used != MPI_INFO_NULL && nkeys >= 0, "get_info returns an info object");
  MPI_Info_free(&used);
  MPI_Info_free(&hints);
  /* MPI_INFO_NULL is allowed where a communicator takes hints. */
  MPI_Comm plain;
  const int code = MPI_Comm_dup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &plain);
  say("dup_with_info: size %d, rank sum %d; with MPI_INFO_NULL %s", dup_size, sum, outcome(code));
  if (code == MPI_SUCCESS) MPI_Comm_free(&plain);
  MPI_Comm_free(&dup);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  info_objects();
  communicators();
  const int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("info", failures);
  return failures == 0 ? 0 : 1;
}
