# Optional backends. Each option is AUTO (use it if found), ON (fail if not
# found) or OFF. The result is KVTIER_HAVE_<NAME> (ON/OFF), which selects the
# sources compiled (never #ifdefs in core code) and is reported by
# `kvtier status`.

function(kvtier_resolve_backend name found)
  set(mode ${KVTIER_WITH_${name}})
  if(mode STREQUAL "OFF")
    set(KVTIER_HAVE_${name} OFF PARENT_SCOPE)
  elseif(found)
    set(KVTIER_HAVE_${name} ON PARENT_SCOPE)
  elseif(mode STREQUAL "ON")
    message(FATAL_ERROR "KVTIER_WITH_${name}=ON but its dependency was not found")
  else()
    set(KVTIER_HAVE_${name} OFF PARENT_SCOPE)
  endif()
endfunction()

# CUDA: only the runtime library is needed so far (device probe). It is linked
# statically so binaries start on machines without a CUDA installation.
if(NOT KVTIER_WITH_CUDA STREQUAL "OFF")
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
endif()
kvtier_resolve_backend(CUDA "${CUDAToolkit_FOUND}")
if(KVTIER_HAVE_CUDA)
  # Kernels for sm_90 (H100, H200) unless the caller says otherwise.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  if(NOT CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
  enable_language(CUDA)
  # CMake 3.25 knows nvcc's dialects up to C++17; the .cu files need no more.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()

# UCX (peer transport) and liburing (NVMe engine): detected now, used by the
# transfer/ and storage/ backends as they land.
if(NOT KVTIER_WITH_UCX STREQUAL "OFF")
  find_package(ucx CONFIG QUIET)
endif()
kvtier_resolve_backend(UCX "${ucx_FOUND}")

if(NOT KVTIER_WITH_URING STREQUAL "OFF")
  pkg_check_modules(URING QUIET IMPORTED_TARGET liburing)
endif()
kvtier_resolve_backend(URING "${URING_FOUND}")
