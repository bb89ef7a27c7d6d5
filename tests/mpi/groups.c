/*
 * Groups and the communicator calls built on them: MPI_Comm_group,
 * MPI_Group_size/rank/incl/excl/range_incl/range_excl/translate_ranks/
 * compare/union/intersection/difference/free, MPI_GROUP_EMPTY,
 * MPI_Comm_create (a reversed group, and one that leaves ranks out),
 * MPI_Comm_create_group (called by the members only: the odd ranks in
 * reverse while the evens make theirs, then the first and last rank alone),
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED and MPI_UNDEFINED),
 * MPI_Comm_compare, MPI_Comm_test_inter, the predefined attributes
 * (MPI_TAG_UB, MPI_UNIVERSE_SIZE, MPI_WTIME_IS_GLOBAL) and communicator
 * names. Every result is checked; only values both chorus and Open MPI
 * must give are printed, so the output matches Open MPI's.
 */
#include "report.h"

static int rank, size;

static void group_calls(void) {
  MPI_Group world, reversed, evens, odds_by_range, without_last, both, common, only_evens;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int gsize = -1, grank = -1;
  MPI_Group_size(world, &gsize);
  MPI_Group_rank(world, &grank);
  expect(gsize == size && grank == rank, "world group: size %d rank %d", gsize, grank);

  int order[64], ranks[64], translated[64];
  for (int i = 0; i < size; ++i) order[i] = size - 1 - i, ranks[i] = i;
  MPI_Group_incl(world, size, order, &reversed);
  int rev_rank = -1;
  MPI_Group_rank(reversed, &rev_rank);
  expect(rev_rank == size - 1 - rank, "reversed group rank %d", rev_rank);
  MPI_Group_translate_ranks(world, size, ranks, reversed, translated);
  int ok = 1;
  for (int i = 0; i < size; ++i) ok &= translated[i] == size - 1 - i;
  int proc_null = MPI_PROC_NULL, translated_null = 0;
  MPI_Group_translate_ranks(world, 1, &proc_null, reversed, &translated_null);
  expect(ok && translated_null == MPI_PROC_NULL, "translate_ranks world -> reversed");

  /* Evens by incl, odds by a range, everything but the last by range_excl. */
  int n_evens = 0, evens_list[64];
  for (int i = 0; i < size; i += 2) evens_list[n_evens++] = i;
  MPI_Group_incl(world, n_evens, evens_list, &evens);
  int odd_range[1][3] = {{1, size - 1, 2}};
  MPI_Group_range_incl(world, size > 1 ? 1 : 0, odd_range, &odds_by_range);
  int last_range[1][3] = {{size - 1, size - 1, 1}};
  MPI_Group_range_excl(world, 1, last_range, &without_last);
  int s_evens = -1, s_odds = -1, s_without = -1, r_odds = -2;
  MPI_Group_size(evens, &s_evens);
  MPI_Group_size(odds_by_range, &s_odds);
  MPI_Group_size(without_last, &s_without);
  MPI_Group_rank(odds_by_range, &r_odds);
  expect(s_evens == (size + 1) / 2 && s_odds == size / 2 && s_without == size - 1, "incl/range sizes %d %d %d",
         s_evens, s_odds, s_without);
  expect(r_odds == (rank % 2 == 1 ? rank / 2 : MPI_UNDEFINED), "rank in the odd group %d", r_odds);

  MPI_Group_union(evens, odds_by_range, &both);
  MPI_Group_intersection(evens, odds_by_range, &common);
  MPI_Group_difference(world, odds_by_range, &only_evens);
  int compare_ident = -1, compare_similar = -1, compare_unequal = -1, compare_evens = -1, common_size = -1;
  MPI_Group_compare(world, world, &compare_ident);
  MPI_Group_compare(world, both, &compare_similar);
  MPI_Group_compare(world, evens, &compare_unequal);
  MPI_Group_compare(only_evens, evens, &compare_evens);
  MPI_Group_size(common, &common_size);
  expect(compare_ident == MPI_IDENT && compare_unequal == (size == 1 ? MPI_IDENT : MPI_UNEQUAL) &&
             compare_evens == MPI_IDENT && common_size == 0,
         "compare: %d %d %d, intersection size %d", compare_ident, compare_unequal, compare_evens, common_size);
  /* The union lists the evens first, then the odds: the same set as world, in another order from 3 ranks on. */
  expect(compare_similar == (size <= 2 ? MPI_IDENT : MPI_SIMILAR), "union vs world: %d", compare_similar);
  int empty_size = -1;
  MPI_Group_size(MPI_GROUP_EMPTY, &empty_size);
  expect(empty_size == 0, "MPI_GROUP_EMPTY has size %d", empty_size);
  say("groups: evens %d, odds %d, without last %d, union vs world %s", s_evens, s_odds, s_without,
      compare_similar == MPI_IDENT ? "ident" : compare_similar == MPI_SIMILAR ? "similar" : "other");

  /* MPI_Comm_create: the reversed group gives ranks in reverse; the evens leave the odd ranks out. */
  MPI_Comm reversed_comm, evens_comm;
  MPI_Comm_create(MPI_COMM_WORLD, reversed, &reversed_comm);
  MPI_Comm_create(MPI_COMM_WORLD, evens, &evens_comm);
  int rc_rank = -1, sum = 0, rank_sum = 0;
  MPI_Comm_rank(reversed_comm, &rc_rank);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, reversed_comm);
  expect(rc_rank == size - 1 - rank && sum == size * (size - 1) / 2, "created reversed comm: rank %d, sum %d",
         rc_rank, sum);
  if (rank % 2 == 0) {
    int ec_rank = -1, ec_size = -1;
    MPI_Comm_rank(evens_comm, &ec_rank);
    MPI_Comm_size(evens_comm, &ec_size);
    MPI_Allreduce(&rank, &rank_sum, 1, MPI_INT, MPI_SUM, evens_comm);
    int want = 0;
    for (int r = 0; r < size; r += 2) want += r;
    expect(ec_rank == rank / 2 && ec_size == (size + 1) / 2 && rank_sum == want, "evens comm: rank %d size %d sum %d",
           ec_rank, ec_size, rank_sum);
    MPI_Comm_free(&evens_comm);
  } else {
    expect(evens_comm == MPI_COMM_NULL, "an odd rank gets MPI_COMM_NULL from MPI_Comm_create of the evens");
  }

  /* MPI_Comm_create_group: only the members call. The odd ranks make a
   * communicator of the odds in reverse order while the even ranks make one
   * of the evens (other tags); then ranks 0 and size-1 alone make one, the
   * others do not call; a group without this rank gives MPI_COMM_NULL. */
  int mine_list[64], n_mine = 0, my_position = -1;
  for (int r = size - 1; r >= 0; --r) {
    if (r % 2 == 1 && rank % 2 == 1) mine_list[n_mine++] = r;
  }
  for (int r = 0; r < size; ++r) {
    if (r % 2 == 0 && rank % 2 == 0) mine_list[n_mine++] = r;
  }
  for (int i = 0; i < n_mine; ++i) {
    if (mine_list[i] == rank) my_position = i;
  }
  MPI_Group mine_group;
  MPI_Group_incl(world, n_mine, mine_list, &mine_group);
  MPI_Comm parity_comm = MPI_COMM_NULL;
  MPI_Comm_create_group(MPI_COMM_WORLD, mine_group, rank % 2 == 0 ? 11 : 12, &parity_comm);
  int pc_rank = -1, pc_size = -1, pc_sum = -1, want_sum = 0;
  for (int i = 0; i < n_mine; ++i) want_sum += mine_list[i];
  MPI_Comm_rank(parity_comm, &pc_rank);
  MPI_Comm_size(parity_comm, &pc_size);
  MPI_Allreduce(&rank, &pc_sum, 1, MPI_INT, MPI_SUM, parity_comm);
  expect(pc_rank == my_position && pc_size == n_mine && pc_sum == want_sum,
         "create_group of my parity: rank %d (want %d), size %d (want %d), sum %d (want %d)", pc_rank, my_position,
         pc_size, n_mine, pc_sum, want_sum);
  int ends_list[2] = {0, size - 1}, ends_sum = -1;
  if (rank == 0 || rank == size - 1) {
    MPI_Group ends;
    MPI_Group_incl(world, size > 1 ? 2 : 1, ends_list, &ends);
    MPI_Comm ends_comm = MPI_COMM_NULL;
    MPI_Comm_create_group(MPI_COMM_WORLD, ends, 7, &ends_comm);
    MPI_Allreduce(&rank, &ends_sum, 1, MPI_INT, MPI_SUM, ends_comm);
    expect(ends_sum == size - 1, "create_group of ranks 0 and %d: sum %d", size - 1, ends_sum);
    MPI_Comm_free(&ends_comm);
    MPI_Group_free(&ends);
  }
  MPI_Comm none = MPI_COMM_WORLD;
  MPI_Comm_create_group(MPI_COMM_WORLD, MPI_GROUP_EMPTY, 5, &none);
  expect(none == MPI_COMM_NULL, "create_group of an empty group gives MPI_COMM_NULL");
  say("create_group: parity communicators of %d and %d ranks, ends sum %d", (size + 1) / 2, size / 2, size - 1);
  MPI_Comm_free(&parity_comm);
  MPI_Group_free(&mine_group);

  /* MPI_Comm_compare. */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int c_ident = -1, c_congruent = -1, c_similar = -1, c_self = -1;
  MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &c_ident);
  MPI_Comm_compare(MPI_COMM_WORLD, dup, &c_congruent);
  MPI_Comm_compare(MPI_COMM_WORLD, reversed_comm, &c_similar);
  MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_SELF, &c_self);
  expect(c_ident == MPI_IDENT && c_congruent == MPI_CONGRUENT &&
             c_similar == (size == 1 ? MPI_CONGRUENT : MPI_SIMILAR) &&
             c_self == (size == 1 ? MPI_CONGRUENT : MPI_UNEQUAL),
         "comm compare: %d %d %d %d", c_ident, c_congruent, c_similar, c_self);
  say("comm compare: world/world %d, world/dup %d, world/reversed %d, world/self %d", c_ident, c_congruent, c_similar,
      c_self);

  /* Names. */
  char name[MPI_MAX_OBJECT_NAME];
  int length = -1;
  MPI_Comm_get_name(MPI_COMM_WORLD, name, &length);
  expect(strcmp(name, "MPI_COMM_WORLD") == 0 && length == 14, "world's name \"%s\"", name);
  MPI_Comm_set_name(dup, "halo exchange");
  MPI_Comm_get_name(dup, name, &length);
  expect(strcmp(name, "halo exchange") == 0 && length == 13, "dup's name \"%s\"", name);
  say("names: world, then \"%s\"", name);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&reversed_comm);

  MPI_Group groups[] = {world, reversed, evens, odds_by_range, without_last, both, common, only_evens};
  for (int i = 0; i < 8; ++i) {
    MPI_Group_free(&groups[i]);
    expect(groups[i] == MPI_GROUP_NULL, "group %d freed", i);
  }
}

