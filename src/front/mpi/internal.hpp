// Internals of the MPI subset (libchorus_mpi): the objects behind the handles
// of include/chorus/mpi/mpi.h, the entry-point wrapper that turns failures
// into MPI error codes through the communicator's error handler, and the
// helpers the collectives share (packing, local reduction).
//
// The MPI layer is a client of chorus' public C++ API only: an MPI
// communicator is a chorus::Communicator (user collectives and messages) plus
// a private dup of it whose point-to-point messages carry the reductions
// built here for ops chorus lacks (user ops, logical ops, ...), so they never
// match the user's.
#pragma once

#include "chorus/mpi/mpi.h"
#include "common/error.hpp"

#include <chorus/chorus.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <atomic>
#include <vector>

// ---- objects behind the handles (the header declares them incomplete) ----

// The two predefined handlers, or one MPI_Comm_create_errhandler made
// (`function`). A user's counts its owners (its handle until
// MPI_Errhandler_free, each communicator that uses it, each handle
// MPI_Comm_get_errhandler gave) and goes with the last
// (retain_errhandler / release_errhandler); the predefined ones count nothing.
struct chorus_mpi_errhandler {
  bool fatal;
  const char* name;
  MPI_Comm_errhandler_function* function = nullptr;
  std::atomic<int> references{1};
};

// An ordered set of processes, as their ranks in MPI_COMM_WORLD.
struct chorus_mpi_group {
  uint32_t magic;
  std::vector<int> world_ranks;
  bool predefined;
};

namespace chorus::mpi {
// A Cartesian process topology: the extent and periodicity of each
// dimension, ranks in row-major order (topology.cc).
struct CartTopology {
  std::vector<int> dims;
  std::vector<bool> periods;
};
// A graph (MPI_Graph_create: the whole graph as given, this rank's
// neighbours both its sources and its destinations) or a distributed graph
// (MPI_Dist_graph_create(_adjacent): this rank's edges only).
struct GraphTopology {
  int kind;                            // MPI_GRAPH or MPI_DIST_GRAPH
  std::vector<int> index, edges;       // MPI_GRAPH only
  std::vector<int> sources, destinations;
  std::vector<int> source_weights, destination_weights;  // MPI_DIST_GRAPH, if weighted
  bool weighted = false;
};
}  // namespace chorus::mpi

struct chorus_mpi_comm {
  uint32_t magic;
  chorus::Communicator* chorus;    // collectives and user point-to-point
  chorus::Communicator* internal;  // point-to-point of the reductions built in this layer
  MPI_Errhandler errhandler;
  const char* name;  // predefined communicators only
  bool predefined;
  std::vector<int> world_ranks;  // the members' ranks in MPI_COMM_WORLD, by rank here (MPI_Comm_group)
  std::string user_name;         // MPI_Comm_set_name's
  // chorus->rank() and size(), kept when `chorus` is set: use_comm, on
  // every call's path, then reads them without two calls into libchorus.
  int rank = -1;
  int size = 0;
  // A Cartesian topology's shape (MPI_Cart_create, MPI_Cart_sub), shared by
  // its duplicates (MPI_Comm_dup keeps the topology); nullptr: none.
  std::shared_ptr<const chorus::mpi::CartTopology> cart = nullptr;
  std::shared_ptr<const chorus::mpi::GraphTopology> graph = nullptr;  // the same, for the graph kinds
  // Cached attributes (MPI_Comm_set_attr): keyval and value, in the order
  // they were set (attributes.cc).
  std::vector<std::pair<int, void*>> attributes = {};
  // Info hints (MPI_Comm_set_info, MPI_Comm_dup_with_info), kept and
  // returned by MPI_Comm_get_info; chorus acts on none (info.cc).
  std::vector<std::pair<std::string, std::string>> hints = {};
};

