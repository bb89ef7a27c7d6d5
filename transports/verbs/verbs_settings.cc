#include "transports/verbs/verbs_settings.hpp"

#include <tuple>

namespace chorus::transport::verbs {

Settings Settings::from_env() {
  Settings v;
  if (auto device = config::get("CHORUS_IB_DEVICE")) v.device = *device;
  v.port = static_cast<int>(config::env_int("CHORUS_IB_PORT", v.port, 1, 255));
  v.gid_index = static_cast<int>(config::env_int("CHORUS_IB_GID_INDEX", v.gid_index, 0, 1023));
  v.srq = config::env_bool("CHORUS_VERBS_SRQ", v.srq);
  v.connect = config::env_choice("CHORUS_VERBS_CONNECT", v.connect, {"bootstrap", "rdmacm"});
  v.recv_depth = static_cast<int>(config::env_int("CHORUS_VERBS_RECV_DEPTH", v.recv_depth, 2, 4096));
  v.cq_entries = static_cast<int>(config::env_int("CHORUS_VERBS_CQ_ENTRIES", v.cq_entries, 1, 1 << 24));
  v.qp_timeout = static_cast<int>(config::env_int("CHORUS_VERBS_QP_TIMEOUT", v.qp_timeout, 1, 31));
  v.retry_count = static_cast<int>(config::env_int("CHORUS_VERBS_RETRY_COUNT", v.retry_count, 0, 7));
  v.mode = config::env_choice("CHORUS_VERBS_MODE", v.mode, {"rc", "ud"});
  v.ud_rc_max = static_cast<int>(config::env_int("CHORUS_UD_RC_MAX", v.ud_rc_max, 1, 4096));
  if (auto hook = config::env_rank_and_count("CHORUS_TEST_VERBS_QP_ERROR", "PEER:N (rank and eager-send count)")) {
    std::tie(v.test_qp_error_peer, v.test_qp_error_after) = *hook;
  }
  if (auto hook = config::env_rank_and_count("CHORUS_TEST_UD_DROP", "RANK:N (rank and UD data fragment number)")) {
    std::tie(v.test_ud_drop_rank, v.test_ud_drop_fragment) = *hook;
  }
  return v;
}

std::span<const config::VariableDoc> variables() { return kVariables; }

// The verbs variables count as known (the unknown-variable warning) and
// chorus_info lists them, wherever this layer is linked.
namespace {
[[maybe_unused]] const bool registered = config::register_variables("The verbs transports' (docs/transport-verbs.md)", kVariables);
}  // namespace

}  // namespace chorus::transport::verbs
