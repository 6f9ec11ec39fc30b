// Error handling (MPI 4.1, 9.3-9.5): communicators' error handlers, error classes, codes and
// strings, and Fail, the error path of every call.
#include <cstdio>
#include <cstring>
#include <string>

#include "gos/gos.h"
#include "internal.h"
#include "mpi.h"
#include "mpi_impl.h"

namespace {

using gos::mpi::internal::Fail;
using gos::mpi::internal::kFirstUserErrhandler;
using gos::mpi::internal::S;
using gos::mpi::internal::State;

const char* ErrorText(int code) {
  switch (code) {
    case MPI_SUCCESS:
      return "no error";
    case MPI_ERR_BUFFER:
      return "invalid buffer pointer";
    case MPI_ERR_COUNT:
      return "invalid count";
    case MPI_ERR_TYPE:
      return "invalid datatype";
    case MPI_ERR_TAG:
      return "invalid tag";
    case MPI_ERR_COMM:
      return "invalid communicator";
    case MPI_ERR_RANK:
      return "invalid rank";
    case MPI_ERR_ROOT:
      return "invalid root";
    case MPI_ERR_GROUP:
      return "invalid group";
    case MPI_ERR_OP:
      return "invalid reduction operation for this datatype";
    case MPI_ERR_ARG:
      return "invalid argument";
    case MPI_ERR_UNKNOWN:
      return "unknown error";
    case MPI_ERR_TRUNCATE:
      return "message truncated";
    case MPI_ERR_OTHER:
      return "MPI is not initialized, or was finalized";
    case MPI_ERR_INTERN:
      return "internal error (channel to the nodeagent)";
    case MPI_ERR_IN_STATUS:
      return "error code is in status";
    case MPI_ERR_PENDING:
      return "pending request";
    case MPI_ERR_REQUEST:
      return "invalid request";
    case MPI_ERR_TOPOLOGY:
      return "invalid topology (the communicator lacks the one the call needs)";
    case MPI_ERR_DIMS:
      return "invalid dimensions";
    case MPI_ERR_NO_MEM:
      return "out of memory";
    case MPI_ERR_KEYVAL:
      return "invalid keyval";
    case MPI_ERR_WIN:
      return "invalid window";
    case MPI_ERR_SIZE:
      return "invalid window size";
    case MPI_ERR_DISP:
      return "invalid displacement or displacement unit";
    case MPI_ERR_RMA_RANGE:
      return "target range outside the target's window";
    default:
      return nullptr;
  }
}

// The class of a code MPI_Add_error_code/_class handed out, or -1.
int UserErrorClass(int code) {
  const State& s = S();
  if (code <= MPI_ERR_LASTCODE || code > s.last_used_code) return -1;
  return s.user_code_class[static_cast<size_t>(code - MPI_ERR_LASTCODE - 1)];
}

// ErrorText, and the program's texts for its own codes ("" when it gave none).
const char* AnyErrorText(int code) {
  if (UserErrorClass(code) < 0) return ErrorText(code);
  const auto& strings = S().user_error_strings;
  auto it = strings.find(code);
  return it != strings.end() ? it->second.c_str() : "";
}

// The program's handler behind `e`, or nullptr (a predefined one, or no handler).
MPI_Comm_errhandler_function* UserErrhandler(MPI_Errhandler e) {
  const State& s = S();
  if (e < kFirstUserErrhandler ||
      static_cast<size_t>(e - kFirstUserErrhandler) >= s.errhandlers.size()) {
    return nullptr;
  }
  return s.errhandlers[static_cast<size_t>(e - kFirstUserErrhandler)];
}

// The error handlers there are: the predefined ones and those MPI_Comm_create_errhandler made.
bool IsErrhandler(MPI_Errhandler e) {
  return e == MPI_ERRORS_ARE_FATAL || e == MPI_ERRORS_RETURN || e == MPI_ERRORS_ABORT ||
         UserErrhandler(e) != nullptr;
}

}  // namespace

namespace gos::mpi::internal {

int FromGos(int err) {
  switch (err) {
    case GOS_OK:
      return MPI_SUCCESS;
    case GOS_ERR_TRUNCATE:
      return MPI_ERR_TRUNCATE;
    case GOS_ERR_RANK:
      return MPI_ERR_RANK;
    case GOS_ERR_ARG:
      return MPI_ERR_ARG;
    case GOS_ERR_NOT_INIT:
      return MPI_ERR_OTHER;
    case GOS_ERR_CHANNEL:
      return MPI_ERR_INTERN;
    case GOS_ERR_REQUEST:
      return MPI_ERR_REQUEST;
    case GOS_ERR_TAG:
      return MPI_ERR_TAG;
    default:
      return MPI_ERR_UNKNOWN;
  }
}

int Fail(MPI_Comm comm, const char* fn, int code) {
  if (code == MPI_SUCCESS) return code;
  Comm* c = FindComm(comm);
  if (c == nullptr) {
    comm = MPI_COMM_WORLD;
    c = FindComm(comm);
  }
  if (c != nullptr && c->errhandler == MPI_ERRORS_RETURN) return code;
  if (MPI_Comm_errhandler_function* user = c != nullptr ? UserErrhandler(c->errhandler) : nullptr) {
    int handed = code;
    user(&comm, &handed);
    return code;
  }
  const char* text = AnyErrorText(code);
  std::fprintf(stderr, "gos MPI: %s: %s (rank %d)\n", fn, text != nullptr ? text : "error",
               gos_initialized() ? gos_world_rank() : -1);
  std::fflush(stderr);
  gos_abort(1);
}

}  // namespace gos::mpi::internal

