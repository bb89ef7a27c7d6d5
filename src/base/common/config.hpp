// Parsing of CHORUS_* environment variables. Every parser validates the whole
// value and throws Error(Status::config) naming the variable, the bad value and
// what is accepted, e.g.
//   CHORUS_EAGER_LIMIT="12Q": expected a byte count like 8192, 64K or 4M (0..1M)
#pragma once

#include <chorus/chorus.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chorus::config {

// Raw lookup: nullopt when unset; an empty string counts as unset.
std::optional<std::string> get(const char* name);

// The parsers are constexpr: the defaults below are the parse of the table's
// text at compile time, by the same code that parses the environment.

// Byte counts: decimal with optional K/M/G suffix (powers of 1024), e.g. 64K.
constexpr std::optional<uint64_t> parse_bytes(std::string_view text) {
  uint64_t number = 0;
  size_t digits = 0;
  for (; digits < text.size() && text[digits] >= '0' && text[digits] <= '9'; ++digits) {
    const auto digit = static_cast<uint64_t>(text[digits] - '0');
    if (number > (UINT64_MAX - digit) / 10) return std::nullopt;
    number = number * 10 + digit;
  }
  if (digits == 0) return std::nullopt;
  const std::string_view suffix = text.substr(digits);
  int shift = 0;
  if (suffix.empty()) {
    shift = 0;
  } else if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "m" || suffix == "MiB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "g" || suffix == "GiB") {
    shift = 30;
  } else {
    return std::nullopt;
  }
  if (shift != 0 && number > (UINT64_MAX >> shift)) return std::nullopt;
  return number << shift;
}
uint64_t env_bytes(const char* name, uint64_t fallback, uint64_t min, uint64_t max);

// A whole decimal number in [min, max] (an optional '-', then digits),
// nothing else in the text.
constexpr std::optional<int64_t> parse_int(std::string_view text, int64_t min, int64_t max) {
  const bool negative = !text.empty() && text.front() == '-';
  const std::string_view digits = text.substr(negative ? 1 : 0);
  if (digits.empty()) return std::nullopt;
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  uint64_t magnitude = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<uint64_t>(c - '0');
    if (magnitude > (limit - digit) / 10) return std::nullopt;
    magnitude = magnitude * 10 + digit;
  }
  const int64_t value = !negative ? static_cast<int64_t>(magnitude)
                        : magnitude == limit ? INT64_MIN
                                             : -static_cast<int64_t>(magnitude);
  if (value < min || value > max) return std::nullopt;
  return value;
}

// Integers in [min, max].
int64_t env_int(const char* name, int64_t fallback, int64_t min, int64_t max);

// Durations in seconds, decimals allowed ("30", "0.5"); must be > 0 and <= max_seconds.
std::chrono::milliseconds env_seconds(const char* name, std::chrono::milliseconds fallback, double max_seconds);

// Booleans: 1/0, true/false, yes/no, on/off (case-insensitive).
constexpr std::optional<bool> parse_bool(std::string_view text) {
  auto is = [text](std::string_view word) {
    if (text.size() != word.size()) return false;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i] >= 'A' && text[i] <= 'Z' ? static_cast<char>(text[i] - 'A' + 'a') : text[i];
      if (c != word[i]) return false;
    }
    return true;
  };
  if (is("1") || is("true") || is("yes") || is("on")) return true;
  if (is("0") || is("false") || is("no") || is("off")) return false;
  return std::nullopt;
}
bool env_bool(const char* name, bool fallback);

// One of `choices` (case-sensitive); returns the fallback when unset.
std::string env_choice(const char* name, const std::string& fallback, const std::vector<std::string>& choices);

// A test hook's "RANK:N" value (rank 0..2^20, count 0..2^30), or nullopt when
// the variable is unset; a malformed value names `expected`.
std::optional<std::pair<int, int>> env_rank_and_count(const char* name, const char* expected);

