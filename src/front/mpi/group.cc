// Groups (MPI-3.1 6.3) and the communicator calls built on them or on the
// host layout: MPI_Comm_group, MPI_Comm_create, MPI_Comm_split_type,
// MPI_Comm_compare, MPI_Comm_test_inter and communicator names (attributes:
// attributes.cc).
//
// A group is its members' ranks in MPI_COMM_WORLD, in group order; every
// communicator keeps the same list for its own members (comm.cc), so group
// operations are local, as MPI has them. MPI_Comm_create is a split of the
// parent (collective over it, as MPI requires): members take color 0 and
// their position in the group as key. MPI_Comm_create_group is collective
// over the group's members only (chorus' Communicator::create_group).
#include "mpi/internal.hpp"

#include <algorithm>
#include <cstring>

extern "C" {
struct chorus_mpi_group chorus_mpi_group_empty = {chorus::mpi::kGroupMagic, {}, true};
}

namespace chorus::mpi {

namespace {

const chorus_mpi_group& use_group(MPI_Group group, const char* role = "group") {
  if (group == MPI_GROUP_NULL) fail(MPI_ERR_GROUP, role, " is MPI_GROUP_NULL");
  if (group->magic != kGroupMagic) fail(MPI_ERR_GROUP, "invalid ", role, " handle (freed, or not a group)");
  return *group;
}

MPI_Group new_group(std::vector<int> world_ranks) {
  if (world_ranks.empty()) return MPI_GROUP_EMPTY;
  return new chorus_mpi_group{kGroupMagic, std::move(world_ranks), false};
}

void check_output(const void* out, const char* name) {
  if (out == nullptr) fail(MPI_ERR_ARG, "null ", name);
}

int position(const std::vector<int>& members, int world_rank) {
  auto found = std::find(members.begin(), members.end(), world_rank);
  return found == members.end() ? MPI_UNDEFINED : static_cast<int>(found - members.begin());
}

// The ranks of `group` that `ranks` (n of them) name, checked: in range, no repeats.
std::vector<int> named_ranks(const chorus_mpi_group& group, int n, const int ranks[]) {
  if (n < 0) fail(MPI_ERR_ARG, "n ", n, " is negative");
  if (n > 0 && ranks == nullptr) fail(MPI_ERR_ARG, "null ranks");
  const int size = static_cast<int>(group.world_ranks.size());
  std::vector<bool> seen(group.world_ranks.size());
  std::vector<int> named;
  for (int i = 0; i < n; ++i) {
    if (ranks[i] < 0 || ranks[i] >= size) fail(MPI_ERR_RANK, "ranks[", i, "] = ", ranks[i], " is not in the group (0..", size - 1, ")");
    if (seen[static_cast<size_t>(ranks[i])]) fail(MPI_ERR_RANK, "rank ", ranks[i], " is named twice");
    seen[static_cast<size_t>(ranks[i])] = true;
    named.push_back(ranks[i]);
  }
  return named;
}

// The ranks `n` (first, last, stride) triplets name, in order (MPI-3.1 6.3.2).
std::vector<int> ranges(const chorus_mpi_group& group, int n, int triplets[][3]) {
  if (n < 0) fail(MPI_ERR_ARG, "n ", n, " is negative");
  if (n > 0 && triplets == nullptr) fail(MPI_ERR_ARG, "null ranges");
  std::vector<int> ranks;
  for (int i = 0; i < n; ++i) {
    const int first = triplets[i][0], last = triplets[i][1], stride = triplets[i][2];
    if (stride == 0) fail(MPI_ERR_ARG, "range ", i, " has stride 0");
    if ((stride > 0 && first > last) || (stride < 0 && first < last)) continue;  // empty
    for (long long r = first; stride > 0 ? r <= last : r >= last; r += stride) ranks.push_back(static_cast<int>(r));
  }
  return named_ranks(group, static_cast<int>(ranks.size()), ranks.data());
}

std::vector<int> members_at(const chorus_mpi_group& group, const std::vector<int>& positions) {
  std::vector<int> members;
  for (int p : positions) members.push_back(group.world_ranks[static_cast<size_t>(p)]);
  return members;
}

std::vector<int> members_except(const chorus_mpi_group& group, const std::vector<int>& positions) {
  std::vector<bool> dropped(group.world_ranks.size());
  for (int p : positions) dropped[static_cast<size_t>(p)] = true;
  std::vector<int> members;
  for (size_t i = 0; i < group.world_ranks.size(); ++i) {
    if (!dropped[i]) members.push_back(group.world_ranks[i]);
  }
  return members;
}

// MPI_Group_intersection (in_second) and MPI_Group_difference: group1's
// members that are (or are not) in group2, in group1's order.
int filtered(const char* function, MPI_Group group1, MPI_Group group2, MPI_Group* newgroup, bool in_second) {
  return call(function, MPI_COMM_WORLD, [&] {
    const chorus_mpi_group& a = use_group(group1, "group1");
    const chorus_mpi_group& b = use_group(group2, "group2");
    check_output(newgroup, "newgroup");
    std::vector<int> members;
    for (int r : a.world_ranks) {
      if ((position(b.world_ranks, r) != MPI_UNDEFINED) == in_second) members.push_back(r);
    }
    *newgroup = new_group(std::move(members));
  });
}

}  // namespace

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Comm_group(MPI_Comm comm, MPI_Group* group) {
  return call("MPI_Comm_group", comm, [&] {
    use_comm(comm);
    check_output(group, "group");
    *group = new_group(comm->world_ranks);
  });
}

int MPI_Group_size(MPI_Group group, int* size) {
  return call("MPI_Group_size", MPI_COMM_WORLD, [&] {
    const chorus_mpi_group& g = use_group(group);
    check_output(size, "size");
    *size = static_cast<int>(g.world_ranks.size());
  });
}

int MPI_Group_rank(MPI_Group group, int* rank) {
  return call("MPI_Group_rank", MPI_COMM_WORLD, [&] {
    const chorus_mpi_group& g = use_group(group);
    check_output(rank, "rank");
    *rank = position(g.world_ranks, world_rank());
  });
}

int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]) {
  return call("MPI_Group_translate_ranks", MPI_COMM_WORLD, [&] {
    const chorus_mpi_group& a = use_group(group1, "group1");
    const chorus_mpi_group& b = use_group(group2, "group2");
    if (n < 0) fail(MPI_ERR_ARG, "n ", n, " is negative");
    if (n > 0 && (ranks1 == nullptr || ranks2 == nullptr)) fail(MPI_ERR_ARG, "null ranks1 or ranks2");
    const int size = static_cast<int>(a.world_ranks.size());
    for (int i = 0; i < n; ++i) {
      if (ranks1[i] == MPI_PROC_NULL) continue;
      if (ranks1[i] < 0 || ranks1[i] >= size) fail(MPI_ERR_RANK, "ranks1[", i, "] = ", ranks1[i], " is not in group1");
    }
    for (int i = 0; i < n; ++i) {
      ranks2[i] = ranks1[i] == MPI_PROC_NULL ? MPI_PROC_NULL
                                             : position(b.world_ranks, a.world_ranks[static_cast<size_t>(ranks1[i])]);
    }
  });
}