static void split_type_and_attributes(void) {
  /* Every rank of this test shares one machine. */
  MPI_Comm shared, undefined;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, -rank, MPI_INFO_NULL, &shared);
  int shared_size = -1, shared_rank = -1;
  MPI_Comm_size(shared, &shared_size);
  MPI_Comm_rank(shared, &shared_rank);
  expect(shared_size == size && shared_rank == size - 1 - rank, "split_type shared: size %d, rank %d by key -rank",
         shared_size, shared_rank);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &undefined);
  expect(undefined == MPI_COMM_NULL, "split_type MPI_UNDEFINED gives MPI_COMM_NULL");
  say("split_type shared: %d ranks, rank %d", shared_size, shared_rank);
  MPI_Comm_free(&shared);

  int inter = -1;
  MPI_Comm_test_inter(MPI_COMM_WORLD, &inter);
  expect(inter == 0, "MPI_COMM_WORLD is an intracommunicator");

  int* tag_ub = NULL;
  int* universe = NULL;
  int* wtime_global = NULL;
  int flag_tag = 0, flag_universe = 0, flag_wtime = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag_tag);
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &universe, &flag_universe);
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &wtime_global, &flag_wtime);
  expect(flag_tag && tag_ub != NULL && *tag_ub >= 32767, "MPI_TAG_UB %d", flag_tag && tag_ub ? *tag_ub : -1);
  expect(flag_universe && universe != NULL && *universe >= 1, "MPI_UNIVERSE_SIZE");
  expect(flag_wtime && wtime_global != NULL && (*wtime_global == 0 || *wtime_global == 1), "MPI_WTIME_IS_GLOBAL");
  say("attributes: tag_ub >= 32767 %d, universe size set %d, wtime_is_global set %d", *tag_ub >= 32767,
      flag_universe, flag_wtime);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    if (rank == 0) printf("usage: groups (under mpirun/chorusrun, 1..64 ranks): checks groups and communicator calls\n");
    MPI_Finalize();
    return 0;
  }
  group_calls();
  split_type_and_attributes();
  int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("groups", failures);
  return failures == 0 ? 0 : 1;
}
