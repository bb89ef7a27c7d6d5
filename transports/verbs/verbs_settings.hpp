// The verbs layer's settings (docs/transport-verbs.md, docs/transport-ud.md):
// every CHORUS_IB_* / CHORUS_VERBS_* / CHORUS_UD_* variable, its default, its
// range and its meaning, declared here beside the transports that use them.
// No verbs types: this file is built even without libibverbs, so a bad value
// stops every job the same way whatever the transport (the factory reads
// these at communicator creation).
#pragma once

#include "common/config.hpp"

#include <string>
#include <vector>

namespace chorus::transport::verbs {

// CHORUS_VERBS_QP_TIMEOUT: 4.096 us * 2^value per try. 16 (~268 ms), not 14:
// rxe's timer can fire while an answer is still on its way, and at ~67 ms it
// did several times a second in READ traffic (transport-verbs.md). The QP
// set-up structs (RcLimits, UdRcLinks::Setup) start from these too.
inline constexpr int kDefaultQpTimeout = 16;
inline constexpr int kDefaultRetryCount = 7;  // CHORUS_VERBS_RETRY_COUNT

struct Settings {
  std::string device;          // CHORUS_IB_DEVICE ("" = first device with an active port)
  int port = 0;                // CHORUS_IB_PORT (0 = first active port)
  int gid_index = -1;          // CHORUS_IB_GID_INDEX (-1 = best GID, see choose_gid)
  bool srq = false;            // CHORUS_VERBS_SRQ
  std::string connect = "bootstrap";  // CHORUS_VERBS_CONNECT: bootstrap or rdmacm
  int recv_depth = 64;         // CHORUS_VERBS_RECV_DEPTH: eager receive buffers per peer
  int cq_entries = 0;          // CHORUS_VERBS_CQ_ENTRIES (0 = sized from the queues)
  int qp_timeout = kDefaultQpTimeout;    // CHORUS_VERBS_QP_TIMEOUT
  int retry_count = kDefaultRetryCount;  // CHORUS_VERBS_RETRY_COUNT
  std::string mode = "rc";     // CHORUS_VERBS_MODE: rc (RC mesh) or ud (UD + SRQ scalable mode)
  int ud_rc_max = 16;          // CHORUS_UD_RC_MAX: RC QPs kept for rendezvous reads in UD mode
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
};

// The variables above with their defaults and meanings (chorus_info prints them).
const std::vector<config::VariableDoc>& variables();

}  // namespace chorus::transport::verbs