int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result) {
  return call("MPI_Group_compare", MPI_COMM_WORLD, [&] {
    const chorus_mpi_group& a = use_group(group1, "group1");
    const chorus_mpi_group& b = use_group(group2, "group2");
    check_output(result, "result");
    auto sorted_a = a.world_ranks, sorted_b = b.world_ranks;
    std::sort(sorted_a.begin(), sorted_a.end());
    std::sort(sorted_b.begin(), sorted_b.end());
    *result = a.world_ranks == b.world_ranks ? MPI_IDENT : sorted_a == sorted_b ? MPI_SIMILAR : MPI_UNEQUAL;
  });
}

int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return call("MPI_Group_union", MPI_COMM_WORLD, [&] {
    const chorus_mpi_group& a = use_group(group1, "group1");
    const chorus_mpi_group& b = use_group(group2, "group2");
    check_output(newgroup, "newgroup");
    std::vector<int> members = a.world_ranks;
    for (int r : b.world_ranks) {
      if (position(a.world_ranks, r) == MPI_UNDEFINED) members.push_back(r);
    }
    *newgroup = new_group(std::move(members));
  });
}

int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return filtered("MPI_Group_intersection", group1, group2, newgroup, true);
}

int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return filtered("MPI_Group_difference", group1, group2, newgroup, false);
}

int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  return call("MPI_Group_incl", MPI_COMM_WORLD, [&] {
    const chorus_mpi_group& g = use_group(group);
    check_output(newgroup, "newgroup");
    *newgroup = new_group(members_at(g, named_ranks(g, n, ranks)));
  });
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  return call("MPI_Group_excl", MPI_COMM_WORLD, [&] {
    const chorus_mpi_group& g = use_group(group);
    check_output(newgroup, "newgroup");
    *newgroup = new_group(members_except(g, named_ranks(g, n, ranks)));
  });
}

int MPI_Group_range_incl(MPI_Group group, int n, int triplets[][3], MPI_Group* newgroup) {
  return call("MPI_Group_range_incl", MPI_COMM_WORLD, [&] {
    const chorus_mpi_group& g = use_group(group);
    check_output(newgroup, "newgroup");
    *newgroup = new_group(members_at(g, ranges(g, n, triplets)));
  });
}