// Every CHORUS_* variable chorus reads, declared once: in kVariables below
// (name, default, meaning), or in a layer's own table that the layer
// registers (register_variables; the verbs layer's is verbs::kVariables in
// transports/verbs/verbs_settings.hpp). The known-variable list (the
// unknown-variable warning), chorus_info (effective values, validation) and
// README.md's table derive from it, and so do the defaults: a setting's
// default value in Settings is the parse of its row's default text (the
// default_* functions below, at compile time), so what chorus_info prints as
// the default is what the library uses. To add a setting: one row in the
// table (a test hook's name starts with CHORUS_TEST_; a variable the launcher
// sets has the default "(set by chorusrun)"; "auto" or "unset" where the
// default is a behaviour rather than a value), a member of Settings that
// starts from default_*(kVariables, name) where the default is a value, and
// its read in Settings::from_env (or where it is used) with the env_*
// parsers above.
struct VariableDoc {
  const char* name;  // CHORUS_ALGO_<OP>: a pattern, see is_known_variable
  const char* default_value;
  const char* meaning;
};

inline constexpr VariableDoc kVariables[] = {
    {"CHORUS_TRANSPORT", "auto",
     "transport: auto, shm (native shared memory, ranks of one host), tcp (chorus' own sockets transport), "
     "ofi (libfabric), verbs (RC mesh over rdma-core) or inproc (threads only, for tests); auto picks shm when "
     "all ranks share a host (unless CHORUS_OFI_PROVIDER is set), verbs when ranks span hosts and an active "
     "RDMA port exists, ofi when CHORUS_OFI_PROVIDER is set, else tcp"},
    {"CHORUS_LOCAL_TRANSPORT", "auto",
     "how a rank reaches the ranks of its own host in a job that spans hosts (docs/transport-hybrid.md): shm "
     "(the native shared-memory transport, the other hosts' ranks over the network transport), network (every "
     "rank over the network transport, as CHORUS_TRANSPORT alone did before) or auto (shm when CHORUS_TRANSPORT "
     "is auto, CHORUS_OFI_PROVIDER is unset and the kernel allows cross-memory attach; else network)"},
    {"CHORUS_HIERARCHICAL", "auto",
     "node-aware collectives (docs/algorithms.md): auto (where a communicator's ranks span hosts and some host "
     "has several, allreduce, broadcast, reduce, barrier, allgather and reduce_scatter run hierarchical, large "
     "allreduces multi_leader) or off (the flat selection table everywhere, for comparison)"},
    {"CHORUS_HOST_ID", "unset",
     "which host this rank is on (unset: the hostname), for the host layout (shm between ranks of one host, node-aware collectives); "
     "ranks with the same value share shared memory, so it must differ between real hosts (tests and containers "
     "set it)"},
    {"CHORUS_OFI_PROVIDER", "auto",
     "libfabric provider, e.g. shm, tcp;ofi_rxm, verbs;ofi_rxm, efa (auto: shm if all ranks share a host, "
     "else tcp;ofi_rxm); setting it selects libfabric"},
    {"CHORUS_TCP_IFACE", "auto",
     "tcp transport: interface name (e.g. eth0, lo) or IP address to listen on (auto: the address that reaches "
     "the bootstrap store; loopback when all ranks share a host)"},
    {"CHORUS_TCP_STREAMS", "1", "tcp transport: connections per pair of ranks; reads of 512K and more are split "
     "across them (1..16)"},
    {"CHORUS_TCP_SOCKET_BUFFER", "0",
     "tcp transport: SO_SNDBUF/SO_RCVBUF bytes per connection; 0 keeps the kernel's autotuning (0..1G)"},
    {"CHORUS_TEST_OFI_STALL", "unset",
     "test hook, RANK:N: on RANK the N-th libfabric data-path call spins forever, as on a lock a dead peer holds"},
    {"CHORUS_BIND", "none",
     "placement: none (default: chorus binds nothing, a launcher's binding is kept, as NCCL, Gloo and torch), nic "
     "(one core each, near the NIC first), core (one core each, in order), or auto (keep a launcher's binding; "
     "none when local ranks outnumber cores; nic for up to 2 local ranks; the package of that core beyond)"},
    {"CHORUS_REPORT_BINDINGS", "0", "1: every rank prints its host, rank, cpuset, NIC and completion vector"},
    {"CHORUS_TOPOLOGY_XML", "unset",
     "hwloc XML export of this machine (lstopo --of xml) used instead of discovering the topology"},
    {"CHORUS_TIMEOUT", "300", "seconds any single wait may take before it fails with CHORUS_ERR_TIMEOUT"},
    {"CHORUS_EAGER_LIMIT", "16K", "messages up to this size are sent eagerly; larger ones use rendezvous RDMA READ"},
    {"CHORUS_RDV_CHUNK", "1M", "size of each RDMA READ a rendezvous receive issues"},
    {"CHORUS_RDV_READS", "4", "RDMA READs in flight per rendezvous receive (1..64)"},
    {"CHORUS_BOARD_BYTES", "2K",
     "allreduce, broadcast, reduce and barrier of up to this many bytes run on the shared-memory board (no "
     "messages) where every rank of the communicator maps the others' memory (the shm transport); 0: never "
     "(0..2K)"},
    {"CHORUS_REG_CACHE_BYTES", "1G", "upper bound on bytes kept registered by the registration cache"},
    {"CHORUS_LEAVE_PINNED", "0",
     "1: keep registrations of application buffers cached on pinning transports (verbs) too, like Open MPI's "
     "mpi_leave_pinned; only safe if the application never frees a buffer it passed to chorus while the "
     "communicator lives"},
    {"CHORUS_CHECK_CALLS", "0",
     "1: before every collective the ranks compare their calls (collective, count, datatype, op, root, "
     "algorithm) and all fail naming who differs; costs one small allgather per call (for debugging)"},
    {"CHORUS_SPIN_US", "50", "microseconds to busy-poll before blocking on the transport (0..1000000)"},
    {"CHORUS_PROGRESS", "thread",
     "thread: a progress thread advances non-blocking operations while the application computes; caller: only "
     "inside chorus calls (docs/nonblocking.md)"},
    {"CHORUS_ALGO_<OP>", "auto",
     "force an algorithm for one collective, e.g. CHORUS_ALGO_ALLREDUCE=ring (chorus_info lists the names)"},
    {"CHORUS_SELECT_RULES", "unset",
     "rules put before the built-in selection table, the first that matches wins: OP:BYTES:RANKS=ALGORITHM, "
     "comma-separated; BYTES MIN-MAX of the payload (max excluded; K/M/G; an end may be left out, e.g. 1M-) or *, "
     "RANKS N, N-M, N- or *; e.g. broadcast:1M-:9-=scatter_allgather (docs/algorithms.md, \"Selection table\"). "
     "Set it alike on every rank"},
    {"CHORUS_LOG_LEVEL", "warn", "error, warn, info or debug"},
    {"CHORUS_BOOTSTRAP", "auto",
     "how the ranks find each other: pmix (the PMIx server of srun --mpi=pmix or Open MPI's mpirun), store "
     "(chorus' TCP store: chorusrun's, or rank 0's under other launchers) or auto (pmix when this build has it "
     "and PMIX_NAMESPACE and PMIX_RANK are set, except under chorusrun, torchrun and Open MPI's mpirun; else store)"},
    {"CHORUS_RANK", "(set by chorusrun)", "this process' rank in the job"},
    {"CHORUS_SIZE", "(set by chorusrun)", "the number of ranks in the job"},
    {"CHORUS_LOCAL_RANK", "(set by chorusrun)", "this process' rank among the job's processes on this host"},
    {"CHORUS_LOCAL_SIZE", "(set by chorusrun)", "the number of the job's processes on this host"},
    {"CHORUS_STORE_ADDR", "(set by chorusrun)", "host:port of the bootstrap key/value store"},
    {"CHORUS_JOB_SECRET", "(set by chorusrun)", "secret every store connection must present"},
    {"CHORUS_JOB_ID", "(set by chorusrun)", "names the job's keys in the store"},
    {"CHORUS_RSH", "ssh", "chorusrun: the command that starts remote ranks (as --rsh)"},
    {"CHORUS_TORCH_TRACE", "0",
     "chorus_torch: 1 prints each step of the backend's creation and, on SIGSEGV, a native backtrace "
     "(docs/pytorch.md)"},
};
std::span<const VariableDoc> variables();

