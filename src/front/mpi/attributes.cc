// Attributes of communicators (MPI-3.1 6.7): the predefined ones
// (MPI_TAG_UB, MPI_UNIVERSE_SIZE, ...) and cached ones under keyvals made by
// MPI_Comm_create_keyval, copied by MPI_Comm_dup through the keyval's copy
// function and deleted through its delete function.
//
// A keyval lives until it is freed and no object holds an attribute under
// it (MPI-3.1 6.7.2: a freed keyval's attributes still copy and delete).
// Keyvals are process-wide, under a lock (MPI_THREAD_MULTIPLE), numbered
// from one sequence for both kinds, so a communicator's keyval used on a
// datatype is refused rather than taken for another. An object's
// attributes are its own, changed by one thread at a time as MPI asks of
// every call that changes an object. The user's functions are called
// without the lock: they may call MPI.
#include "mpi/internal.hpp"

#include <algorithm>
#include <map>
#include <mutex>

namespace chorus::mpi {
namespace {

// The values MPI_Comm_get_attr hands out by address.
int tag_upper_bound = 0x7fffffff;
int no_host = MPI_PROC_NULL;
int any_rank_does_io = MPI_ANY_SOURCE;
int wtime_is_global = 0;  // MPI_Wtime is each process's own clock
int universe_size = 0;    // set from MPI_COMM_WORLD's size at the first query

// User keyvals start past the predefined ones (MPI_TAG_UB .. MPI_UNIVERSE_SIZE).
constexpr int kFirstUserKeyval = 64;

// What the two kinds of object differ in: their functions' types, where
// their attributes live, and the names in messages.
template <class Handle>
struct Kind;
template <>
struct Kind<MPI_Comm> {
  using Copy = MPI_Comm_copy_attr_function;
  using Delete = MPI_Comm_delete_attr_function;
  static constexpr const char* maker = "MPI_Comm_create_keyval";
};
template <>
struct Kind<MPI_Datatype> {
  using Copy = MPI_Type_copy_attr_function;
  using Delete = MPI_Type_delete_attr_function;
  static constexpr const char* maker = "MPI_Type_create_keyval";
};

template <class Handle>
struct Keyval {
  typename Kind<Handle>::Copy* copy;
  typename Kind<Handle>::Delete* remove;
  void* extra_state;
  int attached = 0;  // attributes set under it, on every object of its kind
  bool freed = false;
};

using Attributes = std::vector<std::pair<int, void*>>;

struct Registry {
  std::mutex mutex;
  int next = kFirstUserKeyval;
  std::map<int, Keyval<MPI_Comm>> comm_keyvals;
  std::map<int, Keyval<MPI_Datatype>> type_keyvals;
  // A datatype's attributes live here, not in the type: constructors and
  // requests copy a type's struct, and a copy must not carry them.
  std::map<MPI_Datatype, Attributes> type_attributes;
};
Registry& registry() {
  static Registry* all = new Registry();  // never destroyed: attributes may be deleted from atexit handlers
  return *all;
}
std::map<int, Keyval<MPI_Comm>>& keyvals_of(MPI_Comm) { return registry().comm_keyvals; }
std::map<int, Keyval<MPI_Datatype>>& keyvals_of(MPI_Datatype) { return registry().type_keyvals; }

Attributes& attributes_of(MPI_Comm comm) { return comm->attributes; }
Attributes& attributes_of(MPI_Datatype type) {
  std::lock_guard lock(registry().mutex);
  return registry().type_attributes[type];  // a map's elements stay where they are
}

bool predefined(int keyval) { return keyval >= MPI_TAG_UB && keyval <= MPI_UNIVERSE_SIZE; }

// A user keyval of `Handle`'s kind, copied out under the lock (its
// functions are called without it). MPI_ERR_KEYVAL for a predefined,
// unknown or (unless `allow_freed`) freed one.
template <class Handle>
Keyval<Handle> find_keyval(int keyval, bool allow_freed = false) {
  if (predefined(keyval)) fail(MPI_ERR_KEYVAL, "keyval ", keyval, " is predefined: its attribute cannot be changed");
  std::lock_guard lock(registry().mutex);
  auto& live = keyvals_of(Handle{});
  auto it = live.find(keyval);
  if (it == live.end() || (it->second.freed && !allow_freed)) {
    fail(MPI_ERR_KEYVAL, "keyval ", keyval, " is not a keyval from ", Kind<Handle>::maker, " (or was freed)");
  }
  return it->second;
}

// One attribute more (+1) or fewer (-1) under `keyval`; the last of a freed
// keyval's attributes ends it.
template <class Handle>
void count_attached(int keyval, int change) {
  std::lock_guard lock(registry().mutex);
  auto& live = keyvals_of(Handle{});
  auto it = live.find(keyval);
  if (it == live.end()) return;
  it->second.attached += change;
  if (it->second.freed && it->second.attached == 0) live.erase(it);
}

template <class Handle>
Attributes::iterator attribute_of(Handle object, int keyval) {
  Attributes& attributes = attributes_of(object);
  return std::find_if(attributes.begin(), attributes.end(),
                      [&](const auto& attribute) { return attribute.first == keyval; });
}

// Runs the delete function of `object`'s attribute under `keyval` and
// removes it; the function's error (MPI-3.1: the call fails) leaves it.
template <class Handle>
void delete_attribute(Handle object, int keyval, void* value) {
  const Keyval<Handle> made = find_keyval<Handle>(keyval, /*allow_freed=*/true);
  if (made.remove != nullptr) {
    const int code = made.remove(object, keyval, value, made.extra_state);
    if (code != MPI_SUCCESS) fail(code, "the delete function of keyval ", keyval, " returned error ", code);
  }
  // The function may have changed the list (set or deleted others): look again.
  Attributes& attributes = attributes_of(object);
  auto at = attribute_of(object, keyval);
  if (at != attributes.end()) attributes.erase(at);
  count_attached<Handle>(keyval, -1);
}

template <class Handle>
void copy_all(Handle from, Handle to) {
  const Attributes attributes = attributes_of(from);  // a copy function may change `from`'s
  for (const auto& [keyval, value] : attributes) {
    const Keyval<Handle> made = find_keyval<Handle>(keyval, /*allow_freed=*/true);
    if (made.copy == nullptr) continue;  // the null copy function
    void* copied = nullptr;
    int keep = 0;
    const int code = made.copy(from, keyval, made.extra_state, value, &copied, &keep);
    if (code != MPI_SUCCESS) fail(code, "the copy function of keyval ", keyval, " returned error ", code);
    if (keep == 0) continue;
    attributes_of(to).emplace_back(keyval, copied);
    count_attached<Handle>(keyval, +1);
  }
}

// Last set first, as Open MPI 4.1 does (MPI leaves the order open).
template <class Handle>
void delete_all(Handle object) {
  for (;;) {
    Attributes& attributes = attributes_of(object);
    if (attributes.empty()) return;
    const auto [keyval, value] = attributes.back();
    delete_attribute(object, keyval, value);
  }
}

template <class Handle>
void create_keyval(typename Kind<Handle>::Copy* copy, typename Kind<Handle>::Copy* null_copy,
                   typename Kind<Handle>::Delete* remove, typename Kind<Handle>::Delete* null_delete, int* keyval,
                   void* extra_state) {
  if (keyval == nullptr) fail(MPI_ERR_ARG, "null keyval");
  // The null functions are kept as "none": nothing to call.
  if (copy == null_copy) copy = nullptr;
  if (remove == null_delete) remove = nullptr;
  std::lock_guard lock(registry().mutex);
  const int made = registry().next++;
  keyvals_of(Handle{}).emplace(made, Keyval<Handle>{copy, remove, extra_state});
  *keyval = made;
}

template <class Handle>
void free_keyval(int* keyval) {
  if (keyval == nullptr) fail(MPI_ERR_ARG, "null keyval");
  find_keyval<Handle>(*keyval);
  {
    std::lock_guard lock(registry().mutex);
    auto& live = keyvals_of(Handle{});
    auto it = live.find(*keyval);
    it->second.freed = true;
    if (it->second.attached == 0) live.erase(it);
  }
  *keyval = MPI_KEYVAL_INVALID;
}

template <class Handle>
void set_attribute(Handle object, int keyval, void* value) {
  find_keyval<Handle>(keyval);
  // A value already there goes as a delete_attr call would take it.
  if (auto at = attribute_of(object, keyval); at != attributes_of(object).end()) {
    delete_attribute(object, keyval, at->second);
  }
  attributes_of(object).emplace_back(keyval, value);
  count_attached<Handle>(keyval, +1);
}

template <class Handle>
void remove_attribute(Handle object, int keyval) {
  find_keyval<Handle>(keyval, /*allow_freed=*/true);
  auto at = attribute_of(object, keyval);
  if (at == attributes_of(object).end()) fail(MPI_ERR_KEYVAL, "no attribute is set under keyval ", keyval);
  delete_attribute(object, keyval, at->second);
}

// A user attribute's value into *attribute_val (a void**), *flag 1; 0 if unset.
template <class Handle>
void get_attribute(Handle object, int keyval, void* attribute_val, int* flag) {
  if (attribute_val == nullptr || flag == nullptr) fail(MPI_ERR_ARG, "null attribute_val or flag");
  *flag = 0;
  find_keyval<Handle>(keyval, /*allow_freed=*/true);
  if (auto at = attribute_of(object, keyval); at != attributes_of(object).end()) {
    *static_cast<void**>(attribute_val) = at->second;
    *flag = 1;
  }
}

}  // namespace

void copy_attributes(MPI_Comm from, MPI_Comm to) { copy_all(from, to); }
void delete_attributes(MPI_Comm comm) { delete_all(comm); }
void copy_attributes(MPI_Datatype from, MPI_Datatype to) { copy_all(from, to); }
void delete_attributes(MPI_Datatype type) {
  delete_all(type);
  std::lock_guard lock(registry().mutex);
  registry().type_attributes.erase(type);
}
void forget_attributes(MPI_Datatype type) noexcept {
  std::lock_guard lock(registry().mutex);
  registry().type_attributes.erase(type);
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_COMM_NULL_COPY_FN(MPI_Comm, int, void*, void*, void*, int* flag) {
  *flag = 0;
  return MPI_SUCCESS;
}

int MPI_COMM_DUP_FN(MPI_Comm, int, void*, void* attribute_val_in, void* attribute_val_out, int* flag) {
  *static_cast<void**>(attribute_val_out) = attribute_val_in;
  *flag = 1;
  return MPI_SUCCESS;
}

int MPI_COMM_NULL_DELETE_FN(MPI_Comm, int, void*, void*) { return MPI_SUCCESS; }

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* comm_copy_attr_fn,
                           MPI_Comm_delete_attr_function* comm_delete_attr_fn, int* comm_keyval, void* extra_state) {
  return call("MPI_Comm_create_keyval", MPI_COMM_WORLD, [&] {
    create_keyval<MPI_Comm>(comm_copy_attr_fn, MPI_COMM_NULL_COPY_FN, comm_delete_attr_fn, MPI_COMM_NULL_DELETE_FN,
                            comm_keyval, extra_state);
  });
}

int MPI_Comm_free_keyval(int* comm_keyval) {
  return call("MPI_Comm_free_keyval", MPI_COMM_WORLD, [&] { free_keyval<MPI_Comm>(comm_keyval); });
}

int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void* attribute_val) {
  return call("MPI_Comm_set_attr", comm, [&] {
    use_comm(comm);
    set_attribute(comm, comm_keyval, attribute_val);
  });
}

