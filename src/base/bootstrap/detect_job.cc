// detect_job(): where this process sits in the job, from the launcher's
// environment (store.hpp lists the order and variables; docs/bootstrap.md
// explains each). Every value is validated; a bad one throws
// Error(Status::config) naming the variable, its value and what is accepted.
#include "bootstrap/pmix_client.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

#include <cerrno>
#include <charconv>
#include <climits>
#include <optional>
#include <sys/random.h>
#include <unistd.h>

namespace chorus::bootstrap {

namespace {

// The variables one launcher sets. Local ones may be missing: then the job is
// taken to run on one host (local rank = rank, local size = size).
struct LauncherVariables {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

constexpr LauncherVariables kChorusrun{"chorusrun", "CHORUS_RANK", "CHORUS_SIZE", "CHORUS_LOCAL_RANK",
                                       "CHORUS_LOCAL_SIZE"};
constexpr LauncherVariables kMpirun{"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr LauncherVariables kSrun{"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr};
// MPICH/Hydra-style PMI environment; reported as "srun" (PMI is how srun starts MPI jobs).
constexpr LauncherVariables kPmi{"srun", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"};
constexpr LauncherVariables kTorchrun{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};

[[noreturn]] void bad_value(const char* name, const std::string& value, const std::string& expected) {
  fail(Status::config, name, "=\"", value, "\": expected ", expected);
}

bool is_set(const char* name) { return name != nullptr && config::get(name).has_value(); }

// The integer in `name`, checked to lie in [min, max]; `why` explains the bound.
std::optional<int> env_int_in(const char* name, long long min, long long max, const std::string& why = "") {
  if (name == nullptr) return std::nullopt;
  auto text = config::get(name);
  if (!text) return std::nullopt;
  long long value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || value < min || value > max) {
    bad_value(name, *text, concat("an integer from ", min, " to ", max, why.empty() ? "" : " (" + why + ")"));
  }
  return static_cast<int>(value);
}

// SLURM_STEP_TASKS_PER_NODE style "4(x2),3": tasks on node `node`.
std::optional<int> tasks_on_node(const char* name, int node) {
  auto text = config::get(name);
  if (!text) return std::nullopt;
  const std::string expected = "a list like \"4(x2),3\" (tasks per node, \"(xN)\" repeating N times)";
  std::string_view rest = *text;
  int index = 0;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    int tasks = 0;
    int repeat = 1;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), tasks);
    std::string_view suffix(end, static_cast<size_t>(item.data() + item.size() - end));
    if (ec != std::errc() || tasks < 1) bad_value(name, *text, expected);
    if (!suffix.empty()) {
      if (!suffix.starts_with("(x") || !suffix.ends_with(")")) bad_value(name, *text, expected);
      auto digits = suffix.substr(2, suffix.size() - 3);
      auto [repeat_end, repeat_ec] = std::from_chars(digits.data(), digits.data() + digits.size(), repeat);
      if (repeat_ec != std::errc() || repeat_end != digits.data() + digits.size() || repeat < 1) {
        bad_value(name, *text, expected);
      }
    }
    if (node < index + repeat) return tasks;
    index += repeat;
  }
  fail(Status::config, name, "=\"", *text, "\" lists ", index, " nodes, but SLURM_NODEID is ", node);
}

void read_ranks(const LauncherVariables& vars, JobInfo& job) {
  if (!is_set(vars.size)) {
    fail(Status::config, vars.rank, " is set (", vars.launcher, ") but ", vars.size,
         " is not: both are needed to know the job's size");
  }
  if (!is_set(vars.rank)) {
    fail(Status::config, vars.size, " is set (", vars.launcher, ") but ", vars.rank, " is not");
  }
  job.launcher = vars.launcher;
  job.size_variable = vars.size;
  job.size = *env_int_in(vars.size, 1, INT_MAX, "the number of ranks");
  job.rank = *env_int_in(vars.rank, 0, job.size - 1, concat("the rank must be below ", vars.size, "=", job.size));
  job.local_size =
      env_int_in(vars.local_size, 1, job.size, concat("at most ", vars.size, "=", job.size)).value_or(job.size);
  job.local_rank = env_int_in(vars.local_rank, 0, job.local_size - 1,
                              vars.local_size ? concat("the local rank must be below ", vars.local_size, "=",
                                                       job.local_size)
                                              : concat("the local rank must be below the ranks on this node, ",
                                                       job.local_size))
                       .value_or(job.local_size == job.size ? job.rank : 0);
}

void read_srun_local_size(JobInfo& job) {
  int node = env_int_in("SLURM_NODEID", 0, INT_MAX, "this node's index in the allocation").value_or(0);
  auto tasks = tasks_on_node("SLURM_STEP_TASKS_PER_NODE", node);
  if (!tasks) tasks = tasks_on_node("SLURM_TASKS_PER_NODE", node);
  if (!tasks) return;  // no per-node layout given: one host
  if (*tasks > job.size) {
    fail(Status::config, "Slurm says ", *tasks, " tasks run on node ", node, " but SLURM_NTASKS=", job.size);
  }
  job.local_size = *tasks;
  job.local_rank = env_int_in("SLURM_LOCALID", 0, job.local_size - 1,
                              concat("the local rank must be below the ", job.local_size, " tasks on this node"))
                       .value_or(0);
}

