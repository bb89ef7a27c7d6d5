// torch's c10d::Store (the one torch.distributed hands a backend: a
// PrefixStore over the TCPStore, FileStore or HashStore of init_process_group)
// as the chorus::KeyValueStore that Communicator::init bootstraps over.
#pragma once

#include <chorus/chorus.hpp>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <mutex>

namespace chorus_torch {

class TorchStore final : public chorus::KeyValueStore {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    std::lock_guard lock(mutex_);
    store_->set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::lock_guard lock(mutex_);
    store_->wait({key}, timeout);  // throws when the key does not appear in time
    return store_->get(key);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard lock(mutex_);
    return store_->add(key, delta);
  }
  bool check(const std::string& key) override {
    std::lock_guard lock(mutex_);
    return store_->check({key});
  }

 private:
  // chorus calls from the caller's thread and its progress thread; one at a
  // time keeps any c10d::Store implementation safe.
  std::mutex mutex_;
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace chorus_torch
