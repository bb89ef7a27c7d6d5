// The store connection under PMIx (docs/bootstrap.md, "No connection to rank
// 0"): rank 0 puts its store's address into PMIx at setup, but a rank reads
// it and connects only when it first needs the store: to announce that it
// leaves after an error, or in a wait that has stalled (departures, the call
// ledger). A healthy job opens no connection to rank 0.
#include <mutex>

#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "common/log.hpp"

namespace chorus::bootstrap {

namespace {

constexpr auto kConnectWithin = std::chrono::milliseconds(1000);

class LazyStoreClient final : public LazyStore {
 public:
  LazyStoreClient(std::function<StoreLocation()> locate, std::chrono::milliseconds timeout, int rank, int served_by)
      : locate_(std::move(locate)), timeout_(timeout), rank_(rank), served_by_(served_by) {}

  void set(const std::string& key, const Bytes& value) override { client(key).set(key, value); }
  Bytes get(const std::string& key) override { return client(key).get(key); }
  void wait(const std::vector<std::string>& keys) override {
    client(keys.empty() ? std::string() : keys.front()).wait(keys);
  }
  int64_t add(const std::string& key, int64_t delta) override { return client(key).add(key, delta); }
  bool check(const std::string& key) override { return client(key).check(key); }
  Bytes get_until(const std::string& key, std::chrono::steady_clock::time_point deadline) override {
    return client(key).get_until(key, deadline);
  }
  void set_failure_check(std::function<std::optional<Error>()> failure) override {
    std::lock_guard lock(mutex_);
    failure_ = std::move(failure);
    if (client_) client_->set_failure_check(failure_);
  }
  bool connected() const override {
    std::lock_guard lock(mutex_);
    return client_ != nullptr;
  }

 private:
  std::function<StoreLocation()> locate_;
  std::chrono::milliseconds timeout_;
  int rank_;
  int served_by_;
  mutable std::mutex mutex_;  // the progress thread's failure probe and the caller may both be first
  std::function<std::optional<Error>()> failure_;
  std::unique_ptr<StoreClient> client_;
  std::optional<Error> unreachable_;  // the first connection failed: every later call fails the same way

  // The connection, opened by the first call (`key` names what needed it, for the log).
  StoreClient& client(const std::string& key) {
    std::lock_guard lock(mutex_);
    if (unreachable_) throw *unreachable_;
    if (!client_) {
      // Rank 0 started the store before it published its address: a refused
      // connection means rank 0 has gone (finalized, or died), so a second of
      // retries is enough; callers must not wait CHORUS_TIMEOUT for it.
      std::unique_ptr<StoreClient> client;
      StoreLocation where;
      try {
        where = locate_();
      } catch (const Error& e) {
        unreachable_ = Error(e.status(), concat("rank ", rank_, " cannot find the bootstrap store rank ", served_by_,
                                                " serves: ", e.what()));
        throw *unreachable_;
      }
      try {
        client = std::make_unique<StoreClient>(where.host, where.port, where.secret, timeout_,
                                               std::min<std::chrono::milliseconds>(timeout_, kConnectWithin));
      } catch (const Error& e) {
        // Not a failure of rank 0's: it may have finished normally.
        unreachable_ =
            Error(e.status(), concat("rank ", served_by_, ", which serves the bootstrap store, has gone: ", e.what()));
        throw *unreachable_;
      }
      if (served_by_ >= 0 && served_by_ != rank_) client->set_served_by(served_by_);
      if (failure_) client->set_failure_check(failure_);
      client_ = std::move(client);
      log::debug("rank ", rank_, " connected to the bootstrap store at ", net::format_address(where.host, where.port),
                 " when it first needed it (key \"", key, "\")");
    }
    return *client_;
  }
};

}  // namespace

std::unique_ptr<LazyStore> lazy_store_client(std::string host, uint16_t port, std::string secret,
                                             std::chrono::milliseconds timeout, int rank, int served_by) {
  StoreLocation where{std::move(host), port, std::move(secret)};
  return lazy_store_client([where] { return where; }, timeout, rank, served_by);
}

std::unique_ptr<LazyStore> lazy_store_client(std::function<StoreLocation()> locate, std::chrono::milliseconds timeout,
                                             int rank, int served_by) {
  return std::make_unique<LazyStoreClient>(std::move(locate), timeout, rank, served_by);
}

}  // namespace chorus::bootstrap
