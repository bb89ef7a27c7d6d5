// CHORUS_BOOTSTRAP's choice (choose_bootstrap): which environment gets the
// PMIx bootstrap, which the store, and the config errors of pmix where it
// cannot work. No PMIx server is needed: only the environment is read.
#include "bootstrap/pmix_client.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

using namespace chorus;
using namespace chorus::bootstrap;

namespace {

using Values = std::map<std::string, std::string>;

// Sets exactly `values` among the variables the choice reads; restores them on exit.
class ScopedEnv {
 public:
  explicit ScopedEnv(const Values& values) {
    for (const char* name : kNames) {
      if (const char* old = std::getenv(name)) saved_[name] = old;
      ::unsetenv(name);
    }
    for (const auto& [name, value] : values) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (const char* name : kNames) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  static constexpr const char* kNames[] = {"PMIX_NAMESPACE", "PMIX_RANK", "CHORUS_RANK", "TORCHELASTIC_RUN_ID",
                                           "OMPI_COMM_WORLD_RANK"};
  std::map<std::string, std::string> saved_;
};

const Values kPmixServer = {{"PMIX_NAMESPACE", "job-7"}, {"PMIX_RANK", "0"}};

std::string config_error(const std::string& setting) {
  try {
    choose_bootstrap(setting);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::config) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "CHORUS_BOOTSTRAP=" << setting << " was accepted";
  return "";
}

TEST(PmixChoice, AutoPicksPmixUnderAPmixServerWhenBuilt) {
  ScopedEnv env(kPmixServer);
  const BootstrapChoice choice = choose_bootstrap("auto");
  EXPECT_EQ(choice.kind, pmix_built() ? "pmix" : "store") << choice.why;
  if (!pmix_built()) {
    EXPECT_NE(choice.why.find("this build has no PMIx"), std::string::npos) << choice.why;
  }
}

TEST(PmixChoice, AutoPicksTheStoreWithoutAServer) {
  ScopedEnv env(Values{{"PMIX_NAMESPACE", "job-7"}});  // half of the pair is no server
  const BootstrapChoice choice = choose_bootstrap("auto");
  EXPECT_EQ(choice.kind, "store");
  EXPECT_NE(choice.why.find("no PMIx server"), std::string::npos) << choice.why;
}

// chorusrun's and torchrun's ranks inherit their launcher's PMIx identity.
TEST(PmixChoice, AutoPicksTheStoreUnderChorusrunAndTorchrunEvenWithPmixVariables) {
  for (const char* launcher : {"CHORUS_RANK", "TORCHELASTIC_RUN_ID"}) {
    auto values = kPmixServer;
    values[launcher] = "1";
    ScopedEnv env(values);
    const BootstrapChoice choice = choose_bootstrap("auto");
    EXPECT_EQ(choice.kind, "store") << launcher;
    EXPECT_NE(choice.why.find(launcher), std::string::npos) << choice.why;
  }
}

// Open MPI 4.1's mpirun can hang at the job's end after a rank left during
// a fence (pmix_client.cc): auto keeps the store there, pmix is still allowed.
TEST(PmixChoice, AutoPicksTheStoreUnderOpenMpisMpirun) {
  auto values = kPmixServer;
  values["OMPI_COMM_WORLD_RANK"] = "0";
  ScopedEnv env(values);
  const BootstrapChoice choice = choose_bootstrap("auto");
  EXPECT_EQ(choice.kind, "store");
  EXPECT_NE(choice.why.find("Open MPI's mpirun"), std::string::npos) << choice.why;
  if (pmix_built()) {
    EXPECT_EQ(choose_bootstrap("pmix").kind, "pmix");
  }
}

TEST(PmixChoice, StoreIsAlwaysTheStore) {
  ScopedEnv env(kPmixServer);
  EXPECT_EQ(choose_bootstrap("store").kind, "store");
}

TEST(PmixChoice, PmixWithoutAServerIsAConfigErrorSayingWhy) {
  ScopedEnv env(Values{});
  const std::string error = config_error("pmix");
  if (pmix_built()) {
    EXPECT_NE(error.find("no PMIx server started this process (PMIX_NAMESPACE and PMIX_RANK are not both set)"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("srun --mpi=pmix"), std::string::npos) << error;
  } else {
    EXPECT_NE(error.find("this build of chorus has no PMIx"), std::string::npos) << error;
  }
}

TEST(PmixChoice, PmixUnderAServerIsPmixWhenBuilt) {
  ScopedEnv env(kPmixServer);
  if (!pmix_built()) {
    EXPECT_NE(config_error("pmix").find("this build of chorus has no PMIx"), std::string::npos);
    return;
  }
  EXPECT_EQ(choose_bootstrap("pmix").kind, "pmix");
}

TEST(PmixChoice, TheDescriptionNamesTheLibraryOrWhyNot) {
  const std::string text = pmix_description();
  EXPECT_NE(text.find(pmix_built() ? "PMIx" : "no PMIx"), std::string::npos) << text;
}

}  // namespace
