// The caller's key/value store (chorus::KeyValueStore, e.g. torch's
// c10d::Store behind the PyTorch backend) as the bootstrap's StoreAccess: chorus
// serves nothing and listens on no port; every key it writes starts with the
// caller's prefix.
#include "bootstrap/store.hpp"
#include "common/error.hpp"

#include <algorithm>

namespace chorus::bootstrap {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A wait the caller's store ends this close to its deadline timed out (its
// clock and ours differ by a little); earlier, it failed.
constexpr auto kDeadlineSlack = milliseconds(50);

class ExternalStore final : public StoreAccess {
 public:
  ExternalStore(std::shared_ptr<KeyValueStore> store, std::string key_prefix, milliseconds timeout)
      : store_(std::move(store)), prefix_(std::move(key_prefix)), timeout_(timeout) {
    if (!store_) fail(Status::invalid_argument, "Communicator::init: the key/value store is null");
  }

  void set(const std::string& key, const Bytes& value) override {
    calling("setting", key, [&] { store_->set(full(key), value); });
  }
  Bytes get(const std::string& key) override { return wait_for(key, Clock::now() + timeout_); }
  void wait(const std::vector<std::string>& keys) override {
    const auto deadline = Clock::now() + timeout_;  // one deadline for the whole set
    for (const auto& key : keys) wait_for(key, deadline);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    int64_t value = 0;
    calling("adding to", key, [&] { value = store_->add(full(key), delta); });
    return value;
  }
  bool check(const std::string& key) override {
    bool exists = false;
    calling("checking", key, [&] { exists = store_->check(full(key)); });
    return exists;
  }
  Bytes get_until(const std::string& key, Clock::time_point deadline) override {
    const auto remaining = std::max(milliseconds(1), std::chrono::ceil<milliseconds>(deadline - Clock::now()));
    Bytes value;
    try {
      calling("waiting for", key, [&] { value = store_->get(full(key), remaining); });
    } catch (const Error& e) {
      if (Clock::now() + kDeadlineSlack < deadline) throw;
      throw Error(Status::timeout, concat("no value for key \"", full(key), "\" in the caller's store within ",
                                          remaining.count(), " ms (", e.what(), ")"));
    }
    return value;
  }
  void set_failure_check(std::function<std::optional<Error>()> failure) override { failure_ = std::move(failure); }

 private:
  std::string full(const std::string& key) const { return prefix_.empty() ? key : concat(prefix_, "/", key); }

  // Runs one call of the caller's store; whatever it throws becomes an Error
  // naming the key.
  template <class Call>
  void calling(const char* what, const std::string& key, Call&& call) const {
    try {
      call();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(Status::bootstrap, concat(what, " key \"", full(key), "\" in the caller's store failed: ", e.what()));
    } catch (...) {
      throw Error(Status::bootstrap, concat(what, " key \"", full(key), "\" in the caller's store failed"));
    }
  }

  // Named in failures as the caller's full key.
  Bytes wait_for(const std::string& key, Clock::time_point deadline) {
    if (!failure_ || asking_failure_) return get_until(key, deadline);
    return get_checking_failures([&](Clock::time_point until) { return get_until(key, until); }, full(key), deadline,
                                 failure_, asking_failure_);
  }

  std::shared_ptr<KeyValueStore> store_;
  std::string prefix_;
  milliseconds timeout_;
  std::function<std::optional<Error>()> failure_;
  bool asking_failure_ = false;
};

}  // namespace

std::unique_ptr<StoreAccess> wrap_external_store(std::shared_ptr<KeyValueStore> store, std::string key_prefix,
                                           milliseconds timeout) {
  return std::make_unique<ExternalStore>(std::move(store), std::move(key_prefix), timeout);
}

}  // namespace chorus::bootstrap
