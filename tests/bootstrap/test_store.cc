// StoreServer and StoreClient over real loopback sockets: the operations,
// waiting, atomic counters, secrets, and timeouts on the client side.
#include "bootstrap/store.hpp"
#include "tests/bootstrap/helpers.hpp"

#include <algorithm>
#include <future>
#include <set>
#include <thread>

using namespace chorus;
using namespace chorus::bootstrap;
using namespace chorus::bootstrap::testing;

namespace {

constexpr auto kClientTimeout = milliseconds(5000);
const std::string kSecret = "test-secret-42";

class Store : public ::testing::Test {
 protected:
  StoreServer server{"127.0.0.1", 0, kSecret, milliseconds(2000)};

  std::unique_ptr<StoreClient> client(milliseconds timeout = kClientTimeout) {
    return std::make_unique<StoreClient>("127.0.0.1", server.port(), kSecret, timeout);
  }
};

template <class Body>
Error error_from(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no chorus::Error was thrown";
  return Error(Status::success, "");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_F(Store, SetGetCheckAndAdd) {
  auto store = client();
  EXPECT_FALSE(store->check("k"));
  store->set("k", bytes_of("v1"));
  EXPECT_TRUE(store->check("k"));
  EXPECT_EQ(text_of(store->get("k")), "v1");
  store->set("k", Bytes{0, 1, 2});  // overwrite, binary
  EXPECT_EQ(store->get("k"), (Bytes{0, 1, 2}));
  store->set("empty", Bytes{});
  EXPECT_TRUE(store->get("empty").empty());

  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -7), -2);
  EXPECT_EQ(store->add("n", 0), -2);
  EXPECT_EQ(text_of(store->get("n")), "-2");  // counters are stored as decimal text
}

TEST_F(Store, AddToANonCounterFailsButTheConnectionStaysUsable) {
  auto store = client();
  store->set("text", bytes_of("hello"));
  Error e = error_from([&] { store->add("text", 1); });
  EXPECT_EQ(e.status(), Status::bootstrap);
  EXPECT_TRUE(contains(e.what(), "not a decimal integer")) << e.what();
  EXPECT_EQ(store->add("n", 1), 1);
  EXPECT_EQ(text_of(store->get("text")), "hello");
}

TEST_F(Store, LargestValueRoundTripsAndTooLargeIsRefusedLocally) {
  auto store = client();
  const std::string key = "big";
  Bytes big(frame::kMaxPayload - 8 - key.size());
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  store->set(key, big);
  EXPECT_EQ(store->get(key), big);
  big.push_back(0);
  Error e = error_from([&] { store->set(key, big); });
  EXPECT_EQ(e.status(), Status::invalid_argument);
  EXPECT_TRUE(contains(e.what(), "key \"big\"")) << e.what();
  EXPECT_TRUE(store->check(key));  // nothing was sent: the connection is fine
}

TEST_F(Store, GetWaitsForASetFromAnotherClient) {
  auto waiter = client();
  auto start = Clock::now();
  auto value = std::async(std::launch::async, [&] { return waiter->get("late"); });
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_EQ(value.wait_for(milliseconds(0)), std::future_status::timeout) << "get returned before the set";
  client()->set("late", bytes_of("here"));
  EXPECT_EQ(text_of(value.get()), "here");
  EXPECT_GE(elapsed_since(start), milliseconds(150));
}

TEST_F(Store, WaitReturnsOnceEveryKeyExists) {
  auto waiter = client();
  auto setter = client();
  auto done = std::async(std::launch::async, [&] { waiter->wait({"a", "b", "c"}); });
  setter->set("b", {});
  setter->set("a", {});
  EXPECT_EQ(done.wait_for(milliseconds(100)), std::future_status::timeout);
  setter->add("c", 3);  // ADD creates the key and wakes its waiters too
  done.get();
  EXPECT_TRUE(waiter->check("c"));
}

