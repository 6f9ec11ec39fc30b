# System dependencies, all from Debian 12 packages (installed by scripts/setup).
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBFABRIC REQUIRED IMPORTED_TARGET libfabric>=1.17)
find_package(Threads REQUIRED)
if(GOS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
