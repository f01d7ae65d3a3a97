# hpc_add_gtest(NAME SOURCES a.cpp ... LIBS lib ...): a GoogleTest executable whose
# tests are registered one by one with CTest.
function(hpc_add_gtest name)
  if(NOT HPC_BUILD_TESTS)
    return()
  endif()
  # SERIAL: a gtest filter for tests that must run alone (timing accuracy: another test's
  # load on the 2 cores would be part of what they measure); ctest runs them with RUN_SERIAL.
  cmake_parse_arguments(A "" "SERIAL" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    HPC_SHARED_DIR="${HPC_SHARED_DIR}" HPC_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    HPC_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(A_SERIAL)
    gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                         TEST_FILTER "-${A_SERIAL}" TEST_LIST ${name}_PARALLEL
                         PROPERTIES TIMEOUT 600)
    gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                         TEST_FILTER "${A_SERIAL}" TEST_LIST ${name}_SERIAL
                         PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE)
  else()
    gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                         PROPERTIES TIMEOUT 600)
  endif()
endfunction()

# hpc_add_fuzzer(NAME SOURCE src.cpp LIBS ...): defines LLVMFuzzerTestOneInput.
# With HPC_LIBFUZZER (clang) it is a real libFuzzer binary; otherwise it links a small
# driver that replays the files named on its command line, so every build compiles it
# and the test suite can run it over a corpus.
function(hpc_add_fuzzer name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS" ${ARGN})
  if(HPC_LIBFUZZER)
    add_executable(${name} ${A_SOURCES})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer,address)
  else()
    add_executable(${name} ${A_SOURCES} ${PROJECT_SOURCE_DIR}/src/common/fuzz_driver.cpp)
  endif()
  target_link_libraries(${name} PRIVATE ${A_LIBS})
endfunction()
