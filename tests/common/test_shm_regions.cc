// remove_stale deletes exactly the /dev/shm files named after one pid.
#include "common/shm_regions.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace {

namespace fs = std::filesystem;

// A pid above pid_max (4194304 at most on Linux): no live process has it.
constexpr pid_t kGonePid = 4194399;

void create(const std::string& name) {
  const int fd = ::open(("/dev/shm/" + name).c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0) << name;
  ::close(fd);
}

TEST(ShmRegions, RemovesEveryRegionOfThePidAndNothingElse) {
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  const std::string pid = std::to_string(kGonePid);
  for (const std::string& name : {pid + ":0:0", pid + ":1:3", pid + "0:0:0", "x" + pid + ":0:0"}) create(name);
  EXPECT_EQ(chorus::shm_regions::remove_stale(kGonePid), 2);
  EXPECT_FALSE(fs::exists("/dev/shm/" + pid + ":0:0"));
  EXPECT_FALSE(fs::exists("/dev/shm/" + pid + ":1:3"));
  // Another pid's region and a name that merely contains the pid stay.
  EXPECT_TRUE(fs::exists("/dev/shm/" + pid + "0:0:0"));
  EXPECT_TRUE(fs::exists("/dev/shm/x" + pid + ":0:0"));
  fs::remove("/dev/shm/" + pid + "0:0:0");
  fs::remove("/dev/shm/x" + pid + ":0:0");
  EXPECT_EQ(chorus::shm_regions::remove_stale(kGonePid), 0);
}

}  // namespace
