// The verbs layer's settings (transports/verbs/verbs_settings.hpp): every
// variable is read, and a bad value is rejected with a message naming the
// variable, the value and what is accepted. Needs no device.
#include "common/error.hpp"
#include "transports/verbs/verbs_settings.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>

using chorus::Error;
using chorus::Status;
using chorus::transport::verbs::Settings;

namespace {

struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  const char* name_;
};

struct BadValue {
  const char* name;
  const char* value;
  const char* expected_fragment;
};

class VerbsSettingsReject : public ::testing::TestWithParam<BadValue> {};

using Fields = std::map<std::string, std::string>;

// Every field of `s` by name, as text: two Settings compare field by field,
// and a failure names the fields that differ.
Fields fields_of(const Settings& s) {
  const auto text = [](int value) { return std::to_string(value); };
  return {{"device", s.device},
          {"port", text(s.port)},
          {"gid_index", text(s.gid_index)},
          {"srq", s.srq ? "true" : "false"},
          {"connect", s.connect},
          {"recv_depth", text(s.recv_depth)},
          {"cq_entries", text(s.cq_entries)},
          {"qp_timeout", text(s.qp_timeout)},
          {"retry_count", text(s.retry_count)},
          {"mode", s.mode},
          {"ud_rc_max", text(s.ud_rc_max)},
          {"test_qp_error_peer", text(s.test_qp_error_peer)},
          {"test_qp_error_after", text(s.test_qp_error_after)},
          {"test_ud_drop_rank", text(s.test_ud_drop_rank)},
          {"test_ud_drop_fragment", text(s.test_ud_drop_fragment)}};
}

// Settings::from_env() reads exactly `expected`: every field is listed.
void expect_from_env(const Fields& expected) {
  const Fields read = fields_of(Settings::from_env());
  ASSERT_EQ(read.size(), expected.size()) << "list every field";
  for (const auto& [name, value] : read) {
    const auto want = expected.find(name);
    ASSERT_NE(want, expected.end()) << "no expected value for " << name;
    EXPECT_EQ(value, want->second) << name;
  }
}

}  // namespace

TEST(VerbsSettings, DefaultsWhenUnset) {
  expect_from_env({{"device", ""}, {"port", "0"}, {"gid_index", "-1"}, {"srq", "false"}, {"connect", "bootstrap"},
                   {"recv_depth", "64"}, {"cq_entries", "0"}, {"qp_timeout", "16"}, {"retry_count", "7"},
                   {"mode", "rc"}, {"ud_rc_max", "16"}, {"test_qp_error_peer", "-1"}, {"test_qp_error_after", "0"},
                   {"test_ud_drop_rank", "-1"}, {"test_ud_drop_fragment", "0"}});
}

TEST(VerbsSettings, ValidValuesAreRead) {
  ScopedEnv a("CHORUS_IB_DEVICE", "rxe0"), b("CHORUS_IB_PORT", "2"), c("CHORUS_IB_GID_INDEX", "3"),
      d("CHORUS_VERBS_SRQ", "yes"), e("CHORUS_VERBS_CONNECT", "rdmacm"), f("CHORUS_VERBS_RECV_DEPTH", "8"),
      g("CHORUS_VERBS_CQ_ENTRIES", "4096"), h("CHORUS_VERBS_QP_TIMEOUT", "12"), i("CHORUS_VERBS_RETRY_COUNT", "3"),
      j("CHORUS_VERBS_MODE", "ud"), k("CHORUS_UD_RC_MAX", "1"), l("CHORUS_TEST_VERBS_QP_ERROR", "1:40"),
      m("CHORUS_TEST_UD_DROP", "0:3");
  expect_from_env({{"device", "rxe0"}, {"port", "2"}, {"gid_index", "3"}, {"srq", "true"}, {"connect", "rdmacm"},
                   {"recv_depth", "8"}, {"cq_entries", "4096"}, {"qp_timeout", "12"}, {"retry_count", "3"},
                   {"mode", "ud"}, {"ud_rc_max", "1"}, {"test_qp_error_peer", "1"}, {"test_qp_error_after", "40"},
                   {"test_ud_drop_rank", "0"}, {"test_ud_drop_fragment", "3"}});
}

// Moved from tests/common/test_config.cc with the settings themselves.
TEST_P(VerbsSettingsReject, NamesVariableAndAcceptedValues) {
  const BadValue& bad = GetParam();
  ScopedEnv env(bad.name, bad.value);
  std::string message;
  try {
    Settings::from_env();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::config);
    message = e.what();
  }
  EXPECT_NE(message.find(bad.name), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("\"") + bad.value + "\""), std::string::npos) << message;
  EXPECT_NE(message.find(bad.expected_fragment), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(
    AllVariables, VerbsSettingsReject,
    ::testing::Values(BadValue{"CHORUS_IB_PORT", "0", "integer from 1 to 255"},
                      BadValue{"CHORUS_IB_GID_INDEX", "first", "integer from 0 to 1023"},
                      BadValue{"CHORUS_VERBS_SRQ", "maybe", "one of 1, 0, true, false"},
                      BadValue{"CHORUS_VERBS_CONNECT", "pigeon", "one of bootstrap, rdmacm"},
                      BadValue{"CHORUS_VERBS_RECV_DEPTH", "1", "integer from 2 to 4096"},
                      BadValue{"CHORUS_VERBS_CQ_ENTRIES", "0", "integer from 1 to 16777216"},
                      BadValue{"CHORUS_VERBS_QP_TIMEOUT", "32", "integer from 1 to 31"},
                      BadValue{"CHORUS_VERBS_RETRY_COUNT", "8", "integer from 0 to 7"},
                      BadValue{"CHORUS_VERBS_MODE", "dc", "one of rc, ud"},
                      BadValue{"CHORUS_UD_RC_MAX", "0", "integer from 1 to 4096"},
                      BadValue{"CHORUS_TEST_VERBS_QP_ERROR", "1", "PEER:N"}),
    [](const ::testing::TestParamInfo<BadValue>& info) { return std::to_string(info.index); });

// Every variable from_env reads is documented once (chorus_info prints the list).
TEST(VerbsSettings, EveryVariableIsDocumented) {
  std::set<std::string> names;
  for (const auto& doc : chorus::transport::verbs::variables()) EXPECT_TRUE(names.insert(doc.name).second) << doc.name;
  for (const char* name : {"CHORUS_IB_DEVICE", "CHORUS_IB_PORT", "CHORUS_IB_GID_INDEX", "CHORUS_VERBS_SRQ",
                           "CHORUS_VERBS_CONNECT", "CHORUS_VERBS_RECV_DEPTH", "CHORUS_VERBS_CQ_ENTRIES",
                           "CHORUS_VERBS_QP_TIMEOUT", "CHORUS_VERBS_RETRY_COUNT", "CHORUS_VERBS_MODE",
                           "CHORUS_UD_RC_MAX", "CHORUS_TEST_VERBS_QP_ERROR"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
}
