// chorus-subcomm: sub-communicators from split/dup between real processes.
// Checks that their ranks and sizes follow (color, key), that their
// collectives give exact results while the parent's run interleaved with
// them, that point-to-point messages with equal tags on different
// communicators never match each other, wildcards, release order, and the C
// API. Prints every failed check and "subcomm: N checks, F failed".
#include <chorus/chorus.h>
#include <chorus/chorus.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace {

using chorus::Communicator;
using chorus::ReduceOp;

int g_checks = 0;
int g_failed = 0;
int g_world_rank = 0;

void check(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_failed;
    std::printf("FAILED: rank %d: %s\n", g_world_rank, what.c_str());
  }
}

// Sum of f(r) over the world ranks r with r % 2 == parity.
int64_t sum_over_parity(int size, int parity, int64_t (*f)(int)) {
  int64_t total = 0;
  for (int r = parity; r < size; r += 2) total += f(r);
  return total;
}

void split_by_parity(Communicator& world) {
  const int rank = world.rank(), size = world.size();
  // Odd and even ranks, each group ordered backwards by key.
  auto half = world.split(rank % 2, size - rank);
  check(half.has_value(), "split with color >= 0 returns a communicator");
  if (!half) return;
  const int expected_size = (size + 1 - rank % 2) / 2;
  check(half->size() == expected_size, "split size " + std::to_string(half->size()));
  // Members of my parity with a larger world rank come first (smaller key).
  int expected_rank = 0;
  for (int r = rank + 2; r < size; r += 2) ++expected_rank;
  check(half->rank() == expected_rank, "split rank " + std::to_string(half->rank()) + " expected " +
                                           std::to_string(expected_rank));

  // Collectives on the halves interleaved with the parent's, sizes on both
  // sides of the eager limit: each must see only its own members' data.
  for (size_t count : {size_t{3}, size_t{70000}}) {
    std::vector<int64_t> sub(count, rank + 1), parent(count, 10 * (rank + 1));
    half->allreduce(std::span<int64_t>(sub), ReduceOp::sum);
    world.allreduce(std::span<int64_t>(parent), ReduceOp::sum);
    const int64_t sub_expected = sum_over_parity(size, rank % 2, [](int r) -> int64_t { return r + 1; });
    const int64_t parent_expected = 10 * int64_t{size} * (size + 1) / 2;
    check(sub == std::vector<int64_t>(count, sub_expected), "allreduce on the half, count " + std::to_string(count));
    check(parent == std::vector<int64_t>(count, parent_expected), "allreduce on the parent, count " + std::to_string(count));
  }
  // Broadcast from the half's root (its highest world rank) and allgather of world ranks.
  std::vector<int32_t> value(5, half->rank() == 0 ? rank : -1);
  half->broadcast(std::span<int32_t>(value), 0);
  int highest = rank % 2;
  while (highest + 2 < size) highest += 2;
  check(value == std::vector<int32_t>(5, highest), "broadcast on the half");
  std::vector<int32_t> members(static_cast<size_t>(half->size()));
  const int32_t my_world_rank = rank;
  half->allgather(&my_world_rank, members.data(), 1);
  for (int i = 0; i < half->size(); ++i) {
    check(members[static_cast<size_t>(i)] == highest - 2 * i, "allgather on the half, block " + std::to_string(i));
  }
  half->barrier();

  // Nested split of a half: singletons, then a collective on each.
  auto single = half->split(half->rank(), 0);
  check(single && single->size() == 1 && single->rank() == 0, "split of a half into singletons");
  if (single) {
    int64_t x = rank, y = -1;
    single->allreduce(&x, &y, 1, ReduceOp::max);
    check(y == rank, "allreduce on a singleton");
  }
}

void undefined_color(Communicator& world) {
  // Rank 0 joins nothing; the others form one communicator.
  auto rest = world.split(world.rank() == 0 ? -1 : 7, 0);
  check(rest.has_value() == (world.rank() != 0), "negative color gets no communicator");
  if (rest) {
    check(rest->size() == world.size() - 1 && rest->rank() == world.rank() - 1, "communicator without rank 0");
    int32_t x = world.rank(), y = 0;
    rest->allreduce(&x, &y, 1, ReduceOp::sum);
    check(y == world.size() * (world.size() - 1) / 2, "allreduce without rank 0");
  }
}

