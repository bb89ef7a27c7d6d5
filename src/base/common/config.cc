#include "common/config.hpp"

#include "common/error.hpp"
#include "common/log.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <tuple>
#include <utility>

extern char** environ;

namespace chorus::config {

namespace {

[[noreturn]] void bad_value(const char* name, const std::string& value, const std::string& expected) {
  fail(Status::config, name, "=\"", value, "\": expected ", expected);
}

std::string human_bytes(uint64_t bytes) {
  if (bytes != 0 && bytes % (1ull << 30) == 0) return concat(bytes >> 30, "G");
  if (bytes != 0 && bytes % (1ull << 20) == 0) return concat(bytes >> 20, "M");
  if (bytes != 0 && bytes % (1ull << 10) == 0) return concat(bytes >> 10, "K");
  return concat(bytes);
}

}  // namespace

std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

uint64_t env_bytes(const char* name, uint64_t fallback, uint64_t min, uint64_t max) {
  auto text = get(name);
  if (!text) return fallback;
  auto value = parse_bytes(*text);
  std::string expected =
      concat("a byte count like 8192, 64K or 4M (", human_bytes(min), "..", human_bytes(max), ")");
  if (!value || *value < min || *value > max) bad_value(name, *text, expected);
  return *value;
}

int64_t env_int(const char* name, int64_t fallback, int64_t min, int64_t max) {
  auto text = get(name);
  if (!text) return fallback;
  auto value = parse_int(*text, min, max);
  if (!value) bad_value(name, *text, concat("an integer from ", min, " to ", max));
  return *value;
}

std::chrono::milliseconds env_seconds(const char* name, std::chrono::milliseconds fallback, double max_seconds) {
  auto text = get(name);
  if (!text) return fallback;
  char* end = nullptr;
  double seconds = std::strtod(text->c_str(), &end);
  if (end != text->c_str() + text->size() || !std::isfinite(seconds) || seconds <= 0 || seconds > max_seconds) {
    bad_value(name, *text, concat("a number of seconds greater than 0 and at most ", max_seconds, " (e.g. 30 or 0.5)"));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

bool env_bool(const char* name, bool fallback) {
  auto text = get(name);
  if (!text) return fallback;
  if (auto value = parse_bool(*text)) return *value;
  bad_value(name, *text, "one of 1, 0, true, false, yes, no, on, off");
}

std::string env_choice(const char* name, const std::string& fallback, const std::vector<std::string>& choices) {
  auto text = get(name);
  if (!text) return fallback;
  if (std::find(choices.begin(), choices.end(), *text) != choices.end()) return *text;
  std::string list;
  for (const auto& choice : choices) list += (list.empty() ? "" : ", ") + choice;
  bad_value(name, *text, "one of " + list);
}

std::optional<std::pair<int, int>> env_rank_and_count(const char* name, const char* expected) {
  auto hook = get(name);
  if (!hook) return std::nullopt;
  const auto colon = hook->find(':');
  auto rank = colon == std::string::npos ? std::nullopt : parse_int(hook->substr(0, colon), 0, 1 << 20);
  auto count = colon == std::string::npos ? std::nullopt : parse_int(hook->substr(colon + 1), 0, 1 << 30);
  if (!rank || !count) bad_value(name, *hook, expected);
  return std::pair<int, int>(static_cast<int>(*rank), static_cast<int>(*count));
}

std::span<const VariableDoc> variables() { return kVariables; }

std::vector<VariableTable>& registered_tables() {
  static std::vector<VariableTable> tables;  // built by static initialisers: a function-local static
  return tables;
}

bool register_variables(const char* heading, std::span<const VariableDoc> variables) {
  registered_tables().push_back(VariableTable{heading, variables});
  return true;
}

VariableKind kind_of(const VariableDoc& variable) {
  if (std::string_view(variable.name).starts_with("CHORUS_TEST_")) return VariableKind::test_hook;
  if (std::string_view(variable.default_value).starts_with("(set by")) return VariableKind::launcher;
  return VariableKind::user;
}

namespace {

constexpr std::string_view kAlgoPrefix = "CHORUS_ALGO_";

std::string upper(std::string_view text) {
  std::string result(text);
  std::transform(result.begin(), result.end(), result.begin(), [](unsigned char c) { return std::toupper(c); });
  return result;
}

// Every name a variable may have: the table's and the layers' own tables
// (register_variables), with CHORUS_ALGO_<OP> expanded.
std::vector<std::string> known_names() {
  std::vector<std::string> names;
  for (const auto& variable : variables()) {
    if (std::string_view(variable.name).find('<') == std::string_view::npos) names.emplace_back(variable.name);
  }
  for (const auto& table : registered_tables()) {
    for (const auto& variable : table.variables) names.emplace_back(variable.name);
  }
  for (int i = 0; i < kNumCollectives; ++i) names.push_back(algorithm_variable(static_cast<Collective>(i)));
  return names;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string algorithm_variable(Collective op) { return std::string(kAlgoPrefix) + upper(to_string(op)); }

bool is_known_variable(std::string_view name) {
  // Test hooks, and the variables the project's soft-RoCE lab hands its
  // guests (tests/lab/run.sh): chorus reads neither as a setting.
  if (name.starts_with("CHORUS_TEST_") || name.starts_with("CHORUS_LAB_")) return true;
  const auto names = known_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<UnknownVariable> unknown_variables() {
  std::vector<UnknownVariable> unknown;
  const auto names = known_names();
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    const size_t equals = text.find('=');
    const std::string_view name = text.substr(0, equals);
    if (!name.starts_with("CHORUS_") || equals == std::string_view::npos || is_known_variable(name)) continue;
    const auto closest = std::min_element(names.begin(), names.end(), [&](const auto& a, const auto& b) {
      return edit_distance(name, a) < edit_distance(name, b);
    });
    unknown.push_back({std::string(name), std::string(text.substr(equals + 1)), *closest});
  }
  std::sort(unknown.begin(), unknown.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return unknown;
}

std::string describe(const UnknownVariable& unknown) {
  std::string text = concat(unknown.name, "=", unknown.value, " is not a chorus variable and is ignored; did you mean ",
                            unknown.closest, "?");
  if (std::string_view(unknown.name).starts_with(kAlgoPrefix)) {
    std::string ops;
    for (int i = 0; i < kNumCollectives; ++i) {
      ops += (i ? ", " : "") + algorithm_variable(static_cast<Collective>(i)).substr(kAlgoPrefix.size());
    }
    text += concat(" (CHORUS_ALGO_<OP> takes OP from ", ops, ")");
  }
  return text + " (chorus_info lists every variable)";
}

void warn_unknown_variables() {
  for (const auto& unknown : unknown_variables()) log::warn(describe(unknown));
}

Settings Settings::from_env() {
  Settings s;
  s.timeout = env_seconds("CHORUS_TIMEOUT", s.timeout, 86400.0);
  s.eager_limit = env_bytes("CHORUS_EAGER_LIMIT", s.eager_limit, 0, 1 << 20);
  s.rendezvous_chunk = env_bytes("CHORUS_RDV_CHUNK", s.rendezvous_chunk, 4096, 1ull << 30);
  s.reads_in_flight = static_cast<int>(env_int("CHORUS_RDV_READS", s.reads_in_flight, 1, 64));
  s.board_bytes = env_bytes("CHORUS_BOARD_BYTES", s.board_bytes, 0, 2048);
  s.reg_cache_bytes = env_bytes("CHORUS_REG_CACHE_BYTES", s.reg_cache_bytes, 0, 1ull << 40);
  s.leave_pinned = env_bool("CHORUS_LEAVE_PINNED", s.leave_pinned);
  s.check_calls = env_bool("CHORUS_CHECK_CALLS", s.check_calls);
  s.spin = std::chrono::microseconds(env_int("CHORUS_SPIN_US", s.spin.count(), 0, 1000000));
  s.progress = env_choice("CHORUS_PROGRESS", s.progress, {"thread", "caller"});
  s.transport = env_choice("CHORUS_TRANSPORT", s.transport, {"auto", "shm", "tcp", "ofi", "verbs", "inproc"});
  s.bootstrap = env_choice("CHORUS_BOOTSTRAP", s.bootstrap, {"auto", "pmix", "store"});
  s.local_transport = env_choice("CHORUS_LOCAL_TRANSPORT", s.local_transport, {"auto", "shm", "network"});
  s.hierarchical = env_choice("CHORUS_HIERARCHICAL", s.hierarchical, {"auto", "off"});
  if (auto iface = get("CHORUS_TCP_IFACE")) s.tcp.iface = *iface;
  s.tcp.streams = static_cast<int>(env_int("CHORUS_TCP_STREAMS", s.tcp.streams, 1, 16));
  s.tcp.socket_buffer = env_bytes("CHORUS_TCP_SOCKET_BUFFER", s.tcp.socket_buffer, 0, 1ull << 30);
  if (auto provider = get("CHORUS_OFI_PROVIDER")) s.ofi_provider = *provider;
  if (auto hook = env_rank_and_count("CHORUS_TEST_OFI_STALL", "RANK:N (rank and provider-call count)")) {
    std::tie(s.test_ofi_stall_rank, s.test_ofi_stall_after) = *hook;
  }
  s.bind = env_choice("CHORUS_BIND", s.bind, {"auto", "nic", "core", "none"});
  s.report_bindings = env_bool("CHORUS_REPORT_BINDINGS", s.report_bindings);
  if (auto xml = get("CHORUS_TOPOLOGY_XML")) {
    if (!std::ifstream(*xml)) bad_value("CHORUS_TOPOLOGY_XML", *xml, concat("a readable hwloc XML file (", errno_string(errno), ")"));
    s.topology_xml = *xml;
  }
  // The logger reads it on its own (it must work before this runs); a bad value still stops init.
  env_choice("CHORUS_LOG_LEVEL", std::string(default_text(kVariables, "CHORUS_LOG_LEVEL")),
             {"error", "warn", "info", "debug"});
  return s;
}

}  // namespace chorus::config