// A row's default text and its parse, evaluated at compile time: a name that
// is not in `table`, or a default the parser refuses, does not compile.
consteval std::string_view default_text(std::span<const VariableDoc> table, std::string_view name) {
  for (const VariableDoc& variable : table) {
    if (name == variable.name) return variable.default_value;
  }
  throw "no such variable in the table";  // not a constant expression: a compile error
}
consteval uint64_t default_bytes(std::span<const VariableDoc> table, std::string_view name) {
  return parse_bytes(default_text(table, name)).value();
}
consteval int64_t default_int(std::span<const VariableDoc> table, std::string_view name) {
  return parse_int(default_text(table, name), INT64_MIN, INT64_MAX).value();
}
consteval bool default_bool(std::span<const VariableDoc> table, std::string_view name) {
  return parse_bool(default_text(table, name)).value();
}

// A layer's own table of variables, registered by a static initialiser in
// the layer (e.g. `static const bool registered = register_variables(...)`):
// its names count as known, and chorus_info prints them under `heading`.
struct VariableTable {
  const char* heading;
  std::span<const VariableDoc> variables;
};
bool register_variables(const char* heading, std::span<const VariableDoc> variables);
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
  std::string iface;  // CHORUS_TCP_IFACE ("" = auto: the interface that reaches the store)
  int streams = static_cast<int>(default_int(kVariables, "CHORUS_TCP_STREAMS"));  // connections per pair of ranks
  uint64_t socket_buffer = default_bytes(kVariables, "CHORUS_TCP_SOCKET_BUFFER");  // 0 = the kernel's autotuning

  bool operator==(const TcpSettings&) const = default;
};