void point_to_point_stays_apart(Communicator& world) {
  if (world.size() < 2) return;
  auto copy = world.dup();
  check(copy.rank() == world.rank() && copy.size() == world.size(), "dup keeps rank and size");
  const int rank = world.rank(), size = world.size();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  // Same tag, same peers, both communicators; the receives are posted in the
  // opposite order from the sends, so a crossing would swap the values.
  // Even ranks send first; odd ranks receive first (no blocking cycle).
  std::vector<int32_t> on_world(4, 100 + rank), on_copy(4, 200 + rank), got_world(4), got_copy(4);
  auto send_both = [&] {
    world.send(on_world.data(), 16, next, 5);
    copy.send(on_copy.data(), 16, next, 5);
  };
  auto receive_both = [&] {
    copy.recv(got_copy.data(), 16, prev, 5);
    world.recv(got_world.data(), 16, prev, 5);
  };
  if (rank % 2 == 0) {
    send_both();
    receive_both();
  } else {
    receive_both();
    send_both();
  }
  check(got_world == std::vector<int32_t>(4, 100 + prev), "p2p on the parent did not cross");
  check(got_copy == std::vector<int32_t>(4, 200 + prev), "p2p on the dup did not cross");

  // Wildcards: rank 0 receives one message from everyone else on the dup,
  // any source, any tag; the tag and source come back.
  if (rank == 0) {
    std::vector<bool> seen(static_cast<size_t>(size), false);
    for (int i = 1; i < size; ++i) {
      int32_t payload[2] = {0, 0};
      chorus::Received got = copy.recv(payload, sizeof payload, chorus::kAnySource, chorus::kAnyTag);
      check(got.source >= 1 && got.source < size && got.tag == 1000 + got.source && got.bytes == 8 &&
                payload[0] == got.source,
            "wildcard receive from " + std::to_string(got.source));
      if (got.source >= 1 && got.source < size) seen[static_cast<size_t>(got.source)] = true;
    }
    for (int r = 1; r < size; ++r) check(seen[static_cast<size_t>(r)], "wildcard receive saw rank " + std::to_string(r));
  } else {
    int32_t payload[2] = {rank, 0};
    copy.send(payload, sizeof payload, 0, 1000 + rank);
  }

  // A message larger than the buffer fails the receive but not the communicator.
  if (rank == 0) {
    int32_t big[8] = {};
    copy.send(big, sizeof big, 1, 9);
  } else if (rank == 1) {
    int32_t small[2];
    try {
      copy.recv(small, sizeof small, 0, 9);
      check(false, "truncated receive did not fail");
    } catch (const chorus::Error& e) {
      check(e.status() == chorus::Status::truncated, std::string("truncated receive status: ") + e.what());
    }
  }
  copy.barrier();
  // A released dup leaves the parent working.
  copy.finalize();
  try {
    copy.barrier();
    check(false, "a finalized dup is unusable");
  } catch (const chorus::Error& e) {
    check(e.status() == chorus::Status::finalized, "finalized dup status");
  }
}

