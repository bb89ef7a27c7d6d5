// detect_job(): every launcher's variables, the precedence between them, and
// every invalid value refused with a message naming the variable.
#include "bootstrap/store.hpp"
#include "tests/bootstrap/helpers.hpp"

using namespace chorus;
using namespace chorus::bootstrap;
using namespace chorus::bootstrap::testing;

namespace {

using Env = std::map<std::string, std::string>;

JobInfo detect(const Env& env) {
  ScopedJobEnv scope(env);
  return detect_job();
}

// The config error detect_job() throws under `env`.
std::string config_error(const Env& env) {
  ScopedJobEnv scope(env);
  try {
    detect_job();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::config) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "detect_job() accepted the environment";
  return "";
}

Env merged(Env base, const Env& changes) {
  for (const auto& [name, value] : changes) base[name] = value;
  return base;
}

Env without(Env base, const std::string& name) {
  base.erase(name);
  return base;
}

// Who detect_job() says this process is, in one line: the launcher, the rank
// and size, the local rank and size ("srun 3/6 local 1/2").
std::string placement(const JobInfo& job) {
  return concat(job.launcher, " ", job.rank, "/", job.size, " local ", job.local_rank, "/", job.local_size);
}

const Env kChorusrun = {{"CHORUS_RANK", "2"},       {"CHORUS_SIZE", "4"},
                        {"CHORUS_LOCAL_RANK", "0"}, {"CHORUS_LOCAL_SIZE", "2"},
                        {"CHORUS_STORE_ADDR", "127.0.0.1:29400"}, {"CHORUS_JOB_SECRET", "s3cret"}};
const Env kMpirun = {{"OMPI_COMM_WORLD_RANK", "1"},       {"OMPI_COMM_WORLD_SIZE", "3"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                     {"OMPI_MCA_ess_base_jobid", "1234567"}};
const Env kSrun = {{"SLURM_PROCID", "3"},  {"SLURM_NTASKS", "6"},   {"SLURM_LOCALID", "1"},
                   {"SLURM_NODEID", "1"},  {"SLURM_JOB_ID", "777"}, {"SLURM_STEP_ID", "2"},
                   {"SLURM_STEP_TASKS_PER_NODE", "2(x2),2"}};
const Env kTorchrun = {{"RANK", "1"},         {"WORLD_SIZE", "2"},           {"LOCAL_RANK", "1"},
                       {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"},
                       {"TORCHELASTIC_RUN_ID", "none"}};

}  // namespace

TEST(DetectJob, Chorusrun) {
  JobInfo job = detect(kChorusrun);
  EXPECT_EQ(placement(job), "chorusrun 2/4 local 0/2");
  EXPECT_EQ(job.store_host, "127.0.0.1");
  EXPECT_EQ(job.store_port, 29400);
  EXPECT_EQ(job.secret, "s3cret");
  EXPECT_FALSE(job.rank0_serves);
  EXPECT_EQ(job.job_id, "chorusrun@127.0.0.1:29400");
  EXPECT_EQ(detect(merged(kChorusrun, {{"CHORUS_JOB_ID", "run-9"}})).job_id, "run-9");
}

TEST(DetectJob, ChorusrunNeedsItsStoreAddressAndSecret) {
  for (const char* name : {"CHORUS_STORE_ADDR", "CHORUS_JOB_SECRET"}) {
    EXPECT_NE(config_error(without(kChorusrun, name)).find(name), std::string::npos) << name;
  }
}

TEST(DetectJob, MpirunServesFromRankZeroWithAPortFile) {
  JobInfo job = detect(kMpirun);
  EXPECT_EQ(placement(job), "mpirun 1/3 local 1/3");
  EXPECT_TRUE(job.rank0_serves);
  EXPECT_TRUE(job.store_host.empty());
  EXPECT_EQ(job.job_id, "ompi-1234567");
  EXPECT_EQ(job.secret, "chorus-job:ompi-1234567");  // derived: not a real secret
  EXPECT_EQ(detect(merged(kMpirun, {{"CHORUS_JOB_SECRET", "real"}})).secret, "real");
}

TEST(DetectJob, MpirunJobIdFallsBackToThePmixNamespace) {
  Env env = merged(without(kMpirun, "OMPI_MCA_ess_base_jobid"), {{"PMIX_NAMESPACE", "prterun-host-4242@1"}});
  EXPECT_EQ(detect(env).job_id, "pmix-prterun-host-4242@1");
}

TEST(DetectJob, MpirunWithoutAJobIdNeedsAStoreAddress) {
  const Env env = without(kMpirun, "OMPI_MCA_ess_base_jobid");
  std::string message = config_error(env);
  EXPECT_NE(message.find("CHORUS_STORE_ADDR"), std::string::npos) << message;
  EXPECT_NE(message.find("OMPI_MCA_ess_base_jobid"), std::string::npos) << message;

  JobInfo with_addr = detect(merged(env, {{"CHORUS_STORE_ADDR", "127.0.0.1:31000"}}));
  EXPECT_TRUE(with_addr.rank0_serves);
  EXPECT_EQ(with_addr.store_host, "127.0.0.1");
  EXPECT_EQ(with_addr.store_port, 31000);
  EXPECT_EQ(with_addr.job_id, "mpirun@127.0.0.1:31000");

  JobInfo alone = detect({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}});
  EXPECT_EQ(alone.size, 1);  // one rank needs no port file, so no job id either
}

TEST(DetectJob, SrunReadsTasksPerNode) {
  JobInfo job = detect(kSrun);
  EXPECT_EQ(placement(job), "srun 3/6 local 1/2");
  EXPECT_EQ(job.job_id, "slurm-777.2");
  EXPECT_TRUE(job.rank0_serves);

  Env uneven = merged(kSrun, {{"SLURM_STEP_TASKS_PER_NODE", "4,2"}, {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(detect(uneven).local_size, 2);
  EXPECT_EQ(detect(merged(uneven, {{"SLURM_NODEID", "0"}})).local_size, 4);
}

TEST(DetectJob, SlurmBatchScriptIsNotAnSrunStep) {
  // A batch script is task 0 (it warns that it runs as 1 rank).
  Env batch = merged(without(kSrun, "SLURM_STEP_ID"), {{"SLURM_PROCID", "0"}});
  EXPECT_EQ(detect(batch).launcher, "single");
}

// Task 3 without a step id is no batch script: N processes would each run
// as a silent 1-rank job. Refused, with the fix.
TEST(DetectJob, SlurmTaskWithoutStepIdIsRefused) {
  const std::string message = config_error(without(kSrun, "SLURM_STEP_ID"));
  EXPECT_NE(message.find("SLURM_PROCID=3 is set but SLURM_STEP_ID is not"), std::string::npos) << message;
  EXPECT_NE(message.find("Start the ranks with srun"), std::string::npos) << message;
}

TEST(DetectJob, PmiVariables) {
  JobInfo job = detect({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"},
                        {"CHORUS_STORE_ADDR", "localhost:4000"}});
  EXPECT_EQ(placement(job), "srun 2/4 local 0/2");
  EXPECT_EQ(job.store_host, "localhost");
}

TEST(DetectJob, TorchrunServesAtMasterAddrAndPort) {
  JobInfo job = detect(kTorchrun);
  EXPECT_EQ(placement(job), "torchrun 1/2 local 1/2");
  EXPECT_TRUE(job.rank0_serves);
  EXPECT_EQ(job.store_host, "127.0.0.1");
  // Under torchrun (TORCHELASTIC_*), MASTER_PORT is torchrun's own store.
  EXPECT_EQ(job.store_port, 29501);
  EXPECT_EQ(job.job_id, "torch-none@127.0.0.1:29501");
  // A hand-made RANK/WORLD_SIZE/MASTER_* environment uses MASTER_PORT itself.
  const Env by_hand = without(kTorchrun, "TORCHELASTIC_RUN_ID");
  EXPECT_EQ(detect(by_hand).store_port, 29500);
  EXPECT_EQ(detect(merged(by_hand, {{"TORCHELASTIC_RESTART_COUNT", "0"}})).store_port, 29501);
  EXPECT_NE(config_error(merged(kTorchrun, {{"MASTER_PORT", "65535"}})).find("set CHORUS_STORE_ADDR"),
            std::string::npos);
  // CHORUS_STORE_ADDR wins over MASTER_ADDR/MASTER_PORT.
  EXPECT_EQ(detect(merged(kTorchrun, {{"CHORUS_STORE_ADDR", "[::1]:6000"}})).store_host, "::1");
}

TEST(DetectJob, TorchrunUnderSrunIsTorchrun) {
  EXPECT_EQ(detect(merged(kSrun, kTorchrun)).launcher, "torchrun");
}

TEST(DetectJob, LaunchersAreTriedInOrder) {
  EXPECT_EQ(detect(merged(kMpirun, kChorusrun)).launcher, "chorusrun");
  EXPECT_EQ(detect(merged(kSrun, kMpirun)).launcher, "mpirun");
  Env srun_and_rank = merged(kSrun, {{"RANK", "0"}, {"WORLD_SIZE", "9"}});
  EXPECT_EQ(detect(srun_and_rank).launcher, "srun");
}

TEST(DetectJob, NoLauncherIsASingleRankJob) {
  JobInfo job = detect({});
  EXPECT_EQ(placement(job), "single 0/1 local 0/1");
  EXPECT_TRUE(job.rank0_serves);
  EXPECT_TRUE(job.store_host.empty());
  EXPECT_EQ(job.secret.size(), 32u);
  EXPECT_NE(detect({}).secret, job.secret);  // random per process start
}

struct InvalidCase {
  Env base;
  std::string variable;
  std::string value;
  std::string expected;  // part of the message
};

class DetectJobInvalid : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(DetectJobInvalid, NamesTheVariableTheValueAndWhatIsAccepted) {
  const InvalidCase& c = GetParam();
  std::string message = config_error(merged(c.base, {{c.variable, c.value}}));
  EXPECT_NE(message.find(c.variable + "=\"" + c.value + "\""), std::string::npos) << message;
  EXPECT_NE(message.find(c.expected), std::string::npos) << message;
}

const char* const kAddressRule = "host:port with a non-empty host";

INSTANTIATE_TEST_SUITE_P(
    Values, DetectJobInvalid,
    ::testing::Values(
        InvalidCase{kChorusrun, "CHORUS_SIZE", "0", "an integer from 1 to"},
        InvalidCase{kChorusrun, "CHORUS_SIZE", "four", "an integer from 1 to"},
        InvalidCase{kChorusrun, "CHORUS_SIZE", "99999999999", "an integer from 1 to"},
        InvalidCase{kChorusrun, "CHORUS_RANK", "4", "the rank must be below CHORUS_SIZE=4"},
        InvalidCase{kChorusrun, "CHORUS_RANK", "-1", "an integer from 0 to 3"},
        InvalidCase{kChorusrun, "CHORUS_RANK", "1.5", "an integer from 0 to 3"},
        InvalidCase{kChorusrun, "CHORUS_LOCAL_RANK", "2", "below CHORUS_LOCAL_SIZE=2"},
        InvalidCase{kChorusrun, "CHORUS_LOCAL_SIZE", "5", "at most CHORUS_SIZE=4"},
        InvalidCase{kChorusrun, "CHORUS_STORE_ADDR", "localhost", kAddressRule},
        InvalidCase{kChorusrun, "CHORUS_STORE_ADDR", "host:0", kAddressRule},
        InvalidCase{kChorusrun, "CHORUS_STORE_ADDR", "host:65536", kAddressRule},
        InvalidCase{kChorusrun, "CHORUS_STORE_ADDR", ":80", kAddressRule},
        InvalidCase{kChorusrun, "CHORUS_STORE_ADDR", "host:8x", kAddressRule},
        InvalidCase{kChorusrun, "CHORUS_STORE_ADDR", "::1:80", kAddressRule},
        InvalidCase{kChorusrun, "CHORUS_STORE_ADDR", "[::1]80", kAddressRule},
        // Found by tests/fuzz: a bracket inside the host was accepted as part of it.
        InvalidCase{kChorusrun, "CHORUS_STORE_ADDR", "[[0]:1", kAddressRule},
        InvalidCase{kChorusrun, "CHORUS_STORE_ADDR", "[::1]]:80", kAddressRule},
        InvalidCase{kChorusrun, "CHORUS_STORE_ADDR", "host]:80", kAddressRule},
        InvalidCase{kMpirun, "OMPI_COMM_WORLD_RANK", "3", "below OMPI_COMM_WORLD_SIZE=3"},
        InvalidCase{kMpirun, "OMPI_COMM_WORLD_SIZE", "-2", "an integer from 1 to"},
        InvalidCase{kMpirun, "OMPI_COMM_WORLD_LOCAL_SIZE", "0", "an integer from 1 to 3"},
        InvalidCase{kMpirun, "CHORUS_STORE_ADDR", "127.0.0.1:", kAddressRule},
        InvalidCase{kSrun, "SLURM_PROCID", "6", "below SLURM_NTASKS=6"},
        InvalidCase{kSrun, "SLURM_NTASKS", " 6", "an integer from 1 to"},
        InvalidCase{kSrun, "SLURM_LOCALID", "2", "below the 2 tasks on this node"},
        InvalidCase{kSrun, "SLURM_STEP_TASKS_PER_NODE", "2(x2", "a list like"},
        InvalidCase{kSrun, "SLURM_STEP_TASKS_PER_NODE", "two", "a list like"},
        InvalidCase{kSrun, "SLURM_NODEID", "x", "an integer from 0 to"},
        InvalidCase{kTorchrun, "RANK", "2", "below WORLD_SIZE=2"},
        InvalidCase{kTorchrun, "WORLD_SIZE", "0x10", "an integer from 1 to"},
        InvalidCase{kTorchrun, "LOCAL_WORLD_SIZE", "3", "at most WORLD_SIZE=2"},
        InvalidCase{kTorchrun, "MASTER_PORT", "0", "an integer from 1 to 65535"},
        InvalidCase{kTorchrun, "MASTER_PORT", "70000", "an integer from 1 to 65535"},
        InvalidCase{kTorchrun, "MASTER_PORT", "http", "an integer from 1 to 65535"}),
    [](const ::testing::TestParamInfo<InvalidCase>& info) { return concat(info.param.variable, "_", info.index); });

TEST(DetectJob, HalfAPairIsRefusedNamingBoth) {
  std::string rank_only = config_error({{"OMPI_COMM_WORLD_RANK", "0"}});
  EXPECT_NE(rank_only.find("OMPI_COMM_WORLD_RANK is set"), std::string::npos) << rank_only;
  EXPECT_NE(rank_only.find("OMPI_COMM_WORLD_SIZE is not"), std::string::npos) << rank_only;
  std::string size_only = config_error({{"WORLD_SIZE", "2"}});
  EXPECT_NE(size_only.find("RANK is not"), std::string::npos) << size_only;
  std::string master = config_error(without(kTorchrun, "MASTER_PORT"));
  EXPECT_NE(master.find("MASTER_ADDR is set but MASTER_PORT is not"), std::string::npos) << master;
  std::string slurm_nodes = config_error(merged(kSrun, {{"SLURM_NODEID", "5"}}));
  EXPECT_NE(slurm_nodes.find("SLURM_STEP_TASKS_PER_NODE"), std::string::npos) << slurm_nodes;
  EXPECT_NE(slurm_nodes.find("SLURM_NODEID is 5"), std::string::npos) << slurm_nodes;
}
