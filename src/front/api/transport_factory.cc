#include "api/transport_factory.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "topology/topology.hpp"
#include "transports/hybrid/hybrid_transport.hpp"
#include "transports/inproc/inproc.hpp"
#include "transports/shm/shm_transport.hpp"
#include "transports/tcp/tcp_transport.hpp"
#include "transports/verbs/verbs_settings.hpp"

#include <algorithm>

#ifdef CHORUS_HAVE_OFI
#include "transports/ofi/ofi_info.hpp"
#include "transports/ofi/ofi_transport.hpp"
#endif
#ifdef CHORUS_HAVE_VERBS
#include "topology/verbs_locality.hpp"
#include "transports/verbs/verbs_device.hpp"
#include "transports/verbs/verbs_transport.hpp"
#endif

namespace chorus {

namespace {

// auto: the native shared-memory transport when every rank is on this host,
// unless a libfabric provider was asked for or the kernel forbids reading a
// peer's memory (then libfabric's shm provider, which copies twice instead).
bool uses_native_shm(const config::Settings& settings, bool all_ranks_on_one_host) {
  if (settings.transport == "shm") return true;
  if (settings.transport != "auto" || !all_ranks_on_one_host || !settings.ofi_provider.empty()) return false;
  std::string why;
  if (transport::shm_cross_memory_attach_allowed(&why)) return true;
  log::info("transport auto: not the native shm transport, ", why);
  return false;
}

// auto: verbs between hosts when an RDMA port is up (shared memory is
// faster within a host), else libfabric.
bool uses_verbs(const config::Settings& settings, bool all_ranks_on_one_host) {
#ifdef CHORUS_HAVE_VERBS
  if (settings.transport == "auto") return !all_ranks_on_one_host && transport::verbs::active_port_present();
#else
  (void)all_ranks_on_one_host;
#endif
  return settings.transport == "verbs";
}

// auto: chorus' own TCP transport between hosts without an active RDMA
// port, unless a libfabric provider was asked for.
bool uses_tcp(const config::Settings& settings, bool all_ranks_on_one_host) {
  if (settings.transport == "tcp") return true;
  return settings.transport == "auto" && !all_ranks_on_one_host && settings.ofi_provider.empty() &&
         !uses_verbs(settings, all_ranks_on_one_host);
}

#ifdef CHORUS_HAVE_VERBS
topology::NicDescription describe_verbs_nic(const transport::verbs::Settings& settings) {
  const transport::verbs::PortChoice port = transport::verbs::choose_port(settings);
  const transport::verbs::DeviceFacts facts = transport::verbs::device_facts(port.device);
  topology::NicDescription nic;
  nic.name = port.device;
  nic.completion_vectors = facts.completion_vectors;
  nic.pci = facts.pci;
  nic.locate = [device = port.device](const topology::Topology& topology) {
    return topology::verbs_device_locality(topology, device);
  };
  return nic;
}
#endif

#ifdef CHORUS_HAVE_OFI
topology::NicDescription describe_ofi_nic(const config::Settings& settings, bool all_ranks_on_one_host) {
  const std::string provider =
      settings.ofi_provider.empty() ? transport::ofi::auto_provider(all_ranks_on_one_host) : settings.ofi_provider;
  const transport::ofi::ProviderNic provider_nic = transport::ofi::provider_nic(provider, all_ranks_on_one_host);
  topology::NicDescription nic;
  nic.name = provider_nic.name;
  nic.pci = provider_nic.pci;
  if (provider_nic.pci) {
    nic.locate = [pci = *provider_nic.pci](const topology::Topology& topology) { return topology.pci_locality(pci); };
  }
  return nic;
}
#endif

}  // namespace

topology::NicDescription describe_nic(const config::Settings& settings, bool all_ranks_on_one_host) {
  // Read whatever the transport: a bad CHORUS_IB_*/CHORUS_VERBS_* value
  // stops every job at creation, as any other CHORUS_* variable does.
  [[maybe_unused]] const transport::verbs::Settings verbs_settings = transport::verbs::Settings::from_env();
  if (settings.transport == "inproc") return topology::NicDescription{"inproc", 0, std::nullopt, {}};
  if (uses_native_shm(settings, all_ranks_on_one_host)) return topology::NicDescription{"shm", 0, std::nullopt, {}};
  if (uses_tcp(settings, all_ranks_on_one_host)) return topology::NicDescription{"tcp", 0, std::nullopt, {}};
#ifdef CHORUS_HAVE_VERBS
  if (uses_verbs(settings, all_ranks_on_one_host)) return describe_verbs_nic(verbs_settings);
#endif
#ifdef CHORUS_HAVE_OFI
  if (!uses_verbs(settings, all_ranks_on_one_host)) return describe_ofi_nic(settings, all_ranks_on_one_host);
#endif
  // create_transport explains what is missing.
  return topology::NicDescription{settings.transport, 0, std::nullopt, {}};
}

std::unique_ptr<transport::Transport> create_transport(const config::Settings& settings, int rank, int size,
                                                       bool all_ranks_on_one_host, int completion_vector) {
  if (settings.transport == "inproc") {
    // Threads of one process only; a multi-process job cannot share it.
    if (size != 1) {
      fail(Status::config, "CHORUS_TRANSPORT=\"inproc\": the in-process transport only serves 1-rank jobs "
                           "(this job has ", size, " ranks); use ofi or auto");
    }
    // The transport keeps the fabric's shared state alive.
    return transport::InprocFabric(1).make_transport(0);
  }
  if (uses_native_shm(settings, all_ranks_on_one_host)) {
    if (!all_ranks_on_one_host) {
      fail(Status::config, "CHORUS_TRANSPORT=\"shm\": the shared-memory transport joins ranks of one host, and "
                           "this job spans hosts; use auto, ofi or verbs");
    }
    transport::ShmOptions options;
    options.max_eager_bytes = settings.eager_limit;
    return transport::make_shm_transport(rank, size, options);
  }
  if (uses_tcp(settings, all_ranks_on_one_host)) {
    transport::TcpOptions options;
    options.max_eager_bytes = settings.eager_limit;
    options.iface = settings.tcp.iface;
    options.streams = settings.tcp.streams;
    options.socket_buffer = settings.tcp.socket_buffer;
    options.all_ranks_on_one_host = all_ranks_on_one_host;
    options.timeout = settings.timeout;
    return transport::make_tcp_transport(rank, size, options);
  }
  const bool use_verbs = uses_verbs(settings, all_ranks_on_one_host);
#ifdef CHORUS_HAVE_VERBS
  if (use_verbs) {
    transport::VerbsOptions options;
    options.settings = transport::verbs::Settings::from_env();
    options.max_eager_bytes = settings.eager_limit;
    options.timeout = settings.timeout;
    options.completion_vector = std::max(completion_vector, 0);
    // CHORUS_VERBS_MODE: the RC mesh, or the UD scalable mode for large jobs.
    if (options.settings.mode == "ud") return transport::make_ud_transport(rank, size, options);
    return transport::make_rc_mesh_transport(rank, size, options);
  }
#else
  (void)completion_vector;
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
  // Generous for a non-blocking call, well inside the timeout a survivor of
  // a dead peer must report within.
  options.stall_cpu_limit = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(settings.timeout / 10),
                                       std::chrono::milliseconds(1000), std::chrono::milliseconds(5000));
  if (settings.test_ofi_stall_rank == rank) options.test_stall_after_calls = settings.test_ofi_stall_after;
  return transport::make_ofi_transport(rank, size, options);
#else
  (void)rank;
  (void)all_ranks_on_one_host;
  fail(Status::unsupported, "CHORUS_TRANSPORT=\"", settings.transport,
       "\": this chorus was built without libfabric (install libfabric-dev and reconfigure)");
#endif
}