TEST_F(Store, SetFromTheServingProcessWakesWaiters) {
  auto waiter = client();
  auto value = std::async(std::launch::async, [&] { return waiter->get("from-server"); });
  std::this_thread::sleep_for(milliseconds(50));
  server.set("from-server", bytes_of("published"));
  EXPECT_EQ(text_of(value.get()), "published");
  EXPECT_THROW(server.set(std::string(frame::kMaxKey + 1, 'k'), {}), Error);
}

TEST_F(Store, ConcurrentAddsFromManyThreadsAreAtomic) {
  constexpr int kThreads = 8;
  constexpr int kAddsEach = 200;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto store = client();
      for (int i = 0; i < kAddsEach; ++i) seen[t].push_back(store->add("total", 1));
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<int64_t> all;
  for (const auto& values : seen) all.insert(values.begin(), values.end());
  // Every intermediate total was handed out exactly once.
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kAddsEach));
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kAddsEach);
  EXPECT_EQ(client()->add("total", 0), kThreads * kAddsEach);
}

TEST_F(Store, WrongSecretIsRefusedWhileAGoodClientKeepsWorking) {
  auto good = client();
  good->set("before", bytes_of("1"));
  Error e = error_from([&] { StoreClient("127.0.0.1", server.port(), "not-the-secret", kClientTimeout); });
  EXPECT_EQ(e.status(), Status::bootstrap);
  EXPECT_TRUE(contains(e.what(), "wrong job secret")) << e.what();
  EXPECT_TRUE(contains(e.what(), concat("127.0.0.1:", server.port()))) << e.what();
  // A secret that is a prefix of the real one is just as wrong.
  Error prefix = error_from([&] { StoreClient("127.0.0.1", server.port(), kSecret.substr(0, 4), kClientTimeout); });
  EXPECT_TRUE(contains(prefix.what(), "wrong job secret")) << prefix.what();

  EXPECT_EQ(text_of(good->get("before")), "1");
  good->set("after", bytes_of("2"));
  EXPECT_EQ(text_of(good->get("after")), "2");
  ServerStats stats = server.stats();
  EXPECT_EQ(stats.connections_refused, 2u);
  EXPECT_EQ(stats.connections_accepted, 3u);
  EXPECT_EQ(stats.frames_rejected, 0u);
}

TEST_F(Store, GetTimesOutNamingTheKeyAndTheStore) {
  auto store = client(milliseconds(300));
  auto start = Clock::now();
  Error e = error_from([&] { store->get("never-set"); });
  auto took = elapsed_since(start);
  EXPECT_EQ(e.status(), Status::timeout);
  EXPECT_TRUE(contains(e.what(), "key \"never-set\"")) << e.what();
  EXPECT_TRUE(contains(e.what(), concat("127.0.0.1:", server.port()))) << e.what();
  EXPECT_GE(took, milliseconds(300));
  EXPECT_LT(took, milliseconds(3000));

  // The late reply to the abandoned GET is dropped; the client stays in step.
  client()->set("never-set", bytes_of("late"));
  store->set("next", bytes_of("ok"));
  EXPECT_EQ(text_of(store->get("next")), "ok");
  EXPECT_EQ(text_of(store->get("never-set")), "late");
}

TEST_F(Store, WaitTimesOutNamingTheMissingKey) {
  auto store = client(milliseconds(200));
  store->set("present", {});
  Error e = error_from([&] { store->wait({"present", "absent"}); });
  EXPECT_EQ(e.status(), Status::timeout);
  EXPECT_TRUE(contains(e.what(), "key \"absent\"")) << e.what();
}