net::HostPort store_address(const char* name) {
  auto text = config::get(name);
  auto parsed = net::parse_host_port(*text);
  if (!parsed) bad_value(name, *text, "host:port with a non-empty host (IPv6 as [addr]:port) and a port from 1 to 65535");
  return *parsed;
}

// The launcher's job id, for the port file name and key namespacing; empty if none.
std::string launcher_job_id(const std::string& launcher) {
  if (auto id = config::get("CHORUS_JOB_ID")) return *id;
  if (launcher == "mpirun") {
    if (auto id = config::get("OMPI_MCA_ess_base_jobid")) return "ompi-" + *id;
    if (auto id = config::get("PMIX_NAMESPACE")) return "pmix-" + *id;
  }
  if (launcher == "srun") {
    if (auto id = config::get("SLURM_JOB_ID")) return concat("slurm-", *id, ".", config::get("SLURM_STEP_ID").value_or("0"));
  }
  if (launcher == "torchrun") {
    if (auto id = config::get("TORCHELASTIC_RUN_ID")) return "torch-" + *id;
  }
  return {};
}

std::string random_secret() {
  uint8_t bytes[16];
  ssize_t got = ::getrandom(bytes, sizeof bytes, 0);
  if (got != static_cast<ssize_t>(sizeof bytes)) {
    fail(Status::internal, "getrandom() for the store secret failed: ", got < 0 ? errno_string(errno) : "short read");
  }
  std::string text;
  for (uint8_t byte : bytes) text += concat("0123456789abcdef"[byte >> 4], "0123456789abcdef"[byte & 15]);
  return text;
}

JobInfo detect_chorusrun() {
  JobInfo job;
  read_ranks(kChorusrun, job);
  if (!is_set("CHORUS_STORE_ADDR")) {
    fail(Status::config, "CHORUS_RANK is set (chorusrun) but CHORUS_STORE_ADDR is not: chorusrun sets both");
  }
  auto address = store_address("CHORUS_STORE_ADDR");
  job.store_host = address.host;
  job.store_port = address.port;
  auto secret = config::get("CHORUS_JOB_SECRET");
  if (!secret) fail(Status::config, "CHORUS_RANK is set (chorusrun) but CHORUS_JOB_SECRET is not: chorusrun sets both");
  job.secret = *secret;
  job.job_id = config::get("CHORUS_JOB_ID").value_or("chorusrun@" + net::format_address(job.store_host, job.store_port));
  return job;
}

// torchrun (torch.distributed.elastic) sets TORCHELASTIC_RUN_ID and friends
// in its workers; a hand-made RANK/WORLD_SIZE environment does not.
bool under_torchelastic() {
  for (const char* name : {"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE"}) {
    if (is_set(name)) return true;
  }
  return false;
}

// mpirun, srun and torchrun: rank 0 serves the store.
void choose_rank0_store(JobInfo& job) {
  job.rank0_serves = true;
  job.job_id = launcher_job_id(job.launcher);
  if (is_set("CHORUS_STORE_ADDR")) {
    auto address = store_address("CHORUS_STORE_ADDR");
    job.store_host = address.host;
    job.store_port = address.port;
  } else if (job.launcher == "torchrun" && (is_set("MASTER_ADDR") || is_set("MASTER_PORT"))) {
    if (!is_set("MASTER_ADDR") || !is_set("MASTER_PORT")) {
      fail(Status::config, is_set("MASTER_ADDR") ? "MASTER_ADDR is set but MASTER_PORT is not"
                                                 : "MASTER_PORT is set but MASTER_ADDR is not",
           ": torchrun sets both (rank 0 serves the store at MASTER_ADDR:MASTER_PORT)");
    }
    job.store_host = *config::get("MASTER_ADDR");
    job.store_port = static_cast<uint16_t>(*env_int_in("MASTER_PORT", 1, 65535, "a TCP port"));
    if (under_torchelastic()) {
      // torchrun's agent serves its own store at MASTER_PORT: ours takes the next port.
      if (job.store_port == 65535) {
        fail(Status::config, "MASTER_PORT=65535 under torchrun: chorus serves its store at MASTER_PORT+1 there "
                             "(MASTER_PORT is torchrun's own store); set CHORUS_STORE_ADDR=host:port to a free port");
      }
      ++job.store_port;
    }
  }
  const bool has_address = !job.store_host.empty();
  if (has_address) {
    // Suffix with the address: a run id alone (torchrun's default is "none") need not be unique.
    std::string address = net::format_address(job.store_host, job.store_port);
    job.job_id = job.job_id.empty() ? job.launcher + "@" + address : job.job_id + "@" + address;
  } else if (job.job_id.empty()) {
    if (job.size > 1) {
      fail(Status::config, job.launcher, " job of ", job.size,
           " ranks without a job id to name the store's port file (looked for CHORUS_JOB_ID, "
           "OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE, SLURM_JOB_ID, TORCHELASTIC_RUN_ID): set CHORUS_STORE_ADDR=host:port "
           "(rank 0 serves the store there) or CHORUS_JOB_ID");
    }
    job.job_id = concat(job.launcher, "-pid-", ::getpid());
  }
  // Without CHORUS_JOB_SECRET the secret is derived from the job id: it keeps
  // other jobs' ranks out, it does not keep out someone who knows the id.
  job.secret = config::get("CHORUS_JOB_SECRET").value_or("chorus-job:" + job.job_id);
}

