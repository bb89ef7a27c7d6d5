#include "options.hpp"

#include "common/config.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

namespace chorusrun {

namespace {

constexpr int kMaxRanks = 4096;

int parse_count(const std::string& option, const std::string& text, int min, int max) {
  auto value = chorus::config::parse_int(text, min, max);
  if (!value) {
    throw UsageError(option + " \"" + text + "\": expected a whole number from " + std::to_string(min) + " to " +
                     std::to_string(max));
  }
  return static_cast<int>(*value);
}

double parse_seconds(const std::string& option, const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value <= 0 || value > 86400) {
    throw UsageError(option + " \"" + text + "\": expected seconds greater than 0 and at most 86400 (e.g. 30 or 0.5)");
  }
  return value;
}

bool valid_host_name(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' || c == ':')) return false;
  }
  return true;
}

Host parse_host_entry(const std::string& entry, const std::string& where) {
  auto colon = entry.rfind(':');
  Host host;
  host.name = colon == std::string::npos ? entry : entry.substr(0, colon);
  if (!valid_host_name(host.name)) throw UsageError(where + ": \"" + entry + "\" is not a host name or host:slots");
  if (colon != std::string::npos) host.slots = parse_count(where + " slots of " + host.name, entry.substr(colon + 1), 1, kMaxRanks);
  return host;
}

std::string need_value(int argc, char** argv, int& i, const std::string& option) {
  if (i + 1 >= argc) throw UsageError(option + " needs a value");
  return argv[++i];
}

// Open MPI spells its long options with one dash too (-np, -host, -bind-to):
// these are read as their two-dash forms.
constexpr const char* kSingleDashLongOptions[] = {"-np", "-host", "-hostfile", "-machinefile", "-bind-to",
                                                  "-map-by", "-oversubscribe", "-mca", "-npernode",
                                                  "-allow-run-as-root", "-tag-output", "-report-bindings"};

// "-np" -> "--np"; "-n4" / "-np4" -> "-n" with the value attached.
std::string normalize_spelling(std::string arg, std::optional<std::string>& attached) {
  const std::string name = arg.substr(0, arg.find('='));
  for (const char* option : kSingleDashLongOptions) {
    if (name == option) return "-" + arg;
  }
  for (const char* prefix : {"-np", "-n"}) {
    const size_t length = std::strlen(prefix);
    if (arg.size() > length && arg.rfind(prefix, 0) == 0 && std::isdigit(static_cast<unsigned char>(arg[length]))) {
      attached = arg.substr(length);
      return "-n";
    }
  }
  return arg;
}

// mpirun's --bind-to in chorusrun's terms (--bind).
std::string bind_from_mpirun(const std::string& level) {
  if (level == "core" || level == "hwthread") return "core";
  if (level == "none") return "none";
  throw UsageError("--bind-to \"" + level + "\": chorusrun binds each rank to one core (--bind core, or --bind nic " +
                   "for a core near its NIC) or not at all (--bind none); it has no " + level + "-wide binding");
}

// Options of mpirun that chorusrun does not have: the error says what to use instead.
const char* chorusrun_equivalent(const std::string& option) {
  if (option == "--mca" || option == "--gmca") {
    return "is Open MPI's: chorus reads CHORUS_* variables instead (chorus_info lists them); pass them with "
           "-x NAME=value";
  }
  if (option == "-N" || option == "--npernode" || option == "--ppn") {
    return "is mpirun's: give the ranks per host as slots, e.g. --hosts a:4,b:4";
  }
  if (option == "--cpus-per-proc" || option == "--cpus-per-rank" || option == "--rank-by" || option == "--display-map") {
    return "is mpirun's: chorusrun places ranks with --hosts/--hostfile (in order) and binds with --bind nic|core|none";
  }
  return nullptr;
}

}  // namespace

