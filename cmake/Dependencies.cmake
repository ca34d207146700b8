# Every third-party dependency, found once. Debian 12 packages (scripts/setup.sh installs them),
# or the same packages unpacked into TIERZERO_DEPS_PREFIX on the GPU machine (scripts/device.sh).
if(DEFINED ENV{TIERZERO_DEPS_PREFIX})
  set(_prefix $ENV{TIERZERO_DEPS_PREFIX})
  list(PREPEND CMAKE_PREFIX_PATH ${_prefix}/usr ${_prefix}/usr/lib/x86_64-linux-gnu/cmake
       ${_prefix}/usr/share/cmake)
  set(ENV{PKG_CONFIG_PATH}
      "${_prefix}/usr/lib/x86_64-linux-gnu/pkgconfig:${_prefix}/usr/share/pkgconfig:$ENV{PKG_CONFIG_PATH}")
  set(ENV{PKG_CONFIG_SYSROOT_DIR} ${_prefix})
endif()

find_package(PkgConfig REQUIRED)
pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing)
find_path(AIO_INCLUDE_DIR libaio.h REQUIRED)
find_library(AIO_LIBRARY aio REQUIRED)
add_library(tierzero_aio INTERFACE)
target_include_directories(tierzero_aio SYSTEM INTERFACE ${AIO_INCLUDE_DIR})
target_link_libraries(tierzero_aio INTERFACE ${AIO_LIBRARY})
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
find_package(zstd REQUIRED)
find_package(TBB REQUIRED)
find_package(hwy REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
if(TIERZERO_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# CUDA: on when nvcc exists (AUTO), so CI compiles the CUDA code it cannot run.
set(TIERZERO_HAVE_CUDA OFF)
if(NOT TIERZERO_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    # The shared runtime, so a binary that also links LibTorch holds one CUDA runtime, not two.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(TIERZERO_HAVE_CUDA ON)
  elseif(TIERZERO_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TIERZERO_WITH_CUDA=ON but no CUDA compiler was found: install the CUDA "
                        "toolkit or configure with -DTIERZERO_WITH_CUDA=OFF")
  endif()
endif()
message(STATUS "tierzero: CUDA ${TIERZERO_HAVE_CUDA}")

# LibTorch from the PyPI torch wheel (python3 -c 'import torch; print(torch.utils.cmake_prefix_path)').
set(TIERZERO_HAVE_TORCH OFF)
if(NOT TIERZERO_WITH_TORCH STREQUAL "OFF")
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c "import torch; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(_torch_prefix)
    list(APPEND CMAKE_PREFIX_PATH ${_torch_prefix})
    # Name the GPU architecture so torch's CMake does not try to run a probe on a GPU-less machine.
    if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
      set(ENV{TORCH_CUDA_ARCH_LIST} "9.0")
    endif()
    find_package(Torch REQUIRED)
    set(TIERZERO_HAVE_TORCH ON)
    # The OpenMP runtime LibTorch's intra-op threads run on (tierzero_intra_op_parallel).
    find_library(TIERZERO_TORCH_GOMP NAMES libgomp.so.1 PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
  elseif(TIERZERO_WITH_TORCH STREQUAL "ON")
    message(FATAL_ERROR "TIERZERO_WITH_TORCH=ON but python3 cannot import torch: run scripts/setup.sh")
  endif()
endif()
message(STATUS "tierzero: LibTorch ${TIERZERO_HAVE_TORCH}")

# at::parallel_for is inline: a TU compiled without -fopenmp (_OPENMP undefined) runs the whole range
# on the calling thread. tierzero_intra_op_parallel(target source...) compiles those sources of
# `target` with -fopenmp and links the libgomp.so.1 LibTorch loads, so their at::parallel_for runs
# on LibTorch's intra-op threads (without that library: on the calling thread, as before).
function(tierzero_intra_op_parallel target)
  if(TIERZERO_TORCH_GOMP)
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS -fopenmp SKIP_PRECOMPILE_HEADERS ON)
    target_link_libraries(${target} PUBLIC ${TIERZERO_TORCH_GOMP})
  endif()
endfunction()
