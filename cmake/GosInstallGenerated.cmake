# Run by `cmake --install` (cmake/GosInstall.cmake sets the GOS_* variables): the files that
# name the install's own paths, made now that CMAKE_INSTALL_PREFIX is the one installed to;
# gos's CRIU. Every file goes through file(INSTALL), which honours DESTDIR and lists it in
# install_manifest.txt. Fails, naming what is missing, rather than leave a part out.

function(_gos_abs out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

_gos_abs(_bindir "${GOS_BINDIR}")
_gos_abs(_sbindir "${GOS_SBINDIR}")
_gos_abs(_libdir "${GOS_LIBDIR}")
_gos_abs(_includedir "${GOS_INCLUDEDIR}")
_gos_abs(_libexecdir "${GOS_LIBEXECDIR}")
_gos_abs(_mandir "${GOS_MANDIR}")
_gos_abs(_sysconfdir "${GOS_SYSCONFDIR}")
_gos_abs(_unitdir "${GOS_UNITDIR}")
# One work dir per destination: installs to different prefixes may run at once (the tests').
string(MD5 _dest "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(GOS_WORK_DIR "${GOS_WORK_DIR}/${_dest}")
file(MAKE_DIRECTORY "${GOS_WORK_DIR}")
# "name|section|program|description" of each man page, joined by @@.
string(REPLACE "@@" ";" GOS_MAN_PAGES "${GOS_MAN_PAGES}")

# gos's CRIU, as <libexec>/gos/criu (cmake/GosCriu.cmake).
if(NOT EXISTS "${GOS_CRIU_BINARY}")
  message(FATAL_ERROR "gos install: gos's CRIU is not at ${GOS_CRIU_BINARY}: build the target "
                      "gos-criu (it needs the CRIU 4.1.1 source tarball scripts/setup fetches), or "
                      "name a prebuilt one with -DGOS_CRIU_BINARY=PATH")
endif()
file(INSTALL DESTINATION "${_libexecdir}" TYPE PROGRAM RENAME criu FILES "${GOS_CRIU_BINARY}")

# gos-cc, gos-c++ (and gos-fort, gos-f90, gos-f77 with the Fortran bindings) with the
# install's include and library dirs; the same template as the build tree's (tools/).
include("${GOS_SOURCE_DIR}/cmake/GosWrapper.cmake")
set(_wrappers gos-cc gos-c++)
if(GOS_FORTRAN)
  list(APPEND _wrappers gos-fort gos-f90 gos-f77)
endif()
foreach(_wrapper ${_wrappers})
  # mpif.h and the mpi module are installed beside mpi.h.
  gos_configure_wrapper(NAME ${_wrapper} INCLUDE_DIRS "'${_includedir}/gos/mpi' '${_includedir}'"
    LIB_DIR "${_libdir}" TEMPLATE "${GOS_SOURCE_DIR}/tools/gos-cc.in"
    OUT "${GOS_WORK_DIR}/${_wrapper}")
  file(INSTALL DESTINATION "${_bindir}" TYPE PROGRAM FILES "${GOS_WORK_DIR}/${_wrapper}")
  list(APPEND GOS_MAN_PAGES
       "${_wrapper}|1|${GOS_WORK_DIR}/${_wrapper}|compile and link an MPI program against gos")
endforeach()

# The systemd units, naming the installed daemons and config file.
set(GOS_UNIT_SBINDIR "${_sbindir}")
set(GOS_UNIT_CONFIG "${_sysconfdir}/gos/gos.conf")
_gos_abs(GOS_UNIT_DOCDIR "${GOS_DOCDIR}")
foreach(_unit coordinator nodeagent)
  configure_file("${GOS_SOURCE_DIR}/${_unit}/gos-${_unit}.service.in"
                 "${GOS_WORK_DIR}/gos-${_unit}.service" @ONLY)
  file(INSTALL DESTINATION "${_unitdir}" TYPE FILE FILES "${GOS_WORK_DIR}/gos-${_unit}.service")
endforeach()

# Man pages from each program's --help (help2man), gzipped as Debian keeps them.
find_program(GOS_HELP2MAN help2man)
if(NOT GOS_HELP2MAN)
  message(FATAL_ERROR "gos install: help2man not found; the man pages are made with it "
                      "(scripts/setup installs it)")
endif()
foreach(_page ${GOS_MAN_PAGES})
  string(REPLACE "|" ";" _f "${_page}")
  list(GET _f 0 _name)
  list(GET _f 1 _section)
  list(GET _f 2 _program)
  list(GET _f 3 _desc)
  set(_out "${GOS_WORK_DIR}/${_name}.${_section}")
  # No config file: --help must not depend on the machine's /etc/gos/gos.conf.
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env GOS_CONFIG=/dev/null
            ${GOS_HELP2MAN} --no-info --no-discard-stderr --section=${_section}
            "--name=${_desc}" "--version-string=${GOS_VERSION}" --source=gos
            --manual=gos --output=${_out} ${_program}
    RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "gos install: help2man ${_program} failed (${_rc}): ${_err}")
  endif()
  execute_process(COMMAND gzip -9nf ${_out} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "gos install: gzip ${_out} failed")
  endif()
  file(INSTALL DESTINATION "${_mandir}/man${_section}" TYPE FILE FILES "${_out}.gz")
endforeach()

# What was made here is installed now; the next install makes it again.
file(REMOVE_RECURSE "${GOS_WORK_DIR}")
