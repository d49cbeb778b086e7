#include "events/zmq_event_publisher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "msgpack.hpp"
#include "storage/block_cache.h"
#include "testing/host_tier_fixture.h"  // Key
#include "testing/small_cache.h"
#include "zmq.hpp"
#include "zmq_addon.hpp"

namespace kvtier {
namespace {

constexpr uint64_t kKiB = 1024;

int64_t Seq(const zmq::message_t& m) {
  EXPECT_EQ(m.size(), 8u);
  uint64_t u = 0;
  for (size_t i = 0; i < 8; ++i) u = (u << 8) | static_cast<const uint8_t*>(m.data())[i];
  return static_cast<int64_t>(u);
}

class ZmqEventPublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = SmallCache(&clock_);
    ns_ = OpenSmallNamespace(*cache_, "model-a", 16);  // 8 KiB blocks
    bus_ = AttachEventBus(cache_.get());
    const std::string base = absl::StrCat("ipc:///tmp/kvtier-events-test-", getpid());
    options_.endpoint = base + ".pub";
    options_.replay_endpoint = base + ".replay";
    options_.topic = "kv@";
    options_.int_hashes = false;  // keys as bytes: readable below
  }
  void TearDown() override {
    publisher_.reset();
    cache_->SetEventSink(nullptr);
  }

  void Start() {
    auto p = ZmqEventPublisher::Create(
        options_, bus_.get(),
        [this](const NamespaceId& ns) -> std::optional<ZmqEventPublisher::NamespaceInfo> {
          if (!(ns == ns_)) return std::nullopt;
          return ZmqEventPublisher::NamespaceInfo{"model-a", 16};
        });
    ASSERT_TRUE(p.ok()) << p.status();
    publisher_ = *std::move(p);
  }

  void Put(const std::vector<std::string>& chain) {
    auto batch = *cache_->BeginPut(ns_);
    std::string parent;
    const std::vector<uint8_t> bytes(8 * kKiB, 3);  // 16 tokens of the layout
    for (const std::string& k : chain) {
      ASSERT_TRUE(
          batch->StartBlock(Key(k), parent.empty() ? BlockKey() : Key(parent), bytes.size()).ok());
      ASSERT_TRUE(batch->Append(bytes).ok());
      parent = k;
    }
    ASSERT_TRUE(batch->Commit().ok());
  }

  FakeClock clock_;
  std::unique_ptr<BlockCache> cache_;
  std::unique_ptr<BlockEventBus> bus_;
  std::unique_ptr<ZmqEventPublisher> publisher_;
  ZmqEventPublisherOptions options_;
  NamespaceId ns_;
};

