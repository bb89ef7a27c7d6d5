// Running the ranks of one job: spawning (fork/exec locally, the remote shell
// for other hosts), forwarding their output line by line with a [rank]
// prefix, forwarding signals, and stopping everyone when one rank fails.
#pragma once

#include "options.hpp"

#include <sys/types.h>

#include <chrono>
#include <functional>
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

class Job {
 public:
  // `publish_failure` records the first failure in the store; `context`
  // adds what the store knows that explains it (ranks that left before).
  Job(const Options& options, std::vector<RankPlacement> placement, JobEnvironment environment,
      std::function<void(int rank, const std::string&)> publish_failure, std::function<std::string()> context = {});
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
  bool only_stopped_ranks_left() const;
  void terminate_others();
  void signal_all(int signal_number);
  void forward_output(Stream& stream, bool at_end);
  bool all_ended() const;

  const Options& options_;
  JobEnvironment environment_;
  std::function<void(int rank, const std::string&)> publish_failure_;
  std::function<std::string()> context_;
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