JobInfo detect_with(const LauncherVariables& vars) {
  JobInfo job;
  read_ranks(vars, job);
  if (&vars == &kSrun) read_srun_local_size(job);
  choose_rank0_store(job);
  return job;
}

// SLURM_PROCID without SLURM_STEP_ID is a batch script (procid 0), or a
// launcher imitating srun without its step id: each process would otherwise
// run as its own 1-rank job, silently.
void check_slurm_without_step() {
  if (!is_set(kSrun.rank) || is_set("SLURM_STEP_ID") || is_set("TORCHELASTIC_RUN_ID")) return;
  const std::string procid = *config::get(kSrun.rank);
  const std::string ntasks = config::get(kSrun.size).value_or("1");
  if (procid != "0") {
    fail(Status::config, "SLURM_PROCID=", procid, " is set but SLURM_STEP_ID is not: srun sets both in every task. ",
         "Start the ranks with srun (inside the allocation), or set SLURM_STEP_ID in every rank if your launcher "
         "imitates srun; without it each process would run as a separate 1-rank job");
  }
  if (ntasks != "1") {
    log::warn("SLURM_PROCID=0 and SLURM_NTASKS=", ntasks, " are set but SLURM_STEP_ID is not: this looks like a ",
              "Slurm batch script, not an srun step, so this process runs as a 1-rank job. To run ", ntasks,
              " ranks, start the program with srun");
  }
}

JobInfo detect_single() {
  check_slurm_without_step();
  JobInfo job;
  job.launcher = "single";
  job.size_variable = "(no launcher)";
  job.rank0_serves = true;
  job.job_id = concat("single-pid-", ::getpid());
  // Nobody else needs to find this store: an unguessable secret costs nothing.
  auto secret = config::get("CHORUS_JOB_SECRET");
  job.secret = secret ? *secret : random_secret();
  return job;
}

// srun sets SLURM_PROCID in every task of a step, but a batch script (step
// "batch", no SLURM_STEP_ID) has it too, and so do torchrun workers started
// under srun (they inherit their agent's): neither is an srun job of ranks.
bool is_srun_step() {
  return is_set(kSrun.rank) && is_set("SLURM_STEP_ID") && !is_set("TORCHELASTIC_RUN_ID");
}

bool launcher_present(const LauncherVariables& vars) { return is_set(vars.rank) || is_set(vars.size); }

// The job as the PMIx server describes it. The launcher's name is kept for
// messages and for what depends on it (mpirun and srun jobs watch their
// same-host peers in /proc); rank 0 serves the store (bootstrap_pmix.cc).
JobInfo detect_pmix(const PmixClient& pmix) {
  JobInfo job;
  job.bootstrap = "pmix";
  job.rank = pmix.rank();
  job.size = pmix.size();
  job.local_rank = pmix.local_rank();
  job.local_size = pmix.local_size();
  job.size_variable = "PMIX_JOB_SIZE";
  job.launcher = launcher_present(kMpirun) ? "mpirun" : is_srun_step() ? "srun" : "pmix";
  job.rank0_serves = true;
  job.job_id = config::get("CHORUS_JOB_ID").value_or("pmix-" + pmix.nspace());
  if (is_set("CHORUS_STORE_ADDR")) {  // where rank 0 serves; the others learn it through PMIx anyway
    auto address = store_address("CHORUS_STORE_ADDR");
    job.store_host = address.host;
    job.store_port = address.port;
  }
  // Rank 0's secret reaches the others through PMIx: unguessable costs nothing.
  auto secret = config::get("CHORUS_JOB_SECRET");
  job.secret = secret ? *secret : random_secret();
  return job;
}

}  // namespace

DetectedJob detect_job(const std::string& bootstrap_setting) {
  const BootstrapChoice choice = choose_bootstrap(bootstrap_setting);
  if (choice.kind != "pmix") {
    log::debug("bootstrap store (", choice.why, ")");
    return {detect_job(), nullptr};
  }
  std::shared_ptr<PmixClient> pmix = PmixClient::connect();
  log::debug("bootstrap pmix (", choice.why, ")");
  return {detect_pmix(*pmix), std::move(pmix)};
}

JobInfo detect_job() {
  if (launcher_present(kChorusrun)) return detect_chorusrun();
  if (launcher_present(kMpirun)) return detect_with(kMpirun);
  if (is_srun_step()) return detect_with(kSrun);
  if (launcher_present(kPmi)) return detect_with(kPmi);
  if (launcher_present(kTorchrun)) return detect_with(kTorchrun);
  return detect_single();
}

}  // namespace chorus::bootstrap
