// Env parsing: every parser accepts what the docs say and rejects the rest
// with a message naming the variable, the value and what is accepted.
#include "common/config.hpp"
#include "common/error.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace chorus;

namespace {
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  const char* name_;
};

std::string config_error(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::config);
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}
}  // namespace

TEST(Config, ParseBytes) {
  EXPECT_EQ(config::parse_bytes("0"), 0u);
  EXPECT_EQ(config::parse_bytes("8192"), 8192u);
  EXPECT_EQ(config::parse_bytes("64K"), 65536u);
  EXPECT_EQ(config::parse_bytes("4M"), 4u << 20);
  EXPECT_EQ(config::parse_bytes("1G"), 1ull << 30);
  EXPECT_EQ(config::parse_bytes("2MiB"), 2u << 20);
  EXPECT_FALSE(config::parse_bytes(""));
  EXPECT_FALSE(config::parse_bytes("K"));
  EXPECT_FALSE(config::parse_bytes("12Q"));
  EXPECT_FALSE(config::parse_bytes("-1"));
  EXPECT_FALSE(config::parse_bytes("99999999999999999999"));
  EXPECT_FALSE(config::parse_bytes("17179869184G"));  // overflows 64 bits
}

TEST(Config, DefaultsWhenUnset) {
  unsetenv("CHORUS_EAGER_LIMIT");
  auto s = config::Settings::from_env();
  EXPECT_EQ(s.eager_limit, 16u * 1024);
  EXPECT_EQ(s.timeout, std::chrono::seconds(300));
  EXPECT_EQ(s.transport, "auto");
}

TEST(Config, PlacementSettings) {
  {
    auto s = config::Settings::from_env();
    EXPECT_EQ(s.bind, "none");  // since issue 21: chorus binds only when asked
    EXPECT_FALSE(s.report_bindings);
    EXPECT_EQ(s.topology_xml, "");
  }
  ScopedEnv a("CHORUS_BIND", "nic"), b("CHORUS_REPORT_BINDINGS", "1"), c("CHORUS_TOPOLOGY_XML", "/dev/null");
  auto s = config::Settings::from_env();
  EXPECT_EQ(s.bind, "nic");
  EXPECT_TRUE(s.report_bindings);
  EXPECT_EQ(s.topology_xml, "/dev/null");
}