// Settings shared by the layers, read once at communicator creation. Every
// default comes from kVariables (default_*), the text chorus_info prints.
struct Settings {
  std::chrono::milliseconds timeout{std::chrono::seconds(default_int(kVariables, "CHORUS_TIMEOUT"))};
  uint64_t eager_limit = default_bytes(kVariables, "CHORUS_EAGER_LIMIT");
  uint64_t rendezvous_chunk = default_bytes(kVariables, "CHORUS_RDV_CHUNK");
  int reads_in_flight = static_cast<int>(default_int(kVariables, "CHORUS_RDV_READS"));
  uint64_t board_bytes = default_bytes(kVariables, "CHORUS_BOARD_BYTES");  // <= transport::kBoardDataBytes
  uint64_t reg_cache_bytes = default_bytes(kVariables, "CHORUS_REG_CACHE_BYTES");
  bool leave_pinned = default_bool(kVariables, "CHORUS_LEAVE_PINNED");
  bool check_calls = default_bool(kVariables, "CHORUS_CHECK_CALLS");
  std::chrono::microseconds spin{default_int(kVariables, "CHORUS_SPIN_US")};
  std::string progress{default_text(kVariables, "CHORUS_PROGRESS")};    // thread or caller
  std::string transport{default_text(kVariables, "CHORUS_TRANSPORT")};
  std::string local_transport{default_text(kVariables, "CHORUS_LOCAL_TRANSPORT")};  // auto, shm or network
  std::string hierarchical{default_text(kVariables, "CHORUS_HIERARCHICAL")};  // auto or off
  std::string bootstrap{default_text(kVariables, "CHORUS_BOOTSTRAP")};   // pmix, store or auto
  std::string ofi_provider;                                                // CHORUS_OFI_PROVIDER ("" = auto)
  // Test hook CHORUS_TEST_OFI_STALL="RANK:N": on RANK, the N-th libfabric
  // data-path call spins instead of returning (the stall escape's tests).
  int test_ofi_stall_rank = -1;
  int test_ofi_stall_after = 0;
  TcpSettings tcp;
  std::string bind{default_text(kVariables, "CHORUS_BIND")};               // none, auto, nic, core
  bool report_bindings = default_bool(kVariables, "CHORUS_REPORT_BINDINGS");
  std::string topology_xml;                                                // CHORUS_TOPOLOGY_XML ("" = this machine)
  static Settings from_env();

  bool operator==(const Settings&) const = default;
};

}  // namespace chorus::config