const char* usage_text() {
  return R"(Usage: chorusrun [options] [--] program [args...]

Starts `program` as the ranks of one chorus job: serves the bootstrap store,
gives every rank its CHORUS_* environment, prefixes output lines with [rank],
forwards signals, and stops the whole job as soon as any rank fails.

Options (--option=value works too):
  -n, --np N            number of ranks (1..4096; required); also -np N, -n4
  --hosts LIST          run on these hosts, e.g. a:4,b:4 (host:slots; ranks fill
                        hosts in order; default: all ranks on this host);
                        also --host, -H
  --hostfile FILE       hosts from a file: one "host", "host:N" or "host slots=N"
                        per line, # starts a comment; also --machinefile
  --oversubscribe       allow more ranks than the hosts' slots (the rest go
                        round-robin); on this host alone ranks are never limited
  --map-by slot|node    slot: fill each host in order (default); node: one rank
                        per host in turn
  --rsh CMD             remote shell for other hosts (default: ssh, or $CHORUS_RSH)
  --store-addr ADDR     address other hosts use to reach the store on this host
                        (required with remote hosts; default 127.0.0.1)
  --transport T         CHORUS_TRANSPORT for the ranks: auto, shm, tcp, ofi, verbs
                        or inproc
  --ofi-provider P      CHORUS_OFI_PROVIDER for the ranks, e.g. shm, 'tcp;ofi_rxm'
  --timeout SEC         CHORUS_TIMEOUT for the ranks: how long any wait inside
                        chorus may take; also bounds how long chorusrun waits for
                        ranks to stop after a failure
  --failure-grace SEC   when a rank fails, let the others run up to SEC seconds
                        so each can report its own error (e.g. which peer it
                        lost) before they are stopped (default 0: stop at once)
  -x VAR[=VALUE]        export VAR (its current value, or VALUE) to every rank;
                        repeatable
  --tag-output          prefix every output line with [rank] (default)
  --no-tag-output       pass output through unchanged
  --bind nic|core|none  where each rank runs (CHORUS_BIND): nic = one core each,
                        near the NIC first, then the NIC's socket, then the rest;
                        core = one core each in order; none = unbound. Ranks
                        beyond the cores are spread round-robin. Default: none
                        (chorus binds nothing; a binding the ranks already have
                        is kept); -x CHORUS_BIND=auto gives the former default
                        (docs/placement.md)
  --bind-to core|none   mpirun's spelling of --bind core / --bind none
  --report-bindings     every rank prints its host, rank, cpuset (read back after
                        binding), NIC and CQ completion vector
                        (CHORUS_REPORT_BINDINGS=1)
  --allow-run-as-root   accepted for mpirun command lines; has no effect
  -v, --verbose         say what chorusrun does (store address, spawned ranks)
  -h, --help            this text
  --version             chorusrun's version

Exit status: 0 when every rank exits 0; otherwise the status of the first rank
that failed (its exit code, or 128+signal); 2 for usage errors.
)";
}

std::vector<Host> parse_hosts(const std::string& text) {
  std::vector<Host> hosts;
  std::stringstream stream(text);
  std::string entry;
  while (std::getline(stream, entry, ',')) hosts.push_back(parse_host_entry(entry, "--hosts"));
  if (hosts.empty()) throw UsageError("--hosts \"" + text + "\": expected host:slots entries separated by commas");
  return hosts;
}

std::vector<Host> read_hostfile(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw UsageError("--hostfile \"" + path + "\": cannot read it (" + std::strerror(errno) + ")");
  std::vector<Host> hosts;
  std::string line;
  int number = 0;
  while (std::getline(file, line)) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::stringstream words(line);
    std::string name, extra;
    if (!(words >> name)) continue;
    std::string where = "--hostfile " + path + " line " + std::to_string(number);
    Host host = parse_host_entry(name, where);
    if (words >> extra) {
      if (extra.rfind("slots=", 0) != 0) throw UsageError(where + ": expected slots=N after the host, got \"" + extra + "\"");
      host.slots = parse_count(where + " slots", extra.substr(6), 1, kMaxRanks);
    }
    hosts.push_back(host);
  }
  if (hosts.empty()) throw UsageError("--hostfile \"" + path + "\": no hosts in it");
  return hosts;
}

std::string resolve_program(const std::string& program) {
  auto runnable = [](const std::string& path) {
    struct stat info;
    return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (!runnable(program)) throw UsageError("program \"" + program + "\" is not an executable file");
    return program;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (runnable(candidate)) return candidate;
  }
  throw UsageError("program \"" + program + "\" was not found in PATH");
}