// chorusrun records a dead rank in the store; a wait asks about it between
// one-second slices and ends with that error instead of at the timeout.
TEST_F(Store, FailureCheckEndsAWaitWithItsError) {
  auto store = client(milliseconds(20000));
  int asked = 0;
  store->set_failure_check([&]() -> std::optional<Error> {
    ++asked;
    if (!store->check("failed")) return std::nullopt;  // the check may use the client
    return Error(Status::peer_failed, concat("reported: ", text_of(store->get("failed"))), 3);
  });
  auto reporter = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(1500));
    client()->set("failed", bytes_of("rank 3 was killed"));
  });
  auto start = Clock::now();
  Error e = error_from([&] { store->get("never-set"); });
  auto took = elapsed_since(start);
  reporter.get();
  EXPECT_EQ(e.status(), Status::peer_failed);
  EXPECT_EQ(e.peer(), 3);
  EXPECT_TRUE(contains(e.what(), "waiting for key \"never-set\"")) << e.what();
  EXPECT_TRUE(contains(e.what(), "reported: rank 3 was killed")) << e.what();
  EXPECT_GE(took, milliseconds(1500));
  EXPECT_LT(took, milliseconds(5000));
  EXPECT_GE(asked, 1);

  // The abandoned slices' late replies are dropped; the client stays in step.
  client()->set("never-set", bytes_of("late"));
  EXPECT_EQ(text_of(store->get("never-set")), "late");
}

TEST_F(Store, FailureCheckThatFindsNothingLeavesTheTimeoutAsItWas) {
  auto store = client(milliseconds(2500));
  int asked = 0;
  store->set_failure_check([&]() -> std::optional<Error> {
    ++asked;
    return std::nullopt;
  });
  auto start = Clock::now();
  Error e = error_from([&] { store->get("never-set"); });
  EXPECT_EQ(e.status(), Status::timeout);
  EXPECT_TRUE(contains(e.what(), "timed out after 2500 ms waiting for key \"never-set\"")) << e.what();
  EXPECT_GE(elapsed_since(start), milliseconds(2500));
  EXPECT_GE(asked, 2);
  // A value set meanwhile is found at once, between slices or not.
  client()->set("present", bytes_of("v"));
  EXPECT_EQ(text_of(store->get("present")), "v");
}

TEST(StoreConnect, TimesOutWhenNoServerListens) {
  uint16_t port = unused_port();
  auto start = Clock::now();
  Error e = error_from([&] { StoreClient("127.0.0.1", port, kSecret, milliseconds(300)); });
  EXPECT_EQ(e.status(), Status::timeout);
  EXPECT_TRUE(contains(e.what(), concat("127.0.0.1:", port))) << e.what();
  EXPECT_TRUE(contains(e.what(), "Connection refused")) << e.what();
  EXPECT_GE(elapsed_since(start), milliseconds(300));
  EXPECT_LT(elapsed_since(start), milliseconds(3000));
}

TEST(StoreConnect, RetriesUntilTheServerStarts) {
  uint16_t port = unused_port();
  auto connected = std::async(std::launch::async, [&] {
    StoreClient store("127.0.0.1", port, kSecret, milliseconds(5000));
    return store.get("hello");
  });
  std::this_thread::sleep_for(milliseconds(200));
  StoreServer server("127.0.0.1", port, kSecret);
  server.set("hello", bytes_of("world"));
  EXPECT_EQ(text_of(connected.get()), "world");
}

TEST(StoreShutdown, DestroyingTheServerEndsWaitingClientsWithAnError) {
  auto server = std::make_unique<StoreServer>("127.0.0.1", 0, kSecret);
  StoreClient store("127.0.0.1", server->port(), kSecret, milliseconds(5000));
  auto waiting = std::async(std::launch::async, [&] { store.get("never"); });
  std::this_thread::sleep_for(milliseconds(50));
  auto start = Clock::now();
  server.reset();
  EXPECT_LT(elapsed_since(start), milliseconds(1000)) << "the server thread did not stop promptly";
  Error e = error_from([&] { waiting.get(); });
  EXPECT_EQ(e.status(), Status::bootstrap);
  EXPECT_TRUE(contains(e.what(), "closed the connection")) << e.what();
  Error after = error_from([&] { store.check("x"); });
  EXPECT_TRUE(contains(after.what(), "unusable")) << after.what();
}

