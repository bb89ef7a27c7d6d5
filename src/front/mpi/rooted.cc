// Gather, gatherv, scatter, scatterv, allgatherv, alltoallv and alltoallw,
// blocking and non-blocking (MPI_Igather .. MPI_Ialltoallw): chorus'
// collectives of the same name (their algorithms and selection:
// docs/algorithms.md), on the packed bytes of the data. One body per
// family serves both forms (Mode): the blocking form runs chorus' blocking
// call, the I-form starts its i-call in the request, and whatever the call
// must unpack afterwards runs when the request completes.
//
// Contiguous types travel straight from and into the user's buffer: a block
// of `count` elements is count * extent bytes at displacement * extent
// (alltoallw: at its byte displacement). Other types are packed into (or
// unpacked from) a temporary laid out as blocks one after another. A root's
// own block in place (MPI_IN_PLACE) stays in the user's buffer for
// contiguous types.
#include "mpi/byte_layout.hpp"
#include "mpi/entry_bodies.hpp"
#include "mpi/requests.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

namespace chorus::mpi {

namespace {

constexpr auto kBytes = chorus::DataType::uint8;

void read_counts(const Comm& c, CountArray counts_in, DisplArray displs_in, std::vector<size_t>& counts,
                 std::vector<size_t>& displs) {
  if (counts_in.null()) fail(MPI_ERR_ARG, "null counts");
  if (displs_in.null()) fail(MPI_ERR_ARG, "null displs");
  counts.resize(static_cast<size_t>(c.size));
  displs.resize(static_cast<size_t>(c.size));
  for (size_t r = 0; r < counts.size(); ++r) {
    counts[r] = use_count(counts_in[r], "count");
    if (displs_in[r] < 0) fail(MPI_ERR_ARG, "displacement ", displs_in[r], " of rank ", r, " is negative");
    displs[r] = static_cast<size_t>(displs_in[r]);
  }
}

// Where a call runs: to completion on this thread (request == nullptr: the
// blocking forms), or started into an I-form's request. `keep` holds what
// the call reads or writes (packed temporaries, layouts) until it is done;
// `after` (unpacking) runs once the data is there.
struct Mode {
  chorus_mpi_request* request = nullptr;

