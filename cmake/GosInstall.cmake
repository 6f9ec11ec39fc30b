# What `cmake --install` puts where (docs/install.md), in the GNUInstallDirs places:
#   bin/                 the tools, gos-cc, gos-c++ and gos-fort (their paths: the install's)
#   sbin/                gos-coordinator, gos-nodeagent
#   libexec/gos/         gos-rank-init, criu (gos's patched CRIU; never a system criu)
#   lib/                 libgos_mpi.a, libgos_rank.a, libgos_mpif.a (what the wrappers link)
#   include/gos/gos.h, include/gos/mpi/{mpi.h,gos_pmpi.h,mpif.h,mpi.mod,...}
#   share/man/man1, man8 man pages made from each program's --help with help2man
#   share/doc/gos/       README, docs, CRIU's patches
#   lib/systemd/system/  gos-coordinator.service, gos-nodeagent.service
#   etc/gos/gos.conf     the commented example (docs/gos.conf.example)
# The programs find each other from where they run (gos/programs.h), so an installed tree
# never refers to the build tree. Man pages, the wrappers and the units are made at install
# time (cmake/GosInstallGenerated.cmake): they name the install's paths, which only then are
# known (`cmake --install --prefix P`). help2man and gos's CRIU are hard requirements of the
# install: it fails, naming what is missing, rather than leave them out.

set(GOS_TOOLS gos-run gos-ps gos-kill gos-ckpt gos-restart gos-replay gos-store gos-attach
    gos-cluster)
set(GOS_DAEMONS gos-coordinator gos-nodeagent)

# gos's CRIU: GOS_CRIU_INSTALL (cmake/GosCriu.cmake).
include(GosCriu)
# Where systemd units go, relative to the prefix (or absolute).
set(GOS_SYSTEMD_UNITDIR lib/systemd/system CACHE STRING "systemd system unit directory")

install(TARGETS ${GOS_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${GOS_DAEMONS} RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
install(TARGETS gos-rank-init RUNTIME DESTINATION ${GOS_INSTALL_LIBEXECDIR})
install(TARGETS gos_mpi gos_rank ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/libgos/include/gos/gos.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gos)
# In a directory of its own, as Debian's Open MPI and MPICH keep theirs: gos's mpi.h is not
# the only one a machine may have.
install(FILES ${PROJECT_SOURCE_DIR}/libgos/mpi/include/mpi.h
              ${PROJECT_SOURCE_DIR}/libgos/mpi/include/gos_pmpi.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gos/mpi)
# The Fortran bindings (libgos/mpi/fortran), when gfortran built them: gos-fort's library,
# mpif.h and the mpi module beside mpi.h.
if(GOS_FORTRAN)
  install(TARGETS gos_mpif ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${GOS_FORTRAN_INCLUDE}/mpif.h ${GOS_FORTRAN_INCLUDE}/gos_mpif_constants.h
                ${GOS_FORTRAN_INCLUDE}/mpi.mod
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gos/mpi)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md" PATTERN "gos.conf.example")
# CRIU is GPL-2.0: the changes gos made to it travel with the binary.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/scripts/criu-patches/
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/criu-patches)
install(FILES ${PROJECT_SOURCE_DIR}/docs/gos.conf.example
        DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/gos RENAME gos.conf)

# "name|section|program|description" of every man page.
set(_man)
set(_desc_gos-run "run a parallel job on the gos cluster")
set(_desc_gos-ps "list the jobs and nodes of the gos cluster")
set(_desc_gos-kill "kill or signal gos jobs")
set(_desc_gos-ckpt "checkpoint a running gos job now, or list its checkpoints")
set(_desc_gos-restart "restart a gos job from a checkpoint")
set(_desc_gos-replay "rerun a recorded gos job deterministically")
set(_desc_gos-store "inspect, verify and collect the gos checkpoint store")
set(_desc_gos-attach "follow a running gos job")
set(_desc_gos-cluster "start, stop and inspect a gos cluster")
set(_desc_gos-coordinator "the gos machine manager daemon")
set(_desc_gos-nodeagent "the gos node daemon")
foreach(_t ${GOS_TOOLS})
  list(APPEND _man "${_t}|1|$<TARGET_FILE:${_t}>|${_desc_${_t}}")
endforeach()
foreach(_t ${GOS_DAEMONS})
  list(APPEND _man "${_t}|8|$<TARGET_FILE:${_t}>|${_desc_${_t}}")
endforeach()
string(JOIN "@@" _man_joined ${_man})

install(CODE "
  set(GOS_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
  set(GOS_WORK_DIR \"${PROJECT_BINARY_DIR}/install-generated\")
  set(GOS_VERSION \"${PROJECT_VERSION}\")
  set(GOS_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(GOS_SBINDIR \"${CMAKE_INSTALL_SBINDIR}\")
  set(GOS_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(GOS_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(GOS_LIBEXECDIR \"${GOS_INSTALL_LIBEXECDIR}\")
  set(GOS_MANDIR \"${CMAKE_INSTALL_MANDIR}\")
  set(GOS_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")
  set(GOS_SYSCONFDIR \"${CMAKE_INSTALL_SYSCONFDIR}\")
  set(GOS_UNITDIR \"${GOS_SYSTEMD_UNITDIR}\")
  set(GOS_CRIU_BINARY \"${GOS_CRIU_INSTALL}\")
  set(GOS_MAN_PAGES \"${_man_joined}\")
  set(GOS_FORTRAN \"${GOS_FORTRAN}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/GosInstallGenerated.cmake\")
")
