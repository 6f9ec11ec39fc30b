# gos's own CRIU (docs/install.md): CRIU 4.1.1 from Debian's source tarball with this tree's
# scripts/criu-patches, built into build/criu/criu by the target gos-criu (cmake/build-criu.sh,
# 1-3 minutes once per build dir) and installed as <prefix>/libexec/gos/criu. Built from this
# tree rather than copied from scripts/setup's /usr/local/sbin/criu, which any checkout of gos
# on the machine may rebuild with its own patches. The build tree's nodeagent keeps using
# /usr/local/sbin/criu (nodeagent/criu.h, CriuPath).
#
# -DGOS_CRIU_BINARY=PATH installs that prebuilt CRIU instead.
set(GOS_CRIU_BINARY "" CACHE FILEPATH "a prebuilt gos CRIU to install (default: build gos-criu)")
set(GOS_CRIU_TARBALL "" CACHE FILEPATH
    "CRIU 4.1.1 source tarball (default: the one scripts/setup keeps in /var/cache/gos-setup)")

set(GOS_CRIU_BUILT ${PROJECT_BINARY_DIR}/criu/criu)
if(NOT GOS_CRIU_BINARY)
  if(NOT GOS_CRIU_TARBALL)
    set(_cache /var/cache/gos-setup)
    if(DEFINED ENV{GOS_SETUP_CACHE} AND NOT "$ENV{GOS_SETUP_CACHE}" STREQUAL "")
      set(_cache $ENV{GOS_SETUP_CACHE})
    endif()
    file(GLOB _tarballs ${_cache}/criu_4.1.1.orig.tar.*)
    list(SORT _tarballs)
    if(_tarballs)
      list(GET _tarballs 0 _tarball)
      set(GOS_CRIU_TARBALL ${_tarball} CACHE FILEPATH "CRIU 4.1.1 source tarball" FORCE)
    endif()
  endif()
  if(GOS_CRIU_TARBALL AND EXISTS ${GOS_CRIU_TARBALL})
    file(GLOB _patches ${PROJECT_SOURCE_DIR}/scripts/criu-patches/*.patch)
    list(SORT _patches)
    add_custom_command(OUTPUT ${GOS_CRIU_BUILT}
      COMMAND ${PROJECT_SOURCE_DIR}/cmake/build-criu.sh ${GOS_CRIU_TARBALL}
              ${PROJECT_BINARY_DIR}/criu ${GOS_CRIU_BUILT} ${_patches}
      DEPENDS ${GOS_CRIU_TARBALL} ${_patches} ${PROJECT_SOURCE_DIR}/cmake/build-criu.sh
      COMMENT "CRIU 4.1.1 with scripts/criu-patches: gos's own CRIU (1-3 min, once)"
      VERBATIM)
    add_custom_target(gos-criu ALL DEPENDS ${GOS_CRIU_BUILT})
  else()
    message(STATUS "gos: no CRIU 4.1.1 source tarball (scripts/setup fetches it): gos's CRIU "
                   "is not built, and `cmake --install` will fail until it is")
  endif()
  set(GOS_CRIU_INSTALL ${GOS_CRIU_BUILT})
else()
  set(GOS_CRIU_INSTALL ${GOS_CRIU_BINARY})
endif()
