# gos_rank (gos::rank): the rank side of BCS communication, gos.h over the shared-memory
# channel (gos/bcs/channel.h). gos-cc links it into users' programs, so it is position
# independent and depends on nothing but libc and libstdc++ (no gos::common).
add_library(gos_rank STATIC
  ${CMAKE_CURRENT_LIST_DIR}/client.cc
  ${CMAKE_CURRENT_LIST_DIR}/client_p2p.cc
  ${CMAKE_CURRENT_LIST_DIR}/client_wait.cc
  ${CMAKE_CURRENT_LIST_DIR}/client_coll.cc
  ${CMAKE_CURRENT_LIST_DIR}/client_record.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduce.cc)
add_library(gos::rank ALIAS gos_rank)
_gos_common_flags(gos_rank)
target_include_directories(gos_rank
  PUBLIC ${CMAKE_CURRENT_LIST_DIR}/../include
  PRIVATE ${PROJECT_SOURCE_DIR})
set_target_properties(gos_rank PROPERTIES
  POSITION_INDEPENDENT_CODE ON
  ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
