#!/usr/bin/env python3
"""Generates the Fortran bindings of the gos MPI subset from one table (docs/mpi.md, "Fortran").

  gen_bindings.py BINDINGS_CC MODULE_F90

BINDINGS_CC: a C++ wrapper per call, `pmpi_<name>_` (gfortran's name for PMPI_<NAME>), with
`mpi_<name>_` and `mpi_<name>__` (-fsecond-underscore) weak aliases of it, that converts the
Fortran arguments and calls the C library's PMPI_<Name>. MODULE_F90: the `mpi` module, the
constants of mpif.h (gos_mpif_constants.h) and an explicit interface per call.

Each line of CALLS is `Name arg:kind ...`, the Fortran arguments in order (IERROR is added).
Kinds, as the wrapper converts them (gfortran passes everything by reference):
  b        choice buffer: void*, MPI_BOTTOM and MPI_IN_PLACE recognized by address
  i        INTEGER in, passed by value
  p / pa   INTEGER scalar / array, passed as int* (in or out: handles are the same ints)
  r3       INTEGER ranges(3, *) (MPI_Group_range_incl/excl)
  a / ap / aa   INTEGER(MPI_ADDRESS_KIND) in by value / scalar pointer / array
  l / lp / la   LOGICAL in by value (nonzero is true) / out scalar (set to 1 or 0) / array
                (gfortran's LOGICAL is a 4-byte 1 or 0, as C's int flags)
  s        CHARACTER(*) in: trailing blanks dropped, then NUL-terminated
  so=N     CHARACTER(*) out: the C string (buffer of N chars) copied and blank-padded
  st       status out: MPI_STATUS_IGNORE by address, else converted from MPI_Status
  sti      status in (MPI_Get_count ...)
  sts=S,N  statuses out, an array of *S; *N of them converted; MPI_STATUSES_IGNORE by address
  idx      index out: 1-based in Fortran (MPI_UNDEFINED stays)
  idxa=N   indices out, *N of them, 1-based
  w        weights array: MPI_UNWEIGHTED and MPI_WEIGHTS_EMPTY by address
  fn=T     a procedure, passed to C as T (a Fortran subroutine whose arguments are all by
           reference is called as a C function of pointers: MPI_User_function's shape)
"""
import sys

