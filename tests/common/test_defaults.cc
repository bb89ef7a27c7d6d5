// The defaults chorus_info prints are the ones the library uses (issue 43):
// both come from one table (config::kVariables, and the verbs layer's
// verbs::kVariables). This runs chorus_info in an empty environment, reads
// every setting it shows as [default], and checks that the printed text,
// given to the library as the environment's value, reads back as the
// library's own default (Settings{}), for the base layer's settings and the
// verbs layer's alike; and that CHORUS_BOARD_BYTES shows 2K (it showed 1K
// while the library used 2K).
#include "common/config.hpp"
#include "transports/verbs/verbs_settings.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <string_view>

using namespace chorus;

namespace {

struct Shown {
  std::string value;
  std::string source;  // "[default]", "[not set]", "[environment]"
};

// chorus_info's lines "  NAME  VALUE  [SOURCE]  meaning", by name.
std::map<std::string, Shown> shown_by_chorus_info() {
  std::map<std::string, Shown> shown;
  FILE* pipe = ::popen("env -i " CHORUS_INFO, "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " CHORUS_INFO;
    return shown;
  }
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  EXPECT_EQ(status, 0) << "chorus_info failed in an empty environment:\n" << output;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("  CHORUS_")) continue;
    std::istringstream fields(line);
    std::string name;
    Shown row;
    fields >> name >> row.value >> row.source;
    shown[name] = row;
  }
  return shown;
}

// A default that names a behaviour rather than a value (config.hpp): the
// library's setting is then a sentinel ("" or 0), not the parse of the text.
bool is_description(std::string_view text) { return text == "auto" || text == "unset"; }

class ScopedEnv {
 public:
  ScopedEnv(const std::string& name, const std::string& value) : name_(name) { ::setenv(name.c_str(), value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name_.c_str()); }

 private:
  std::string name_;
};

}  // namespace

TEST(Defaults, ChorusInfoShowsTheBoardLimitTheLibraryUses) {
  static_assert(config::default_bytes(config::kVariables, "CHORUS_BOARD_BYTES") == 2048);
  EXPECT_EQ(config::Settings{}.board_bytes, 2048u);
  const auto shown = shown_by_chorus_info();
  ASSERT_TRUE(shown.contains("CHORUS_BOARD_BYTES"));
  EXPECT_EQ(shown.at("CHORUS_BOARD_BYTES").value, "2K");
  EXPECT_EQ(shown.at("CHORUS_BOARD_BYTES").source, "[default]");
}

TEST(Defaults, EveryDefaultShownIsTheLibrarysValue) {
  const auto shown = shown_by_chorus_info();
  // chorus_info shows every user setting of every table with the table's text.
  std::map<std::string, std::string> table;
  for (const auto& variable : config::variables()) table[variable.name] = variable.default_value;
  for (const auto& registered : config::registered_tables()) {
    for (const auto& variable : registered.variables) table[variable.name] = variable.default_value;
  }
  ASSERT_TRUE(table.contains("CHORUS_VERBS_RECV_DEPTH")) << "the verbs table is not registered";
  for (const auto& [name, text] : table) {
    const config::VariableDoc doc{name.c_str(), text.c_str(), ""};
    if (config::kind_of(doc) != config::VariableKind::user || name.find('<') != std::string::npos) continue;
    ASSERT_TRUE(shown.contains(name)) << name << " is not shown by chorus_info";
    EXPECT_EQ(shown.at(name).value, text) << name;
  }
  // And every default shown, as the environment's value, is the default.
  const config::Settings base_defaults;
  const transport::verbs::Settings verbs_defaults;
  int compared = 0;
  for (const auto& [name, row] : shown) {
    if (row.source != "[default]" || is_description(row.value)) continue;
    SCOPED_TRACE(name + "=" + row.value);
    ScopedEnv env(name, row.value);
    EXPECT_EQ(config::Settings::from_env(), base_defaults);
    EXPECT_EQ(transport::verbs::Settings::from_env(), verbs_defaults);
    ++compared;
  }
  EXPECT_GE(compared, 20);  // base: 15 or so, verbs: 6
}

// Each default differs from a value the variable accepts, so the comparison
// above would see a default that did not come through (one per kind of parse).
TEST(Defaults, TheComparisonSeesADifferentValue) {
  const config::Settings defaults;
  for (const auto& [name, value] : std::map<std::string, std::string>{{"CHORUS_BOARD_BYTES", "1K"},
                                                                      {"CHORUS_TIMEOUT", "30"},
                                                                      {"CHORUS_RDV_READS", "8"},
                                                                      {"CHORUS_CHECK_CALLS", "1"},
                                                                      {"CHORUS_PROGRESS", "caller"}}) {
    ScopedEnv env(name, value);
    EXPECT_NE(config::Settings::from_env(), defaults) << name << "=" << value;
  }
}
