# FindLlamaCppJinja: llama.cpp's Jinja engine for chat templates (common/jinja/, MIT licence), built
# from the llama-cpp-python sdist on PyPI that scripts/setup.sh downloads. Nothing of it is kept in
# this repository: the sources are extracted from the sdist into the build tree at configure time.
#
#   TIERZERO_LLAMA_CPP_SDIST  the sdist (llama_cpp_python-<version>.tar.gz); default
#                             ~/.cache/tierzero/llama_cpp_python-0.3.36.tar.gz, where setup.sh puts it
#
# Defines, when the sdist is there:
#   LlamaCppJinja_FOUND        TRUE
#   LlamaCppJinja::jinja       static library: jinja/{lexer,parser,runtime,value,string}.cpp and the
#                              two files of llama.cpp's common/ they include (json.cpp: its nlohmann
#                              wrapper, unicode.cpp); nlohmann-json comes from Debian, and ggml.h (for
#                              GGML_ASSERT in json.cpp) is a two-line shim written here
#   LlamaCppJinja_SDIST        the sdist used (tests read the chat templates from it)
set(TIERZERO_LLAMA_CPP_SDIST "$ENV{HOME}/.cache/tierzero/llama_cpp_python-0.3.36.tar.gz"
    CACHE FILEPATH "llama-cpp-python sdist whose vendor/llama.cpp/common/jinja builds the chat-template engine")

set(LlamaCppJinja_FOUND FALSE)
if(NOT EXISTS "${TIERZERO_LLAMA_CPP_SDIST}")
  if(NOT LlamaCppJinja_FIND_QUIETLY)
    message(STATUS "LlamaCppJinja: ${TIERZERO_LLAMA_CPP_SDIST} not found; chat rows are compiled out "
                   "(scripts/setup.sh downloads it)")
  endif()
  return()
endif()
if(TARGET LlamaCppJinja::jinja)
  set(LlamaCppJinja_FOUND TRUE)
  return()
endif()

get_filename_component(_ljj_name "${TIERZERO_LLAMA_CPP_SDIST}" NAME)
string(REGEX REPLACE "\\.tar\\.gz$" "" _ljj_name "${_ljj_name}")
set(_ljj_root "${CMAKE_BINARY_DIR}/_deps/llama_cpp_jinja")
file(SIZE "${TIERZERO_LLAMA_CPP_SDIST}" _ljj_size)
set(_ljj_stamp "${TIERZERO_LLAMA_CPP_SDIST} ${_ljj_size}")
set(_ljj_stamp_file "${_ljj_root}/STAMP")
if(EXISTS "${_ljj_stamp_file}")
  file(READ "${_ljj_stamp_file}" _ljj_old_stamp)
endif()
if(NOT "${_ljj_old_stamp}" STREQUAL "${_ljj_stamp}")
  file(REMOVE_RECURSE "${_ljj_root}")
  file(ARCHIVE_EXTRACT INPUT "${TIERZERO_LLAMA_CPP_SDIST}" DESTINATION "${_ljj_root}"
       PATTERNS "*/vendor/llama.cpp/common/jinja/*" "*/vendor/llama.cpp/common/json.*"
                "*/vendor/llama.cpp/common/unicode.*" "*/vendor/llama.cpp/LICENSE")
  file(WRITE "${_ljj_root}/shim/ggml.h"
       "#pragma once\n#include <cstdlib>\n#define GGML_ASSERT(x) do { if (!(x)) std::abort(); } while (0)\n")
  file(WRITE "${_ljj_stamp_file}" "${_ljj_stamp}")
endif()

file(GLOB _ljj_common "${_ljj_root}/*/vendor/llama.cpp/common")
if(NOT EXISTS "${_ljj_common}/jinja/runtime.cpp" OR NOT EXISTS "${_ljj_common}/json.cpp")
  message(WARNING "LlamaCppJinja: ${TIERZERO_LLAMA_CPP_SDIST} has no vendor/llama.cpp/common/jinja/runtime.cpp or "
                  "common/json.cpp; chat rows are compiled out. Download it again with scripts/setup.sh.")
  return()
endif()

find_package(nlohmann_json 3.10 REQUIRED)
add_library(llama_cpp_jinja STATIC
  ${_ljj_common}/jinja/lexer.cpp
  ${_ljj_common}/jinja/parser.cpp
  ${_ljj_common}/jinja/runtime.cpp
  ${_ljj_common}/jinja/value.cpp
  ${_ljj_common}/jinja/string.cpp
  ${_ljj_common}/json.cpp
  ${_ljj_common}/unicode.cpp)
# Third-party code: built as it is, its warnings not ours to fix.
target_compile_options(llama_cpp_jinja PRIVATE -w)
target_include_directories(llama_cpp_jinja SYSTEM PUBLIC ${_ljj_common} PRIVATE ${_ljj_root}/shim)
target_link_libraries(llama_cpp_jinja PUBLIC nlohmann_json::nlohmann_json)
add_library(LlamaCppJinja::jinja ALIAS llama_cpp_jinja)
set(LlamaCppJinja_SDIST "${TIERZERO_LLAMA_CPP_SDIST}")
set(LlamaCppJinja_FOUND TRUE)
message(STATUS "LlamaCppJinja: chat templates with llama.cpp's Jinja engine from ${_ljj_name}")