CALLS = """
Finalize
Initialized flag:lp
Finalized flag:lp
Abort comm:i errorcode:i
Query_thread provided:p
Is_thread_main flag:lp
Get_version version:p subversion:p
Get_library_version version:so=MPI_MAX_LIBRARY_VERSION_STRING+1 resultlen:p
Get_processor_name name:so=MPI_MAX_PROCESSOR_NAME+1 resultlen:p
Error_string errorcode:i string:so=MPI_MAX_ERROR_STRING+1 resultlen:p
Error_class errorcode:i errorclass:p
Add_error_class errorclass:p
Add_error_code errorclass:i errorcode:p
Add_error_string errorcode:i string:s
Pcontrol level:i
Comm_rank comm:i rank:p
Comm_size comm:i size:p
Comm_dup comm:i newcomm:p
Comm_dup_with_info comm:i info:i newcomm:p
Comm_idup comm:i newcomm:p request:p
Comm_split comm:i color:i key:i newcomm:p
Comm_split_type comm:i split_type:i key:i info:i newcomm:p
Comm_free comm:p
Comm_compare comm1:i comm2:i result:p
Comm_create comm:i group:i newcomm:p
Comm_create_group comm:i group:i tag:i newcomm:p
Comm_group comm:i group:p
Comm_test_inter comm:i flag:lp
Comm_set_errhandler comm:i errhandler:i
Comm_get_errhandler comm:i errhandler:p
Errhandler_set comm:i errhandler:i
Errhandler_get comm:i errhandler:p
Comm_call_errhandler comm:i errorcode:i
Comm_create_errhandler function:fn=MPI_Comm_errhandler_function* errhandler:p
Errhandler_free errhandler:p
Comm_set_name comm:i comm_name:s
Comm_get_name comm:i comm_name:so=MPI_MAX_OBJECT_NAME+1 resultlen:p
Comm_set_info comm:i info:i
Comm_get_info comm:i info_used:p
Group_size group:i size:p
Group_rank group:i rank:p
Group_incl group:i n:i ranks:pa newgroup:p
Group_excl group:i n:i ranks:pa newgroup:p
Group_range_incl group:i n:i ranges:r3 newgroup:p
Group_range_excl group:i n:i ranges:r3 newgroup:p
Group_union group1:i group2:i newgroup:p
Group_intersection group1:i group2:i newgroup:p
Group_difference group1:i group2:i newgroup:p
Group_translate_ranks group1:i n:i ranks1:pa group2:i ranks2:pa
Group_compare group1:i group2:i result:p
Group_free group:p
Send buf:b count:i datatype:i dest:i tag:i comm:i
Ssend buf:b count:i datatype:i dest:i tag:i comm:i
Rsend buf:b count:i datatype:i dest:i tag:i comm:i
Bsend buf:b count:i datatype:i dest:i tag:i comm:i
Recv buf:b count:i datatype:i source:i tag:i comm:i status:st
Isend buf:b count:i datatype:i dest:i tag:i comm:i request:p
Issend buf:b count:i datatype:i dest:i tag:i comm:i request:p
Irsend buf:b count:i datatype:i dest:i tag:i comm:i request:p
Ibsend buf:b count:i datatype:i dest:i tag:i comm:i request:p
Irecv buf:b count:i datatype:i source:i tag:i comm:i request:p
Send_init buf:b count:i datatype:i dest:i tag:i comm:i request:p
Ssend_init buf:b count:i datatype:i dest:i tag:i comm:i request:p
Rsend_init buf:b count:i datatype:i dest:i tag:i comm:i request:p
Bsend_init buf:b count:i datatype:i dest:i tag:i comm:i request:p
Recv_init buf:b count:i datatype:i source:i tag:i comm:i request:p
Start request:p
Startall count:i array_of_requests:pa
Sendrecv sendbuf:b sendcount:i sendtype:i dest:i sendtag:i recvbuf:b recvcount:i recvtype:i source:i recvtag:i comm:i status:st
Sendrecv_replace buf:b count:i datatype:i dest:i sendtag:i source:i recvtag:i comm:i status:st
Isendrecv sendbuf:b sendcount:i sendtype:i dest:i sendtag:i recvbuf:b recvcount:i recvtype:i source:i recvtag:i comm:i request:p
Isendrecv_replace buf:b count:i datatype:i dest:i sendtag:i source:i recvtag:i comm:i request:p
Probe source:i tag:i comm:i status:st
Iprobe source:i tag:i comm:i flag:lp status:st
Get_count status:sti datatype:i count:p
Get_elements status:sti datatype:i count:p
Buffer_attach buffer:b size:i
Wait request:p status:st
Waitall count:i array_of_requests:pa array_of_statuses:sts=count,count
Waitany count:i array_of_requests:pa index:idx status:st
Waitsome incount:i array_of_requests:pa outcount:p array_of_indices:idxa=outcount array_of_statuses:sts=incount,outcount
Test request:p flag:lp status:st
Testall count:i array_of_requests:pa flag:lp array_of_statuses:sts=count,count
Testany count:i array_of_requests:pa index:idx flag:lp status:st
Testsome incount:i array_of_requests:pa outcount:p array_of_indices:idxa=outcount array_of_statuses:sts=incount,outcount
Request_free request:p
Request_get_status request:i flag:lp status:st
Cancel request:p
Test_cancelled status:sti flag:lp
Barrier comm:i
Bcast buffer:b count:i datatype:i root:i comm:i
Reduce sendbuf:b recvbuf:b count:i datatype:i op:i root:i comm:i
Allreduce sendbuf:b recvbuf:b count:i datatype:i op:i comm:i
Reduce_local inbuf:b inoutbuf:b count:i datatype:i op:i
Reduce_scatter sendbuf:b recvbuf:b recvcounts:pa datatype:i op:i comm:i
Reduce_scatter_block sendbuf:b recvbuf:b recvcount:i datatype:i op:i comm:i
Scan sendbuf:b recvbuf:b count:i datatype:i op:i comm:i
Exscan sendbuf:b recvbuf:b count:i datatype:i op:i comm:i
Gather sendbuf:b sendcount:i sendtype:i recvbuf:b recvcount:i recvtype:i root:i comm:i
Gatherv sendbuf:b sendcount:i sendtype:i recvbuf:b recvcounts:pa displs:pa recvtype:i root:i comm:i
Scatter sendbuf:b sendcount:i sendtype:i recvbuf:b recvcount:i recvtype:i root:i comm:i
Scatterv sendbuf:b sendcounts:pa displs:pa sendtype:i recvbuf:b recvcount:i recvtype:i root:i comm:i
Allgather sendbuf:b sendcount:i sendtype:i recvbuf:b recvcount:i recvtype:i comm:i
Allgatherv sendbuf:b sendcount:i sendtype:i recvbuf:b recvcounts:pa displs:pa recvtype:i comm:i
Alltoall sendbuf:b sendcount:i sendtype:i recvbuf:b recvcount:i recvtype:i comm:i
Alltoallv sendbuf:b sendcounts:pa sdispls:pa sendtype:i recvbuf:b recvcounts:pa rdispls:pa recvtype:i comm:i
Alltoallw sendbuf:b sendcounts:pa sdispls:pa sendtypes:pa recvbuf:b recvcounts:pa rdispls:pa recvtypes:pa comm:i
Ibarrier comm:i request:p
Ibcast buffer:b count:i datatype:i root:i comm:i request:p
Ireduce sendbuf:b recvbuf:b count:i datatype:i op:i root:i comm:i request:p
Iallreduce sendbuf:b recvbuf:b count:i datatype:i op:i comm:i request:p
Ireduce_scatter sendbuf:b recvbuf:b recvcounts:pa datatype:i op:i comm:i request:p
Ireduce_scatter_block sendbuf:b recvbuf:b recvcount:i datatype:i op:i comm:i request:p
Iscan sendbuf:b recvbuf:b count:i datatype:i op:i comm:i request:p
Iexscan sendbuf:b recvbuf:b count:i datatype:i op:i comm:i request:p
Igather sendbuf:b sendcount:i sendtype:i recvbuf:b recvcount:i recvtype:i root:i comm:i request:p
Igatherv sendbuf:b sendcount:i sendtype:i recvbuf:b recvcounts:pa displs:pa recvtype:i root:i comm:i request:p
Iscatter sendbuf:b sendcount:i sendtype:i recvbuf:b recvcount:i recvtype:i root:i comm:i request:p
Iscatterv sendbuf:b sendcounts:pa displs:pa sendtype:i recvbuf:b recvcount:i recvtype:i root:i comm:i request:p
Iallgather sendbuf:b sendcount:i sendtype:i recvbuf:b recvcount:i recvtype:i comm:i request:p
Iallgatherv sendbuf:b sendcount:i sendtype:i recvbuf:b recvcounts:pa displs:pa recvtype:i comm:i request:p
Ialltoall sendbuf:b sendcount:i sendtype:i recvbuf:b recvcount:i recvtype:i comm:i request:p
Ialltoallv sendbuf:b sendcounts:pa sdispls:pa sendtype:i recvbuf:b recvcounts:pa rdispls:pa recvtype:i comm:i request:p
Ialltoallw sendbuf:b sendcounts:pa sdispls:pa sendtypes:pa recvbuf:b recvcounts:pa rdispls:pa recvtypes:pa comm:i request:p
Op_create user_fn:fn=MPI_User_function* commute:l op:p
Op_free op:p
Op_commutative op:i commute:lp
Type_contiguous count:i oldtype:i newtype:p
Type_vector count:i blocklength:i stride:i oldtype:i newtype:p
Type_create_hvector count:i blocklength:i stride:a oldtype:i newtype:p
Type_indexed count:i array_of_blocklengths:pa array_of_displacements:pa oldtype:i newtype:p
Type_create_hindexed count:i array_of_blocklengths:pa array_of_displacements:aa oldtype:i newtype:p
Type_create_indexed_block count:i blocklength:i array_of_displacements:pa oldtype:i newtype:p
Type_create_hindexed_block count:i blocklength:i array_of_displacements:aa oldtype:i newtype:p
Type_create_struct count:i array_of_blocklengths:pa array_of_displacements:aa array_of_types:pa newtype:p
Type_create_resized oldtype:i lb:a extent:a newtype:p
Type_create_subarray ndims:i array_of_sizes:pa array_of_subsizes:pa array_of_starts:pa order:i oldtype:i newtype:p
Type_dup oldtype:i newtype:p
Type_commit datatype:p
Type_free datatype:p
Type_size datatype:i size:p
Type_get_extent datatype:i lb:ap extent:ap
Type_get_true_extent datatype:i true_lb:ap true_extent:ap
Type_set_name datatype:i type_name:s
Type_get_name datatype:i type_name:so=MPI_MAX_OBJECT_NAME+1 resultlen:p
Get_address location:b address:ap
Pack inbuf:b incount:i datatype:i outbuf:b outsize:i position:p comm:i
Unpack inbuf:b insize:i position:p outbuf:b outcount:i datatype:i comm:i
Pack_size incount:i datatype:i comm:i size:p
Dims_create nnodes:i ndims:i dims:pa
Cart_create comm_old:i ndims:i dims:pa periods:la reorder:l comm_cart:p
Cartdim_get comm:i ndims:p
Cart_get comm:i maxdims:i dims:pa periods:la coords:pa
Cart_rank comm:i coords:pa rank:p
Cart_coords comm:i rank:i maxdims:i coords:pa
Cart_shift comm:i direction:i disp:i rank_source:p rank_dest:p
Cart_sub comm:i remain_dims:la newcomm:p
Cart_map comm:i ndims:i dims:pa periods:la newrank:p
Topo_test comm:i status:p
Dist_graph_create_adjacent comm_old:i indegree:i sources:pa sourceweights:w outdegree:i destinations:pa destweights:w info:i reorder:l comm_dist_graph:p
Dist_graph_neighbors_count comm:i indegree:p outdegree:p weighted:lp
Dist_graph_neighbors comm:i maxindegree:i sources:pa sourceweights:w maxoutdegree:i destinations:pa destweights:w
Neighbor_allgather sendbuf:b sendcount:i sendtype:i recvbuf:b recvcount:i recvtype:i comm:i
Neighbor_allgatherv sendbuf:b sendcount:i sendtype:i recvbuf:b recvcounts:pa displs:pa recvtype:i comm:i
Neighbor_alltoall sendbuf:b sendcount:i sendtype:i recvbuf:b recvcount:i recvtype:i comm:i
Neighbor_alltoallv sendbuf:b sendcounts:pa sdispls:pa sendtype:i recvbuf:b recvcounts:pa rdispls:pa recvtype:i comm:i
Info_create info:p
Info_set info:i key:s value:s
Info_get info:i key:s valuelen:i value:so=*valuelen+1 flag:lp
Info_get_valuelen info:i key:s valuelen:p flag:lp
Info_delete info:i key:s
Info_get_nkeys info:i nkeys:p
Info_get_nthkey info:i n:i key:so=MPI_MAX_INFO_KEY+1
Info_dup info:i newinfo:p
Info_free info:p
Win_create base:b size:a disp_unit:i info:i comm:i win:p
Win_free win:p
Win_fence assert:i win:i
Win_set_errhandler win:i errhandler:i
Win_get_errhandler win:i errhandler:p
Put origin_addr:b origin_count:i origin_datatype:i target_rank:i target_disp:a target_count:i target_datatype:i win:i
Get origin_addr:b origin_count:i origin_datatype:i target_rank:i target_disp:a target_count:i target_datatype:i win:i
Accumulate origin_addr:b origin_count:i origin_datatype:i target_rank:i target_disp:a target_count:i target_datatype:i op:i win:i
"""

