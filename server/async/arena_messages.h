// ArenaMessages: a gRPC MessageAllocator for a unary callback method that
// puts its request and response on one protobuf Arena per call, whose first
// block lies inside the call's holder. gRPC's default allocator news both
// messages on the heap, so a Lookup of 128 keys costs hundreds of mallocs
// and frees (a string per requested key, a BlockInfo and its key per
// answered one), and the frees run on another thread than the mallocs (gRPC
// calls OnDone on its executor). With the arena the call costs one malloc
// and one free while it fits in kFirstBlockBytes; a larger call grows the
// arena by further blocks, as any arena does.
//
// Register it with the generated SetMessageAllocatorFor_<Method>; it must
// outlive the server (a member of the service does). Handlers may treat
// the messages as any others; they must not hand pieces of them to heap
// messages (set_allocated_* from the heap, Swap with a heap message), which
// kvtier's handlers never do.
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
  // Sized for a Lookup of a few hundred keys of 32 bytes and its answer.
  static constexpr size_t kFirstBlockBytes = 16 * 1024;

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

    // Declared before the arena, which lives in it (and is destroyed first).
    alignas(std::max_align_t) char first_block_[kFirstBlockBytes];
    google::protobuf::Arena arena_;
  };
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_ASYNC_ARENA_MESSAGES_H_