TEST(Config, ValidValuesAreRead) {
  ScopedEnv a("CHORUS_EAGER_LIMIT", "64K"), b("CHORUS_TIMEOUT", "0.5"), c("CHORUS_TRANSPORT", "ofi"),
      d("CHORUS_RDV_READS", "8"), e("CHORUS_SPIN_US", "0");
  auto s = config::Settings::from_env();
  EXPECT_EQ(s.eager_limit, 65536u);
  EXPECT_EQ(s.timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(s.transport, "ofi");
  EXPECT_EQ(s.reads_in_flight, 8);
  EXPECT_EQ(s.spin.count(), 0);
}

// Every variable Settings reads, with a bad value: the message names it and
// the accepted values. (The verbs layer's own: tests/verbs/test_verbs_settings.cc.)
struct BadValue {
  const char* name;
  const char* value;
  const char* expected_fragment;
};

class ConfigRejects : public ::testing::TestWithParam<BadValue> {};

TEST_P(ConfigRejects, NamesVariableAndAcceptedValues) {
  const BadValue& bad = GetParam();
  ScopedEnv env(bad.name, bad.value);
  std::string message = config_error([] { config::Settings::from_env(); });
  EXPECT_NE(message.find(bad.name), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("\"") + bad.value + "\""), std::string::npos) << message;
  EXPECT_NE(message.find(bad.expected_fragment), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(
    AllVariables, ConfigRejects,
    ::testing::Values(BadValue{"CHORUS_TIMEOUT", "soon", "number of seconds"},
                      BadValue{"CHORUS_TIMEOUT", "-3", "greater than 0"},
                      BadValue{"CHORUS_TIMEOUT", "0", "greater than 0"},
                      BadValue{"CHORUS_EAGER_LIMIT", "12Q", "byte count"},
                      BadValue{"CHORUS_EAGER_LIMIT", "2M", "0..1M"},
                      BadValue{"CHORUS_RDV_CHUNK", "100", "4K..1G"},
                      BadValue{"CHORUS_RDV_READS", "0", "integer from 1 to 64"},
                      BadValue{"CHORUS_RDV_READS", "4x", "integer from 1 to 64"},
                      BadValue{"CHORUS_REG_CACHE_BYTES", "lots", "byte count"},
                      BadValue{"CHORUS_SPIN_US", "-1", "integer from 0 to 1000000"},
                      BadValue{"CHORUS_TRANSPORT", "carrier-pigeon", "one of auto, shm, tcp, ofi, verbs, inproc"},
                      BadValue{"CHORUS_LOG_LEVEL", "loud", "one of error, warn, info, debug"},
                      BadValue{"CHORUS_TCP_STREAMS", "0", "integer from 1 to 16"},
                      BadValue{"CHORUS_TCP_SOCKET_BUFFER", "big", "byte count"},
                      BadValue{"CHORUS_LEAVE_PINNED", "perhaps", "one of 1, 0, true, false"},
                      BadValue{"CHORUS_CHECK_CALLS", "sometimes", "one of 1, 0, true, false"},
                      BadValue{"CHORUS_BIND", "bogus", "one of auto, nic, core, none"},
                      BadValue{"CHORUS_REPORT_BINDINGS", "loud", "one of 1, 0, true, false"},
                      BadValue{"CHORUS_TOPOLOGY_XML", "/nonexistent/topology.xml", "a readable hwloc XML file"}),
    [](const ::testing::TestParamInfo<BadValue>& info) { return std::to_string(info.index); });

TEST(Config, Booleans) {
  {
    ScopedEnv env("CHORUS_TEST_BOOL", "Yes");
    EXPECT_TRUE(config::env_bool("CHORUS_TEST_BOOL", false));
  }
  {
    ScopedEnv env("CHORUS_TEST_BOOL", "off");
    EXPECT_FALSE(config::env_bool("CHORUS_TEST_BOOL", true));
  }
  ScopedEnv env("CHORUS_TEST_BOOL", "maybe");
  std::string message = config_error([] { config::env_bool("CHORUS_TEST_BOOL", true); });
  EXPECT_NE(message.find("one of 1, 0, true, false"), std::string::npos) << message;
}

// Unknown CHORUS_* names: a typo is found and named with the closest known
// name; the table's names, CHORUS_ALGO_<OP> of every collective and the
// CHORUS_TEST_* namespace are known.
TEST(Config, UnknownVariablesNameTheClosestKnownOne) {
  EXPECT_TRUE(config::is_known_variable("CHORUS_TIMEOUT"));
  EXPECT_TRUE(config::is_known_variable("CHORUS_ALGO_REDUCE_SCATTER"));
  EXPECT_TRUE(config::is_known_variable("CHORUS_LOCAL_RANK"));
  EXPECT_TRUE(config::is_known_variable("CHORUS_TEST_ANYTHING"));
  EXPECT_TRUE(config::is_known_variable("CHORUS_LAB_RANK"));  // the lab's, not a setting
  EXPECT_FALSE(config::is_known_variable("CHORUS_LABS"));
  EXPECT_FALSE(config::is_known_variable("CHORUS_ALGO_<OP>"));
  EXPECT_FALSE(config::is_known_variable("CHORUS_ALGO_FOO"));
  EXPECT_FALSE(config::is_known_variable("CHORUS_TIMOUT"));
  for (const auto& variable : config::variables()) {
    if (std::string_view(variable.name).find('<') == std::string_view::npos) {
      EXPECT_TRUE(config::is_known_variable(variable.name)) << variable.name;
    }
  }
  ScopedEnv typo("CHORUS_TIMOUT", "5");
  ScopedEnv algo("CHORUS_ALGO_FOO", "ring");
  ScopedEnv known("CHORUS_SPIN_US", "10");
  ScopedEnv other("NOT_CHORUS_TIMOUT", "1");
  const auto unknown = config::unknown_variables();
  ASSERT_EQ(unknown.size(), 2u);
  EXPECT_EQ(unknown[0].name, "CHORUS_ALGO_FOO");
  EXPECT_EQ(unknown[0].value, "ring");
  EXPECT_EQ(unknown[1].name, "CHORUS_TIMOUT");
  EXPECT_EQ(unknown[1].closest, "CHORUS_TIMEOUT");
  const std::string message = config::describe(unknown[1]);
  EXPECT_NE(message.find("CHORUS_TIMOUT=5 is not a chorus variable and is ignored; did you mean CHORUS_TIMEOUT?"),
            std::string::npos)
      << message;
  EXPECT_NE(config::describe(unknown[0]).find("ALLREDUCE, BROADCAST"), std::string::npos) << config::describe(unknown[0]);
}

TEST(Config, VariableKinds) {
  int users = 0, launcher = 0, hooks = 0;
  for (const auto& variable : config::variables()) {
    switch (config::kind_of(variable)) {
      case config::VariableKind::user: ++users; break;
      case config::VariableKind::launcher: ++launcher; break;
      case config::VariableKind::test_hook:
        ++hooks;
        EXPECT_EQ(std::string_view(variable.name).substr(0, 12), "CHORUS_TEST_");
        break;
    }
  }
  EXPECT_GT(users, 10);
  EXPECT_GE(launcher, 4);
  EXPECT_GE(hooks, 1);
}
