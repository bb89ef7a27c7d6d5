// Running the ranks of one job: spawning (fork/exec locally, the remote shell
// for other hosts), forwarding their output line by line with a [rank]
// prefix, forwarding signals, and stopping everyone when one rank fails.
#pragma once

#include "options.hpp"

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace chorusrun {

struct RankPlacement {
  int rank = 0;
  std::string host;  // empty: this host
  int local_rank = 0;
  int local_size = 1;
};

// Blocks the signals chorusrun handles through its signalfd. Must run before
// any thread starts (the store's), or a signal can land on that thread.
void block_handled_signals();

// Ranks fill hosts in order, each host up to its slots.
std::vector<RankPlacement> place_ranks(const Options& options);

struct JobEnvironment {
  std::vector<std::string> variables;  // "NAME=value" given to every rank
  std::string store_address;           // host:port
};

// StoreHooks::left_early's answer for a rank that never reached the store.
inline constexpr const char* kNeverJoined = "never joined";

// What the job tells the bootstrap store and asks of it (chorusrun.cc).
struct StoreHooks {
  // Records the first failure, so every survivor's error can name it.
  std::function<void(int rank, const std::string& message)> publish_failure;
  // What the store knows that explains a failure (ranks that left before).
  std::function<std::string()> context;
  // A rank exited with status 0 (`who`: "rank 1 (pid 42 on localhost)").
  // Empty when it left as it should (every rank passed finalize, or it
  // failed itself and said so); kNeverJoined when it never reached the
  // store. Otherwise how it left early; where the
  // rank announced nothing, it also records that departure in the store,
  // so the ranks that still need it fail naming it (docs/errors.md).
  std::function<std::string(int rank, const std::string& who)> left_early;
  // The first rank that announced leaving without finalize() (its
  // Communicator destroyed; it may still be inside that destructor), and
  // "rank 1 left the job (...)"; nullopt if none.
  std::function<std::optional<std::pair<int, std::string>>()> left_without_finalize;
  // True once any rank joined the job through the store (called init).
  std::function<bool()> anyone_joined;
};

class Job {
 public:
  Job(const Options& options, std::vector<RankPlacement> placement, JobEnvironment environment, StoreHooks store);
  ~Job();

  // Spawns every rank, forwards output and signals until all have ended;
  // returns chorusrun's exit status.
  int run();

 private:
  struct Rank;
  struct Stream;

  void spawn(Rank& rank);
  void handle_signal(int signal_number);
  void reap_children();
  void on_rank_ended(Rank& rank, int status);
  void on_rank_stopped(Rank& rank, int signal_number);
  void fail_job(const Rank& failed, const std::string& what, int exit_status);
  void judge_clean_exit(Rank& rank);
  void fail_if_others_joined();
  std::string who(const Rank& rank) const;
  bool only_stopped_ranks_left() const;
  void terminate_others();
  void signal_all(int signal_number);
  void forward_output(Stream& stream, bool at_end);
  bool all_ended() const;

  const Options& options_;
  JobEnvironment environment_;
  StoreHooks store_;
  // The first rank that exited with status 0 before the job was done, and
  // how: it caused what fails after it, so chorusrun names it first.
  int left_early_rank_ = -1;
  std::string left_early_;
  // Ranks that exited with status 0 before anyone joined: a fault once
  // another rank joins (they wait for it in init), else a job without chorus.
  std::vector<int> left_before_joining_;
  std::vector<Rank> ranks_;
  int signal_fd_ = -1;
  int exit_status_ = 0;
  bool failing_ = false;
  int interrupts_ = 0;
  std::chrono::steady_clock::time_point kill_deadline_{};
  std::chrono::steady_clock::time_point term_deadline_{};  // --failure-grace ends
  bool terminating_ = false;                                // SIGTERM sent to the survivors
};

}  // namespace chorusrun