// The C API's split/dup, in a launch of its own (one init per process).
void c_api() {
  chorus_comm_t comm = nullptr;
  if (chorus_init(&comm) != CHORUS_SUCCESS) {
    check(false, std::string("chorus_init: ") + chorus_last_error());
    return;
  }
  int world_rank = 0, world_size = 0;
  chorus_comm_rank(comm, &world_rank);
  chorus_comm_size(comm, &world_size);
  g_world_rank = world_rank;
  chorus_comm_t sub = nullptr, copy = nullptr;
  check(chorus_comm_split(comm, world_rank % 3, world_rank, &sub) == CHORUS_SUCCESS,
        std::string("chorus_comm_split: ") + chorus_last_error());
  check(chorus_comm_dup(sub, &copy) == CHORUS_SUCCESS, std::string("chorus_comm_dup: ") + chorus_last_error());
  int size = 0, total = 0, mine = world_rank;
  chorus_comm_size(copy, &size);
  int expected_size = 0, expected_total = 0;
  for (int r = world_rank % 3; r < world_size; r += 3) {
    ++expected_size;
    expected_total += r;
  }
  chorus_allreduce(copy, &mine, &total, 1, CHORUS_INT32, CHORUS_SUM);
  check(size == expected_size && total == expected_total, "C API split + dup allreduce");
  check(chorus_comm_split(comm, 0, 0, nullptr) == CHORUS_ERR_INVALID_ARGUMENT &&
            std::strstr(chorus_last_error(), "null output") != nullptr,
        "C API split null output");
  chorus_comm_t none = nullptr;
  check(chorus_comm_split(comm, -1, 0, &none) == CHORUS_SUCCESS && none == nullptr, "C API negative color gives NULL");
  // create_group: the odd ranks alone, in descending order; the even ranks do not call.
  if (world_rank % 2 == 1) {
    std::vector<int> odd;
    for (int r = world_size - 1; r >= 0; --r) {
      if (r % 2 == 1) odd.push_back(r);
    }
    chorus_comm_t group = nullptr;
    check(chorus_comm_create_group(comm, odd.data(), odd.size(), 7, &group) == CHORUS_SUCCESS,
          std::string("chorus_comm_create_group: ") + chorus_last_error());
    int group_rank = -1, group_size = 0, group_total = 0;
    chorus_comm_rank(group, &group_rank);
    chorus_comm_size(group, &group_size);
    const auto place = std::find(odd.begin(), odd.end(), world_rank) - odd.begin();
    int expected = 0;
    for (int r : odd) expected += r;
    chorus_allreduce(group, &mine, &group_total, 1, CHORUS_INT32, CHORUS_SUM);
    check(group_size == static_cast<int>(odd.size()) && group_rank == static_cast<int>(place) &&
              group_total == expected,
          "C API create_group: size, rank in the listed order, allreduce");
    check(chorus_finalize(&group) == CHORUS_SUCCESS && group == nullptr, "C API create_group finalize");
  }
  const int others[1] = {(world_rank + 1) % world_size};
  chorus_comm_t refused = comm;  // set to NULL by the refusal
  check(world_size < 2 || (chorus_comm_create_group(comm, others, 1, 8, &refused) == CHORUS_ERR_INVALID_ARGUMENT &&
                           refused == nullptr && std::strstr(chorus_last_error(), "this rank") != nullptr),
        "C API create_group without this rank is refused");
  check(chorus_comm_create_group(comm, nullptr, 2, 8, &refused) == CHORUS_ERR_INVALID_ARGUMENT,
        "C API create_group null members");
  chorus_finalize(&copy);
  chorus_finalize(&sub);
  check(chorus_finalize(&comm) == CHORUS_SUCCESS, std::string("chorus_finalize: ") + chorus_last_error());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--c-api") == 0) {
    c_api();
    std::printf("subcomm: %d checks, %d failed\n", g_checks, g_failed);
    // Every rank's own pass line, after finalize (tests/job_verdict.py).
    if (g_failed == 0) std::printf("chorus-subcomm: rank %d passed\n", g_world_rank);
    return g_failed == 0 ? 0 : 1;
  }
  try {
    auto world = Communicator::init();
    g_world_rank = world.rank();
    split_by_parity(world);
    undefined_color(world);
    point_to_point_stays_apart(world);
    world.barrier();
    // Sub-communicators end with the world communicator.
    auto late = world.dup();
    world.finalize();
    try {
      late.barrier();
      check(false, "a dup is unusable after the world communicator was finalized");
    } catch (const chorus::Error& e) {
      check(e.status() == chorus::Status::finalized, "dup after world finalize status");
    }
  } catch (const std::exception& e) {
    std::printf("FAILED: rank %d: exception: %s\n", g_world_rank, e.what());
    return 1;
  }
  std::printf("subcomm: %d checks, %d failed\n", g_checks, g_failed);
  if (g_failed == 0) std::printf("chorus-subcomm: rank %d passed\n", g_world_rank);
  return g_failed == 0 ? 0 : 1;
}
