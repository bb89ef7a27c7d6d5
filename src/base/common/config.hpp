// Parsing of CHORUS_* environment variables. Every parser validates the whole
// value and throws Error(Status::config) naming the variable, the bad value and
// what is accepted, e.g.
//   CHORUS_EAGER_LIMIT="12Q": expected a byte count like 8192, 64K or 4M (0..1M)
#pragma once

#include <chorus/chorus.hpp>

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

// Every CHORUS_* variable chorus reads, declared once: in the table of
// variables() in config.cc (name, default, meaning), or in a layer's own
// table that the layer registers (register_variables; the verbs layer's is
// transports/verbs/verbs_settings.cc). The known-variable list
// (the unknown-variable warning), chorus_info (effective values, validation)
// and README.md's table derive from it. To add a setting: one entry in that
// table (a test hook's name starts with CHORUS_TEST_; a variable the launcher
// sets has the default "(set by chorusrun)"), then read it in
// Settings::from_env (or where it is used) with the env_* parsers below.
struct VariableDoc {
  const char* name;  // CHORUS_ALGO_<OP>: a pattern, see is_known_variable
  const char* default_value;
  const char* meaning;
};
const std::vector<VariableDoc>& variables();

// A layer's own table of variables, registered by a static initialiser in
// the layer (e.g. `static const bool registered = register_variables(...)`):
// its names count as known, and chorus_info prints them under `heading`.
struct VariableTable {
  const char* heading;
  const std::vector<VariableDoc>& (*list)();
};
bool register_variables(const char* heading, const std::vector<VariableDoc>& (*list)());
std::vector<VariableTable>& registered_tables();

enum class VariableKind { user, launcher, test_hook };
VariableKind kind_of(const VariableDoc& variable);

// A name from the table, or CHORUS_ALGO_<OP> for a collective OP (upper case,
// e.g. CHORUS_ALGO_REDUCE_SCATTER). Names starting with CHORUS_TEST_ are
// reserved for test hooks and test scripts, and count as known.
bool is_known_variable(std::string_view name);
// CHORUS_ALGO_<OP> of one collective, e.g. "CHORUS_ALGO_REDUCE_SCATTER".
std::string algorithm_variable(Collective op);

// CHORUS_* variables set in this process' environment that chorus does not
// read (typos such as CHORUS_TIMOUT), each with the closest known name.
struct UnknownVariable {
  std::string name;
  std::string value;
  std::string closest;  // the known name with the smallest edit distance
};
std::vector<UnknownVariable> unknown_variables();
// "CHORUS_TIMOUT=5 is not a chorus variable and is ignored; did you mean CHORUS_TIMEOUT? ..."
std::string describe(const UnknownVariable& unknown);
// Logs one warning per unknown variable (as UCX does for UCX_*).
void warn_unknown_variables();

// TCP transport settings (docs/transport-tcp.md).
struct TcpSettings {
  std::string iface;           // CHORUS_TCP_IFACE ("" = auto: the interface that reaches the store)
  int streams = 1;             // CHORUS_TCP_STREAMS: connections per pair of ranks
  uint64_t socket_buffer = 0;  // CHORUS_TCP_SOCKET_BUFFER (0 = the kernel's autotuning)
};

// Settings shared by the layers, read once at communicator creation.
struct Settings {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // CHORUS_TIMEOUT
  uint64_t eager_limit = 16 * 1024;                              // CHORUS_EAGER_LIMIT
  uint64_t rendezvous_chunk = 1 << 20;                           // CHORUS_RDV_CHUNK
  int reads_in_flight = 4;                                       // CHORUS_RDV_READS
  uint64_t board_bytes = 2048;                                   // CHORUS_BOARD_BYTES (<= transport::kBoardDataBytes)
  uint64_t reg_cache_bytes = 1ull << 30;                         // CHORUS_REG_CACHE_BYTES
  bool leave_pinned = false;                                     // CHORUS_LEAVE_PINNED
  bool check_calls = false;                                      // CHORUS_CHECK_CALLS
  std::chrono::microseconds spin{std::chrono::microseconds(50)}; // CHORUS_SPIN_US
  std::string progress = "thread";                               // CHORUS_PROGRESS: thread or caller
  std::string transport = "auto";                                // CHORUS_TRANSPORT
  std::string ofi_provider;                                      // CHORUS_OFI_PROVIDER ("" = auto)
  // Test hook CHORUS_TEST_OFI_STALL="RANK:N": on RANK, the N-th libfabric
  // data-path call spins instead of returning (the stall escape's tests).
  int test_ofi_stall_rank = -1;
  int test_ofi_stall_after = 0;
  TcpSettings tcp;
  std::string bind = "none";                                     // CHORUS_BIND: none (default), auto, nic, core
  bool report_bindings = false;                                  // CHORUS_REPORT_BINDINGS
  std::string topology_xml;                                      // CHORUS_TOPOLOGY_XML ("" = this machine)
  static Settings from_env();
};

}  // namespace chorus::config