int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval) {
  return call("MPI_Comm_delete_attr", comm, [&] {
    use_comm(comm);
    remove_attribute(comm, comm_keyval);
  });
}

int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void* attribute_val, int* flag) {
  return call("MPI_Comm_get_attr", comm, [&] {
    use_comm(comm);
    if (!predefined(comm_keyval)) return get_attribute(comm, comm_keyval, attribute_val, flag);
    if (attribute_val == nullptr || flag == nullptr) fail(MPI_ERR_ARG, "null attribute_val or flag");
    int* value = nullptr;
    switch (comm_keyval) {
      case MPI_TAG_UB: value = &tag_upper_bound; break;
      case MPI_HOST: value = &no_host; break;
      case MPI_IO: value = &any_rank_does_io; break;
      case MPI_WTIME_IS_GLOBAL: value = &wtime_is_global; break;
      case MPI_UNIVERSE_SIZE:
        // No dynamic processes: the universe is the job.
        universe_size = static_cast<int>(chorus_mpi_comm_world.world_ranks.size());
        value = &universe_size;
        break;
      default: break;  // MPI_APPNUM, MPI_LASTUSEDCODE: not set (one application, no user error codes)
    }
    *flag = value != nullptr ? 1 : 0;
    if (value != nullptr) *static_cast<int**>(attribute_val) = value;
  });
}