# The calls written by hand in fortran.cc (their module interfaces are here).
HAND_INTERFACES = {
    "Init": [],
    "Init_thread": [("required", "i"), ("provided", "p")],
    "Comm_get_attr": [("comm", "i"), ("comm_keyval", "i"), ("attribute_val", "ap"),
                      ("flag", "lp")],
    "Attr_get": [("comm", "i"), ("keyval", "i"), ("attribute_val", "p"), ("flag", "lp")],
    "Buffer_detach": [("buffer_addr", "b"), ("size", "p")],
}


def parse():
    calls = []
    for line in CALLS.strip().splitlines():
        parts = line.split()
        args = []
        for a in parts[1:]:
            name, kind = a.split(":", 1)
            param = None
            if "=" in kind:
                kind, param = kind.split("=", 1)
            args.append((name, kind, param))
        calls.append((parts[0], args))
    return calls


C_TYPES = {
    "b": "void* {n}", "i": "MPI_Fint* {n}", "p": "MPI_Fint* {n}", "pa": "MPI_Fint* {n}",
    "r3": "MPI_Fint* {n}", "a": "MPI_Aint* {n}", "ap": "MPI_Aint* {n}", "aa": "MPI_Aint* {n}",
    "l": "MPI_Fint* {n}", "lp": "MPI_Fint* {n}", "la": "MPI_Fint* {n}", "s": "const char* {n}",
    "so": "char* {n}", "st": "MPI_Fint* {n}", "sti": "const MPI_Fint* {n}",
    "sts": "MPI_Fint* {n}", "idx": "MPI_Fint* {n}", "idxa": "MPI_Fint* {n}", "w": "MPI_Fint* {n}",
    "fn": "void (*{n})(void)",
}


