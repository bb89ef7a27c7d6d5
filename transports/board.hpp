// Boards: memory every rank of a job can read and each rank writes its own
// part of, for small collectives without messages where all ranks share a
// host (collectives/board.cc has the protocol; docs/algorithms.md "board").
//
// Each rank owns, per communicator context below kBoardContexts, three slots
// used in turn by its consecutive board calls on that communicator (the
// call's board sequence modulo kBoardSlotsPerContext picks the slot; three
// let a peer be two calls ahead, so a call rarely waits for the others to
// have started the previous one: collectives/board.cc). A slot is a header and up
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
inline constexpr uint64_t kBoardSlotsPerContext = 3;

struct BoardSlotHeader {
  uint64_t sequence;  // the board call that last wrote the slot (0: none yet); stored last
  uint32_t digest;    // the call's digest: readers compare it with their own
  uint32_t bytes;     // payload bytes, or kBoardStopped
};
// `bytes` of a slot whose owner found, in step 1 of that call, that a rank
// made a different previous call, and stopped: its readers stop too, saying so.
inline constexpr uint32_t kBoardStopped = 0xffffffffu;
static_assert(sizeof(BoardSlotHeader) == 16);

inline constexpr size_t kBoardSlotBytes = (sizeof(BoardSlotHeader) + kBoardDataBytes + kBoardLine - 1) / kBoardLine * kBoardLine;
// One rank's slots for every context.
inline constexpr size_t kBoardSlotsBytes = kBoardContexts * kBoardSlotsPerContext * kBoardSlotBytes;

// After the slots, one line: the CPU the owner is pinned to (-1: none, or
// several), written when the area is created, before any peer maps it. The
// board uses it where ranks share a CPU (collectives/board.cc, `keep_cpu_for`).
struct BoardAreaTail {
  alignas(kBoardLine) int32_t pinned_cpu;
};
static_assert(sizeof(BoardAreaTail) == kBoardLine);

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
  // The last call every peer is known to have written its slot of, and the
  // last whose digests this rank compared with every peer's (reading every
  // slot of a call exactly, as allreduce, barrier and a reduce root do,
  // learns both): step 1 of a board call waits and compares only what these
  // do not already cover.
  std::array<uint64_t, kBoardContexts> written_through{};
  std::array<uint64_t, kBoardContexts> compared_through{};
  // This rank saw every peer's slot of `sequence`, digest compared.
  void saw_every_peer(uint32_t context, uint64_t sequence) {
    written_through[context] = compared_through[context] = sequence;
  }
  // Per transport rank, the one CPU it is pinned to (-1: none, or unknown),
  // and whether any two ranks are pinned to the same one.
  std::vector<int> pinned_cpu;
  bool shared_cpus = false;
  // `index`: the call's board sequence modulo kBoardSlotsPerContext.
  uint8_t* slot(int rank, uint32_t context, uint64_t index) const {
    return areas[static_cast<size_t>(rank)] + (context * kBoardSlotsPerContext + index) * kBoardSlotBytes;
  }
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
