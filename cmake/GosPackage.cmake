# The Debian package (scripts/package, docs/install.md): CPack's DEB generator over what
# cmake/GosInstall.cmake installs, configured with prefix /usr and sysconfdir /etc. Its
# dependencies on shared libraries are derived by dpkg-shlibdeps from the programs in it
# (CRIU's included), not listed by hand; nothing is vendored.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gos)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "gos developers <gos@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "cluster OS runtime: gang scheduling, coordinated checkpoints, deterministic replay")
set(CPACK_PACKAGE_DESCRIPTION
    "gos makes a cluster behave like one machine: a coordinator and a node agent per host run\n\
launch, gang scheduling and communication in lockstep to a global strobe, take coordinated\n\
CRIU checkpoints of parallel jobs and replay them deterministically. This package has the\n\
tools (gos-run, gos-ps, ...), the daemons and their systemd units, the MPI wrappers gos-cc\n\
and gos-c++ with gos's MPI library, and gos's own patched CRIU in /usr/libexec/gos.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Programs gos runs that no library dependency brings: ip (gos-cluster --netns).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "iproute2")
# gos-cc and gos-c++ run the system's C and C++ compilers, and link libstdc++ (gos's MPI
# library is C++).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "gcc, g++, libstdc++-dev")
set(CPACK_STRIP_FILES ON)
# /etc/gos/gos.conf is a conffile; the maintainer scripts reload systemd and, on purge,
# remove the state the daemons kept (/var/lib/gos, /run/gos).
configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/conffiles.in
               ${PROJECT_BINARY_DIR}/debian/conffiles @ONLY)
foreach(_script postinst postrm)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/${_script}
                 ${PROJECT_BINARY_DIR}/debian/${_script} COPYONLY
                 FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                                  GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/debian/conffiles
    ${PROJECT_BINARY_DIR}/debian/postinst ${PROJECT_BINARY_DIR}/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