  template <class Blocking, class Start>
  void run(Blocking&& blocking, Start&& start, std::shared_ptr<void> keep, std::function<void()> after = {}) const {
    if (request == nullptr) {
      blocking();
      if (after) after();
      return;
    }
    request->operation = start();
    request->finish() = [keep = std::move(keep), after = std::move(after)](const chorus::Received&) {
      if (after) after();
    };
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
PackedView own_data(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype) {
  if (sendbuf == MPI_IN_PLACE) return PackedView{nullptr, 0, {}};
  const size_t count = use_count(sendcount, "sendcount");
  const Datatype& type = use_type(sendtype, "sendtype");
  check_buffer(sendbuf, count, "sendbuf");
  return packed_view(sendbuf, count, type);
}

// What a gather, scatter or allgatherv keeps until it completes.
struct Staged {
  PackedView own{nullptr, 0, {}};
  std::optional<ByteLayout> layout;
  Bytes received;
};

// Gather (v or not): every rank's packed block to the root's layout.
void gather(Mode m, const Comm& c, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
            std::vector<size_t> counts, const std::vector<size_t>& displs, const Datatype* rtype, int root,
            bool uniform_blocks) {
  const bool is_root = c.rank == root;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (in_place && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is only allowed at the root");
  auto s = std::make_shared<Staged>();
  s->own = own_data(sendbuf, sendcount, sendtype);
  chorus::Communicator& comm = c.chorus;
  if (!is_root) {
    const void* data = s->own.data;
    const size_t bytes = s->own.bytes;
    if (uniform_blocks) {
      return m.run([&] { comm.gather(data, nullptr, bytes, kBytes, root); },
                   [&] { return comm.igather(data, nullptr, bytes, kBytes, root); }, s);
    }
    return m.run([&] { comm.gatherv(data, bytes, nullptr, {}, {}, kBytes, root); },
                 [&] { return comm.igatherv(data, bytes, nullptr, {}, {}, kBytes, root); }, s);
  }
  const auto me = static_cast<size_t>(root);
  ByteLayout& layout = s->layout.emplace(std::move(counts), displs, *rtype);
  if (!in_place) check_own_block(s->own.bytes, layout.counts[me]);
  const std::byte* send = in_place && layout.direct ? layout.block(recvbuf, me) : static_cast<const std::byte*>(s->own.data);
  if (in_place && !layout.direct) {
    layout.pack_one(recvbuf, me);
    send = layout.block(recvbuf, me);
  }
  std::byte* out = layout.base(recvbuf);
  const size_t mine = layout.counts[me];
  auto after = [s, recvbuf, skip = in_place ? me : SIZE_MAX] { s->layout->unpack_into(recvbuf, skip); };
  if (uniform_blocks) {
    return m.run([&] { comm.gather(send, out, mine, kBytes, root); },
                 [&] { return comm.igather(send, out, mine, kBytes, root); }, s, after);
  }
  m.run([&] { comm.gatherv(send, mine, out, layout.counts, layout.displs, kBytes, root); },
        [&] { return comm.igatherv(send, mine, out, layout.counts, layout.displs, kBytes, root); }, s, after);
}

// Scatter (v or not): the root's blocks, packed, to every rank.
void scatter(Mode m, const Comm& c, const void* sendbuf, std::vector<size_t> counts, const std::vector<size_t>& displs,
             const Datatype* stype, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
             bool uniform_blocks) {
  const bool is_root = c.rank == root;
  const bool in_place = recvbuf == MPI_IN_PLACE;
  if (in_place && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is only allowed at the root");
  size_t rcount = 0;
  std::optional<Datatype> rtype;  // a copy: unpacked after an I-form returned
  if (!in_place) {
    rcount = use_count(recvcount, "recvcount");
    rtype = use_type(recvtype, "recvtype");
    check_buffer(recvbuf, rcount, "recvbuf");
  }
  const size_t rbytes = rtype ? packed_bytes(rcount, *rtype) : 0;
  auto s = std::make_shared<Staged>();
  // Received data lands packed unless the receive type is contiguous.
  const bool unpacks = rtype && !rtype->contiguous();
  if (unpacks) s->received.resize(rbytes);
  void* landing = unpacks ? s->received.data() : recvbuf;
  std::function<void()> after;
  if (unpacks) after = [s, rcount, type = *rtype, recvbuf] { unpack(s->received.data(), rcount, type, recvbuf); };
  chorus::Communicator& comm = c.chorus;
  if (!is_root) {
    if (uniform_blocks) {
      return m.run([&] { comm.scatter(nullptr, landing, rbytes, kBytes, root); },
                   [&] { return comm.iscatter(nullptr, landing, rbytes, kBytes, root); }, s, after);
    }
    return m.run([&] { comm.scatterv(nullptr, {}, {}, landing, rbytes, kBytes, root); },
                 [&] { return comm.iscatterv(nullptr, {}, {}, landing, rbytes, kBytes, root); }, s, after);
  }
  const auto me = static_cast<size_t>(root);
  ByteLayout& layout = s->layout.emplace(std::move(counts), displs, *stype);
  if (!in_place) check_own_block(layout.counts[me], rbytes);
  layout.pack_from(sendbuf);
  // In place the root's block stays in the send buffer (chorus: recv = its place in send).
  void* own = in_place ? static_cast<void*>(layout.block(const_cast<void*>(sendbuf), me)) : landing;
  if (in_place) after = nullptr;
  const std::byte* send = layout.base(const_cast<void*>(sendbuf));
  const size_t mine = layout.counts[me];
  if (uniform_blocks) {
    return m.run([&] { comm.scatter(send, own, mine, kBytes, root); },
                 [&] { return comm.iscatter(send, own, mine, kBytes, root); }, s, after);
  }
  m.run([&] { comm.scatterv(send, layout.counts, layout.displs, own, mine, kBytes, root); },
        [&] { return comm.iscatterv(send, layout.counts, layout.displs, own, mine, kBytes, root); }, s, after);
}

// Allgatherv: every rank's block to every rank's layout.
void allgatherv(Mode m, const Comm& c, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                CountArray recvcounts, DisplArray displs, MPI_Datatype recvtype) {
  const Datatype& rtype = use_type(recvtype, "recvtype");
  std::vector<size_t> counts, offsets;
  read_counts(c, recvcounts, displs, counts, offsets);
  const auto me = static_cast<size_t>(c.rank);
  check_buffer(recvbuf, std::accumulate(counts.begin(), counts.end(), size_t{0}), "recvbuf");
  const bool in_place = sendbuf == MPI_IN_PLACE;
  auto s = std::make_shared<Staged>();
  s->own = own_data(sendbuf, sendcount, sendtype);
  ByteLayout& layout = s->layout.emplace(std::move(counts), offsets, rtype);
  if (!in_place && s->own.bytes != layout.counts[me]) {
    fail(MPI_ERR_TRUNCATE, "sends ", s->own.bytes, " bytes but recvcounts[", me, "] says ", layout.counts[me]);
  }
  const void* send = s->own.data;
  if (in_place) {
    layout.pack_one(recvbuf, me);
    send = layout.block(recvbuf, me);
  }
  std::byte* out = layout.base(recvbuf);
  const size_t mine = layout.counts[me];
  chorus::Communicator& comm = c.chorus;
  m.run([&] { comm.allgatherv(send, mine, out, layout.counts, layout.displs, kBytes); },
        [&] { return comm.iallgatherv(send, mine, out, layout.counts, layout.displs, kBytes); }, s,
        [s, recvbuf, skip = in_place ? me : SIZE_MAX] { s->layout->unpack_into(recvbuf, skip); });
}

// What an alltoallv or alltoallw keeps until it completes.
struct Exchanged {
  std::optional<ByteLayout> in, out;
};

// Alltoallv and alltoallw once their layouts are read: `out` is where this
// rank receives, `in` what it sends (none in place: the receive buffer holds
// the input, laid out as `out`).
void exchange(Mode m, const Comm& c, const std::shared_ptr<Exchanged>& s, const void* sendbuf, void* recvbuf) {
  ByteLayout& out = *s->out;
  chorus::Communicator& comm = c.chorus;
  auto after = [s, recvbuf] { s->out->unpack_into(recvbuf); };
  if (!s->in) {
    out.pack_from(recvbuf);
    std::byte* both = out.base(recvbuf);
    return m.run([&] { comm.alltoallv(both, {}, {}, both, out.counts, out.displs, kBytes); },
                 [&] { return comm.ialltoallv(both, {}, {}, both, out.counts, out.displs, kBytes); }, s, after);
  }
  ByteLayout& in = *s->in;
  const auto me = static_cast<size_t>(c.rank);
  if (in.counts[me] != out.counts[me]) {
    fail(MPI_ERR_TRUNCATE, "sends itself ", in.counts[me], " bytes but receives ", out.counts[me], " from itself");
  }
  in.pack_from(sendbuf);
  const std::byte* send = in.base(const_cast<void*>(sendbuf));
  std::byte* recv = out.base(recvbuf);
  m.run([&] { comm.alltoallv(send, in.counts, in.displs, recv, out.counts, out.displs, kBytes); },
        [&] { return comm.ialltoallv(send, in.counts, in.displs, recv, out.counts, out.displs, kBytes); }, s, after);
}

void alltoallv(Mode m, const Comm& c, const void* sendbuf, CountArray sendcounts, DisplArray sdispls,
               MPI_Datatype sendtype, void* recvbuf, CountArray recvcounts, DisplArray rdispls, MPI_Datatype recvtype) {
  const Datatype& rtype = use_type(recvtype, "recvtype");
  std::vector<size_t> rcounts, roffsets;
  read_counts(c, recvcounts, rdispls, rcounts, roffsets);
  check_buffer(recvbuf, std::accumulate(rcounts.begin(), rcounts.end(), size_t{0}), "recvbuf");
  auto s = std::make_shared<Exchanged>();
  s->out.emplace(std::move(rcounts), roffsets, rtype);
  if (sendbuf != MPI_IN_PLACE) {
    const Datatype& stype = use_type(sendtype, "sendtype");
    std::vector<size_t> scounts, soffsets;
    read_counts(c, sendcounts, sdispls, scounts, soffsets);
    check_buffer(sendbuf, std::accumulate(scounts.begin(), scounts.end(), size_t{0}), "sendbuf");
    s->in.emplace(std::move(scounts), soffsets, stype);
  }
  exchange(m, c, s, sendbuf, recvbuf);
}

// A w-form's types, one per rank, checked and copied.
std::vector<Datatype> read_types(const Comm& c, const MPI_Datatype* types, const char* name) {
  if (types == nullptr) fail(MPI_ERR_ARG, "null ", name);
  std::vector<Datatype> copies;
  copies.reserve(static_cast<size_t>(c.size));
  for (int r = 0; r < c.size; ++r) copies.push_back(use_type(types[r], name));
  return copies;
}

// Alltoallw: a count, byte displacement and type per rank on both sides.
void alltoallw(Mode m, const Comm& c, const void* sendbuf, CountArray sendcounts, DisplArray sdispls,
               const MPI_Datatype sendtypes[], void* recvbuf, CountArray recvcounts, DisplArray rdispls,
               const MPI_Datatype recvtypes[]) {
  std::vector<size_t> rcounts, roffsets;
  read_counts(c, recvcounts, rdispls, rcounts, roffsets);
  auto s = std::make_shared<Exchanged>();
  s->out.emplace(std::move(rcounts), std::move(roffsets), read_types(c, recvtypes, "recvtypes"));
  if (recvbuf == nullptr && std::any_of(s->out->counts.begin(), s->out->counts.end(), [](size_t n) { return n > 0; })) {
    fail(MPI_ERR_BUFFER, "null recvbuf with data to receive");
  }
  if (sendbuf != MPI_IN_PLACE) {
    std::vector<size_t> scounts, soffsets;
    read_counts(c, sendcounts, sdispls, scounts, soffsets);
    s->in.emplace(std::move(scounts), std::move(soffsets), read_types(c, sendtypes, "sendtypes"));
    if (sendbuf == nullptr && std::any_of(s->in->counts.begin(), s->in->counts.end(), [](size_t n) { return n > 0; })) {
      fail(MPI_ERR_BUFFER, "null sendbuf with data to send");
    }
  }
  exchange(m, c, s, sendbuf, recvbuf);
}

void gather_call(Mode m, const Comm& c, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                 MPI_Count recvcount, MPI_Datatype recvtype, int root) {
  check_root(root, c);
  std::vector<size_t> counts, displs;
  const Datatype* rtype = nullptr;
  if (c.rank == root) {
    const size_t rcount = use_count(recvcount, "recvcount");
    rtype = &use_type(recvtype, "recvtype");
    check_buffer(recvbuf, rcount * static_cast<size_t>(c.size), "recvbuf");
    uniform(static_cast<size_t>(c.size), rcount, counts, displs);
  }
  gather(m, c, sendbuf, sendcount, sendtype, recvbuf, std::move(counts), displs, rtype, root, true);
}

void gatherv_call(Mode m, const Comm& c, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  CountArray recvcounts, DisplArray displs, MPI_Datatype recvtype, int root) {
  check_root(root, c);
  std::vector<size_t> counts, offsets;
  const Datatype* rtype = nullptr;
  if (c.rank == root) {
    rtype = &use_type(recvtype, "recvtype");
    read_counts(c, recvcounts, displs, counts, offsets);
    check_buffer(recvbuf, std::accumulate(counts.begin(), counts.end(), size_t{0}), "recvbuf");
  }
  gather(m, c, sendbuf, sendcount, sendtype, recvbuf, std::move(counts), offsets, rtype, root, false);
}

void scatter_call(Mode m, const Comm& c, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  MPI_Count recvcount, MPI_Datatype recvtype, int root) {
  check_root(root, c);
  std::vector<size_t> counts, displs;
  const Datatype* stype = nullptr;
  if (c.rank == root) {
    const size_t scount = use_count(sendcount, "sendcount");
    stype = &use_type(sendtype, "sendtype");
    check_buffer(sendbuf, scount * static_cast<size_t>(c.size), "sendbuf");
    uniform(static_cast<size_t>(c.size), scount, counts, displs);
  }
  scatter(m, c, sendbuf, std::move(counts), displs, stype, recvbuf, recvcount, recvtype, root, true);
}

void scatterv_call(Mode m, const Comm& c, const void* sendbuf, CountArray sendcounts, DisplArray displs,
                   MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root) {
  check_root(root, c);
  std::vector<size_t> counts, offsets;
  const Datatype* stype = nullptr;
  if (c.rank == root) {
    stype = &use_type(sendtype, "sendtype");
    read_counts(c, sendcounts, displs, counts, offsets);
    check_buffer(sendbuf, std::accumulate(counts.begin(), counts.end(), size_t{0}), "sendbuf");
  }
  scatter(m, c, sendbuf, std::move(counts), offsets, stype, recvbuf, recvcount, recvtype, root, false);
}

// The blocking form of a family: its body run to completion here.
template <class Body>
int blocking(const char* function, MPI_Comm comm, Body&& body) {
  return call(function, comm, [&] { body(Mode{}, use_comm(comm)); });
}
// The I-form: its body started into a new request.
template <class Body>
int nonblocking(const char* function, MPI_Comm comm, MPI_Request* request, Body&& body) {
  return start_collective(function, comm, request,
                          [&](const Comm& c, chorus_mpi_request& r) { body(Mode{&r}, c); });
}

}  // namespace

}  // namespace chorus::mpi

namespace chorus::mpi {

int gather_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                 MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return blocking(function, comm, [&](Mode m, const Comm& c) {
    gather_call(m, c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root);
  });
}

int igather_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return nonblocking(function, comm, request, [&](Mode m, const Comm& c) {
    gather_call(m, c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root);
  });
}

int gatherv_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  CountArray recvcounts, DisplArray displs, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return blocking(function, comm, [&](Mode m, const Comm& c) {
    gatherv_call(m, c, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root);
  });
}

int igatherv_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                   CountArray recvcounts, DisplArray displs, MPI_Datatype recvtype, int root, MPI_Comm comm,
                   MPI_Request* request) {
  return nonblocking(function, comm, request, [&](Mode m, const Comm& c) {
    gatherv_call(m, c, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root);
  });
}

int scatter_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return blocking(function, comm, [&](Mode m, const Comm& c) {
    scatter_call(m, c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root);
  });
}