int MPI_TYPE_NULL_COPY_FN(MPI_Datatype, int, void*, void*, void*, int* flag) {
  *flag = 0;
  return MPI_SUCCESS;
}

int MPI_TYPE_DUP_FN(MPI_Datatype, int, void*, void* attribute_val_in, void* attribute_val_out, int* flag) {
  *static_cast<void**>(attribute_val_out) = attribute_val_in;
  *flag = 1;
  return MPI_SUCCESS;
}

int MPI_TYPE_NULL_DELETE_FN(MPI_Datatype, int, void*, void*) { return MPI_SUCCESS; }

int MPI_Type_create_keyval(MPI_Type_copy_attr_function* type_copy_attr_fn,
                           MPI_Type_delete_attr_function* type_delete_attr_fn, int* type_keyval, void* extra_state) {
  return call("MPI_Type_create_keyval", MPI_COMM_WORLD, [&] {
    create_keyval<MPI_Datatype>(type_copy_attr_fn, MPI_TYPE_NULL_COPY_FN, type_delete_attr_fn, MPI_TYPE_NULL_DELETE_FN,
                                type_keyval, extra_state);
  });
}

int MPI_Type_free_keyval(int* type_keyval) {
  return call("MPI_Type_free_keyval", MPI_COMM_WORLD, [&] { free_keyval<MPI_Datatype>(type_keyval); });
}

int MPI_Type_set_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val) {
  return call("MPI_Type_set_attr", MPI_COMM_WORLD, [&] {
    use_any_type(datatype, "datatype");
    set_attribute(datatype, type_keyval, attribute_val);
  });
}

int MPI_Type_get_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val, int* flag) {
  return call("MPI_Type_get_attr", MPI_COMM_WORLD, [&] {
    use_any_type(datatype, "datatype");
    get_attribute(datatype, type_keyval, attribute_val, flag);
  });
}

int MPI_Type_delete_attr(MPI_Datatype datatype, int type_keyval) {
  return call("MPI_Type_delete_attr", MPI_COMM_WORLD, [&] {
    use_any_type(datatype, "datatype");
    remove_attribute(datatype, type_keyval);
  });
}

}  // extern "C"