namespace chorus::mpi {

inline constexpr uint32_t kCommMagic = 0x636f6d6d;  // "comm"
inline constexpr uint32_t kTypeMagic = 0x74797065;  // "type"
inline constexpr uint32_t kOpMagic = 0x6f702020;    // "op  "
inline constexpr uint32_t kGroupMagic = 0x67727570; // "grup"

// The element type predefined reductions work on.
enum class Basic : uint8_t {
  i8, u8, i16, u16, i32, u32, i64, u64,  // C integer
  f32, f64, f80,                         // floating point (f80: long double)
  c32, c64,                              // complex
  boolean,                               // logical (C _Bool)
  byte,                                  // MPI_BYTE
  float_int, double_int, long_int, two_int, short_int, long_double_int,  // value-index pairs
  opaque,                                // no predefined reduction (MPI_WCHAR, MPI_PACKED)
};

// One contiguous piece of an element in memory.
struct Block {
  MPI_Aint offset;
  size_t length;
};

// How a derived type was made, as MPI_Type_get_envelope/_get_contents
// report it (type_decoding.cc): the combiner and the constructor's
// arguments. A derived argument type is kept as a copy taken then (the
// caller may free its handle; chorus' types copy their layout, so nothing
// else refers to it); a predefined one is the predefined object itself.
struct TypeRecipe {
  int combiner;
  std::vector<int> integers;
  std::vector<MPI_Aint> addresses;
  std::vector<std::shared_ptr<const chorus_mpi_datatype>> types;
};

enum class OpKind : uint8_t { sum, prod, min, max, land, lor, lxor, band, bor, bxor, minloc, maxloc, replace, no_op, user };

}  // namespace chorus::mpi

struct chorus_mpi_datatype {
  uint32_t magic;
  const char* name;                    // "MPI_INT"; "" for derived types
  chorus::mpi::Basic basic;            // what predefined ops see
  size_t basic_count;                  // basic elements per element
  int size;                            // MPI_Type_size: bytes of data per element
  MPI_Aint extent;                     // distance between consecutive elements in memory
  size_t packed_size;                  // bytes of one element on the wire
  bool predefined;
  bool committed;
  std::vector<chorus::mpi::Block> blocks;  // memory layout of one element; empty: contiguous
  MPI_Aint lb;                             // lower bound (MPI_Type_get_extent); addresses do not depend on it
  std::string user_name;                   // MPI_Type_set_name's
  std::shared_ptr<const chorus::mpi::TypeRecipe> recipe;  // null for a predefined type (MPI_COMBINER_NAMED)
  // The largest alignment of its basic types: a derived type's extent is
  // rounded up to a multiple of it unless set explicitly (MPI-3.1 4.1.6's
  // epsilon), so that an array of a struct { double; char } is 16 bytes apart.
  size_t alignment;

  bool contiguous() const { return blocks.empty(); }
};

struct chorus_mpi_op {
  uint32_t magic;
  const char* name;  // "MPI_SUM"; "user-defined op" for MPI_Op_create
  chorus::mpi::OpKind kind;
  MPI_User_function* function;  // user ops only
  bool commutative;
  bool predefined;
};

