#include "transport_factory.hpp"

#include "common/error.hpp"
#include "transports/inproc/inproc.hpp"

#ifdef CHORUS_HAVE_OFI
#include "transports/ofi/ofi_transport.hpp"
#endif
#ifdef CHORUS_HAVE_VERBS
#include "transports/verbs/verbs_device.hpp"
#include "transports/verbs/verbs_transport.hpp"
#endif

namespace chorus {

std::unique_ptr<transport::Transport> create_transport(const config::Settings& settings, int rank, int size,
                                                       bool all_ranks_on_one_host) {
  if (settings.transport == "inproc") {
    // Threads of one process only; a multi-process job cannot share it.
    if (size != 1) {
      fail(Status::config, "CHORUS_TRANSPORT=\"inproc\": the in-process transport only serves 1-rank jobs "
                           "(this job has ", size, " ranks); use ofi or auto");
    }
    // The transport keeps the fabric's shared state alive.
    return transport::InprocFabric(1).make_transport(0);
  }
  // auto: verbs between hosts when an RDMA port is up (shared memory is
  // faster within a host), else libfabric.
  bool use_verbs = settings.transport == "verbs";
#ifdef CHORUS_HAVE_VERBS
  if (settings.transport == "auto" && !all_ranks_on_one_host && transport::verbs::active_port_present()) {
    use_verbs = true;
  }
  if (use_verbs) {
    transport::VerbsOptions options;
    options.settings = settings.verbs;
    options.max_eager_bytes = settings.eager_limit;
    options.timeout = settings.timeout;
    return transport::make_verbs_transport(rank, size, options);
  }
#else
  if (use_verbs) {
    fail(Status::unsupported, "CHORUS_TRANSPORT=\"verbs\": this chorus was built without libibverbs "
                              "(install libibverbs-dev librdmacm-dev and reconfigure)");
  }
#endif
#ifdef CHORUS_HAVE_OFI
  transport::OfiOptions options;
  options.provider = settings.ofi_provider;
  options.all_ranks_on_one_host = all_ranks_on_one_host;
  options.max_eager_bytes = settings.eager_limit;
  return transport::make_ofi_transport(rank, size, options);
#else
  (void)rank;
  (void)all_ranks_on_one_host;
  fail(Status::unsupported, "CHORUS_TRANSPORT=\"", settings.transport,
       "\": this chorus was built without libfabric (install libfabric-dev and reconfigure)");
#endif
}

}  // namespace chorus