Options parse_options(int argc, char** argv) {
  Options options;
  if (const char* rsh = std::getenv("CHORUS_RSH"); rsh != nullptr && *rsh != '\0') options.rsh = rsh;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> attached;
    if (arg.size() > 1 && arg[0] == '-' && arg[1] != '-') arg = normalize_spelling(arg, attached);
    // "--bind=nic" means "--bind nic", as in Open MPI and GNU tools.
    if (const size_t equals = arg.find('='); arg.rfind("--", 0) == 0 && equals != std::string::npos) {
      attached = arg.substr(equals + 1);
      arg.resize(equals);
    }
    auto take_value = [&] { return attached ? *std::exchange(attached, std::nullopt) : need_value(argc, argv, i, arg); };
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // the program
    if (arg == "-n" || arg == "--np" || arg == "--n") {
      options.ranks = parse_count(arg, take_value(), 1, kMaxRanks);
    } else if (arg == "--hosts" || arg == "--host" || arg == "-H") {
      options.hosts = parse_hosts(take_value());
    } else if (arg == "--hostfile" || arg == "--machinefile") {
      options.hosts = read_hostfile(take_value());
    } else if (arg == "--oversubscribe") {
      options.oversubscribe = true;
    } else if (arg == "--allow-run-as-root") {
      // mpirun refuses root without it; chorusrun never did.
    } else if (arg == "--bind-to") {
      options.bind = bind_from_mpirun(take_value());
    } else if (arg == "--map-by") {
      const std::string policy = take_value();
      const std::string base = policy.substr(0, policy.find(':'));
      if (base == "slot" || base == "core") {
        options.map_by_node = false;
      } else if (base == "node") {
        options.map_by_node = true;
      } else {
        throw UsageError("--map-by \"" + policy + "\": chorusrun maps by slot (fill each host in order, the default) " +
                         "or by node (one rank per host in turn); give the hosts' slots with --hosts a:4,b:4");
      }
    } else if (arg == "--rsh") {
      options.rsh = take_value();
    } else if (arg == "--store-addr") {
      options.store_address = take_value();
      if (!valid_host_name(options.store_address)) throw UsageError("--store-addr \"" + options.store_address + "\" is not a host name or address");
    } else if (arg == "--transport") {
      options.transport = take_value();
      if (options.transport != "auto" && options.transport != "shm" && options.transport != "tcp" &&
          options.transport != "ofi" &&
          options.transport != "verbs" && options.transport != "inproc") {
        throw UsageError("--transport \"" + options.transport + "\": expected one of auto, shm, tcp, ofi, verbs, inproc");
      }
    } else if (arg == "--ofi-provider") {
      options.ofi_provider = take_value();
    } else if (arg == "--timeout") {
      options.timeout_seconds = parse_seconds(arg, take_value());
    } else if (arg == "--failure-grace") {
      options.failure_grace_seconds = parse_seconds(arg, take_value());
    } else if (arg == "-x") {
      std::string value = take_value();
      std::string name = value.substr(0, value.find('='));
      if (name.empty() || name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
        throw UsageError("-x \"" + value + "\": expected VAR or VAR=value with a variable name of letters, digits and _");
      }
      options.exports.push_back(value);
    } else if (arg == "--tag-output") {
      options.tag_output = true;
    } else if (arg == "--no-tag-output") {
      options.tag_output = false;
    } else if (arg == "--bind") {
      options.bind = take_value();
      if (options.bind != "nic" && options.bind != "core" && options.bind != "none") {
        throw UsageError("--bind \"" + options.bind + "\": expected one of nic, core, none");
      }
    } else if (arg == "--report-bindings") {
      options.report_bindings = true;
    } else if (arg == "-v" || arg == "--verbose") {
      options.verbose = true;
    } else if (arg == "-h" || arg == "--help") {
      options.help = true;
      return options;
    } else if (arg == "--version") {
      options.version = true;
      return options;
    } else if (const char* instead = chorusrun_equivalent(arg)) {
      throw UsageError(arg + " " + instead);
    } else {
      throw UsageError("unknown option \"" + arg + "\"");
    }
    if (attached) throw UsageError(arg + " takes no value (got \"" + arg + "=" + *attached + "\")");
  }
  for (; i < argc; ++i) options.program.emplace_back(argv[i]);
  if (options.ranks == 0) throw UsageError("the number of ranks is missing: give -n N");
  if (options.program.empty()) throw UsageError("no program to run");
  int slots = 0;
  for (const Host& host : options.hosts) slots += host.slots;
  if (!options.hosts.empty() && options.ranks > slots && !options.oversubscribe) {
    throw UsageError("-n " + std::to_string(options.ranks) + " is more than the " + std::to_string(slots) +
                     " slots the hosts offer (--oversubscribe places the rest round-robin)");
  }
  return options;
}

}  // namespace chorusrun
