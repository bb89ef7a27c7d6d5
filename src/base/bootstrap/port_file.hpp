// The port file through which rank 0 tells the other ranks on its host where
// its store listens, when the launcher (mpirun, srun, torchrun without
// MASTER_ADDR) gave no store address: /tmp/chorus-store-<job id>-<uid>.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace chorus::bootstrap::port_file {

// /tmp/chorus-store-<job id>-<uid>; characters outside [A-Za-z0-9._-] in the
// job id become '_' and a long id is shortened to a prefix plus its hash.
std::string path_for(const std::string& job_id);

// Writes "<port>\n" to a temporary file (mode 0600) and renames it over
// `path`, so a reader sees either no file or the whole file.
void publish(const std::string& path, uint16_t port);

// Polls for `path` until it appears and returns its port. The file must be a
// regular file owned by this user and writable by nobody else: otherwise
// another user could point our ranks (and their secret) at their own server.
// Throws Error(Status::timeout) naming the path when `timeout` passes.
uint16_t wait_for(const std::string& path, std::chrono::milliseconds timeout);

// The port in a port file's contents: decimal 1..65535 and one newline,
// nothing else. Throws Error(Status::bootstrap) naming `path` otherwise.
uint16_t parse_port(std::string_view text, const std::string& path);

// Removes the file; failures only matter to the next job with this id, so
// they are logged, not thrown.
void remove(const std::string& path) noexcept;

}  // namespace chorus::bootstrap::port_file