def c_wrapper(name, args):
    lower = name.lower()
    params = [C_TYPES[k].format(n=n) for n, k, _ in args] + ["MPI_Fint* ierr"]
    params += [f"size_t {n}_len" for n, k, _ in args if k in ("s", "so")]
    pre, call, post = [], [], []
    for n, k, p in args:
        if k == "b":
            call.append(f"Buf({n})")
        elif k in ("i", "a"):
            call.append(f"*{n}")
        elif k in ("p", "pa", "ap", "aa", "la", "idx", "idxa"):
            call.append(n)
        elif k == "r3":
            call.append(f"reinterpret_cast<int(*)[3]>({n})")
        elif k == "l":
            call.append(f"*{n} != 0 ? 1 : 0")
        elif k == "lp":
            call.append(n)
            post.append(f"*{n} = *{n} != 0 ? 1 : 0;")
        elif k == "s":
            pre.append(f"const std::string {n}_c = FromFortran({n}, {n}_len);")
            call.append(f"{n}_c.c_str()")
        elif k == "so":
            pre.append(f"std::vector<char> {n}_c(static_cast<size_t>(std::max({p}, 1)), '\\0');")
            call.append(f"{n}_c.data()")
            post.append(f"ToFortran({n}_c.data(), {n}, {n}_len);")
        elif k == "st":
            pre.append(f"MPI_Status {n}_c{{}};")
            pre.append(f"MPI_Status* {n}_p = IsStatusIgnore({n}) ? MPI_STATUS_IGNORE : &{n}_c;")
            call.append(f"{n}_p")
            post.append(f"if ({n}_p != MPI_STATUS_IGNORE) PMPI_Status_c2f({n}_p, {n});")
        elif k == "sti":
            pre.append(f"MPI_Status {n}_c{{}};")
            pre.append(f"PMPI_Status_f2c({n}, &{n}_c);")
            call.append(f"&{n}_c")
        elif k == "sts":
            size, conv = p.split(",")
            pre.append(f"std::vector<MPI_Status> {n}_c(static_cast<size_t>(std::max(*{size}, 1)));")
            pre.append(f"MPI_Status* {n}_p = IsStatusIgnore({n}) ? MPI_STATUSES_IGNORE : {n}_c.data();")
            call.append(f"{n}_p")
            post.append(f"if ({n}_p != MPI_STATUSES_IGNORE) StatusesToFortran({n}_p, *{conv}, {n});")
        elif k == "w":
            call.append(f"Weights({n})")
        elif k == "fn":
            call.append(f"reinterpret_cast<{p}>({n})")
        else:
            raise SystemExit(f"{name}: unknown kind {k}")
        if k == "idx":
            post.append(f"if (*{n} >= 0) ++*{n};")
        if k == "idxa":
            post.append(f"for (int k = 0; k < *{p}; ++k) ++{n}[k];")
    out = [f"void pmpi_{lower}_({', '.join(params)}) {{"]
    out += ["  " + x for x in pre]
    out.append(f"  *ierr = PMPI_{name}({', '.join(call)});")
    out += ["  " + x for x in post]
    out.append("}")
    out.append(f"GOS_MPIF_ALIASES({lower})")
    return "\n".join(out)


