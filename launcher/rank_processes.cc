#include "rank_processes.hpp"

#include "common/shm_regions.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>

namespace chorusrun {

namespace {

using Clock = std::chrono::steady_clock;

// Signals chorusrun handles itself (through a signalfd) and forwards.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (int s : kForwarded) sigaddset(&set, s);
  return set;
}

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own stdout is gone: nothing better to do
    done += static_cast<size_t>(n);
  }
}

void say(const std::string& message) { write_all(STDERR_FILENO, "chorusrun: " + message + "\n"); }

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// A failed exec in the child: tell the user, in the child's stderr.
[[noreturn]] void child_fail(const char* what, const char* program) {
  std::string message = std::string("chorusrun: cannot start ") + program + ": " + what + ": " + strerror(errno) + "\n";
  write_all(STDERR_FILENO, message);
  _exit(127);
}

}  // namespace

struct Job::Stream {
  int fd = -1;
  int target = STDOUT_FILENO;
  std::string pending;  // bytes after the last newline
  int rank = 0;
};

struct Job::Rank {
  RankPlacement placement;
  pid_t pid = -1;
  bool ended = false;
  bool stopped = false;  // by a signal (SIGSTOP, SIGTSTP, ...): alive but never progressing
  int status = 0;
  Stream out, err;
};

void block_handled_signals() {
  sigset_t set = handled_signals();
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) throw std::runtime_error("pthread_sigmask failed");
}

std::vector<RankPlacement> place_ranks(const Options& options) {
  std::vector<RankPlacement> placement;
  if (options.hosts.empty()) {
    for (int r = 0; r < options.ranks; ++r) placement.push_back({r, "", r, options.ranks});
    return placement;
  }
  // By slot each host fills up in order; by node the hosts take one rank each
  // in turn. Ranks beyond every slot (--oversubscribe) go round-robin.
  const size_t hosts = options.hosts.size();
  std::vector<int> used(hosts, 0);
  size_t next = 0;
  size_t overflow = 0;
  std::vector<size_t> host_of;
  for (int r = 0; r < options.ranks; ++r) {
    size_t chosen = hosts;
    for (size_t step = 0; step < hosts && chosen == hosts; ++step) {
      const size_t h = options.map_by_node ? (next + step) % hosts : step;
      if (used[h] < options.hosts[h].slots) chosen = h;
    }
    if (chosen == hosts) chosen = overflow++ % hosts;
    next = chosen + 1;
    host_of.push_back(chosen);
    placement.push_back({r, options.hosts[chosen].name, used[chosen]++, 0});
  }
  for (size_t r = 0; r < placement.size(); ++r) placement[r].local_size = used[host_of[r]];
  return placement;
}

Job::Job(const Options& options, std::vector<RankPlacement> placement, JobEnvironment environment, StoreHooks store)
    : options_(options), environment_(std::move(environment)), store_(std::move(store)) {
  for (auto& p : placement) {
    Rank rank;
    rank.placement = p;
    ranks_.push_back(std::move(rank));
  }
  block_handled_signals();
  sigset_t set = handled_signals();
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) throw std::runtime_error(std::string("signalfd: ") + strerror(errno));
}

Job::~Job() {
  if (signal_fd_ >= 0) close(signal_fd_);
}

void Job::spawn(Rank& rank) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe2: ") + strerror(errno));
  }
  // Build everything before fork: the child only calls async-signal-safe code.
  std::vector<std::string> env = environment_.variables;
  const RankPlacement& p = rank.placement;
  env.push_back("CHORUS_RANK=" + std::to_string(p.rank));
  env.push_back("CHORUS_SIZE=" + std::to_string(ranks_.size()));
  env.push_back("CHORUS_LOCAL_RANK=" + std::to_string(p.local_rank));
  env.push_back("CHORUS_LOCAL_SIZE=" + std::to_string(p.local_size));
  std::vector<std::string> args;
  if (p.host.empty()) {
    args = options_.program;
  } else {
    // Remote: <rsh> host env VAR=... program args (the remote shell starts a fresh environment).
    args = {options_.rsh, p.host, "env"};
    for (const auto& variable : env) args.push_back(variable);
    args.insert(args.end(), options_.program.begin(), options_.program.end());
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // One value per name (getenv returns the first): inherited, then chorusrun's, then -x.
  std::map<std::string, std::string> merged;
  auto add = [&merged](const std::string& entry) {
    auto equals = entry.find('=');
    if (equals != std::string::npos) merged[entry.substr(0, equals)] = entry;
  };
  for (char** e = environ; *e != nullptr; ++e) add(*e);
  for (const auto& entry : env) add(entry);
  std::vector<std::string> full_env;
  for (auto& [name, entry] : merged) full_env.push_back(entry);
  std::vector<char*> envp;
  for (auto& e : full_env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // ranks never outlive chorusrun
    if (getppid() != parent) _exit(127);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    sigset_t set = handled_signals();
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    // execvpe searches PATH for the remote shell; the local program is resolved already.
    execvpe(argv[0], argv.data(), envp.data());
    child_fail("exec failed", argv[0]);
  }
  setpgid(pid, pid);  // also here, so killpg works even before the child ran
  close(out[1]);
  close(err[1]);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  rank.pid = pid;
  rank.out = Stream{out[0], STDOUT_FILENO, "", p.rank};
  rank.err = Stream{err[0], STDERR_FILENO, "", p.rank};
  if (options_.verbose) {
    say("started rank " + std::to_string(p.rank) + " (pid " + std::to_string(pid) + (p.host.empty() ? "" : " via " + options_.rsh + " on " + p.host) + ")");
  }
}

