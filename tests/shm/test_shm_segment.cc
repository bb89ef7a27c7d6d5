// A rank's segment takes its name even when a killed process with the same
// pid left that name in /dev/shm (pids repeat, soon in a container; CI once
// failed on a leftover "/dev/shm/593:chorus-shm-0").
#include "transports/shm/shm_segment.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

TEST(ShmSegment, TakesTheNameOfAKilledProcessWithTheSamePid) {
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  // This process has made no segment yet: its next ones are numbered from 0.
  std::vector<std::string> leftovers;
  for (int n = 0; n < 3; ++n) {
    leftovers.push_back("/dev/shm/" + std::to_string(getpid()) + ":chorus-shm-" + std::to_string(n));
    const int fd = ::open(leftovers.back().c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << leftovers.back();
    ::close(fd);
  }
  for (int n = 0; n < 3; ++n) {
    chorus::transport::shm::OwnSegment segment = chorus::transport::shm::create_own_segment(2, 4096);
    ASSERT_TRUE(segment.mapping.mapped());
    EXPECT_GE(segment.fd, 0);
    // The leftover is gone and the new segment has no name either.
    EXPECT_FALSE(fs::exists(leftovers[static_cast<size_t>(n)])) << leftovers[static_cast<size_t>(n)];
    ::close(segment.fd);
  }
  for (const std::string& name : leftovers) fs::remove(name);  // only if the check above failed
}

}  // namespace
