// Explicit packing and element counts: MPI_Pack, MPI_Unpack, MPI_Pack_size,
// MPI_Get_elements(_x).
//
// MPI_Pack writes chorus' own packed layout (datatype.cc: the type's blocks
// one after another, what travels on the wire), so a buffer packed here and
// sent as MPI_PACKED unpacks on any chorus rank. MPI_Pack_size is that
// layout's exact size, not just a bound.
//
// MPI_Get_elements counts the predefined elements in the received bytes: a
// whole number of the type's elements gives that many times its basic
// elements; a partial element counts basic elements where the type is made
// of one basic type, and is MPI_UNDEFINED for a mixed struct (chorus does not
// keep which basic type each block holds).
#include "mpi/internal.hpp"

#include <climits>

namespace chorus::mpi {

namespace {

size_t use_size(int bytes, const char* role) {
  if (bytes < 0) fail(MPI_ERR_ARG, role, " ", bytes, " is negative");
  return static_cast<size_t>(bytes);
}

// The packed bytes at *position must fit in `capacity`; returns where they start.
size_t checked_position(const int* position, size_t bytes, size_t capacity, const char* side) {
  if (position == nullptr) fail(MPI_ERR_ARG, "null position");
  if (*position < 0) fail(MPI_ERR_ARG, "position ", *position, " is negative");
  const auto at = static_cast<size_t>(*position);
  if (at > capacity || bytes > capacity - at) {
    fail(MPI_ERR_TRUNCATE, bytes, " packed bytes at position ", at, " do not fit the ", side, " of ", capacity,
         " bytes");
  }
  if (at + bytes > static_cast<size_t>(INT_MAX)) fail(MPI_ERR_COUNT, "the new position would pass INT_MAX");
  return at;
}

enum class Side { output, input };  // the packed buffer is MPI_Pack's output or MPI_Unpack's input

// MPI_Pack's and MPI_Unpack's arguments, checked: `count` elements of
// `datatype` in the typed buffer, their packed bytes at *position of the
// packed buffer of `capacity` bytes.
struct PackedSpan {
  size_t count;
  const Datatype& type;
  size_t bytes;
  size_t at;
  void* buffer;
  int* position;

  PackedSpan(MPI_Comm comm, const void* typed, int count_in, MPI_Datatype datatype, const void* packed_buffer,
             int capacity, int* position_in, Side side)
      : count(use_count(count_in, side == Side::output ? "incount" : "outcount")),
        type(use_type(datatype, "datatype")),
        bytes(packed_bytes(count, type)),
        at(0),
        buffer(const_cast<void*>(packed_buffer)),
        position(position_in) {
    use_comm(comm);
    const bool out = side == Side::output;
    check_buffer(typed, count, out ? "inbuf" : "outbuf");
    at = checked_position(position, bytes, use_size(capacity, out ? "outsize" : "insize"),
                          out ? "output buffer" : "input buffer");
    if (bytes != 0 && buffer == nullptr) fail(MPI_ERR_BUFFER, out ? "null outbuf" : "null inbuf");
  }
  std::byte* packed() const { return static_cast<std::byte*>(buffer) + at; }
  void advance() const { *position = static_cast<int>(at + bytes); }
};

// Basic elements in `bytes` packed bytes of `type`; nullopt where MPI_UNDEFINED.
std::optional<MPI_Count> elements_in(size_t bytes, const Datatype& type) {
  if (type.packed_size == 0) return bytes == 0 ? std::optional<MPI_Count>{0} : std::nullopt;
  const size_t whole = bytes / type.packed_size, rest = bytes % type.packed_size;
  const auto basic_elements = static_cast<MPI_Count>(whole * type.basic_count);
  if (rest == 0) return basic_elements;
  // One basic type throughout: every basic element is packed_size / basic_count bytes.
  const bool uniform = type.basic != Basic::opaque && type.basic_count != 0 && type.packed_size % type.basic_count == 0;
  if (!uniform) return std::nullopt;
  const size_t basic_bytes = type.packed_size / type.basic_count;
  if (rest % basic_bytes != 0) return std::nullopt;
  return basic_elements + static_cast<MPI_Count>(rest / basic_bytes);
}

}  // namespace

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size) {
  return call("MPI_Pack_size", comm, [&] {
    use_comm(comm);
    const size_t n = use_count(incount, "incount");
    const Datatype& type = use_type(datatype, "datatype");
    if (size == nullptr) fail(MPI_ERR_ARG, "null size");
    const size_t bytes = packed_bytes(n, type);
    if (bytes > static_cast<size_t>(INT_MAX)) fail(MPI_ERR_COUNT, incount, " elements pack to more than INT_MAX bytes");
    *size = static_cast<int>(bytes);
  });
}

int MPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize, int* position,
             MPI_Comm comm) {
  return call("MPI_Pack", comm, [&] {
    const PackedSpan span{comm, inbuf, incount, datatype, outbuf, outsize, position, Side::output};
    if (span.bytes != 0) pack(inbuf, span.count, span.type, span.packed());
    span.advance();
  });
}

int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount, MPI_Datatype datatype,
               MPI_Comm comm) {
  return call("MPI_Unpack", comm, [&] {
    const PackedSpan span{comm, outbuf, outcount, datatype, inbuf, insize, position, Side::input};
    if (span.bytes != 0) unpack(span.packed(), span.count, span.type, outbuf);
    span.advance();
  });
}

int MPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  return call("MPI_Get_elements", MPI_COMM_WORLD, [&] {
    if (status == nullptr || count == nullptr) fail(MPI_ERR_ARG, "null status or count");
    const std::optional<MPI_Count> n = elements_in(status->chorus_bytes, use_type(datatype, "datatype"));
    *count = n && *n <= INT_MAX ? static_cast<int>(*n) : MPI_UNDEFINED;
  });
}

int MPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count) {
  return call("MPI_Get_elements_x", MPI_COMM_WORLD, [&] {
    if (status == nullptr || count == nullptr) fail(MPI_ERR_ARG, "null status or count");
    const std::optional<MPI_Count> n = elements_in(status->chorus_bytes, use_type(datatype, "datatype"));
    *count = n ? *n : MPI_UNDEFINED;
  });
}

}  // extern "C"
