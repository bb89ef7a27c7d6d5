// Gather, gatherv, scatter, scatterv, allgatherv and alltoallv: chorus'
// collectives of the same name (their algorithms and selection: docs/algorithms.md), on the
// packed bytes of the data.
//
// Contiguous types travel straight from and into the user's buffer: a block
// of `count` elements is count * extent bytes at displacement * extent.
// Other types are packed into (or unpacked from) a temporary laid out as
// blocks one after another. A root's own block in place (MPI_IN_PLACE)
// stays in the user's buffer for contiguous types.
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

// Where the blocks of a v-layout of `type` elements travel from or to, in
// bytes: the user's buffer itself for contiguous types, else a packed
// temporary (`packed`) whose blocks follow one another.
struct ByteLayout {
  std::vector<size_t> counts, displs;
  bool direct = false;
  Bytes packed;

  ByteLayout(const std::vector<size_t>& element_counts, const std::vector<size_t>& element_displs,
             const Datatype& type)
      : counts(element_counts.size()), displs(element_counts.size()), direct(type.contiguous()) {
    size_t offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      counts[r] = packed_bytes(element_counts[r], type);
      displs[r] = direct ? element_displs[r] * static_cast<size_t>(type.extent) : offset;
      offset += counts[r];
    }
    if (!direct) packed.resize(offset);
  }
  // The buffer chorus reads or writes: the user's, or the packed temporary.
  std::byte* base(void* user) { return direct ? static_cast<std::byte*>(user) : packed.data(); }
  std::byte* block(void* user, size_t rank) { return base(user) + displs[rank]; }
  // Packed temporary <-> user memory, block by block (not for `skip`).
  void unpack_into(void* user, const std::vector<size_t>& element_counts, const std::vector<size_t>& element_displs,
                   const Datatype& type, size_t skip = SIZE_MAX) const {
    if (direct) return;
    for (size_t r = 0; r < counts.size(); ++r) {
      if (r != skip) unpack(packed.data() + displs[r], element_counts[r], type, element(user, element_displs[r], type));
    }
  }
  void pack_from(const void* user, const std::vector<size_t>& element_counts,
                 const std::vector<size_t>& element_displs, const Datatype& type) {
    if (direct) return;
    for (size_t r = 0; r < counts.size(); ++r) {
      pack(element(user, element_displs[r], type), element_counts[r], type, packed.data() + displs[r]);
    }
  }
};

// Uniform counts and displacements (gather/scatter): block r at r * count.
void uniform(size_t ranks, size_t count, std::vector<size_t>& counts, std::vector<size_t>& displs) {
  counts.assign(ranks, count);
  displs.resize(ranks);
  for (size_t r = 0; r < ranks; ++r) displs[r] = r * count;
}

void check_own_block(size_t sent_bytes, size_t received_bytes) {
  if (sent_bytes != received_bytes) {
    fail(MPI_ERR_TRUNCATE, "the root's own block is ", sent_bytes, " bytes sent but ", received_bytes, " received");
  }
}

// This rank's send data, packed (nothing for MPI_IN_PLACE).
PackedView own_data(const void* sendbuf, int sendcount, MPI_Datatype sendtype) {
  if (sendbuf == MPI_IN_PLACE) return PackedView{nullptr, 0, {}};
  const size_t count = use_count(sendcount, "sendcount");
  const Datatype& type = use_type(sendtype, "sendtype");
  check_buffer(sendbuf, count, "sendbuf");
  return packed_view(sendbuf, count, type);
}

// This rank's receive buffer (nothing for MPI_IN_PLACE).
void check_receive(void* recvbuf, int recvcount, MPI_Datatype recvtype, size_t& count, const Datatype*& type) {
  if (recvbuf == MPI_IN_PLACE) return;
  count = use_count(recvcount, "recvcount");
  type = &use_type(recvtype, "recvtype");
  check_buffer(recvbuf, count, "recvbuf");
}