TEST(StoreServerSetup, BindFailureNamesTheAddress) {
  net::Fd holder = net::listen_on("127.0.0.1", 0);  // SO_REUSEADDR does not allow two listeners
  uint16_t taken = net::local_port(holder.get());
  Error e = error_from([&] { StoreServer second("127.0.0.1", taken, kSecret); });
  EXPECT_EQ(e.status(), Status::bootstrap);
  EXPECT_TRUE(contains(e.what(), concat("127.0.0.1:", taken))) << e.what();
  EXPECT_TRUE(contains(e.what(), "Address already in use")) << e.what();
}

// The PMIx bootstrap's store connection (lazy_store.cc): nothing is opened
// until the first call; a store that has gone fails the first call within
// about a second (not the client's timeout) and every later call at once.
TEST_F(Store, LazyClientConnectsOnlyOnItsFirstCall) {
  auto lazy = lazy_store_client("127.0.0.1", server.port(), kSecret, kClientTimeout, 3, 0);
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(lazy->connected());
  EXPECT_EQ(server.stats().connections_accepted, 0u);
  lazy->set("lazy", Bytes{7});
  EXPECT_TRUE(lazy->connected());
  EXPECT_EQ(lazy->get("lazy"), Bytes{7});
  EXPECT_EQ(lazy->add("lazy/counter", 2), 2);
  EXPECT_EQ(server.stats().connections_accepted, 1u);
}

TEST(LazyStore, AStoreThatHasGoneFailsTheFirstCallWithinASecondAndTheNextAtOnce) {
  uint16_t port = 0;
  {
    StoreServer gone("127.0.0.1", 0, kSecret);
    port = gone.port();
  }
  auto lazy = lazy_store_client("127.0.0.1", port, kSecret, milliseconds(30000), 2, 0);
  const auto start = std::chrono::steady_clock::now();
  const Error first = error_from([&] { lazy->check("x"); });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(5)) << "the client's timeout is 30 s; a gone store must fail in about 1 s";
  EXPECT_TRUE(contains(first.what(), "rank 0, which serves the bootstrap store, has gone")) << first.what();
  EXPECT_FALSE(lazy->connected());
  const auto again = std::chrono::steady_clock::now();
  const Error second = error_from([&] { lazy->set("y", Bytes{1}); });
  EXPECT_LT(std::chrono::steady_clock::now() - again, milliseconds(100));
  EXPECT_STREQ(second.what(), first.what());
}

// Under PMIx even the address is read on first use (the lookup is a PMIx_Get
// of rank 0's record): never before the first call, once, and a lookup that
// fails fails that call and every later one the same way, without asking again.
TEST_F(Store, LazyClientLooksTheAddressUpOnlyOnItsFirstCall) {
  int lookups = 0;
  auto lazy = lazy_store_client(
      [&] {
        ++lookups;
        return StoreLocation{"127.0.0.1", server.port(), kSecret};
      },
      kClientTimeout, 3, 0);
  EXPECT_EQ(lookups, 0);
  lazy->set("located", Bytes{5});
  EXPECT_EQ(lazy->get("located"), Bytes{5});
  EXPECT_EQ(lookups, 1);
  EXPECT_EQ(server.stats().connections_accepted, 1u);
}

TEST(LazyStore, ALookupThatFailsFailsEveryCallTheSameWay) {
  int lookups = 0;
  auto lazy = lazy_store_client(
      [&]() -> StoreLocation {
        ++lookups;
        throw Error(Status::bootstrap, "PMIx_Get(\"chorus.store\" of rank 0): rank 0 has not published it");
      },
      milliseconds(30000), 2, 0);
  const Error first = error_from([&] { lazy->check("x"); });
  EXPECT_EQ(first.status(), Status::bootstrap);
  EXPECT_TRUE(contains(first.what(), "rank 2 cannot find the bootstrap store rank 0 serves")) << first.what();
  EXPECT_TRUE(contains(first.what(), "has not published it")) << first.what();
  const Error second = error_from([&] { lazy->get("y"); });
  EXPECT_STREQ(second.what(), first.what());
  EXPECT_EQ(lookups, 1);
  EXPECT_FALSE(lazy->connected());
}
