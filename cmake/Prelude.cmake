# Precompiled preludes: the heavy third-party headers (the standard library,
# abseil, spdlog, gRPC and the generated stubs, GoogleTest, CLI11, JSON)
# parsed once per build instead of once per source file; a full build takes
# about a third less time (the README has the figures). Each prelude
# is built by a small object library and reused (REUSE_FROM) by the targets
# that include those headers anyway:
#   domain  storage, datapath, encoding, transfer, testing: std, abseil, spdlog
#   rpc     server, C++ client: std, abseil, gRPC, kvtier's generated stubs
#   cli     kvtier, kvtierd, the planner: rpc + CLI11 + nlohmann/json
#   test    every GoogleTest binary (kvtier_add_test): rpc + GoogleTest
# The domain prelude has no gRPC in it: domain code knows nothing of gRPC.
#
# A reused precompiled header must see the macros it was made with: both
# clang and GCC refuse one made without -pthread in a -pthread build (and
# the reverse), and GCC one whose macros the consumer lacks. So every
# prelude and every consumer compiles with -pthread, and each prelude links
# only what all its consumers link (spdlog, whose -D GCC checks, only in
# the domain prelude: the client library, the planner and some tests do not
# link it).
# Consumers may add -D of their own; the preludes include nothing that
# reads them. The preludes hide a missing #include; building with
# -DKVTIER_PRELUDE=OFF shows it.
option(KVTIER_PRELUDE "Precompile the third-party headers (cmake/prelude)" ON)

# kvtier_prelude(NAME HEADER LIBS...): the object library kvtier_NAME_prelude
# carrying the precompiled cmake/prelude/HEADER.
function(kvtier_prelude name header)
  add_library(kvtier_${name}_prelude OBJECT ${PROJECT_SOURCE_DIR}/cmake/prelude/empty.cc)
  target_compile_options(kvtier_${name}_prelude PRIVATE ${KVTIER_WARNINGS} -pthread)
  target_include_directories(kvtier_${name}_prelude PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(kvtier_${name}_prelude PRIVATE ${ARGN})
  target_precompile_headers(kvtier_${name}_prelude PRIVATE
                            ${PROJECT_SOURCE_DIR}/cmake/prelude/${header})
endfunction()

if(KVTIER_PRELUDE)
  kvtier_prelude(domain domain_prelude.h spdlog::spdlog absl::status)
  kvtier_prelude(rpc rpc_prelude.h kvtier_proto gRPC::grpc++)
  kvtier_prelude(cli cli_prelude.h kvtier_proto gRPC::grpc++ CLI11::CLI11
                 nlohmann_json::nlohmann_json)
  kvtier_prelude(test test_prelude.h kvtier_proto gRPC::grpc++ GTest::gmock GTest::gtest)
endif()

# kvtier_use_prelude(TARGET NAME): TARGET's C++ sources start with the NAME
# prelude (a no-op with KVTIER_PRELUDE=OFF).
function(kvtier_use_prelude target name)
  if(KVTIER_PRELUDE)
    target_compile_options(${target} PRIVATE -pthread)
    target_precompile_headers(${target} REUSE_FROM kvtier_${name}_prelude)
  endif()
endfunction()
