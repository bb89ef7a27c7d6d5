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

const std::vector<config::VariableDoc>& variables() {
  static const std::vector<config::VariableDoc> docs = {
      {"CHORUS_IB_DEVICE", "auto", "verbs device name, e.g. mlx5_0 or rxe0 (auto: the first with an active port)"},
      {"CHORUS_IB_PORT", "auto", "verbs port number, 1..255 (auto: the device's first active port)"},
      {"CHORUS_IB_GID_INDEX", "auto",
       "GID index, 0..1023 (auto on RoCE: skip empty and link-local GIDs, prefer RoCE v2 with an IPv4 address)"},
      {"CHORUS_VERBS_SRQ", "0", "1: one shared receive queue for all peers instead of receive buffers per QP"},
      {"CHORUS_VERBS_CONNECT", "bootstrap",
       "bootstrap: QP numbers and GIDs exchanged through the store; rdmacm: connect through rdma_cm"},
      {"CHORUS_VERBS_RECV_DEPTH", "64", "eager receive buffers (and send credits) per peer, 2..4096"},
      {"CHORUS_VERBS_CQ_ENTRIES", "auto",
       "completion queue size; setup fails if it is smaller than the work requests that can be outstanding"},
      {"CHORUS_VERBS_QP_TIMEOUT", "16", "RC local ACK timeout exponent: 4.096 us * 2^value per try (1..31)"},
      {"CHORUS_VERBS_RETRY_COUNT", "7", "RC transport retries before a send fails (0..7)"},
      {"CHORUS_VERBS_MODE", "rc",
       "rc: one RC QP per peer (RC mesh); ud: one UD QP and SRQ per process with software reliability, RC QPs "
       "only for rendezvous reads (scalable mode)"},
      {"CHORUS_UD_RC_MAX", "16", "UD mode: RC QPs kept for rendezvous reads, least recently used closed first (1..4096)"},
      {"CHORUS_TEST_VERBS_QP_ERROR", "unset",
       "test hook, PEER:N: after N eager sends every other rank moves its QP to PEER into the error state"},
      {"CHORUS_TEST_UD_DROP", "unset",
       "test hook, RANK:N: in UD mode, rank RANK's N-th data fragment (0: the first) is lost on the wire"},
  };
  return docs;
}

// The verbs variables count as known (the unknown-variable warning) and
// chorus_info lists them, wherever this layer is linked.
namespace {
[[maybe_unused]] const bool registered = config::register_variables("The verbs transports' (docs/transport-verbs.md)", &variables);
}  // namespace

}  // namespace chorus::transport::verbs
