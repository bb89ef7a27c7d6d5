/*
 * Attribute caching on communicators: MPI_Comm_create_keyval with the
 * predefined functions (MPI_COMM_DUP_FN, MPI_COMM_NULL_COPY_FN,
 * MPI_COMM_NULL_DELETE_FN) and user ones (a copy that changes the value, one
 * that declines, one that fails; a delete that counts, one that fails),
 * MPI_Comm_set_attr (twice: the first value is deleted), MPI_Comm_get_attr,
 * MPI_Comm_delete_attr, MPI_Comm_dup copying, MPI_Comm_free deleting (the
 * order is printed), MPI_Comm_free_keyval with attributes still set, the
 * predefined attributes, an MPI_COMM_SELF attribute whose delete function
 * runs at the start of MPI_Finalize, and the same on datatypes
 * (MPI_Type_create_keyval .., copied by MPI_Type_dup, deleted by
 * MPI_Type_free, on a predefined type too). Every result is checked; what
 * is printed is the same under Open MPI.
 */
#include "report.h"

static int rank, size;
static int deleted[64], deleted_count = 0;  /* values passed to count_delete, in order */
static int self_deleted = 0;

static int count_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm, (void)keyval, (void)extra;
  if (deleted_count < 64) deleted[deleted_count++] = *(int*)value;
  return MPI_SUCCESS;
}

/* The copy is the value in the extra state's slot plus 1000. */
static int copy_plus(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm, (void)keyval;
  int* slots = (int*)extra;
  slots[0] = *(int*)in + 1000;
  *(void**)out = &slots[0];
  *flag = 1;
  return MPI_SUCCESS;
}

static int copy_declines(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm, (void)keyval, (void)extra, (void)in, (void)out;
  *flag = 0;
  return MPI_SUCCESS;
}

static int copy_fails(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm, (void)keyval, (void)extra, (void)in, (void)out;
  *flag = 0;
  return MPI_ERR_OTHER;
}

static int delete_fails(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm, (void)keyval, (void)value, (void)extra;
  return MPI_ERR_OTHER;
}

static int self_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)keyval, (void)extra;
  /* MPI still works here: a collective on MPI_COMM_WORLD. */
  int one = 1, total = 0;
  MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  self_deleted = comm == MPI_COMM_SELF && *(int*)value == 77 && total == size;
  if (rank == 0) printf("MPI_COMM_SELF's attribute deleted at MPI_Finalize: %s\n", self_deleted ? "yes" : "wrong");
  return MPI_SUCCESS;
}

static int type_deleted[16], type_deleted_count = 0;
static int count_type_delete(MPI_Datatype type, int keyval, void* value, void* extra) {
  (void)type, (void)keyval, (void)extra;
  if (type_deleted_count < 16) type_deleted[type_deleted_count++] = *(int*)value;
  return MPI_SUCCESS;
}

static int get_type(MPI_Datatype type, int keyval, int* value) {
  int* got = NULL;
  int flag = -1;
  MPI_Type_get_attr(type, keyval, &got, &flag);
  if (flag && got != NULL) *value = *got;
  return flag;
}

