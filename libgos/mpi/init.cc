// Startup and the environment (MPI 4.1, chapter 11): MPI_Init and MPI_Finalize, the library
// state they set up, threads, implementation information, memory, timers; and what belongs
// to no area: MPI_Pcontrol (profiling) and the Fortran handle conversions.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "gos/gos.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::internal::AddComm;
using gos::mpi::internal::Comm;
using gos::mpi::internal::DeleteAllAttrs;
using gos::mpi::internal::Fail;
using gos::mpi::internal::FindComm;
using gos::mpi::internal::FindInfo;
using gos::mpi::internal::FromGos;
using gos::mpi::internal::S;
using gos::mpi::internal::State;
using gos::mpi::internal::SweepDetached;

int g_thread_level = MPI_THREAD_SINGLE;  // what MPI_Init_thread provided

int InitState() {
  State& s = S();
  s.comms.clear();
  s.comms.push_back(nullptr);  // MPI_COMM_NULL
  for (const gos_comm_t* g : {gos_comm_world(), gos_comm_self()}) {
    if (g == nullptr) return MPI_ERR_INTERN;
    auto c = std::make_unique<Comm>();
    c->g = *g;  // gos owns its world arrays for the life of the process
    AddComm(std::move(c));
  }
  s.groups.clear();
  s.groups.emplace_back();                    // MPI_GROUP_NULL
  s.groups.emplace_back(std::vector<int>{});  // MPI_GROUP_EMPTY
  return MPI_SUCCESS;
}

}  // namespace

namespace gos::mpi::internal {

State& S() {
  static State* s = new State();
  return *s;
}

}  // namespace gos::mpi::internal

extern "C" {

// MPIR process acquisition (docs/debugging.md): a rank of `gos-run --debug` (GOS_DEBUG_HOLD=1
// in its environment) waits in MPI_Init until a debugger sets this to 1.
__attribute__((used)) volatile int MPIR_debug_gate = 0;

GOS_MPI_WEAK_ALIAS(Init);
int PMPI_Init(int* /*argc*/, char*** /*argv*/) {
  if (const char* hold = std::getenv("GOS_DEBUG_HOLD"); hold != nullptr && *hold == '1') {
    while (MPIR_debug_gate == 0) ::usleep(10 * 1000);
  }
  int err = gos_init();
  if (err != GOS_OK) {
    // No communicator exists yet, so the only handler is the fatal default.
    std::fprintf(stderr, "gos MPI: MPI_Init: %s\n", gos_error_string(err));
    std::fflush(stderr);
    gos_abort(1);
  }
  GOS_MPI_CHECK(MPI_COMM_WORLD, "MPI_Init", InitState());
  S().main_thread = std::this_thread::get_id();
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Init_thread);
int PMPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int err = PMPI_Init(argc, argv);
  g_thread_level = std::clamp(required, MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED);
  if (provided != nullptr) *provided = g_thread_level;
  return err;
}

GOS_MPI_WEAK_ALIAS(Query_thread);
int PMPI_Query_thread(int* provided) {
  *provided = g_thread_level;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Is_thread_main);
int PMPI_Is_thread_main(int* flag) {
  if (flag == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Is_thread_main", MPI_ERR_ARG);
  *flag = std::this_thread::get_id() == S().main_thread;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Finalize);
int PMPI_Finalize(void) {
  // As if MPI_COMM_SELF were freed first (MPI-3.1 8.7.1): programs hook cleanup there.
  if (Comm* self = FindComm(MPI_COMM_SELF)) {
    GOS_MPI_CHECK(MPI_COMM_SELF, "MPI_Finalize", DeleteAllAttrs(MPI_COMM_SELF, self));
  }
  SweepDetached(/*block=*/true);
  GOS_MPI_CHECK(MPI_COMM_WORLD, "MPI_Finalize", FromGos(gos_finalize()));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Initialized);
int PMPI_Initialized(int* flag) {
  *flag = gos_initialized();
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Finalized);
int PMPI_Finalized(int* flag) {
  *flag = gos_finalized();
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Abort);
int PMPI_Abort(MPI_Comm /*comm*/, int errorcode) {
  // gos ends the whole job, whatever the communicator (as most MPIs do).
  gos_abort(errorcode);
}

GOS_MPI_WEAK_ALIAS(Get_version);
int PMPI_Get_version(int* version, int* subversion) {
  *version = MPI_VERSION;
  *subversion = MPI_SUBVERSION;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Get_library_version);
int PMPI_Get_library_version(char* version, int* resultlen) {
  std::snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
                "gos MPI (MPI %d.%d subset over buffered coscheduling; docs/mpi.md)", MPI_VERSION,
                MPI_SUBVERSION);
  *resultlen = static_cast<int>(std::strlen(version));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Get_processor_name);