bool uses_hybrid(const config::Settings& settings, const HostLayout& layout, std::string* why) {
  auto no = [why](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  if (layout.hosts < 2) return no("every rank on one host");
  if (layout.largest_host < 2) return no("one rank per host");
  if (settings.local_transport == "network") return no("CHORUS_LOCAL_TRANSPORT=network");
  if (settings.transport == "shm" || settings.transport == "inproc") return no(concat("CHORUS_TRANSPORT=", settings.transport));
  if (settings.local_transport == "auto") {
    if (settings.transport != "auto") {
      return no(concat("CHORUS_TRANSPORT=", settings.transport, " (CHORUS_LOCAL_TRANSPORT=shm adds shm inside the host)"));
    }
    if (!settings.ofi_provider.empty()) return no("CHORUS_OFI_PROVIDER is set");
    std::string reason;
    if (!transport::shm_cross_memory_attach_allowed(&reason)) return no(reason);
  }
  return true;
}

std::unique_ptr<transport::Transport> create_transport(const config::Settings& settings, int rank, int size,
                                                       const HostLayout& layout, int completion_vector) {
  const bool all_local = layout.hosts == 1;
  std::string why_not;
  if (!uses_hybrid(settings, layout, &why_not)) {
    if (layout.local_ranks.size() > 1 && !all_local) {
      log::info("transport: every peer over the network transport: ", why_not);
    }
    return create_transport(settings, rank, size, all_local, completion_vector);
  }
  const std::vector<int>& local_ranks = layout.local_ranks;
  const auto local_index = static_cast<int>(std::find(local_ranks.begin(), local_ranks.end(), rank) - local_ranks.begin());
  transport::ShmOptions shm_options;
  shm_options.max_eager_bytes = settings.eager_limit;
  shm_options.rank_names = local_ranks;
  std::unique_ptr<transport::Transport> local =
      transport::make_shm_transport(local_index, static_cast<int>(local_ranks.size()), shm_options);
  std::unique_ptr<transport::Transport> network = create_transport(settings, rank, size, false, completion_vector);
  std::string ranks;
  for (size_t i = 0; i < local_ranks.size() && i < 16; ++i) ranks += concat(i == 0 ? "" : ",", local_ranks[i]);
  if (local_ranks.size() > 16) ranks += concat(",... (", local_ranks.size(), " in all)");
  log::info("transport: rank ", rank, " reaches ranks ", ranks, " (this host) over shm and the other ",
            size - static_cast<int>(local_ranks.size()), " over ", network->name(), " (CHORUS_LOCAL_TRANSPORT=",
            settings.local_transport, ")");
  return transport::make_hybrid_transport(rank, size, local_ranks, std::move(local), std::move(network));
}

}  // namespace chorus