int iscatter_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                   MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return nonblocking(function, comm, request, [&](Mode m, const Comm& c) {
    scatter_call(m, c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root);
  });
}

int scatterv_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray displs,
                   MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                   MPI_Comm comm) {
  return blocking(function, comm, [&](Mode m, const Comm& c) {
    scatterv_call(m, c, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root);
  });
}

int iscatterv_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray displs,
                    MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                    MPI_Comm comm, MPI_Request* request) {
  return nonblocking(function, comm, request, [&](Mode m, const Comm& c) {
    scatterv_call(m, c, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root);
  });
}

int allgatherv_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                     void* recvbuf, CountArray recvcounts, DisplArray displs, MPI_Datatype recvtype, MPI_Comm comm) {
  return blocking(function, comm, [&](Mode m, const Comm& c) {
    allgatherv(m, c, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype);
  });
}

int iallgatherv_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                      void* recvbuf, CountArray recvcounts, DisplArray displs, MPI_Datatype recvtype, MPI_Comm comm,
                      MPI_Request* request) {
  return nonblocking(function, comm, request, [&](Mode m, const Comm& c) {
    allgatherv(m, c, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype);
  });
}

int alltoallv_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray sdispls,
                    MPI_Datatype sendtype, void* recvbuf, CountArray recvcounts, DisplArray rdispls,
                    MPI_Datatype recvtype, MPI_Comm comm) {
  return blocking(function, comm, [&](Mode m, const Comm& c) {
    alltoallv(m, c, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype);
  });
}

