// chorusrun's command line: parsing and validation. Every problem is a
// UsageError whose message says what is wrong; main() prints it with a hint
// to --help and exits 2.
#pragma once

#include "common/config.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace chorusrun {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Host {
  std::string name;
  int slots = 1;
};

struct Options {
  int ranks = 0;                        // -n
  std::vector<Host> hosts;              // --hosts / --hostfile; empty = this host only
  bool oversubscribe = false;           // --oversubscribe: more ranks than slots
  bool map_by_node = false;             // --map-by node: one rank per host in turn
  std::string transport;                // --transport
  std::string ofi_provider;             // --ofi-provider
  double timeout_seconds = 0;           // --timeout (0 = library default)
  double failure_grace_seconds = 0;     // --failure-grace
  std::vector<std::string> exports;     // -x VAR or VAR=value
  bool tag_output = true;               // --tag-output / --no-tag-output
  std::string rsh{chorus::config::default_text(chorus::config::kVariables, "CHORUS_RSH")};  // --rsh or CHORUS_RSH
  std::string store_address;            // --store-addr
  bool report_bindings = false;         // --report-bindings
  std::string bind;                     // --bind
  bool verbose = false;                 // -v
  bool help = false;
  bool version = false;
  std::vector<std::string> program;     // program and its arguments
};

// Parses argv; throws UsageError.
Options parse_options(int argc, char** argv);
// Reads a hostfile ("host", "host:N" or "host slots=N" per line, # comments).
std::vector<Host> read_hostfile(const std::string& path);
// Parses "a:4,b:4" (a bare name means 1 slot).
std::vector<Host> parse_hosts(const std::string& text);
// Resolves `program` like execvp would; throws UsageError when not runnable.
std::string resolve_program(const std::string& program);

const char* usage_text();

}  // namespace chorusrun
