# Helpers shared by every component's CMakeLists.txt.

# tierzero_add_component(DIR): adds the library in DIR and, when tests are on, tests/DIR.
function(tierzero_add_component dir)
  add_subdirectory(${dir})
  if(TIERZERO_BUILD_TESTS AND EXISTS ${PROJECT_SOURCE_DIR}/tests/${dir}/CMakeLists.txt)
    add_subdirectory(${PROJECT_SOURCE_DIR}/tests/${dir} ${PROJECT_BINARY_DIR}/tests/${dir})
  endif()
endfunction()

# tierzero_target_defaults(TARGET): warnings and the chosen sanitizer, as target properties.
function(tierzero_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
  if(TIERZERO_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${TIERZERO_SANITIZE} -fno-omit-frame-pointer>)
    target_link_options(${target} PRIVATE -fsanitize=${TIERZERO_SANITIZE})
  endif()
endfunction()

# tierzero_add_test(NAME SOURCES... LIBS ... [LABELS ...]): one gtest binary registered with ctest,
# linked with tests/support (EXPECT_OK, ScratchDir).
function(tierzero_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  tierzero_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} tierzero_test_support GTest::gtest GTest::gtest_main)
  set(props ENVIRONMENT "TIERZERO_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  if(ARG_LABELS)
    list(APPEND props LABELS "${ARG_LABELS}")
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ${props})
endfunction()
