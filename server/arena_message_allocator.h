// ArenaMessageAllocator: gives each call of a callback unary method its
// request and response on a protobuf arena that starts in a block inside the
// call's holder, so parsing a request of many keys and building a response
// of many entries costs one allocation per call instead of one per entry.
// The arena grows from the heap when a call needs more than kInitialBytes.
//
// Thread-safety: AllocateMessages may be called from any thread (it holds no
// state); each holder belongs to its call until gRPC releases it.
#ifndef KVTIER_SERVER_ARENA_MESSAGE_ALLOCATOR_H_
#define KVTIER_SERVER_ARENA_MESSAGE_ALLOCATOR_H_

#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

#include <cstddef>

namespace kvtier {

template <typename Request, typename Response>
class ArenaMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  static constexpr size_t kInitialBytes = 16 << 10;

  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder; }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options(initial_)) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions Options(char* block) {
      google::protobuf::ArenaOptions o;
      o.initial_block = block;
      o.initial_block_size = kInitialBytes;
      return o;
    }
    alignas(std::max_align_t) char initial_[kInitialBytes];
    google::protobuf::Arena arena_;  // after initial_, which it starts in
  };
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_ARENA_MESSAGE_ALLOCATOR_H_
