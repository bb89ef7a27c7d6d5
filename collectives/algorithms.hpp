// Every algorithm's entry point; registry.cc puts them in the table.
#pragma once

#include "collectives/collectives.hpp"

namespace chorus::coll {

void allreduce_ring(Context& ctx, const Args& args);
void allreduce_tree(Context& ctx, const Args& args);
void allreduce_recursive_doubling(Context& ctx, const Args& args);
void allreduce_rabenseifner(Context& ctx, const Args& args);
void broadcast_binomial(Context& ctx, const Args& args);
void broadcast_pipelined(Context& ctx, const Args& args);
void broadcast_linear(Context& ctx, const Args& args);
void broadcast_scatter_allgather(Context& ctx, const Args& args);
void barrier_dissemination(Context& ctx, const Args& args);
void reduce_binomial(Context& ctx, const Args& args);
void allgather_ring(Context& ctx, const Args& args);
void allgather_bruck(Context& ctx, const Args& args);
void reduce_scatter_ring(Context& ctx, const Args& args);
void alltoall_pairwise(Context& ctx, const Args& args);
void gather_linear(Context& ctx, const Args& args);
void gather_binomial(Context& ctx, const Args& args);
void gatherv_linear(Context& ctx, const Args& args);
void scatter_linear(Context& ctx, const Args& args);
void scatter_binomial(Context& ctx, const Args& args);
void scatterv_linear(Context& ctx, const Args& args);
void allgatherv_ring(Context& ctx, const Args& args);
void alltoallv_pairwise(Context& ctx, const Args& args);
void scan_linear(Context& ctx, const Args& args);
void scan_recursive_doubling(Context& ctx, const Args& args);
void exscan_linear(Context& ctx, const Args& args);
void exscan_recursive_doubling(Context& ctx, const Args& args);
// board.cc: where the communicator's ranks share memory.
void allreduce_board(Context& ctx, const Args& args);
void broadcast_board(Context& ctx, const Args& args);
void reduce_board(Context& ctx, const Args& args);
void barrier_board(Context& ctx, const Args& args);
// hierarchical.cc: from the host layout, for ranks on several hosts.
void allreduce_hierarchical(Context& ctx, const Args& args);
void allreduce_multi_leader(Context& ctx, const Args& args);
void broadcast_hierarchical(Context& ctx, const Args& args);
void reduce_hierarchical(Context& ctx, const Args& args);
void barrier_hierarchical(Context& ctx, const Args& args);
void allgather_hierarchical(Context& ctx, const Args& args);
void reduce_scatter_hierarchical(Context& ctx, const Args& args);

}  // namespace chorus::coll