static void type_attributes(int comm_keyval) {
  static int p = 10, q = 20, r = 30;
  int kv_dup, kv_null, value = -1;
  MPI_Type_create_keyval(MPI_TYPE_DUP_FN, count_type_delete, &kv_dup, NULL);
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &kv_null, NULL);
  MPI_Datatype pair, copy;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  expect(get_type(pair, kv_dup, &value) == 0, "a new type has no attribute");
  MPI_Type_set_attr(pair, kv_dup, &p);
  MPI_Type_set_attr(pair, kv_null, &q);
  MPI_Type_dup(pair, &copy);
  int v_dup = -1, v_null = -1;
  const int f_dup = get_type(copy, kv_dup, &v_dup), f_null = get_type(copy, kv_null, &v_null);
  expect(f_dup && v_dup == 10 && !f_null, "the type dup's attributes: %d:%d %d", f_dup, v_dup, f_null);
  MPI_Type_free(&copy);
  expect(type_deleted_count == 1 && type_deleted[0] == 10, "freeing the type dup deletes its copy");
  /* On a predefined type, and deleted by hand. */
  MPI_Type_set_attr(MPI_INT, kv_dup, &r);
  expect(get_type(MPI_INT, kv_dup, &value) == 1 && value == 30, "MPI_INT's attribute %d", value);
  MPI_Type_delete_attr(MPI_INT, kv_dup);
  expect(get_type(MPI_INT, kv_dup, &value) == 0 && type_deleted_count == 2, "MPI_INT's attribute deleted");
  MPI_Type_free(&pair);
  expect(type_deleted_count == 3 && type_deleted[2] == 10, "freeing the type deletes its attribute");
  /* A communicator's keyval is not a datatype's. */
  const int code = MPI_Type_set_attr(MPI_INT, comm_keyval, &p);
  say("type attributes: dup copied %d (value %d), null copy %d, deleted %d:%d,%d,%d; a comm keyval on a type %s",
      f_dup, v_dup, f_null, type_deleted_count, type_deleted[0], type_deleted[1], type_deleted[2],
      code == MPI_SUCCESS ? "accepted" : "refused");
  expect(code != MPI_SUCCESS, "a comm keyval must not serve a datatype");
  MPI_Type_free_keyval(&kv_dup);
  MPI_Type_free_keyval(&kv_null);
  expect(kv_dup == MPI_KEYVAL_INVALID && kv_null == MPI_KEYVAL_INVALID, "type keyvals freed");
}