void Job::forward_output(Stream& stream, bool at_end) {
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(stream.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (!at_end) return;
      break;  // draining: take what is there and close
    }
    if (n <= 0) {
      at_end = true;
      break;
    }
    stream.pending.append(buffer, static_cast<size_t>(n));
    if (!at_end) break;  // one read per wakeup keeps ranks fair
  }
  std::string prefix = options_.tag_output ? "[" + std::to_string(stream.rank) + "] " : "";
  std::string lines;
  size_t start = 0;
  for (size_t newline; (newline = stream.pending.find('\n', start)) != std::string::npos; start = newline + 1) {
    lines += prefix;
    lines.append(stream.pending, start, newline + 1 - start);
  }
  stream.pending.erase(0, start);
  // Very long lines are flushed in pieces; a partial last line at EOF gets its newline.
  if (stream.pending.size() > 65536 || (at_end && !stream.pending.empty())) {
    lines += prefix + stream.pending + "\n";
    stream.pending.clear();
  }
  if (!lines.empty()) write_all(stream.target, lines);
  if (at_end) {
    close(stream.fd);
    stream.fd = -1;
  }
}

void Job::signal_all(int signal_number) {
  for (Rank& rank : ranks_) {
    if (!rank.ended && rank.pid > 0) killpg(rank.pid, signal_number);
  }
}

// The first failure decides the exit status and is published in the store,
// so every survivor's error can name the rank that really failed.
std::string Job::who(const Rank& rank) const {
  const RankPlacement& p = rank.placement;
  return "rank " + std::to_string(p.rank) + " (pid " + std::to_string(rank.pid) + " on " +
         (p.host.empty() ? "localhost" : p.host) + ")";
}

void Job::fail_job(const Rank& failed, const std::string& what, int exit_status) {
  if (failing_) return;
  failing_ = true;
  exit_status_ = exit_status;
  int alive = 0;
  for (const Rank& rank : ranks_) alive += (!rank.ended && &rank != &failed) ? 1 : 0;
  std::string message = who(failed) + " " + what;
  int named = failed.placement.rank;
  std::optional<std::pair<int, std::string>> dropped;
  if (left_early_rank_ < 0 && store_.left_without_finalize) dropped = store_.left_without_finalize();
  if (left_early_rank_ >= 0 && left_early_rank_ != named) {
    // The rank that left first caused this failure: it is named first.
    message = left_early_ + "; then " + message;
    named = left_early_rank_;
  } else if (dropped && dropped->first != named) {
    message = dropped->second + " while the others still ran; then " + message;
    named = dropped->first;
  } else if (store_.context) {
    message += store_.context();
  }
  say(message + (alive > 0 ? "; stopping the other " + std::to_string(alive) + " rank" + (alive == 1 ? "" : "s") : ""));
  if (store_.publish_failure) store_.publish_failure(named, message);
  if (options_.failure_grace_seconds > 0) {
    // The survivors see the failure through chorus and exit on their own;
    // whoever is still running when the grace ends is stopped.
    term_deadline_ = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options_.failure_grace_seconds * 1000));
    return;
  }
  terminate_others();
}

// A rank that exits with status 0 is a fault when the others are not done
// with it: exit(0) or _exit(0) mid-job, a Communicator dropped without
// finalize(), a return before init while the others wait for it there. The
// store tells which (StoreHooks::left_early).
void Job::judge_clean_exit(Rank& rank) {
  if (!store_.left_early || failing_) return;
  std::string how;
  try {
    how = store_.left_early(rank.placement.rank, who(rank));
  } catch (const std::exception& e) {
    say("cannot tell from the store how " + who(rank) + " left: " + e.what());
    return;
  }
  if (how.empty()) return;
  if (how == kNeverJoined) {
    left_before_joining_.push_back(rank.placement.rank);
    fail_if_others_joined();
    return;
  }
  if (left_early_rank_ >= 0) return;
  left_early_rank_ = rank.placement.rank;
  left_early_ = who(rank) + " " + how;
  if (!all_ended()) say(left_early_ + "; the ranks that still need it will fail naming it");
}

