// Info objects (MPI-3.1 9): ordered key/value pairs of strings, and the
// communicator calls that take them (MPI_Comm_dup_with_info,
// MPI_Comm_set_info, MPI_Comm_get_info). chorus acts on no info key: every
// hint is accepted and kept, as MPI allows (an implementation may ignore
// any hint), and MPI_Comm_get_info returns those set on the communicator.
#include "mpi/internal.hpp"

#include <algorithm>
#include <cstring>

struct chorus_mpi_info {
  uint32_t magic;
  std::vector<std::pair<std::string, std::string>> entries;  // in the order keys were first set
};

namespace chorus::mpi {
namespace {

inline constexpr uint32_t kInfoMagic = 0x696e666f;  // "info"

chorus_mpi_info& use_info(MPI_Info info) {
  if (info == MPI_INFO_NULL) fail(MPI_ERR_INFO, "MPI_INFO_NULL is not an info object");
  if (info->magic != kInfoMagic) fail(MPI_ERR_INFO, "invalid info handle (freed, or not an info object)");
  return *info;
}

const std::string& checked_key(const char* key, std::string& storage) {
  if (key == nullptr) fail(MPI_ERR_INFO_KEY, "null key");
  const size_t length = std::strlen(key);
  if (length == 0 || length > MPI_MAX_INFO_KEY - 1) {
    fail(MPI_ERR_INFO_KEY, "key \"", key, "\" has ", length, " characters (1..", MPI_MAX_INFO_KEY - 1, ")");
  }
  storage = key;
  return storage;
}

auto entry_of(chorus_mpi_info& info, const std::string& key) {
  return std::find_if(info.entries.begin(), info.entries.end(), [&](const auto& entry) { return entry.first == key; });
}

MPI_Info new_info(std::vector<std::pair<std::string, std::string>> entries) {
  return new chorus_mpi_info{kInfoMagic, std::move(entries)};
}

// What a communicator keeps of MPI_Comm_set_info / MPI_Comm_dup_with_info.
std::vector<std::pair<std::string, std::string>> info_entries(MPI_Info info) {
  if (info == MPI_INFO_NULL) return {};
  return use_info(info).entries;
}

}  // namespace

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Info_create(MPI_Info* info) {
  return call("MPI_Info_create", MPI_COMM_WORLD, [&] {
    if (info == nullptr) fail(MPI_ERR_ARG, "null info pointer");
    *info = new_info({});
  });
}

int MPI_Info_dup(MPI_Info info, MPI_Info* newinfo) {
  return call("MPI_Info_dup", MPI_COMM_WORLD, [&] {
    const chorus_mpi_info& old = use_info(info);
    if (newinfo == nullptr) fail(MPI_ERR_ARG, "null newinfo pointer");
    *newinfo = new_info(old.entries);
  });
}

int MPI_Info_free(MPI_Info* info) {
  return call("MPI_Info_free", MPI_COMM_WORLD, [&] {
    if (info == nullptr) fail(MPI_ERR_ARG, "null info pointer");
    use_info(*info).magic = 0;
    delete *info;
    *info = MPI_INFO_NULL;
  });
}

int MPI_Info_set(MPI_Info info, const char* key, const char* value) {
  return call("MPI_Info_set", MPI_COMM_WORLD, [&] {
    chorus_mpi_info& object = use_info(info);
    std::string storage;
    const std::string& name = checked_key(key, storage);
    if (value == nullptr) fail(MPI_ERR_INFO_VALUE, "null value for key \"", name, "\"");
    const size_t length = std::strlen(value);
    if (length == 0 || length > MPI_MAX_INFO_VAL - 1) {
      fail(MPI_ERR_INFO_VALUE, "the value of key \"", name, "\" has ", length, " characters (1..",
           MPI_MAX_INFO_VAL - 1, ")");
    }
    if (auto at = entry_of(object, name); at != object.entries.end()) {
      at->second = value;  // a key keeps its place
    } else {
      object.entries.emplace_back(name, value);
    }
  });
}

int MPI_Info_delete(MPI_Info info, const char* key) {
  return call("MPI_Info_delete", MPI_COMM_WORLD, [&] {
    chorus_mpi_info& object = use_info(info);
    std::string storage;
    const std::string& name = checked_key(key, storage);
    auto at = entry_of(object, name);
    if (at == object.entries.end()) fail(MPI_ERR_INFO_NOKEY, "key \"", name, "\" is not set");
    object.entries.erase(at);
  });
}

// At most `valuelen` characters and a terminating NUL (MPI-3.1 9: the
// buffer holds valuelen + 1).
int MPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag) {
  return call("MPI_Info_get", MPI_COMM_WORLD, [&] {
    chorus_mpi_info& object = use_info(info);
    std::string storage;
    const std::string& name = checked_key(key, storage);
    if (flag == nullptr) fail(MPI_ERR_ARG, "null flag");
    if (valuelen < 0) fail(MPI_ERR_ARG, "valuelen ", valuelen, " is negative");
    *flag = 0;
    auto at = entry_of(object, name);
    if (at == object.entries.end()) return;
    if (value == nullptr) fail(MPI_ERR_ARG, "null value buffer");
    const size_t copied = std::min(at->second.size(), static_cast<size_t>(valuelen));
    std::memcpy(value, at->second.data(), copied);
    value[copied] = '\0';
    *flag = 1;
  });
}

int MPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag) {
  return call("MPI_Info_get_valuelen", MPI_COMM_WORLD, [&] {
    chorus_mpi_info& object = use_info(info);
    std::string storage;
    const std::string& name = checked_key(key, storage);
    if (valuelen == nullptr || flag == nullptr) fail(MPI_ERR_ARG, "null valuelen or flag");
    auto at = entry_of(object, name);
    *flag = at != object.entries.end() ? 1 : 0;
    if (*flag) *valuelen = static_cast<int>(at->second.size());
  });
}

int MPI_Info_get_nkeys(MPI_Info info, int* nkeys) {
  return call("MPI_Info_get_nkeys", MPI_COMM_WORLD, [&] {
    const chorus_mpi_info& object = use_info(info);
    if (nkeys == nullptr) fail(MPI_ERR_ARG, "null nkeys");
    *nkeys = static_cast<int>(object.entries.size());
  });
}

int MPI_Info_get_nthkey(MPI_Info info, int n, char* key) {
  return call("MPI_Info_get_nthkey", MPI_COMM_WORLD, [&] {
    const chorus_mpi_info& object = use_info(info);
    if (key == nullptr) fail(MPI_ERR_ARG, "null key buffer");
    if (n < 0 || static_cast<size_t>(n) >= object.entries.size()) {
      fail(MPI_ERR_ARG, "n ", n, " is not in 0..", static_cast<int>(object.entries.size()) - 1);
    }
    const std::string& name = object.entries[static_cast<size_t>(n)].first;
    std::memcpy(key, name.c_str(), name.size() + 1);
  });
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  return call("MPI_Comm_dup_with_info", comm, [&] {
    use_comm(comm);
    auto hints = info_entries(info);  // checked before the collective
    if (newcomm == nullptr) fail(MPI_ERR_ARG, "null newcomm");
    *newcomm = MPI_COMM_NULL;
    MPI_Comm made = dup_comm(comm);
    // MPI-3.1 6.4.2: the new communicator's hints are `info`'s, not comm's.
    made->hints = std::move(hints);
    *newcomm = made;
  });
}

int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  return call("MPI_Comm_set_info", comm, [&] {
    use_comm(comm);
    use_info(info);
    comm->hints = info_entries(info);
  });
}

int MPI_Comm_get_info(MPI_Comm comm, MPI_Info* info_used) {
  return call("MPI_Comm_get_info", comm, [&] {
    use_comm(comm);
    if (info_used == nullptr) fail(MPI_ERR_ARG, "null info_used");
    *info_used = new_info(comm->hints);
  });
}

}  // extern "C"
