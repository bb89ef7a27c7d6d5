// The RDMA READs a verbs transport has in progress, as plain data (no verbs
// types), so the RC mesh's flow control (rc_mesh_flow_control.hpp) can queue
// them and be unit tested without a device.
#pragma once

#include "transports/transport.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace chorus::transport::verbs {

// One post_read(): done when its last piece completes.
struct ReadJob {
  uint64_t context;
  size_t pieces_left = 0;
  bool failed = false;
};

// The reads a transport has in progress. A deque: pieces point at their
// job until it ends.
class ReadJobs {
 public:
  ReadJob& start(uint64_t context) { return jobs_.emplace_back(ReadJob{context}); }
  // Every piece of `job` ended (or it had none).
  void finish(ReadJob* job) { finished_.push_back(job); }
  bool any_finished() const { return !finished_.empty(); }
  // Tells `sink` of each finished job that did not fail (a failed one was
  // reported with its error), forgets them; returns how many ended.
  int deliver(Sink& sink);

 private:
  std::deque<ReadJob> jobs_;
  std::vector<ReadJob*> finished_;
};

// One RDMA READ work request of a job.
struct PendingRead {
  ReadJob* job;
  uint64_t local_address;
  uint32_t lkey;
  uint32_t bytes;
  uint64_t remote_address;
  uint32_t rkey;
};

}  // namespace chorus::transport::verbs
