// Parsing of CHORUS_* environment variables. Every parser validates the whole
// value and throws Error(Status::config) naming the variable, the bad value and
// what is accepted, e.g.
//   CHORUS_EAGER_LIMIT="12Q": expected a byte count like 8192, 64K or 4M (0..1M)
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chorus::config {

// Raw lookup: nullopt when unset; an empty string counts as unset.
std::optional<std::string> get(const char* name);

// Byte counts: decimal with optional K/M/G suffix (powers of 1024), e.g. 64K.
std::optional<uint64_t> parse_bytes(std::string_view text);
uint64_t env_bytes(const char* name, uint64_t fallback, uint64_t min, uint64_t max);

// A whole decimal number in [min, max], nothing else in the text.
std::optional<int64_t> parse_int(std::string_view text, int64_t min, int64_t max);

// Integers in [min, max].
int64_t env_int(const char* name, int64_t fallback, int64_t min, int64_t max);

// Durations in seconds, decimals allowed ("30", "0.5"); must be > 0 and <= max_seconds.
std::chrono::milliseconds env_seconds(const char* name, std::chrono::milliseconds fallback, double max_seconds);

// Booleans: 1/0, true/false, yes/no, on/off (case-insensitive).
bool env_bool(const char* name, bool fallback);

// One of `choices` (case-sensitive); returns the fallback when unset.
std::string env_choice(const char* name, const std::string& fallback, const std::vector<std::string>& choices);

// A test hook's "RANK:N" value (rank 0..2^20, count 0..2^30), or nullopt when
// the variable is unset; a malformed value names `expected`.
std::optional<std::pair<int, int>> env_rank_and_count(const char* name, const char* expected);

// Every variable chorus reads, with its meaning and default; printed by
// chorus_info and documented in README.md. The verbs layer lists its own
// (transports/verbs/verbs_settings.hpp).
struct VariableDoc {
  const char* name;
  const char* default_value;
  const char* meaning;
};
const std::vector<VariableDoc>& variables();

// Settings shared by the layers, read once at communicator creation.
struct Settings {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // CHORUS_TIMEOUT
  uint64_t eager_limit = 16 * 1024;                              // CHORUS_EAGER_LIMIT
  uint64_t rendezvous_chunk = 1 << 20;                           // CHORUS_RDV_CHUNK
  int reads_in_flight = 4;                                       // CHORUS_RDV_READS
  uint64_t reg_cache_bytes = 1ull << 30;                         // CHORUS_REG_CACHE_BYTES
  bool leave_pinned = false;                                     // CHORUS_LEAVE_PINNED
  bool check_calls = false;                                      // CHORUS_CHECK_CALLS
  std::chrono::microseconds spin{std::chrono::microseconds(50)}; // CHORUS_SPIN_US
  std::string transport = "auto";                                // CHORUS_TRANSPORT
  std::string ofi_provider;                                      // CHORUS_OFI_PROVIDER ("" = auto)
  // Test hook CHORUS_TEST_OFI_STALL="RANK:N": on RANK, the N-th libfabric
  // data-path call spins instead of returning (the stall escape's tests).
  int test_ofi_stall_rank = -1;
  int test_ofi_stall_after = 0;
  std::string bind = "auto";                                     // CHORUS_BIND: auto, nic, core, none
  bool report_bindings = false;                                  // CHORUS_REPORT_BINDINGS
  std::string topology_xml;                                      // CHORUS_TOPOLOGY_XML ("" = this machine)
  static Settings from_env();
};

}  // namespace chorus::config
