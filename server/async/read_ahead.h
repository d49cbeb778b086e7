// ReadAhead: the bookkeeping of a streaming call that reads one message
// ahead of the worker storing them (KvCacheService's Put). Two message
// buffers: while a worker stores one, the next read fills the other. One
// drain at a time takes the filled buffers in arrival order, then the end of
// the stream; the reactions only record what arrived and say which read to
// start. Nothing here touches gRPC: the caller starts the reads and submits
// the drain as told.
//
// Invariants: at most one read is in flight, always into a buffer that is
// not filled; a filled buffer is only read by the drain; after Finish no read
// starts again (one in flight ends, and its arrival is ignored).
//
// Thread-safety: not thread-safe; the owner serializes every call (the
// call's mutex), and calls each method on the thread the comment names.
#ifndef KVTIER_SERVER_ASYNC_READ_AHEAD_H_
#define KVTIER_SERVER_ASYNC_READ_AHEAD_H_

namespace kvtier {

class ReadAhead {
 public:
  static constexpr int kBuffers = 2;
  static constexpr int kNoRead = -1;

  // The buffer the first read fills.
  static constexpr int kFirstRead = 0;

  // In a reaction: a read ended, having filled its buffer when `ok`, or
  // having found the end of the stream (or a cancelled call) when not.
  struct Arrival {
    bool ignored = false;       // after Finish: do nothing more
    int read_into = kNoRead;    // start the next read into this buffer
    bool submit_drain = false;  // no drain is running: submit one
  };
  Arrival Arrived(bool ok);

  // In the drain: what to do next.
  struct Step {
    enum Kind { kStore, kCommit, kIdle } kind = kIdle;
    int buffer = kNoRead;  // kStore: the buffer to store
  };
  // kStore: store `buffer`, then call Stored. kCommit: the stream ended and
  // every buffer is stored. kIdle: nothing yet; this drain ends (a later
  // arrival submits the next).
  Step Next();
  // The buffer Next gave is stored and free again; returns the buffer to
  // start a read into (the read that waited for it), or kNoRead.
  int Stored();

  // The call is answering: no read starts again.
  void Finish() { finished_ = true; }

 private:
  int head_ = 0;  // the oldest filled buffer
  // Filled buffers not yet stored; the next read fills (head_ + filled_) % 2.
  // When both are filled, the next read waits for Stored.
  int filled_ = 0;
  bool stream_ended_ = false;
  bool draining_ = false;  // a drain is submitted or running
  bool finished_ = false;
};

inline ReadAhead::Arrival ReadAhead::Arrived(bool ok) {
  Arrival a;
  if (finished_) {
    a.ignored = true;
    return a;
  }
  if (ok) {
    ++filled_;
    if (filled_ < kBuffers) a.read_into = (head_ + filled_) % kBuffers;
  } else {
    stream_ended_ = true;
  }
  a.submit_drain = !draining_;
  draining_ = true;
  return a;
}

inline ReadAhead::Step ReadAhead::Next() {
  if (filled_ > 0) return Step{Step::kStore, head_};
  if (stream_ended_) return Step{Step::kCommit};
  draining_ = false;
  return Step{Step::kIdle};
}

inline int ReadAhead::Stored() {
  const bool read_waiting = filled_ == kBuffers;
  head_ = (head_ + 1) % kBuffers;
  --filled_;
  if (!read_waiting || finished_) return kNoRead;
  return (head_ + filled_) % kBuffers;
}

}  // namespace kvtier

#endif  // KVTIER_SERVER_ASYNC_READ_AHEAD_H_
