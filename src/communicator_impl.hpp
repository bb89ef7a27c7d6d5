// The communicator behind chorus::Communicator and the C API: owns the
// bootstrap, the transport and the P2P engine, validates every call, picks
// the algorithm and turns the first failure into a sticky error (after a
// failed collective the ranks disagree on what was exchanged, so every later
// call fails too, as NCCL does after an async error).
#pragma once

#include "bootstrap/store.hpp"
#include "collectives/collectives.hpp"
#include "common/config.hpp"
#include "p2p/engine.hpp"
#include "transports/transport.hpp"

#include <chorus/chorus.hpp>

#include <array>
#include <memory>
#include <mutex>
#include <optional>

namespace chorus {

class CommunicatorImpl {
 public:
  // Joins the job described by the environment.
  static std::unique_ptr<CommunicatorImpl> create_from_environment();
  ~CommunicatorImpl();

  int rank() const { return job_.rank; }
  int size() const { return job_.size; }
  int local_rank() const { return job_.local_rank; }
  int local_size() const { return job_.local_size; }
  std::string transport_name() const;

  // Runs one collective (arguments in the public API's conventions).
  void run(Collective op, const coll::Args& args);
  void send(const void* buf, size_t bytes, int peer, int tag);
  void recv(void* buf, size_t bytes, int peer, int tag);

  void set_algorithm(Collective op, std::string_view name);
  std::vector<std::string> algorithms(Collective op) const;
  std::string selected_algorithm(Collective op, size_t bytes) const;

  void finalize();
  bool finalized() const { return finalized_; }

  p2p::Engine& engine() { return *engine_; }
  const config::Settings& settings() const { return settings_; }

 private:
  CommunicatorImpl() = default;
  void connect();
  void leave_job();
  void check_usable() const;
  std::string launcher_report(const Error& error);
  void validate(Collective op, const coll::Args& args) const;
  void run_single_rank(Collective op, const coll::Args& args);
  const coll::Algorithm& choose(Collective op, size_t bytes) const;
  // Runs `body`, remembering the first failure so later calls report it.
  template <class Body>
  void guarded(const char* what, Body&& body);

  config::Settings settings_;
  bootstrap::JobInfo job_;
  std::unique_ptr<bootstrap::Bootstrap> bootstrap_;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<p2p::Engine> engine_;
  std::vector<int> world_ranks_;  // communicator rank -> engine rank
  coll::Scratch scratch_;
  coll::Tuning tuning_;
  std::array<const coll::Algorithm*, kNumCollectives> forced_{};  // nullptr = table
  uint64_t sequence_ = 0;
  std::optional<Error> sticky_error_;
  bool finalized_ = false;
  mutable std::mutex mutex_;  // one call at a time per communicator
};

// Bytes moved by one call, as the selection table measures them.
size_t payload_bytes(Collective op, const coll::Args& args, int size);

}  // namespace chorus
