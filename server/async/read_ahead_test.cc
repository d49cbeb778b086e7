#include "server/async/read_ahead.h"

#include "gtest/gtest.h"

namespace kvtier {
namespace {

using Step = ReadAhead::Step;

TEST(ReadAheadTest, OneChunkThenTheEndCommitInOneDrain) {
  ReadAhead a;
  ReadAhead::Arrival first = a.Arrived(true);  // chunk 0 filled buffer 0
  EXPECT_FALSE(first.ignored);
  EXPECT_EQ(first.read_into, 1);  // the end of the stream is read meanwhile
  EXPECT_TRUE(first.submit_drain);
  // The end arrives while the drain stores chunk 0: no second drain.
  ReadAhead::Arrival end = a.Arrived(false);
  EXPECT_EQ(end.read_into, ReadAhead::kNoRead);
  EXPECT_FALSE(end.submit_drain);

  Step s = a.Next();
  EXPECT_EQ(s.kind, Step::kStore);
  EXPECT_EQ(s.buffer, 0);
  EXPECT_EQ(a.Stored(), ReadAhead::kNoRead);
  EXPECT_EQ(a.Next().kind, Step::kCommit);
}

TEST(ReadAheadTest, AnIdleDrainEndsAndTheNextArrivalSubmitsAnother) {
  ReadAhead a;
  EXPECT_TRUE(a.Arrived(true).submit_drain);
  EXPECT_EQ(a.Next().buffer, 0);
  EXPECT_EQ(a.Stored(), ReadAhead::kNoRead);  // the read into 1 is in flight
  EXPECT_EQ(a.Next().kind, Step::kIdle);      // this drain ends
  ReadAhead::Arrival second = a.Arrived(true);
  EXPECT_TRUE(second.submit_drain);
  EXPECT_EQ(second.read_into, 0);  // buffer 0 is free again
  Step s = a.Next();
  EXPECT_EQ(s.kind, Step::kStore);
  EXPECT_EQ(s.buffer, 1);
  EXPECT_EQ(a.Stored(), ReadAhead::kNoRead);
  EXPECT_EQ(a.Next().kind, Step::kIdle);
  EXPECT_TRUE(a.Arrived(false).submit_drain);
  EXPECT_EQ(a.Next().kind, Step::kCommit);
}

TEST(ReadAheadTest, BothBuffersFilledHoldTheReadUntilOneIsStored) {
  ReadAhead a;
  EXPECT_EQ(a.Arrived(true).read_into, 1);
  ReadAhead::Arrival full = a.Arrived(true);  // before the drain stored chunk 0
  EXPECT_EQ(full.read_into, ReadAhead::kNoRead);
  EXPECT_FALSE(full.submit_drain);
  // Chunks leave in arrival order; each store frees the buffer the waiting
  // read then fills.
  EXPECT_EQ(a.Next().buffer, 0);
  EXPECT_EQ(a.Stored(), 0);
  EXPECT_EQ(a.Next().buffer, 1);
  EXPECT_EQ(a.Stored(), ReadAhead::kNoRead);  // the read into 0 is in flight
  EXPECT_EQ(a.Next().kind, Step::kIdle);
  EXPECT_EQ(a.Arrived(true).read_into, 1);
  EXPECT_EQ(a.Next().buffer, 0);
  EXPECT_EQ(a.Stored(), ReadAhead::kNoRead);
  EXPECT_FALSE(a.Arrived(false).submit_drain);  // that drain still runs
  EXPECT_EQ(a.Next().kind, Step::kCommit);
}

TEST(ReadAheadTest, NoReadStartsAfterFinish) {
  ReadAhead a;
  a.Arrived(true);
  a.Arrived(true);  // both filled: the next read waits
  EXPECT_EQ(a.Next().buffer, 0);
  a.Finish();  // the drain failed to store chunk 0 and answers
  EXPECT_EQ(a.Stored(), ReadAhead::kNoRead);
  ReadAhead::Arrival late = a.Arrived(false);  // a read Finish cut short
  EXPECT_TRUE(late.ignored);
  EXPECT_EQ(late.read_into, ReadAhead::kNoRead);
  EXPECT_FALSE(late.submit_drain);
}

TEST(ReadAheadTest, AReadInFlightAtFinishIsIgnored) {
  ReadAhead a;
  EXPECT_EQ(a.Arrived(true).read_into, 1);
  EXPECT_EQ(a.Next().buffer, 0);
  a.Finish();
  EXPECT_TRUE(a.Arrived(true).ignored);
}

}  // namespace
}  // namespace kvtier