F_DECLS = {
    "b": ["!GCC$ ATTRIBUTES NO_ARG_CHECK :: {n}", "type(*), dimension(*) :: {n}"],
    "i": ["integer, intent(in) :: {n}"], "p": ["integer :: {n}"], "pa": ["integer :: {n}(*)"],
    "r3": ["integer :: {n}(3, *)"], "a": ["integer(kind=MPI_ADDRESS_KIND), intent(in) :: {n}"],
    "ap": ["integer(kind=MPI_ADDRESS_KIND) :: {n}"],
    "aa": ["integer(kind=MPI_ADDRESS_KIND) :: {n}(*)"], "l": ["logical, intent(in) :: {n}"],
    "lp": ["logical :: {n}"], "la": ["logical :: {n}(*)"],
    "s": ["character(len=*), intent(in) :: {n}"], "so": ["character(len=*) :: {n}"],
    "st": ["integer :: {n}(MPI_STATUS_SIZE)"], "sti": ["integer :: {n}(MPI_STATUS_SIZE)"],
    "sts": ["integer :: {n}(MPI_STATUS_SIZE, *)"], "idx": ["integer :: {n}"],
    "idxa": ["integer :: {n}(*)"], "w": ["integer :: {n}(*)"], "fn": ["external :: {n}"],
}