int MPI_Group_range_excl(MPI_Group group, int n, int triplets[][3], MPI_Group* newgroup) {
  return call("MPI_Group_range_excl", MPI_COMM_WORLD, [&] {
    const chorus_mpi_group& g = use_group(group);
    check_output(newgroup, "newgroup");
    *newgroup = new_group(members_except(g, ranges(g, n, triplets)));
  });
}

int MPI_Group_free(MPI_Group* group) {
  return call("MPI_Group_free", MPI_COMM_WORLD, [&] {
    check_output(group, "group pointer");
    const chorus_mpi_group& g = use_group(*group);
    // MPI_GROUP_EMPTY comes back from group operations too; freeing it is allowed and does nothing.
    if (!g.predefined) {
      (*group)->magic = 0;
      delete *group;
    }
    *group = MPI_GROUP_NULL;
  });
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  return call("MPI_Comm_create", comm, [&] {
    Comm c = use_comm(comm);
    const chorus_mpi_group& g = use_group(group);
    check_output(newcomm, "newcomm");
    for (int member : g.world_ranks) {
      if (position(comm->world_ranks, member) == MPI_UNDEFINED) {
        fail(MPI_ERR_GROUP, "the group holds MPI_COMM_WORLD rank ", member, ", which is not in the communicator");
      }
    }
    *newcomm = MPI_COMM_NULL;
    const int mine = position(g.world_ranks, world_rank());
    *newcomm = split_comm(comm, c, mine == MPI_UNDEFINED ? MPI_UNDEFINED : 0, mine);
  });
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  return call("MPI_Comm_create_group", comm, [&] {
    Comm c = use_comm(comm);
    const chorus_mpi_group& g = use_group(group);
    check_output(newcomm, "newcomm");
    if (tag < 0) fail(MPI_ERR_TAG, "tag ", tag, " is negative");
    *newcomm = MPI_COMM_NULL;
    // MPI-3.1 6.4.2: a process outside the group gets MPI_COMM_NULL, locally.
    if (position(g.world_ranks, world_rank()) == MPI_UNDEFINED) return;
    std::vector<int> members;
    members.reserve(g.world_ranks.size());
    for (int member : g.world_ranks) {
      const int rank = position(comm->world_ranks, member);
      if (rank == MPI_UNDEFINED) {
        fail(MPI_ERR_GROUP, "the group holds MPI_COMM_WORLD rank ", member, ", which is not in the communicator");
      }
      members.push_back(rank);
    }
    *newcomm = group_comm(comm, c, members, g.world_ranks, tag);
  });
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  (void)info;  // no hints are read
  return call("MPI_Comm_split_type", comm, [&] {
    Comm c = use_comm(comm);
    check_output(newcomm, "newcomm");
    if (split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED) {
      fail(MPI_ERR_ARG, "split_type ", split_type, " is neither MPI_COMM_TYPE_SHARED nor MPI_UNDEFINED");
    }
    *newcomm = MPI_COMM_NULL;
    // The host layout the hybrid transports use (CHORUS_HOST_ID, else the hostname).
    *newcomm = split_comm(comm, c, split_type == MPI_UNDEFINED ? MPI_UNDEFINED : c.chorus.host(), key);
  });
}

int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result) {
  return call("MPI_Comm_compare", MPI_COMM_WORLD, [&] {
    use_comm(comm1);
    use_comm(comm2);
    check_output(result, "result");
    auto a = comm1->world_ranks, b = comm2->world_ranks;
    if (comm1 == comm2) {
      *result = MPI_IDENT;
    } else if (a == b) {
      *result = MPI_CONGRUENT;
    } else {
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      *result = a == b ? MPI_SIMILAR : MPI_UNEQUAL;
    }
  });
}

int MPI_Comm_test_inter(MPI_Comm comm, int* flag) {
  return call("MPI_Comm_test_inter", comm, [&] {
    use_comm(comm);
    check_output(flag, "flag");
    *flag = 0;  // chorus communicators are intracommunicators
  });
}

int MPI_Comm_set_name(MPI_Comm comm, const char* comm_name) {
  return call("MPI_Comm_set_name", comm, [&] {
    use_comm(comm);
    check_output(comm_name, "comm_name");
    comm->user_name.assign(comm_name, strnlen(comm_name, MPI_MAX_OBJECT_NAME - 1));
  });
}

int MPI_Comm_get_name(MPI_Comm comm, char* comm_name, int* resultlen) {
  return call("MPI_Comm_get_name", comm, [&] {
    use_comm(comm);
    check_output(comm_name, "comm_name");
    check_output(resultlen, "resultlen");
    const std::string name = !comm->user_name.empty() ? comm->user_name : comm->predefined ? comm->name : "";
    std::memcpy(comm_name, name.c_str(), name.size() + 1);
    *resultlen = static_cast<int>(name.size());
  });
}

}  // extern "C"
