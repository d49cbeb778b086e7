// ArenaMessages: a gRPC MessageAllocator for a unary callback method that
// puts its request and response on one protobuf Arena per call, whose first
// block lies inside the call's holder. gRPC's default holder keeps both
// messages as heap-allocating protobuf objects, so a Lookup of 128 keys
// costs hundreds of mallocs and frees (a string object per requested key, a
// BlockInfo and its key per answered one), and the frees run on another
// thread than the mallocs (gRPC frees them once the call is done, on
// whichever of its threads finishes it). With the
// arena those objects come from the holder's block. What still reaches the
// heap: the holder itself (one malloc), the characters of strings longer
// than 15 bytes (protobuf 3.21 keeps only the string object on the arena),
// and, as for any arena, further blocks when the call outgrows
// kFirstBlockBytes or when a second thread (the executor, for a Lookup
// that could not finish inline) allocates on it (protobuf gives each thread
// blocks of its own).
//
// Register it with the generated SetMessageAllocatorFor_<Method>; it must
// outlive the server (a member of the service does). Handlers may treat
// the messages as any others, except the unsafe_arena_* calls
// (unsafe_arena_set_allocated_*, unsafe_arena_release_*, UnsafeArenaSwap)
// and keeping pointers into them past the call, which kvtier's handlers
// never do.
//
// Thread-safety: AllocateMessages is thread-safe (it keeps no state); a
// holder belongs to its call.
#ifndef KVTIER_SERVER_ASYNC_ARENA_MESSAGES_H_
#define KVTIER_SERVER_ASYNC_ARENA_MESSAGES_H_

#include <google/protobuf/arena.h>

#include <cstddef>

#include "grpcpp/support/message_allocator.h"

namespace kvtier {

template <typename Request, typename Response>
class ArenaMessages final : public grpc::MessageAllocator<Request, Response> {
 public:
  // Holds a Lookup of 128 keys of 32 bytes and its full answer (about 20
  // KiB; arena_messages_test checks it).
  static constexpr size_t kFirstBlockBytes = 32 * 1024;

  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder(); }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options(first_block_)) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    Holder(const Holder&) = delete;
    Holder& operator=(const Holder&) = delete;

    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions Options(char* block) {
      google::protobuf::ArenaOptions options;
      options.initial_block = block;
      options.initial_block_size = kFirstBlockBytes;
      return options;
    }

    // The arena's first block; declared before the arena, which is
    // destroyed first.
    alignas(std::max_align_t) char first_block_[kFirstBlockBytes];
    google::protobuf::Arena arena_;
  };
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_ASYNC_ARENA_MESSAGES_H_