def f_interface(name, args):
    upper = "MPI_" + name.upper()
    names = [n for n, *_ in args] + ["ierror"]
    # Free form lines of at most 132 characters: the arguments continue on lines of their own.
    lines, cur = [], f"    subroutine {upper}("
    for i, n in enumerate(names):
        piece = n + (", " if i + 1 < len(names) else ")")
        if len(cur) + len(piece) > 100:
            lines.append(cur.rstrip() + " &")
            cur = "        "
        cur += piece
    out = lines + [cur]
    kinds = {k for _, k, *_ in args}
    imports = []
    if kinds & {"st", "sti", "sts"}:
        imports.append("MPI_STATUS_SIZE")
    if kinds & {"a", "ap", "aa"}:
        imports.append("MPI_ADDRESS_KIND")
    if imports:
        out.append(f"      import :: {', '.join(imports)}")
    out.append("      implicit none")
    for n, k, *_ in args:
        out += ["      " + d.format(n=n) for d in F_DECLS[k]]
    out.append("      integer :: ierror")
    out.append(f"    end subroutine {upper}")
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: gen_bindings.py BINDINGS_CC MODULE_F90")
    calls = parse()
    with open(sys.argv[1], "w") as f:
        f.write("// Generated by libgos/mpi/fortran/gen_bindings.py: do not edit.\n")
        f.write('#include <algorithm>\n#include <cstddef>\n#include <string>\n#include <vector>\n\n')
        f.write('#include "fortran.h"\n#include "mpi.h"\n\n')
        f.write("using gos::mpi::fortran::Buf;\nusing gos::mpi::fortran::FromFortran;\n")
        f.write("using gos::mpi::fortran::IsStatusIgnore;\n")
        f.write("using gos::mpi::fortran::StatusesToFortran;\n")
        f.write("using gos::mpi::fortran::ToFortran;\nusing gos::mpi::fortran::Weights;\n\n")
        f.write('extern "C" {\n\n')
        for name, args in calls:
            f.write(c_wrapper(name, args) + "\n\n")
        f.write('}  // extern "C"\n')
    with open(sys.argv[2], "w") as f:
        f.write("! The mpi module of the gos MPI subset (docs/mpi.md). Generated by\n")
        f.write("! libgos/mpi/fortran/gen_bindings.py: do not edit.\n")
        f.write("module mpi\n  implicit none\n  include 'gos_mpif_constants.h'\n")
        f.write("  interface\n")
        f.write("    double precision function MPI_WTIME()\n    end function MPI_WTIME\n")
        f.write("    double precision function MPI_WTICK()\n    end function MPI_WTICK\n")
        for name, args in list(HAND_INTERFACES.items()) + calls:
            f.write(f_interface(name, [(n, k, None) for n, k in args]
                                if name in HAND_INTERFACES else args) + "\n")
        f.write("  end interface\nend module mpi\n")


if __name__ == "__main__":
    main()