static int get(MPI_Comm comm, int keyval, int* value) {
  int* got = NULL;
  int flag = -1;
  MPI_Comm_get_attr(comm, keyval, &got, &flag);
  if (flag && got != NULL) *value = *got;
  return flag;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  MPI_Comm base;
  MPI_Comm_dup(MPI_COMM_WORLD, &base);
  static int slots[4];
  int kv_dup, kv_null, kv_plus, kv_declines;
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, count_delete, &kv_dup, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &kv_null, NULL);
  MPI_Comm_create_keyval(copy_plus, count_delete, &kv_plus, slots);
  MPI_Comm_create_keyval(copy_declines, count_delete, &kv_declines, NULL);
  expect(kv_dup != kv_null && kv_null != kv_plus && kv_plus != kv_declines && kv_dup != MPI_KEYVAL_INVALID,
         "four distinct keyvals");

  static int a = 1, b = 2, c = 3, d = 4, e = 5;
  int value = -1;
  expect(get(base, kv_dup, &value) == 0, "nothing set yet under kv_dup");
  MPI_Comm_set_attr(base, kv_dup, &a);
  MPI_Comm_set_attr(base, kv_dup, &b); /* a is deleted */
  MPI_Comm_set_attr(base, kv_null, &c);
  MPI_Comm_set_attr(base, kv_plus, &d);
  MPI_Comm_set_attr(base, kv_declines, &e);
  expect(deleted_count == 1 && deleted[0] == 1, "setting twice deletes the first value (%d deletions)", deleted_count);
  expect(get(base, kv_dup, &value) == 1 && value == 2, "kv_dup holds %d", value);
  expect(get(base, kv_null, &value) == 1 && value == 3, "kv_null holds %d", value);

  MPI_Comm copy;
  MPI_Comm_dup(base, &copy);
  int v_dup = -1, v_null = -1, v_plus = -1, v_declines = -1;
  const int f_dup = get(copy, kv_dup, &v_dup), f_null = get(copy, kv_null, &v_null);
  const int f_plus = get(copy, kv_plus, &v_plus), f_declines = get(copy, kv_declines, &v_declines);
  expect(f_dup && v_dup == 2 && !f_null && f_plus && v_plus == 1004 && !f_declines,
         "the dup's attributes: %d:%d %d %d:%d %d", f_dup, v_dup, f_null, f_plus, v_plus, f_declines);
  say("dup copied: DUP_FN %d (value %d), NULL_COPY_FN %d, user copy %d (value %d), declined %d", f_dup, v_dup, f_null,
      f_plus, v_plus, f_declines);
  /* Copied, not shared: deleting from the copy leaves base's. */
  MPI_Comm_delete_attr(copy, kv_dup);
  expect(get(copy, kv_dup, &value) == 0 && get(base, kv_dup, &value) == 1, "delete_attr on the dup only");

  /* A freed keyval's attributes still delete with their communicator. */
  const int kv_plus_before = kv_plus;
  MPI_Comm_free_keyval(&kv_plus);
  expect(kv_plus == MPI_KEYVAL_INVALID && kv_plus_before != MPI_KEYVAL_INVALID, "free_keyval resets the handle");

  deleted_count = 0;
  MPI_Comm_free(&copy);
  char line[200];
  int used = snprintf(line, sizeof line, "freeing the dup deleted %d:", deleted_count);
  for (int i = 0; i < deleted_count; ++i) used += snprintf(line + used, sizeof line - (size_t)used, " %d", deleted[i]);
  say("%s", line);
  expect(deleted_count == 1 && deleted[0] == 1004, "the dup's one remaining counted attribute");
  deleted_count = 0;
  MPI_Comm_free(&base);
  used = snprintf(line, sizeof line, "freeing base deleted %d:", deleted_count);
  for (int i = 0; i < deleted_count; ++i) used += snprintf(line + used, sizeof line - (size_t)used, " %d", deleted[i]);
  say("%s", line);
  expect(deleted_count == 3, "base's three counted attributes: %d", deleted_count);

  /* Failing user functions fail the call. */
  int kv_bad_copy, kv_bad_delete;
  MPI_Comm_create_keyval(copy_fails, MPI_COMM_NULL_DELETE_FN, &kv_bad_copy, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_fails, &kv_bad_delete, NULL);
  MPI_Comm third, refused = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &third);
  MPI_Comm_set_attr(third, kv_bad_copy, &a);
  int code = MPI_Comm_dup(third, &refused);
  say("dup with a failing copy function: %s", code == MPI_SUCCESS ? "accepted" : "refused");
  expect(code != MPI_SUCCESS, "a failing copy function must fail MPI_Comm_dup");
  MPI_Comm_set_attr(third, kv_bad_delete, &b);
  code = MPI_Comm_delete_attr(third, kv_bad_delete);
  say("delete_attr with a failing delete function: %s", code == MPI_SUCCESS ? "accepted" : "refused");
  expect(code != MPI_SUCCESS, "a failing delete function must fail MPI_Comm_delete_attr");
  MPI_Comm_free_keyval(&kv_bad_copy);
  MPI_Comm_free_keyval(&kv_bad_delete);

  /* Predefined attributes: readable, not settable. */
  int* tag_ub = NULL;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  expect(flag && tag_ub != NULL && *tag_ub >= 32767, "MPI_TAG_UB");
  code = MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, &a);
  say("set_attr of MPI_TAG_UB: %s; MPI_TAG_UB >= 32767: %d", code == MPI_SUCCESS ? "accepted" : "refused",
      flag && *tag_ub >= 32767);
  expect(code != MPI_SUCCESS, "MPI_TAG_UB must not be settable");

  type_attributes(kv_dup);
  MPI_Comm_free_keyval(&kv_dup);
  MPI_Comm_free_keyval(&kv_null);
  MPI_Comm_free_keyval(&kv_declines);

  /* Deleted at the start of MPI_Finalize, while MPI still works. */
  static int seventy_seven = 77;
  int kv_self;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &kv_self, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, kv_self, &seventy_seven);

  const int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("attributes", failures + (self_deleted ? 0 : 1));
  return failures == 0 && self_deleted ? 0 : 1;
}