// Gather (v or not): every rank's packed block to the root's layout.
void gather(const Comm& c, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
            const std::vector<size_t>& counts, const std::vector<size_t>& displs, const Datatype* rtype, int root,
            bool uniform_blocks) {
  const bool is_root = c.rank == root;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (in_place && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is only allowed at the root");
  PackedView own = own_data(sendbuf, sendcount, sendtype);
  if (!is_root) {
    if (uniform_blocks) return c.chorus.gather(own.data, nullptr, own.bytes, kBytes, root);
    return c.chorus.gatherv(own.data, own.bytes, nullptr, {}, {}, kBytes, root);
  }
  const auto me = static_cast<size_t>(root);
  ByteLayout layout(counts, displs, *rtype);
  if (!in_place) check_own_block(own.bytes, layout.counts[me]);
  const std::byte* send = in_place && layout.direct ? layout.block(recvbuf, me) : static_cast<const std::byte*>(own.data);
  if (in_place && !layout.direct) {
    pack(element(recvbuf, displs[me], *rtype), counts[me], *rtype, layout.block(recvbuf, me));
    send = layout.block(recvbuf, me);
  }
  if (uniform_blocks) {
    c.chorus.gather(send, layout.base(recvbuf), layout.counts[me], kBytes, root);
  } else {
    c.chorus.gatherv(send, layout.counts[me], layout.base(recvbuf), layout.counts, layout.displs, kBytes, root);
  }
  layout.unpack_into(recvbuf, counts, displs, *rtype, in_place ? me : SIZE_MAX);
}

// Scatter (v or not): the root's blocks, packed, to every rank.
void scatter(const Comm& c, const void* sendbuf, const std::vector<size_t>& counts, const std::vector<size_t>& displs,
             const Datatype* stype, void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
             bool uniform_blocks) {
  const bool is_root = c.rank == root;
  const bool in_place = recvbuf == MPI_IN_PLACE;
  if (in_place && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is only allowed at the root");
  size_t rcount = 0;
  const Datatype* rtype = nullptr;
  check_receive(recvbuf, recvcount, recvtype, rcount, rtype);
  const size_t rbytes = rtype != nullptr ? packed_bytes(rcount, *rtype) : 0;
  // Received data lands packed unless the receive type is contiguous.
  Bytes received(rtype != nullptr && !rtype->contiguous() ? rbytes : 0);
  void* landing = rtype != nullptr && rtype->contiguous() ? recvbuf : received.data();
  if (!is_root) {
    if (uniform_blocks) {
      c.chorus.scatter(nullptr, landing, rbytes, kBytes, root);
    } else {
      c.chorus.scatterv(nullptr, {}, {}, landing, rbytes, kBytes, root);
    }
  } else {
    const auto me = static_cast<size_t>(root);
    ByteLayout layout(counts, displs, *stype);
    if (!in_place) check_own_block(layout.counts[me], rbytes);
    layout.pack_from(sendbuf, counts, displs, *stype);
    // In place the root's block stays in the send buffer (chorus: recv = its place in send).
    void* own = in_place ? static_cast<void*>(layout.block(const_cast<void*>(sendbuf), me)) : landing;
    std::byte* send = layout.base(const_cast<void*>(sendbuf));
    if (uniform_blocks) {
      c.chorus.scatter(send, own, layout.counts[me], kBytes, root);
    } else {
      c.chorus.scatterv(send, layout.counts, layout.displs, own, layout.counts[me], kBytes, root);
    }
    if (in_place) return;
  }
  if (!received.empty()) unpack(received.data(), rcount, *rtype, recvbuf);
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
    std::vector<size_t> counts, displs;
    const Datatype* rtype = nullptr;
    if (c.rank == root) {
      const size_t rcount = use_count(recvcount, "recvcount");
      rtype = &use_type(recvtype, "recvtype");
      check_buffer(recvbuf, rcount * static_cast<size_t>(c.size), "recvbuf");
      uniform(static_cast<size_t>(c.size), rcount, counts, displs);
    }
    gather(c, sendbuf, sendcount, sendtype, recvbuf, counts, displs, rtype, root, true);
  });
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return call("MPI_Gatherv", comm, [&] {
    Comm c = use_comm(comm);
    check_root(root, c);
    std::vector<size_t> counts, offsets;
    const Datatype* rtype = nullptr;
    if (c.rank == root) {
      rtype = &use_type(recvtype, "recvtype");
      read_counts(c, recvcounts, displs, counts, offsets);
      check_buffer(recvbuf, std::accumulate(counts.begin(), counts.end(), size_t{0}), "recvbuf");
    }
    gather(c, sendbuf, sendcount, sendtype, recvbuf, counts, offsets, rtype, root, false);
  });
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return call("MPI_Scatter", comm, [&] {
    Comm c = use_comm(comm);
    check_root(root, c);
    std::vector<size_t> counts, displs;
    const Datatype* stype = nullptr;
    if (c.rank == root) {
      const size_t scount = use_count(sendcount, "sendcount");
      stype = &use_type(sendtype, "sendtype");
      check_buffer(sendbuf, scount * static_cast<size_t>(c.size), "sendbuf");
      uniform(static_cast<size_t>(c.size), scount, counts, displs);
    }
    scatter(c, sendbuf, counts, displs, stype, recvbuf, recvcount, recvtype, root, true);
  });
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return call("MPI_Scatterv", comm, [&] {
    Comm c = use_comm(comm);
    check_root(root, c);
    std::vector<size_t> counts, offsets;
    const Datatype* stype = nullptr;
    if (c.rank == root) {
      stype = &use_type(sendtype, "sendtype");
      read_counts(c, sendcounts, displs, counts, offsets);
      check_buffer(sendbuf, std::accumulate(counts.begin(), counts.end(), size_t{0}), "sendbuf");
    }
    scatter(c, sendbuf, counts, offsets, stype, recvbuf, recvcount, recvtype, root, false);
  });
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return call("MPI_Allgatherv", comm, [&] {
    Comm c = use_comm(comm);
    const Datatype& rtype = use_type(recvtype, "recvtype");
    std::vector<size_t> counts, offsets;
    read_counts(c, recvcounts, displs, counts, offsets);
    const auto me = static_cast<size_t>(c.rank);
    check_buffer(recvbuf, std::accumulate(counts.begin(), counts.end(), size_t{0}), "recvbuf");
    const bool in_place = sendbuf == MPI_IN_PLACE;
    PackedView own = own_data(sendbuf, sendcount, sendtype);
    ByteLayout layout(counts, offsets, rtype);
    if (!in_place && own.bytes != layout.counts[me]) {
      fail(MPI_ERR_TRUNCATE, "sends ", own.bytes, " bytes but recvcounts[", me, "] says ", layout.counts[me]);
    }
    const void* send = own.data;
    if (in_place) {
      if (!layout.direct) pack(element(recvbuf, offsets[me], rtype), counts[me], rtype, layout.block(recvbuf, me));
      send = layout.block(recvbuf, me);
    }
    c.chorus.allgatherv(send, layout.counts[me], layout.base(recvbuf), layout.counts, layout.displs, kBytes);
    layout.unpack_into(recvbuf, counts, offsets, rtype, in_place ? me : SIZE_MAX);
  });
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return call("MPI_Alltoallv", comm, [&] {
    Comm c = use_comm(comm);
    const Datatype& rtype = use_type(recvtype, "recvtype");
    std::vector<size_t> rcounts, roffsets;
    read_counts(c, recvcounts, rdispls, rcounts, roffsets);
    check_buffer(recvbuf, std::accumulate(rcounts.begin(), rcounts.end(), size_t{0}), "recvbuf");
    ByteLayout out(rcounts, roffsets, rtype);
    if (sendbuf == MPI_IN_PLACE) {
      // The receive buffer holds the input, laid out by recvcounts/rdispls.
      out.pack_from(recvbuf, rcounts, roffsets, rtype);
      c.chorus.alltoallv(out.base(recvbuf), {}, {}, out.base(recvbuf), out.counts, out.displs, kBytes);
      return out.unpack_into(recvbuf, rcounts, roffsets, rtype);
    }
    const Datatype& stype = use_type(sendtype, "sendtype");
    std::vector<size_t> scounts, soffsets;
    read_counts(c, sendcounts, sdispls, scounts, soffsets);
    check_buffer(sendbuf, std::accumulate(scounts.begin(), scounts.end(), size_t{0}), "sendbuf");
    ByteLayout in(scounts, soffsets, stype);
    const auto me = static_cast<size_t>(c.rank);
    if (in.counts[me] != out.counts[me]) {
      fail(MPI_ERR_TRUNCATE, "sends itself ", in.counts[me], " bytes but receives ", out.counts[me], " from itself");
    }
    in.pack_from(sendbuf, scounts, soffsets, stype);
    c.chorus.alltoallv(in.base(const_cast<void*>(sendbuf)), in.counts, in.displs, out.base(recvbuf), out.counts,
                       out.displs, kBytes);
    out.unpack_into(recvbuf, rcounts, roffsets, rtype);
  });
}

}  // extern "C"
