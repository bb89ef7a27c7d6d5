// Same-host peers that died without a word (SIGKILL, the OOM killer) in a job
// with no launcher watching them (Communicator::init over a caller's store,
// e.g. under torch.multiprocessing): each rank publishes its pid, its pid
// namespace and its process start time at init, and the failure probe looks
// them up in /proc about once a second, so a survivor names the dead rank in
// about a second instead of at the timeout.
#include "api/communicator_impl.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace chorus {

namespace {

std::string pid_namespace() {
  char target[128] = {0};
  const ssize_t length = readlink("/proc/self/ns/pid", target, sizeof target - 1);
  return length > 0 ? std::string(target, static_cast<size_t>(length)) : std::string();
}

// The state letter and start time (clock ticks since boot) of `pid`, or
// nullopt when it has no /proc entry.
struct ProcessStat {
  char state = '?';
  uint64_t flags = 0;
  uint64_t start_time = 0;
};
// PF_EXITING (include/linux/sched.h): the process is being torn down, which
// takes a while for one with large mappings; it never runs again.
constexpr uint64_t kExitingFlag = 0x4;
std::optional<ProcessStat> read_stat(long pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(file, line)) return std::nullopt;
  // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  ProcessStat stat;
  fields >> stat.state;
  std::string skipped;
  for (int field = 4; field < 9; ++field) fields >> skipped;   // fields 4..8
  fields >> stat.flags;                                         // field 9
  for (int field = 10; field < 22; ++field) fields >> skipped;  // fields 10..21
  fields >> stat.start_time;                                    // field 22
  return stat;
}

}  // namespace

std::string LocalLiveness::describe_self() {
  const std::optional<ProcessStat> own = read_stat(getpid());
  return concat(pid_namespace(), "|", getpid(), "|", own ? own->start_time : 0);
}

LocalLiveness::LocalLiveness(const std::vector<bootstrap::Bytes>& descriptions, const std::vector<bootstrap::Bytes>& hosts,
                             int self) {
  const std::string mine(descriptions.at(static_cast<size_t>(self)).begin(), descriptions.at(static_cast<size_t>(self)).end());
  const std::string my_namespace = mine.substr(0, mine.find('|'));
  for (size_t rank = 0; rank < descriptions.size(); ++rank) {
    if (static_cast<int>(rank) == self || hosts[rank] != hosts[static_cast<size_t>(self)]) continue;
    std::istringstream text(std::string(descriptions[rank].begin(), descriptions[rank].end()));
    std::string pid_ns, pid, start;
    std::getline(text, pid_ns, '|');
    std::getline(text, pid, '|');
    std::getline(text, start, '|');
    // Only a peer in this pid namespace has a meaningful pid here.
    if (pid_ns.empty() || pid_ns != my_namespace) continue;
    peers_.push_back({static_cast<int>(rank), std::stol(pid), std::stoull(start)});
  }
}

std::optional<Error> LocalLiveness::dead_peer() const {
  // Every peer that is gone, not just the first: survivors that raised and
  // exited may be gone too by the time a slower rank looks.
  std::string gone;
  int first = -1;
  for (const Peer& peer : peers_) {
    const std::optional<ProcessStat> stat = read_stat(peer.pid);
    if (stat && stat->state != 'Z' && stat->state != 'X' && (stat->flags & kExitingFlag) == 0 &&
        stat->start_time == peer.start_time) {
      continue;
    }
    gone += concat(gone.empty() ? "" : ", ", "rank ", peer.rank, " (pid ", peer.pid, ")");
    if (first < 0) first = peer.rank;
  }
  if (first < 0) return std::nullopt;
  return Error(Status::peer_failed,
               concat(gone, " on this host exited or was killed without leaving the job"), first);
}

}  // namespace chorus
