// A transport per peer (docs/transport-hybrid.md): the ranks on this rank's
// host through the native shared-memory transport, every other rank through
// a network transport (tcp, verbs, libfabric). One Transport to the engine,
// so there is one engine, one tag space, one progress and one failure path;
// each peer's eager messages and rendezvous reads go through the transport
// that owns it.
#pragma once

#include "transports/transport.hpp"

#include <memory>
#include <vector>

namespace chorus::transport {

// `local_ranks`: the job's ranks on this host, in increasing order, this
// rank among them; `local` joins exactly those (ShmOptions::rank_names set
// to them, so it numbers them 0..local_ranks.size()-1 and names job ranks);
// `network` joins every rank of the job (size `size`) and carries only the
// traffic to the others.
std::unique_ptr<Transport> make_hybrid_transport(int rank, int size, std::vector<int> local_ranks,
                                                 std::unique_ptr<Transport> local, std::unique_ptr<Transport> network);

}  // namespace chorus::transport