int ialltoallv_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray sdispls,
                     MPI_Datatype sendtype, void* recvbuf, CountArray recvcounts, DisplArray rdispls,
                     MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return nonblocking(function, comm, request, [&](Mode m, const Comm& c) {
    alltoallv(m, c, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype);
  });
}

int alltoallw_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray sdispls,
                    const MPI_Datatype sendtypes[], void* recvbuf, CountArray recvcounts, DisplArray rdispls,
                    const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return blocking(function, comm, [&](Mode m, const Comm& c) {
    alltoallw(m, c, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes);
  });
}

int ialltoallw_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray sdispls,
                     const MPI_Datatype sendtypes[], void* recvbuf, CountArray recvcounts, DisplArray rdispls,
                     const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request* request) {
  return nonblocking(function, comm, request, [&](Mode m, const Comm& c) {
    alltoallw(m, c, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes);
  });
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gather_entry("MPI_Gather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}
int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return igather_entry("MPI_Igather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gatherv_entry("MPI_Gatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
}
int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return igatherv_entry("MPI_Igatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                        request);
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatter_entry("MPI_Scatter", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}
int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return iscatter_entry("MPI_Iscatter", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        request);
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatterv_entry("MPI_Scatterv", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                        comm);
}
int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                  void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                  MPI_Request* request) {
  return iscatterv_entry("MPI_Iscatterv", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                         comm, request);
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return allgatherv_entry("MPI_Allgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
}
int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return iallgatherv_entry("MPI_Iallgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                           request);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoallv_entry("MPI_Alltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                         recvtype, comm);
}
int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  return ialltoallv_entry("MPI_Ialltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm, request);
}

int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                  void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                  MPI_Comm comm) {
  return alltoallw_entry("MPI_Alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                         recvtypes, comm);
}
int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                   void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                   MPI_Comm comm, MPI_Request* request) {
  return ialltoallw_entry("MPI_Ialltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                          recvtypes, comm, request);
}

}  // extern "C"
