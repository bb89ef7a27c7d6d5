#include "bootstrap/port_file.hpp"
#include "bootstrap/store.hpp"

#include "common/error.hpp"
#include "common/fnv.hpp"
#include "common/log.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace chorus::bootstrap::port_file {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxIdInName = 96;
constexpr auto kFirstPollDelay = std::chrono::milliseconds(5);
constexpr auto kMaxPollDelay = std::chrono::milliseconds(100);

std::string safe_for_filename(const std::string& id) {
  std::string name = id;
  std::replace_if(
      name.begin(), name.end(),
      [](unsigned char c) { return !(std::isalnum(c) || c == '.' || c == '_' || c == '-'); }, '_');
  if (name.size() > kMaxIdInName) name = concat(name.substr(0, kMaxIdInName / 2), "-", std::hex, fnv1a::hash(id));
  return name;
}

void write_all(int fd, const std::string& text, const std::string& path) {
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(Status::bootstrap, "writing the store port file ", path, " failed: ", errno_string(errno));
    written += static_cast<size_t>(n);
  }
}

// The port in an opened port file; throws if the file is not one of ours.
uint16_t read_port(int fd, const std::string& path) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) fail(Status::bootstrap, "fstat(", path, ") failed: ", errno_string(errno));
  if (!S_ISREG(info.st_mode) || info.st_uid != ::geteuid() || (info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    fail(Status::bootstrap, "refusing the store port file ", path, ": it must be a regular file owned by uid ",
         ::geteuid(), " and writable only by it (owner uid ", info.st_uid, ", mode ", std::oct,
         info.st_mode & 07777, "); remove it if it is left over");
  }
  char text[32] = {0};
  ssize_t n = 0;
  do {
    n = ::read(fd, text, sizeof text - 1);
  } while (n < 0 && errno == EINTR);
  if (n < 0) fail(Status::bootstrap, "reading the store port file ", path, " failed: ", errno_string(errno));
  return parse_port({text, static_cast<size_t>(n)}, path);
}

}  // namespace

uint16_t parse_port(std::string_view text, const std::string& path) {
  unsigned port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || port < 1 || port > 65535 || end + 1 != text.data() + text.size() || *end != '\n') {
    fail(Status::bootstrap, "the store port file ", path, " does not hold a port followed by a newline (",
         text.size(), " bytes)");
  }
  return static_cast<uint16_t>(port);
}

std::string path_for(const std::string& job_id) {
  return concat("/tmp/chorus-store-", safe_for_filename(job_id), "-", ::geteuid());
}

void publish(const std::string& path, uint16_t port) {
  std::string temporary = concat(path, ".tmp.", ::getpid());
  // O_EXCL: never write into a file someone else prepared under this name.
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(temporary.c_str(), flags, 0600);
  if (fd < 0 && errno == EEXIST && ::unlink(temporary.c_str()) == 0) fd = ::open(temporary.c_str(), flags, 0600);
  if (fd < 0) fail(Status::bootstrap, "creating the store port file ", temporary, " failed: ", errno_string(errno));
  try {
    write_all(fd, concat(port, "\n"), temporary);
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    int error = errno;
    ::unlink(temporary.c_str());
    fail(Status::bootstrap, "closing the store port file ", temporary, " failed: ", errno_string(error));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    int error = errno;
    ::unlink(temporary.c_str());
    fail(Status::bootstrap, "renaming ", temporary, " to ", path, " failed: ", errno_string(error));
  }
}

uint16_t wait_for(const std::string& path, std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  auto next_report = start + startup_report_interval(timeout);
  auto delay = kFirstPollDelay;
  for (;;) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      try {
        uint16_t port = read_port(fd, path);
        ::close(fd);
        return port;
      } catch (...) {
        ::close(fd);
        throw;
      }
    }
    if (errno != ENOENT) fail(Status::bootstrap, "opening the store port file ", path, " failed: ", errno_string(errno));
    auto now = Clock::now();
    if (now >= deadline) {
      fail(Status::timeout, "timed out after ", timeout.count(), " ms waiting for rank 0 to publish the store's port in ",
           path, ": rank 0 has not started its store (or failed), or it runs on another host; ranks on several "
           "hosts need CHORUS_STORE_ADDR=host:port");
    }
    if (now >= next_report) {
      next_report = now + startup_report_interval(timeout);
      log::warn("still waiting for rank 0 to publish the store's port in ", path, " (",
                std::chrono::duration_cast<std::chrono::seconds>(now - start).count(),
                " s so far): is rank 0 running? Only ranks on rank 0's host see this file: with ranks on several "
                "hosts, set MASTER_ADDR and MASTER_PORT (or CHORUS_STORE_ADDR=host:port) in every rank");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(delay, deadline - now));
    delay = std::min(delay * 2, kMaxPollDelay);
  }
}

void remove(const std::string& path) noexcept {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return;
  try {
    log::warn("removing the store port file ", path, " failed: ", errno_string(errno));
  } catch (...) {
    // Out of memory while logging: nothing more to do.
  }
}

}  // namespace chorus::bootstrap::port_file
