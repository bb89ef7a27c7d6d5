// Gather, gatherv, scatter, scatterv and allgatherv: chorus has no rooted
// gather/scatter or variable-size allgather, so they are built here.
//
// Gather(v)/scatter(v) are linear: the root receives from (or sends to) each
// rank in turn over the communicator's private point-to-point channel, each
// message straight into (or out of) the user's buffer for contiguous types.
// (size - 1) messages at the root; the latency of a binomial tree would only
// matter at rank counts where this layer is not the tool anyway.
//
// Allgatherv uses chorus' allgather when the counts are balanced (every
// block padded to the largest; at most twice the bytes of the exact
// exchange), and otherwise a linear gather to rank 0 and a chorus broadcast.
#include "mpi/internal.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace chorus::mpi {

namespace {

constexpr auto kBytes = chorus::DataType::uint8;

const int* use_array(const int* values, const char* name) {
  if (values == nullptr) fail(MPI_ERR_ARG, "null ", name);
  return values;
}

// Receives `count` elements of `type` from `peer` into `buffer`.
void recv_elements(chorus::Communicator& comm, void* buffer, size_t count, const Datatype& type, int peer, int tag) {
  const size_t bytes = packed_bytes(count, type);
  if (bytes == 0) return;
  if (type.contiguous()) return recv_exact(comm, buffer, bytes, peer, tag);
  Bytes packed(bytes);
  recv_exact(comm, packed.data(), bytes, peer, tag);
  unpack(packed.data(), count, type, buffer);
}

// Sends `count` elements of `type` at `buffer` to `peer`.
void send_elements(chorus::Communicator& comm, const void* buffer, size_t count, const Datatype& type, int peer,
                   int tag) {
  PackedView view = packed_view(buffer, count, type);
  if (view.bytes != 0) comm.send(view.data, view.bytes, peer, tag);
}

// Copies `count` elements between two buffers of possibly different types.
void copy_elements(const void* from, size_t from_count, const Datatype& from_type, void* to, size_t to_count,
                   const Datatype& to_type) {
  if (packed_bytes(from_count, from_type) != packed_bytes(to_count, to_type)) {
    fail(MPI_ERR_TRUNCATE, "the root's own block is ", packed_bytes(from_count, from_type), " bytes sent but ",
         packed_bytes(to_count, to_type), " received");
  }
  Bytes packed = pack_copy(from, from_count, from_type);
  unpack(packed.data(), to_count, to_type, to);
}

// Gather of every rank's block to `root`: counts[r] elements of rtype at
// displs[r] (in rtype extents); only the root reads counts and displs.
void gather(const Comm& c, const void* sendbuf, size_t scount, const Datatype* stype, void* recvbuf,
            const std::vector<size_t>& counts, const std::vector<size_t>& displs, const Datatype* rtype, int root) {
  if (c.rank != root) return send_elements(c.internal, sendbuf, scount, *stype, root, kTagGather);
  for (int r = 0; r < c.size; ++r) {
    const size_t index = static_cast<size_t>(r);
    void* block = element(recvbuf, displs[index], *rtype);
    if (r == root) {
      if (sendbuf != MPI_IN_PLACE) copy_elements(sendbuf, scount, *stype, block, counts[index], *rtype);
      continue;
    }
    recv_elements(c.internal, block, counts[index], *rtype, r, kTagGather);
  }
}

// Scatter from `root`: counts[r] elements of stype at displs[r] go to rank r.
void scatter(const Comm& c, const void* sendbuf, const std::vector<size_t>& counts, const std::vector<size_t>& displs,
             const Datatype* stype, void* recvbuf, size_t rcount, const Datatype* rtype, int root) {
  if (c.rank != root) return recv_elements(c.internal, recvbuf, rcount, *rtype, root, kTagScatter);
  for (int r = 0; r < c.size; ++r) {
    const size_t index = static_cast<size_t>(r);
    const void* block = element(sendbuf, displs[index], *stype);
    if (r == root) {
      if (recvbuf != MPI_IN_PLACE) copy_elements(block, counts[index], *stype, recvbuf, rcount, *rtype);
      continue;
    }
    send_elements(c.internal, block, counts[index], *stype, r, kTagScatter);
  }
}

// Uniform counts and displacements (gather/scatter): block r at r * count.
void uniform(size_t ranks, size_t count, std::vector<size_t>& counts, std::vector<size_t>& displs) {
  counts.assign(ranks, count);
  displs.resize(ranks);
  for (size_t r = 0; r < ranks; ++r) displs[r] = r * count;
}

void read_counts(const Comm& c, const int* counts_in, const int* displs_in, std::vector<size_t>& counts,
                 std::vector<size_t>& displs) {
  use_array(counts_in, "counts");
  use_array(displs_in, "displs");
  counts.resize(static_cast<size_t>(c.size));
  displs.resize(static_cast<size_t>(c.size));
  for (size_t r = 0; r < counts.size(); ++r) {
    counts[r] = use_count(counts_in[r], "count");
    if (displs_in[r] < 0) fail(MPI_ERR_ARG, "displacement ", displs_in[r], " of rank ", r, " is negative");
    displs[r] = static_cast<size_t>(displs_in[r]);
  }
}

}  // namespace

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return call("MPI_Gather", comm, [&] {
    Comm c = use_comm(comm);
    check_root(root, c);
    const bool is_root = c.rank == root;
    if (sendbuf == MPI_IN_PLACE && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is only allowed at the root");
    const Datatype* stype = nullptr;
    size_t scount = 0;
    if (sendbuf != MPI_IN_PLACE) {
      scount = use_count(sendcount, "sendcount");
      stype = &use_type(sendtype, "sendtype");
      check_buffer(sendbuf, scount, "sendbuf");
    }
    std::vector<size_t> counts, displs;
    const Datatype* rtype = nullptr;
    if (is_root) {
      const size_t rcount = use_count(recvcount, "recvcount");
      rtype = &use_type(recvtype, "recvtype");
      check_buffer(recvbuf, rcount, "recvbuf");
      uniform(static_cast<size_t>(c.size), rcount, counts, displs);
    }
    gather(c, sendbuf, scount, stype, recvbuf, counts, displs, rtype, root);
  });
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return call("MPI_Gatherv", comm, [&] {
    Comm c = use_comm(comm);
    check_root(root, c);
    const bool is_root = c.rank == root;
    if (sendbuf == MPI_IN_PLACE && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is only allowed at the root");
    const Datatype* stype = nullptr;
    size_t scount = 0;
    if (sendbuf != MPI_IN_PLACE) {
      scount = use_count(sendcount, "sendcount");
      stype = &use_type(sendtype, "sendtype");
      check_buffer(sendbuf, scount, "sendbuf");
    }
    std::vector<size_t> counts, offsets;
    const Datatype* rtype = nullptr;
    if (is_root) {
      rtype = &use_type(recvtype, "recvtype");
      read_counts(c, recvcounts, displs, counts, offsets);
      const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
      check_buffer(recvbuf, total, "recvbuf");
    }
    gather(c, sendbuf, scount, stype, recvbuf, counts, offsets, rtype, root);
  });
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return call("MPI_Scatter", comm, [&] {
    Comm c = use_comm(comm);
    check_root(root, c);
    const bool is_root = c.rank == root;
    if (recvbuf == MPI_IN_PLACE && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is only allowed at the root");
    const Datatype* rtype = nullptr;
    size_t rcount = 0;
    if (recvbuf != MPI_IN_PLACE) {
      rcount = use_count(recvcount, "recvcount");
      rtype = &use_type(recvtype, "recvtype");
      check_buffer(recvbuf, rcount, "recvbuf");
    }
    std::vector<size_t> counts, displs;
    const Datatype* stype = nullptr;
    if (is_root) {
      const size_t scount = use_count(sendcount, "sendcount");
      stype = &use_type(sendtype, "sendtype");
      check_buffer(sendbuf, scount, "sendbuf");
      uniform(static_cast<size_t>(c.size), scount, counts, displs);
    }
    scatter(c, sendbuf, counts, displs, stype, recvbuf, rcount, rtype, root);
  });
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return call("MPI_Scatterv", comm, [&] {
    Comm c = use_comm(comm);
    check_root(root, c);
    const bool is_root = c.rank == root;
    if (recvbuf == MPI_IN_PLACE && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is only allowed at the root");
    const Datatype* rtype = nullptr;
    size_t rcount = 0;
    if (recvbuf != MPI_IN_PLACE) {
      rcount = use_count(recvcount, "recvcount");
      rtype = &use_type(recvtype, "recvtype");
      check_buffer(recvbuf, rcount, "recvbuf");
    }
    std::vector<size_t> counts, offsets;
    const Datatype* stype = nullptr;
    if (is_root) {
      stype = &use_type(sendtype, "sendtype");
      read_counts(c, sendcounts, displs, counts, offsets);
      const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
      check_buffer(sendbuf, total, "sendbuf");
    }
    scatter(c, sendbuf, counts, offsets, stype, recvbuf, rcount, rtype, root);
  });
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return call("MPI_Allgatherv", comm, [&] {
    Comm c = use_comm(comm);
    const Datatype& rtype = use_type(recvtype, "recvtype");
    std::vector<size_t> counts, offsets;
    read_counts(c, recvcounts, displs, counts, offsets);
    const size_t ranks = counts.size(), me = static_cast<size_t>(c.rank);
    const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
    check_buffer(recvbuf, total, "recvbuf");
    // This rank's contribution, packed.
    PackedView own = sendbuf == MPI_IN_PLACE ? packed_view(element(recvbuf, offsets[me], rtype), counts[me], rtype)
                                             : PackedView{nullptr, 0, {}};
    if (sendbuf != MPI_IN_PLACE) {
      const size_t scount = use_count(sendcount, "sendcount");
      const Datatype& stype = use_type(sendtype, "sendtype");
      check_buffer(sendbuf, scount, "sendbuf");
      own = packed_view(sendbuf, scount, stype);
    }
    if (own.bytes != packed_bytes(counts[me], rtype)) {
      fail(MPI_ERR_TRUNCATE, "sends ", own.bytes, " bytes but recvcounts[", me, "] says ",
           packed_bytes(counts[me], rtype));
    }
    if (total == 0 || rtype.packed_size == 0) return;

    const size_t largest = *std::max_element(counts.begin(), counts.end());
    Bytes packed;
    std::vector<size_t> block_offsets(ranks);
    if (largest * ranks <= 2 * total) {
      // Balanced: one chorus allgather of blocks padded to the largest.
      const size_t block = packed_bytes(largest, rtype);
      packed.resize(block * ranks);
      for (size_t r = 0; r < ranks; ++r) block_offsets[r] = r * block;
      std::memcpy(packed.data() + block_offsets[me], own.data, own.bytes);
      c.chorus.allgather(packed.data() + block_offsets[me], packed.data(), block, kBytes);
    } else {
      // Skewed: gather the exact blocks to rank 0, then broadcast them.
      packed.resize(packed_bytes(total, rtype));
      size_t offset = 0;
      for (size_t r = 0; r < ranks; ++r) {
        block_offsets[r] = offset;
        offset += packed_bytes(counts[r], rtype);
      }
      if (c.rank == 0) {
        std::memcpy(packed.data(), own.data, own.bytes);
        for (size_t r = 1; r < ranks; ++r) {
          const size_t bytes = packed_bytes(counts[r], rtype);
          if (bytes != 0) {
            recv_exact(c.internal, packed.data() + block_offsets[r], bytes, static_cast<int>(r), kTagGather);
          }
        }
      } else if (own.bytes != 0) {
        c.internal.send(own.data, own.bytes, 0, kTagGather);
      }
      c.chorus.broadcast(packed.data(), packed.size(), kBytes, 0);
    }
    for (size_t r = 0; r < ranks; ++r) {
      if (r == me && sendbuf == MPI_IN_PLACE) continue;
      unpack(packed.data() + block_offsets[r], counts[r], rtype, element(recvbuf, offsets[r], rtype));
    }
  });
}

}  // extern "C"