TEST_F(ZmqEventPublisherTest, SubscriberGetsVllmFramesAndReplayReturnsThem) {
  Put({"pre"});  // held before the publisher starts: published as its snapshot
  Start();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (publisher_->messages_published() < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(publisher_->messages_published(), 1u);  // the snapshot
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "kv@");
  sub.set(zmq::sockopt::rcvtimeo, 200);
  sub.connect(options_.endpoint);
  // A subscription takes a moment to reach the publisher (messages before
  // it are not delivered): store chains until one arrives.
  std::vector<zmq::message_t> frames;
  int chains = 0;
  while (frames.empty() && absl::Now() < deadline) {
    Put({absl::StrCat("a", chains), absl::StrCat("b", chains)});
    ++chains;
    if (!zmq::recv_multipart(sub, std::back_inserter(frames))) frames.clear();
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].to_string(), "kv@");
  const int64_t seq = Seq(frames[1]);
  EXPECT_GE(seq, 1);  // seq 0 was the snapshot
  msgpack::object_handle h =
      msgpack::unpack(static_cast<const char*>(frames[2].data()), frames[2].size());
  const msgpack::object& events = h.get().via.array.ptr[1];
  ASSERT_GE(events.via.array.size, 1u);  // a chain per BlockStored
  const msgpack::object& stored = events.via.array.ptr[0];
  EXPECT_EQ(stored.via.array.ptr[0].as<std::string>(), "BlockStored");
  // A chain committed at once may still be split across two batches (the
  // dispatcher can take the queue between its blocks), and the subscription
  // may have joined between them: [a, b], [a] or [b] (child of a).
  const msgpack::object& hashes = stored.via.array.ptr[1];
  ASSERT_GE(hashes.via.array.size, 1u);
  ASSERT_LE(hashes.via.array.size, 2u);
  const std::string first = hashes.via.array.ptr[0].as<std::string>();
  if (first[0] == 'a') {
    EXPECT_EQ(stored.via.array.ptr[2].type, msgpack::type::NIL);  // a root
    if (hashes.via.array.size == 2) {
      EXPECT_EQ(hashes.via.array.ptr[1].as<std::string>(), "b" + first.substr(1));
    }
  } else {
    EXPECT_EQ(first[0], 'b');
    EXPECT_EQ(hashes.via.array.size, 1u);
    EXPECT_EQ(stored.via.array.ptr[2].as<std::string>(), "a" + first.substr(1));  // its parent
  }
  EXPECT_EQ(stored.via.array.ptr[6].as<std::string>(), "CPU");
  EXPECT_EQ(stored.via.array.ptr[4].as<uint32_t>(), 16u);
  const uint64_t want_events = 1u + 2u * static_cast<uint64_t>(chains);
  while (publisher_->events_published() < want_events && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(publisher_->events_published(), want_events);
  const uint64_t messages = publisher_->messages_published();

  // Replay from 0: the snapshot (AllBlocksCleared + pre) and every chain, then the end.
  zmq::socket_t replay(ctx, zmq::socket_type::dealer);
  replay.set(zmq::sockopt::rcvtimeo, 10000);
  replay.connect(options_.replay_endpoint);
  const char zero[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  replay.send(zmq::message_t(), zmq::send_flags::sndmore);
  replay.send(zmq::buffer(zero, 8), zmq::send_flags::none);
  std::vector<int64_t> seqs;
  for (;;) {
    std::vector<zmq::message_t> r;
    ASSERT_TRUE(zmq::recv_multipart(replay, std::back_inserter(r)));
    ASSERT_EQ(r.size(), 3u);  // empty, seq, payload (vLLM's replay)
    EXPECT_EQ(r[0].size(), 0u);
    const int64_t seq = Seq(r[1]);
    if (seq == -1) {
      EXPECT_EQ(r[2].size(), 0u);
      break;
    }
    seqs.push_back(seq);
    if (seq == 0) {
      h = msgpack::unpack(static_cast<const char*>(r[2].data()), r[2].size());
      const msgpack::object& first = h.get().via.array.ptr[1];
      ASSERT_EQ(first.via.array.size, 2u);  // the stream starts with a clear, then the contents
      EXPECT_EQ(first.via.array.ptr[0].via.array.ptr[0].as<std::string>(), "AllBlocksCleared");
      EXPECT_EQ(first.via.array.ptr[1].via.array.ptr[1].via.array.ptr[0].as<std::string>(), "pre");
    }
  }
  std::vector<int64_t> want(messages);
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<int64_t>(i);
  EXPECT_EQ(seqs, want);
}

TEST_F(ZmqEventPublisherTest, ModelFilterAndAnEmptyStartingCache) {
  options_.model = "another-model";
  Start();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (publisher_->messages_published() < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(publisher_->messages_published(), 1u);  // AllBlocksCleared alone
  Put({"a", "b"});                                  // model-a: not published
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(publisher_->messages_published(), 1u);
  EXPECT_EQ(publisher_->events_published(), 0u);
}

TEST_F(ZmqEventPublisherTest, BadEndpointsAreClearErrors) {
  options_.endpoint = "localhost:5557";
  EXPECT_EQ(ZmqEventPublisher::Create(options_, bus_.get(), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  options_.endpoint = "tcp://256.1.1.1:1";
  EXPECT_EQ(ZmqEventPublisher::Create(options_, bus_.get(), {}).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace kvtier