namespace gos::mpi {

int FailCall(MPI_Comm comm, const char* fn, int code) { return Fail(comm, fn, code); }

}  // namespace gos::mpi

extern "C" {

GOS_MPI_WEAK_ALIAS(Comm_create_errhandler);
int PMPI_Comm_create_errhandler(MPI_Comm_errhandler_function* function,
                                MPI_Errhandler* errhandler) {
  if (function == nullptr || errhandler == nullptr) {
    return Fail(MPI_COMM_WORLD, "MPI_Comm_create_errhandler", MPI_ERR_ARG);
  }
  State& s = S();
  s.errhandlers.push_back(function);
  *errhandler = kFirstUserErrhandler + static_cast<MPI_Errhandler>(s.errhandlers.size() - 1);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Errhandler_create);
int PMPI_Errhandler_create(MPI_Handler_function* function, MPI_Errhandler* errhandler) {
  return PMPI_Comm_create_errhandler(function, errhandler);
}

GOS_MPI_WEAK_ALIAS(Comm_set_errhandler);
int PMPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_set_errhandler");
  if (!IsErrhandler(errhandler)) return Fail(comm, "MPI_Comm_set_errhandler", MPI_ERR_ARG);
  c->errhandler = errhandler;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_get_errhandler);
int PMPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_get_errhandler");
  *errhandler = c->errhandler;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Errhandler_set);
int PMPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler) {
  return PMPI_Comm_set_errhandler(comm, errhandler);
}

GOS_MPI_WEAK_ALIAS(Errhandler_get);
int PMPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return PMPI_Comm_get_errhandler(comm, errhandler);
}

GOS_MPI_WEAK_ALIAS(Errhandler_free);
int PMPI_Errhandler_free(MPI_Errhandler* errhandler) {
  if (errhandler == nullptr || !IsErrhandler(*errhandler)) {
    return Fail(MPI_COMM_WORLD, "MPI_Errhandler_free", MPI_ERR_ARG);
  }
  // Predefined handlers are never freed: communicators using one keep it.
  *errhandler = MPI_ERRHANDLER_NULL;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Error_string);
int PMPI_Error_string(int errorcode, char* string, int* resultlen) {
  const char* text = AnyErrorText(errorcode);
  if (text == nullptr) {
    std::snprintf(string, MPI_MAX_ERROR_STRING, "unknown error code %d", errorcode);
  } else {
    std::snprintf(string, MPI_MAX_ERROR_STRING, "%s", text);
  }
  *resultlen = static_cast<int>(std::strlen(string));
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Error_class);
int PMPI_Error_class(int errorcode, int* errorclass) {
  // Every error code gos returns is itself a class; the program's codes have theirs.
  const int user = UserErrorClass(errorcode);
  if (errorclass == nullptr || (user < 0 && ErrorText(errorcode) == nullptr)) {
    return Fail(MPI_COMM_WORLD, "MPI_Error_class", MPI_ERR_ARG);
  }
  *errorclass = user >= 0 ? user : errorcode;
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Add_error_class);
int PMPI_Add_error_class(int* errorclass) {
  if (errorclass == nullptr) return Fail(MPI_COMM_WORLD, "MPI_Add_error_class", MPI_ERR_ARG);
  State& s = S();
  *errorclass = ++s.last_used_code;
  s.user_code_class.push_back(*errorclass);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Add_error_code);
int PMPI_Add_error_code(int errorclass, int* errorcode) {
  // A predefined class, or one the program added (not a code of its own that is no class).
  const bool is_class = UserErrorClass(errorclass) == errorclass ||
                        (errorclass <= MPI_ERR_LASTCODE && ErrorText(errorclass) != nullptr);
  if (errorcode == nullptr || !is_class) {
    return Fail(MPI_COMM_WORLD, "MPI_Add_error_code", MPI_ERR_ARG);
  }
  State& s = S();
  *errorcode = ++s.last_used_code;
  s.user_code_class.push_back(errorclass);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Add_error_string);
int PMPI_Add_error_string(int errorcode, const char* string) {
  // Only for the program's own codes and classes (MPI 4.1, 9.5).
  if (string == nullptr || UserErrorClass(errorcode) < 0) {
    return Fail(MPI_COMM_WORLD, "MPI_Add_error_string", MPI_ERR_ARG);
  }
  S().user_error_strings[errorcode] = std::string(string).substr(0, MPI_MAX_ERROR_STRING - 1);
  return MPI_SUCCESS;
}

GOS_MPI_WEAK_ALIAS(Comm_call_errhandler);
int PMPI_Comm_call_errhandler(MPI_Comm comm, int errorcode) {
  GOS_MPI_COMM(c, comm, "MPI_Comm_call_errhandler");
  (void)c;
  Fail(comm, "MPI_Comm_call_errhandler", errorcode);
  return MPI_SUCCESS;
}

}  // extern "C"