int PMPI_Get_processor_name(char* name, int* resultlen) {
  if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0) {
    std::snprintf(name, MPI_MAX_PROCESSOR_NAME, "unknown");
  }
  name[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
  *resultlen = static_cast<int>(std::strlen(name));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Alloc_mem);
int PMPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
  static const char* const kFn = "MPI_Alloc_mem";
  if (size < 0 || baseptr == nullptr || (info != MPI_INFO_NULL && FindInfo(info) == nullptr)) {
    return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_ARG);
  }
  // At least a byte: a size of 0 also gives a pointer of its own, freed like any other.
  void* p = std::malloc(std::max<size_t>(static_cast<size_t>(size), 1));
  if (p == nullptr) return Fail(MPI_COMM_WORLD, kFn, MPI_ERR_NO_MEM);
  *static_cast<void**>(baseptr) = p;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Free_mem);
int PMPI_Free_mem(void* base) {
  std::free(base);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Wtime);
double PMPI_Wtime(void) { return gos_wtime(); }

GOS_MPI_WEAK_ALIAS(Wtick);
double PMPI_Wtick(void) { return gos_wtick(); }

GOS_MPI_WEAK_ALIAS(Pcontrol);
int PMPI_Pcontrol(const int /*level*/, ...) { return MPI_SUCCESS; }

// Fortran and C handles are the same ints.
GOS_MPI_WEAK_ALIAS(Comm_c2f);
MPI_Fint PMPI_Comm_c2f(MPI_Comm comm) { return comm; }
GOS_MPI_WEAK_ALIAS(Comm_f2c);
MPI_Comm PMPI_Comm_f2c(MPI_Fint comm) { return comm; }
GOS_MPI_WEAK_ALIAS(Type_c2f);
MPI_Fint PMPI_Type_c2f(MPI_Datatype datatype) { return datatype; }
GOS_MPI_WEAK_ALIAS(Type_f2c);
MPI_Datatype PMPI_Type_f2c(MPI_Fint datatype) { return datatype; }
GOS_MPI_WEAK_ALIAS(Group_c2f);
MPI_Fint PMPI_Group_c2f(MPI_Group group) { return group; }
GOS_MPI_WEAK_ALIAS(Group_f2c);
MPI_Group PMPI_Group_f2c(MPI_Fint group) { return group; }
GOS_MPI_WEAK_ALIAS(Request_c2f);
MPI_Fint PMPI_Request_c2f(MPI_Request request) { return request; }
GOS_MPI_WEAK_ALIAS(Request_f2c);
MPI_Request PMPI_Request_f2c(MPI_Fint request) { return request; }
GOS_MPI_WEAK_ALIAS(Op_c2f);
MPI_Fint PMPI_Op_c2f(MPI_Op op) { return op; }
GOS_MPI_WEAK_ALIAS(Op_f2c);
MPI_Op PMPI_Op_f2c(MPI_Fint op) { return op; }
GOS_MPI_WEAK_ALIAS(Info_c2f);
MPI_Fint PMPI_Info_c2f(MPI_Info info) { return info; }
GOS_MPI_WEAK_ALIAS(Info_f2c);
MPI_Info PMPI_Info_f2c(MPI_Fint info) { return info; }
GOS_MPI_WEAK_ALIAS(Errhandler_c2f);
MPI_Fint PMPI_Errhandler_c2f(MPI_Errhandler errhandler) { return errhandler; }
GOS_MPI_WEAK_ALIAS(Errhandler_f2c);
MPI_Errhandler PMPI_Errhandler_f2c(MPI_Fint errhandler) { return errhandler; }

}  // extern "C"