// Ranks that ended before anyone joined: a fault as soon as another rank
// joins, for the others then wait for them in init.
void Job::fail_if_others_joined() {
  if (left_before_joining_.empty() || failing_ || !store_.anyone_joined || !store_.anyone_joined()) return;
  for (Rank& rank : ranks_) {
    if (rank.placement.rank != left_before_joining_.front()) continue;
    fail_job(rank,
             "exited with status 0 without joining the job: it never called init (or returned before it), and "
             "the other ranks wait for it there",
             1);
  }
}

bool Job::only_stopped_ranks_left() const {
  return std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.ended || r.stopped; });
}

void Job::terminate_others() {
  terminating_ = true;
  signal_all(SIGTERM);
  // A stopped rank cannot act on SIGTERM until continued: it gets SIGKILL now.
  for (Rank& rank : ranks_) {
    if (!rank.ended && rank.stopped && rank.pid > 0) killpg(rank.pid, SIGKILL);
  }
  // Grace for a clean exit, bounded by the job's timeout.
  double grace = 2.0;
  if (options_.timeout_seconds > 0) grace = std::min(grace, options_.timeout_seconds);
  kill_deadline_ = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace * 1000));
}

void Job::on_rank_ended(Rank& rank, int status) {
  rank.ended = true;
  rank.stopped = false;
  rank.status = status;
  bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Whatever the way it ended (a signal, exit() without destructors, an
  // error before its peers attached), nothing named after it may stay in
  // /dev/shm: libfabric's shm queues and chorus' segments are "<pid>:...".
  if (rank.placement.host.empty()) chorus::shm_regions::remove_stale(rank.pid);
  if (failed) {
    fail_job(rank, describe_status(status), exit_code_of(status));
  } else {
    judge_clean_exit(rank);
  }
}

// A stopped rank never progresses, so its peers would wait for it until
// their timeout: it counts as failed (and is killed with the job).
void Job::on_rank_stopped(Rank& rank, int signal_number) {
  rank.stopped = true;
  fail_job(rank, "was stopped by signal " + std::to_string(signal_number) + " (" + strsignal(signal_number) + ")",
           128 + signal_number);
}

void Job::reap_children() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED);
    if (pid <= 0) return;
    for (Rank& rank : ranks_) {
      if (rank.pid != pid) continue;
      if (WIFSTOPPED(status)) {
        on_rank_stopped(rank, WSTOPSIG(status));
      } else {
        on_rank_ended(rank, status);
      }
    }
  }
}

void Job::handle_signal(int signal_number) {
  if (signal_number == SIGCHLD) return reap_children();
  if (signal_number == SIGINT && ++interrupts_ >= 2) {
    say("second interrupt: killing every rank");
    return signal_all(SIGKILL);
  }
  if (options_.verbose) say(std::string("forwarding ") + strsignal(signal_number) + " to every rank");
  signal_all(signal_number);
}

bool Job::all_ended() const {
  return std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.ended; });
}

int Job::run() {
  for (Rank& rank : ranks_) {
    try {
      spawn(rank);
    } catch (const std::exception& e) {
      say(std::string("cannot start rank ") + std::to_string(rank.placement.rank) + ": " + e.what());
      signal_all(SIGKILL);
      for (Rank& unstarted : ranks_) unstarted.ended = unstarted.ended || unstarted.pid < 0;
      exit_status_ = 1;
      failing_ = true;
      break;
    }
  }
  Clock::time_point drain_deadline{};
  for (;;) {
    std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
    std::vector<Stream*> streams;
    for (Rank& rank : ranks_) {
      for (Stream* s : {&rank.out, &rank.err}) {
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
    }
    bool ended = all_ended();
    if (ended && streams.empty()) break;
    if (ended && drain_deadline == Clock::time_point{}) drain_deadline = Clock::now() + std::chrono::seconds(1);
    if (ended && Clock::now() > drain_deadline) {
      // A grandchild still holds a pipe open: do not wait for it.
      for (Stream* s : streams) forward_output(*s, true);
      break;
    }
    // A rank that left before anyone joined is judged once someone does.
    int timeout_ms = (failing_ || ended) ? 100 : !left_before_joining_.empty() ? 200 : -1;
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      say(std::string("poll failed: ") + strerror(errno));
      signal_all(SIGKILL);
      return 1;
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info;
      while (::read(signal_fd_, &info, sizeof info) == sizeof info) handle_signal(static_cast<int>(info.ssi_signo));
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) forward_output(*streams[i - 1], false);
    }
    reap_children();  // SIGCHLD may coalesce
    fail_if_others_joined();
    // Nobody left to report: a stopped rank need not wait out the grace.
    if (failing_ && !terminating_ && !all_ended() && (Clock::now() > term_deadline_ || only_stopped_ranks_left())) {
      terminate_others();
    }
    if (failing_ && terminating_ && !all_ended() && Clock::now() > kill_deadline_) signal_all(SIGKILL);
  }
  // Without a failure, a rank killed by a forwarded signal still decides the status.
  if (!failing_) {
    for (const Rank& rank : ranks_) {
      if (rank.status != 0) return exit_code_of(rank.status);
    }
  }
  return exit_status_;
}

}  // namespace chorusrun
