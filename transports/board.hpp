// Boards: memory every rank of a job can read and each rank writes its own
// part of, for small collectives without messages where all ranks share a
// host (collectives/board.cc has the protocol; docs/algorithms.md "board").
//
// Each rank owns, per communicator context below kBoardContexts, two slots
// used alternately by its consecutive board calls on that communicator (the
// call's board sequence picks the slot by parity). A slot is a header and up
// to kBoardDataBytes of payload; the header's `sequence` is stored last,
// with release, and sits in the payload's first cache line, so a reader
// that sees the sequence of the call it waits for sees a payload of up to
// 48 bytes with that one line.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::transport {

inline constexpr uint32_t kBoardContexts = 8;     // communicators with a lower context id get a board
inline constexpr size_t kBoardDataBytes = 2048;   // payload a slot holds
inline constexpr size_t kBoardLine = 64;

struct BoardSlotHeader {
  uint64_t sequence;  // the board call that last wrote the slot (0: none yet); stored last
  uint32_t digest;    // the call's digest: readers compare it with their own
  uint32_t bytes;     // payload bytes
};
static_assert(sizeof(BoardSlotHeader) == 16);

inline constexpr size_t kBoardSlotBytes = (sizeof(BoardSlotHeader) + kBoardDataBytes + kBoardLine - 1) / kBoardLine * kBoardLine;
// One rank's slots for every context.
inline constexpr size_t kBoardSlotsBytes = kBoardContexts * 2 * kBoardSlotBytes;

// After the slots, one line: the CPU the owner is pinned to (-1: none, or
// several), written when the area is created, before any peer maps it. The
// board uses it where ranks share a CPU (collectives/board.cc, `await`).
struct BoardAreaTail {
  alignas(kBoardLine) int32_t pinned_cpu;
  // Per context, the last barrier the owner left.
  alignas(kBoardLine) uint64_t left[kBoardContexts];
};
static_assert(sizeof(BoardAreaTail) == 2 * kBoardLine);

inline constexpr size_t kBoardAreaBytes = kBoardSlotsBytes + sizeof(BoardAreaTail);
inline BoardAreaTail* board_tail(uint8_t* area) { return reinterpret_cast<BoardAreaTail*>(area + kBoardSlotsBytes); }

inline std::atomic_ref<uint64_t> board_sequence(uint8_t* slot) {
  return std::atomic_ref<uint64_t>(reinterpret_cast<BoardSlotHeader*>(slot)->sequence);
}
inline BoardSlotHeader* board_header(uint8_t* slot) { return reinterpret_cast<BoardSlotHeader*>(slot); }
inline uint8_t* board_data(uint8_t* slot) { return slot + sizeof(BoardSlotHeader); }

// Every rank's board area as this process maps it (index: transport rank),
// each kBoardAreaBytes long, zeroed before the first call, aligned to a line.
struct Boards {
  std::vector<uint8_t*> areas;
  // This process' own record per context, in private memory: reading it
  // back from its slots would miss whenever a peer's read had taken the
  // line (a line read by another core often moves there whole).
  std::array<uint64_t, kBoardContexts> last_sequence{};  // the last board call made
  std::array<uint32_t, kBoardContexts> last_digest{};    // its digest
  // Whether the last call read every peer's slot of it (allreduce, barrier,
  // a reduce root, a 2-rank broadcast non-root): the next call's step 1 then
  // has nothing to learn.
  std::array<bool, kBoardContexts> read_every_peer{};
  // Per transport rank, the one CPU it is pinned to (-1: none, or unknown),
  // and whether any two ranks are pinned to the same one.
  std::vector<int> pinned_cpu;
  bool shared_cpus = false;
  uint8_t* slot(int rank, uint32_t context, uint64_t sequence) const {
    return areas[static_cast<size_t>(rank)] + (static_cast<size_t>(context) * 2 + (sequence & 1)) * kBoardSlotBytes;
  }
  uint64_t* left(int rank, uint32_t context) const { return &board_tail(areas[static_cast<size_t>(rank)])->left[context]; }
  // Reads every owner's pinned CPU from its area (once, at connect).
  void learn_pinned_cpus() {
    pinned_cpu.clear();
    shared_cpus = false;
    for (uint8_t* area : areas) {
      const int cpu = board_tail(area)->pinned_cpu;
      if (cpu >= 0 && std::find(pinned_cpu.begin(), pinned_cpu.end(), cpu) != pinned_cpu.end()) shared_cpus = true;
      pinned_cpu.push_back(cpu);
    }
  }
};

}  // namespace chorus::transport
