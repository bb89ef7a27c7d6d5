// The verbs layer's settings (docs/transport-verbs.md, docs/transport-ud.md):
// every CHORUS_IB_* / CHORUS_VERBS_* / CHORUS_UD_* variable, its default, its
// range and its meaning, declared here beside the transports that use them.
// No verbs types: this file is built even without libibverbs, so a bad value
// stops every job the same way whatever the transport (the factory reads
// these at communicator creation).
#pragma once

#include "common/config.hpp"

#include <span>
#include <string>

namespace chorus::transport::verbs {

// The verbs variables with their defaults and meanings (chorus_info prints
// them, registered with config::register_variables); the defaults of
// Settings below are the parse of this table's text (config::default_*).
inline constexpr config::VariableDoc kVariables[] = {
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
std::span<const config::VariableDoc> variables();

// CHORUS_VERBS_QP_TIMEOUT: 4.096 us * 2^value per try. 16 (~268 ms), not 14:
// rxe's timer can fire while an answer is still on its way, and at ~67 ms it
// did several times a second in READ traffic (transport-verbs.md). The QP
// set-up structs (RcLimits, UdRcLinks::Setup) start from these too.
inline constexpr int kDefaultQpTimeout = static_cast<int>(config::default_int(kVariables, "CHORUS_VERBS_QP_TIMEOUT"));
inline constexpr int kDefaultRetryCount = static_cast<int>(config::default_int(kVariables, "CHORUS_VERBS_RETRY_COUNT"));

struct Settings {
  std::string device;          // CHORUS_IB_DEVICE ("" = first device with an active port)
  int port = 0;                // CHORUS_IB_PORT (0 = first active port)
  int gid_index = -1;          // CHORUS_IB_GID_INDEX (-1 = best GID, see choose_gid)
  bool srq = config::default_bool(kVariables, "CHORUS_VERBS_SRQ");
  std::string connect{config::default_text(kVariables, "CHORUS_VERBS_CONNECT")};  // bootstrap or rdmacm
  // CHORUS_VERBS_RECV_DEPTH: eager receive buffers per peer
  int recv_depth = static_cast<int>(config::default_int(kVariables, "CHORUS_VERBS_RECV_DEPTH"));
  int cq_entries = 0;          // CHORUS_VERBS_CQ_ENTRIES (0 = sized from the queues)
  int qp_timeout = kDefaultQpTimeout;    // CHORUS_VERBS_QP_TIMEOUT
  int retry_count = kDefaultRetryCount;  // CHORUS_VERBS_RETRY_COUNT
  // CHORUS_VERBS_MODE: rc (RC mesh) or ud (UD + SRQ scalable mode)
  std::string mode{config::default_text(kVariables, "CHORUS_VERBS_MODE")};
  // CHORUS_UD_RC_MAX: RC QPs kept for rendezvous reads in UD mode
  int ud_rc_max = static_cast<int>(config::default_int(kVariables, "CHORUS_UD_RC_MAX"));
  // Test hook CHORUS_TEST_VERBS_QP_ERROR="PEER:N": after N eager sends, move
  // the QP to PEER into the error state (fault tests; never set in
  // production). Resolved once when the RC mesh is made (rc_mesh_init.cc):
  // the data path never looks at it.
  int test_qp_error_peer = -1;
  int test_qp_error_after = 0;
  // Test hook CHORUS_TEST_UD_DROP="RANK:N": rank RANK sends its N-th UD data
  // fragment (0: the first; retransmissions count) with a wrong qkey, so the
  // receiving HCA drops it: one lost datagram at a known place (tests/verbs).
  int test_ud_drop_rank = -1;
  int test_ud_drop_fragment = 0;

  // Reads and validates every variable above; throws Error(Status::config)
  // naming the variable, the value and what is accepted.
  static Settings from_env();

  bool operator==(const Settings&) const = default;
};

}  // namespace chorus::transport::verbs