namespace chorus::mpi {

using Datatype = chorus_mpi_datatype;
using Bytes = std::vector<std::byte>;

// ---- failures ----------------------------------------------------------

// A failure inside an MPI function: the error class and what went wrong.
// The entry point (call) prefixes the function name and raises it.
struct Failure {
  int error_class;
  std::string message;
};

using chorus::concat;  // the library's formatter (common/error.hpp)

template <class... Args>
[[noreturn]] void fail(int error_class, Args&&... args) {
  throw Failure{error_class, concat(std::forward<Args>(args)...)};
}

// Registers `message` under a fresh error code of `error_class` and hands it
// to the error handler of `comm` (or MPI_COMM_WORLD's if comm is not a valid
// communicator). Returns the code unless the handler ends the process.
int raise(MPI_Comm comm, int error_class, const std::string& message);
// How many errors raise() has raised so far (a freed request's error is
// reported by MPI_Finalize only if no call reported one since).
uint64_t errors_raised();
// The error class of a chorus failure.
int error_class_of(chorus::Status status);
// Name of an error class ("MPI_ERR_TRUNCATE"), or nullptr.
const char* error_class_name(int error_class);

// The only ways this library ends the process (MPI_Abort, MPI_ERRORS_ARE_FATAL):
// prints `message` on stderr, flushes stdio and _exit()s with `status`
// (no atexit handlers: they could block on peers that are gone).
[[noreturn]] void terminate_process(const std::string& message, int status);

// ---- process state -------------------------------------------------------

bool initialized();
bool finalized();
int world_rank();  // -1 before MPI_Init
void register_comm(MPI_Comm comm);
void unregister_comm(MPI_Comm comm);

// Runs `body` as the MPI function `function`: checks MPI is initialized (if
// `needs_init`), and turns every failure into an error code raised on `comm`.
template <bool needs_init = true, class Body>
int call(const char* function, MPI_Comm comm, Body&& body) {
  try {
    if constexpr (needs_init) {
      if (!initialized()) {
        fail(MPI_ERR_OTHER, finalized() ? "called after MPI_Finalize" : "called before MPI_Init");
      }
    }
    body();
    return MPI_SUCCESS;
  } catch (const Failure& failure) {
    return raise(comm, failure.error_class, concat(function, ": ", failure.message));
  } catch (const chorus::Error& error) {
    return raise(comm, error_class_of(error.status()), concat(function, ": ", error.what()));
  } catch (const std::bad_alloc&) {
    return raise(comm, MPI_ERR_NO_MEM, concat(function, ": out of memory"));
  } catch (const std::exception& error) {
    return raise(comm, MPI_ERR_INTERN, concat(function, ": internal error: ", error.what()));
  }
}

// Another owner of a user's error handler; one owner fewer (the last frees it).
void retain_errhandler(MPI_Errhandler errhandler);
void release_errhandler(MPI_Errhandler errhandler);

// The error every declared-only function returns.
int unsupported(const char* function, MPI_Comm comm);

// ---- argument checks -----------------------------------------------------

// A communicator in use: its chorus communicators, rank and size.
struct Comm {
  MPI_Comm handle;
  chorus::Communicator& chorus;
  chorus::Communicator& internal;
  int rank;
  int size;
};
// The checks on every call's path are inline and their failures out of
// line (cold): out of line, each cost a call of 10-25 instructions on a
// path of a few hundred (docs/performance.md, "The send side").
[[noreturn, gnu::cold]] void refuse_comm(MPI_Comm comm);
inline Comm use_comm(MPI_Comm comm) {                           // MPI_ERR_COMM
  if (comm == MPI_COMM_NULL || comm->magic != kCommMagic || comm->chorus == nullptr) [[unlikely]] refuse_comm(comm);
  return Comm{comm, *comm->chorus, *comm->internal, comm->rank, comm->size};
}
// Collective over `parent` (c): the new communicator of this rank's color,
// ordered by key (MPI_COMM_NULL for MPI_UNDEFINED), with its members' world ranks.
MPI_Comm split_comm(MPI_Comm parent, const Comm& c, int color, int key);
// MPI_Comm_dup's work (collective): topology, hints and attributes copied.
MPI_Comm dup_comm(MPI_Comm comm);
// Attribute caching (attributes.cc): what MPI_Comm_dup copies from `from`
// to `to` through each keyval's copy function, and the delete functions
// MPI_Comm_free (and MPI_Finalize for MPI_COMM_SELF) runs, last set first.
void copy_attributes(MPI_Comm from, MPI_Comm to);
void delete_attributes(MPI_Comm comm);
// The same for datatypes: MPI_Type_dup copies, MPI_Type_free deletes.
void copy_attributes(MPI_Datatype from, MPI_Datatype to);
void delete_attributes(MPI_Datatype type);
// Drops what is left of a type's attributes without their delete functions
// (a type being discarded whose delete functions failed): the table must
// not hand them to a later type at the same address.
void forget_attributes(MPI_Datatype type) noexcept;
// A datatype handle that is valid, committed or not (MPI_ERR_TYPE).
const Datatype& use_any_type(MPI_Datatype datatype, const char* role);
// Collective over the members only: the communicator of `members` (ranks of
// `parent`, in new-rank order; their world ranks in `world_ranks`).
MPI_Comm group_comm(MPI_Comm parent, const Comm& c, const std::vector<int>& members, std::vector<int> world_ranks,
                    int tag);
[[noreturn, gnu::cold]] void refuse_type(MPI_Datatype datatype, const char* role);
inline const Datatype& use_type(MPI_Datatype datatype, const char* role) {  // MPI_ERR_TYPE (valid and committed)
  if (datatype == MPI_DATATYPE_NULL || datatype->magic != kTypeMagic || !datatype->committed) [[unlikely]] {
    refuse_type(datatype, role);
  }
  return *datatype;
}
[[noreturn, gnu::cold]] void refuse_count(MPI_Count count, const char* role);
inline size_t use_count(MPI_Count count, const char* role) {  // MPI_ERR_COUNT
  if (count < 0) [[unlikely]] refuse_count(count, role);
  return static_cast<size_t>(count);
}

// A count or displacement array as the caller passed it: int in the MPI-3.1
// functions, MPI_Count (counts) and MPI_Aint (displacements) in the MPI-4
// large-count `_c` ones. One body serves both (large_count.cc).
template <class Wide>
struct WidthArray {
  const int* narrow = nullptr;
  const Wide* wide = nullptr;
  WidthArray(const int* values) : narrow(values) {}  // NOLINT: both forms convert implicitly
  WidthArray(const Wide* values) : wide(values) {}   // NOLINT
  bool null() const { return narrow == nullptr && wide == nullptr; }
  Wide operator[](size_t i) const { return narrow != nullptr ? Wide{narrow[i]} : wide[i]; }
};
using CountArray = WidthArray<MPI_Count>;
using DisplArray = WidthArray<MPI_Aint>;
void check_root(int root, const Comm& comm);                    // MPI_ERR_ROOT
[[noreturn, gnu::cold]] void refuse_buffer(size_t count, const char* role);
inline void check_buffer(const void* buffer, size_t count, const char* role) {  // MPI_ERR_BUFFER
  if (buffer == nullptr && count > 0) [[unlikely]] refuse_buffer(count, role);
}

// Tags of the point-to-point messages collectives exchange on Comm::internal.
// (Gather, scatter and allgatherv are chorus' own collectives, and so are
// the gathers of the reductions chorus cannot compute; what is left here
// serves scan.cc.)
// kTagNeighbor + 2 * dimension (+ 1 toward the higher coordinate) serves the
// neighbourhood collectives of a Cartesian topology, kTagGraphNeighbor those
// of the graph kinds (neighbourhood.cc).
enum InternalTag : int { kTagScan = 3, kTagGraphNeighbor = 15, kTagNeighbor = 16 };

// Whom a neighbourhood collective receives block k from and sends block
// k to, with the tags of those messages. For a Cartesian topology both
// lists are the 2 x ndims neighbours of MPI-3.1 7.6: along dimension d the
// lower (k = 2d), then the higher (k = 2d + 1), MPI_PROC_NULL at a
// non-periodic edge (its blocks are neither sent nor written); a message's
// tag says which way it travels, so that in a dimension of extent 1 or 2,
// where both neighbours are one rank, the block sent up arrives as the one
// from below. For the graph kinds: the sources and the destinations, in
// their order, one tag (messages between two ranks match in order).
struct NeighbourPlan {
  std::vector<int> from, to;
  std::vector<int> from_tags, to_tags;
};
// MPI_ERR_TOPOLOGY without a topology (topology.cc).
NeighbourPlan plan_of(MPI_Comm comm, int rank);

// Receives exactly `bytes` bytes from `peer`; another length means the ranks
// passed different counts or datatypes.
void recv_exact(chorus::Communicator& comm, void* buffer, size_t bytes, int peer, int tag);
// Sends `send_bytes` to `peer` and receives `recv_bytes` from it; the lower
// rank sends first, so two blocking calls never wait for each other.
void exchange(const Comm& comm, int peer, const void* send, size_t send_bytes, void* recv, size_t recv_bytes, int tag);

// ---- datatypes -------------------------------------------------------------

// One piece of a derived type: `count` elements of `type` from byte
// displacement `displacement` (consecutive elements one extent apart).
struct Piece {
  const Datatype* type;
  MPI_Aint displacement;
  size_t count;
};
using TypePtr = std::unique_ptr<chorus_mpi_datatype>;
// A derived type made of `pieces` in type-map order, not committed. Its
// bounds are those of the pieces (lb the lowest piece lower bound, extent
// up to the highest upper bound), unless `bounds` gives them (lb, extent).
TypePtr derive(const std::vector<Piece>& pieces, std::optional<std::pair<MPI_Aint, MPI_Aint>> bounds = {});
// The recipe of a type made by `combiner` from these arguments
// (type_decoding.cc); derived `types` are copied.
std::shared_ptr<const TypeRecipe> make_recipe(int combiner, std::vector<int> integers, std::vector<MPI_Aint> addresses,
                                              const std::vector<MPI_Datatype>& types);
// Gives `made` its recipe and hands it out as a handle.
MPI_Datatype with_recipe(TypePtr made, int combiner, std::vector<int> integers, std::vector<MPI_Aint> addresses,
                         const std::vector<MPI_Datatype>& types);
// `count`, then each array's `count` entries (the integer arguments of the indexed constructors).
std::vector<int> concat_ints(int count, const int* first, const int* second = nullptr);
std::vector<MPI_Aint> addresses_of(int count, const MPI_Aint* values);

// Bytes of `count` elements on the wire.
[[noreturn, gnu::cold]] void refuse_packed_bytes(size_t count);
inline size_t packed_bytes(size_t count, const Datatype& type) {  // MPI_ERR_COUNT if it overflows
  if (type.packed_size != 0 && count > SIZE_MAX / type.packed_size) [[unlikely]] refuse_packed_bytes(count);
  return count * type.packed_size;
}
// Address of element `index` of a buffer of `type` elements.
inline const std::byte* element(const void* buffer, size_t index, const Datatype& type) {
  return static_cast<const std::byte*>(buffer) + static_cast<MPI_Aint>(index) * type.extent;
}
inline std::byte* element(void* buffer, size_t index, const Datatype& type) {
  return static_cast<std::byte*>(buffer) + static_cast<MPI_Aint>(index) * type.extent;
}
// Copies `count` elements between memory layout and packed (wire) layout.
void pack(const void* buffer, size_t count, const Datatype& type, void* packed);
void unpack(const void* packed, size_t count, const Datatype& type, void* buffer);
Bytes pack_copy(const void* buffer, size_t count, const Datatype& type);

// `count` elements of `type` at `buffer` as packed bytes: the user's memory
// itself for contiguous types, else a packed copy.
struct PackedView {
  const void* data;
  size_t bytes;
  Bytes storage;
};
PackedView packed_view(const void* buffer, size_t count, const Datatype& type);

// The checked arguments of a broadcast, blocking or not: `count` elements
// of `type` at the buffer, `bytes` of them packed.
struct Broadcast {
  size_t count;
  const Datatype& type;
  size_t bytes;
};
Broadcast broadcast_args(const Comm& comm, const void* buffer, MPI_Count count, MPI_Datatype datatype, int root);

// The checked arguments of an allgather or alltoall, blocking or not: the
// receive side and, unless in place, the send buffer packed (`send_blocks`
// blocks: 1 for allgather, size for alltoall), each block the same number
// of packed bytes as a receive block (MPI_ERR_TRUNCATE otherwise).
struct BlockExchange {
  const Datatype& rtype;
  size_t rcount;       // elements per receive block
  size_t block;        // packed bytes per block
  size_t total_count;  // elements in the receive buffer
  bool in_place;
  PackedView send;
};
BlockExchange block_exchange(const Comm& comm, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                             const void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, size_t send_blocks);

// ---- reductions ------------------------------------------------------------

// Checks that `op` may reduce `type` (MPI-3.1 5.9.2); MPI_ERR_OP otherwise.
void check_op(MPI_Op op, const Datatype& type);
// inout[i] = in[i] op inout[i] for `count` packed elements of `type`
// (MPI's convention: `in` holds the lower ranks' contribution).
void reduce_local(MPI_Op op, const Datatype& type, const void* in, void* inout, size_t count);

// The chorus datatype and op that compute `op` on `type`, when chorus'
// collectives can (SUM/PROD/MIN/MAX on integers and float/double).
struct FastPath {
  chorus::DataType dtype;
  chorus::ReduceOp op;
  size_t count;  // chorus elements for `count` MPI elements is count * this
};
std::optional<FastPath> fast_path(MPI_Op op, const Datatype& type);

// MPI_Scan/MPI_Exscan and their I-forms (scan.cc): count, type and op
// checked; the send data (recvbuf when MPI_IN_PLACE) and the packed bytes.
struct ScanArgs {
  size_t count;
  const Datatype& type;
  const void* send;
  size_t bytes;
};
ScanArgs scan_args(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op);

// The checked arguments of an allreduce (no root) or a reduce to `root`,
// blocking or not: the send data (recvbuf when MPI_IN_PLACE, which reduce
// allows at the root only), where the result goes and whether this rank
// receives it, and how chorus computes the op (fast) if it can.
struct Reduction {
  size_t count;
  const Datatype& type;
  MPI_Op op;
  const void* send;
  void* recv;
  bool receives;
  std::optional<FastPath> fast;

  bool empty() const { return packed_bytes(count, type) == 0; }
  size_t chorus_count() const { return count * fast->count; }  // elements of fast->dtype
};
Reduction reduction(const Comm& comm, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                    MPI_Op op, std::optional<int> root);

// x0 op (x1 op (... op x[size-1])) of the `size` packed blocks of `count`
// elements in `blocks` (block r is rank r's contribution): how every
// reduction chorus' collectives cannot compute (user ops, logical/bitwise
// ops, long double, complex, value-index pairs) ends, blocking or not, once
// the contributions are gathered (requests.hpp, "Reductions chorus lacks").
Bytes combine_in_rank_order(const Bytes& blocks, int size, size_t count, const Datatype& type, MPI_Op op);

}  // namespace chorus::mpi
