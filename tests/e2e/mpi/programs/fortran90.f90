! A Fortran 90 MPI program (use mpi), self-checking like the C programs of this directory:
! every rank checks its answers, rank 0 prints "OK fortran90" when all ranks passed. Built
! with gos-fort; plain MPI, correct under Open MPI's mpifort too.
! Checks what fortran77.f does not: a struct type from absolute addresses sent from
! MPI_BOTTOM, a subarray type, Cartesian topologies (LOGICAL periods), the 1-based indices of
! MPI_WAITANY / MPI_WAITSOME and MPI_WAITALL's status array, the collectives (gather(v),
! scatter(v), allgather(v), alltoall(v), bcast, reduce, scan, reduce_scatter), DOUBLE COMPLEX
! sums, MINLOC / MAXLOC on MPI_2DOUBLE_PRECISION and MPI_2REAL, info keys and values
! (blank-padded), MPI_COMM_GET_ATTR, error classes under MPI_ERRORS_RETURN, type names, and
! (more_checks) split communicators and groups, MPI_TESTANY / MPI_TESTSOME indices, a
! nonblocking allreduce, packing, an indexed type, alltoallv, scatterv, exscan, the library
! version string, an error handler written in Fortran.
module checks
  implicit none
  integer :: nfail = 0, me = -1, handled = 0, last_code = 0
contains
  subroutine check(cond, what, value)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    integer, intent(in) :: value
    if (.not. cond) then
      nfail = nfail + 1
      print '(A, I0, A, A, A, I0)', 'FAIL fortran90 rank ', me, ': ', what, ': ', value
    end if
  end subroutine check
end module checks

subroutine dmul(invec, inoutvec, len, datatype)
  implicit none
  integer :: len, datatype, i
  double precision :: invec(len), inoutvec(len)
  do i = 1, len
    inoutvec(i) = invec(i) * inoutvec(i)
  end do
end subroutine dmul

! An error handler written in Fortran: counts the errors it sees.
subroutine count_errors(comm, code)
  use checks
  implicit none
  integer :: comm, code
  handled = handled + 1
  last_code = code
  if (comm == -12345) handled = -1000  ! never: keeps `comm` used
end subroutine count_errors

program f90test
  use mpi
  use checks
  implicit none
  integer :: rank, nprocs, ierr, i, j, n, cart, sub, src, dst, dims(2), coords(2), crank
  logical :: periods(2), remain(2), flag
  integer :: reqs(3), idx, outcount, indices(3), statuses(MPI_STATUS_SIZE, 3)
  integer :: bufs(3), stype, subtype, blocklens(3), types(3), op, rlen, info, nkeys
  integer(kind=MPI_ADDRESS_KIND) :: displs(3), lb, extent, tagub
  integer, allocatable :: all(:), counts(:), offs(:), recv(:)
  double precision :: d, dpair(2), x(3)
  real :: rpair(2)
  double complex :: z
  character(len=MPI_MAX_OBJECT_NAME) :: tname
  character(len=30) :: value, key
  integer :: grid(4, 6), block(2, 3)
  integer :: ivalue
  double precision :: dvalue
  character :: cvalue
  external :: dmul

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  me = rank
  n = nprocs

  ! A struct of an integer, a double and a character, described by absolute addresses and
  ! broadcast from MPI_BOTTOM.
  ivalue = -1
  dvalue = -1d0
  cvalue = '?'
  if (rank == 0) then
    ivalue = 42
    dvalue = 2.5d0
    cvalue = 'g'
  end if
  call MPI_Get_address(ivalue, displs(1), ierr)
  call MPI_Get_address(dvalue, displs(2), ierr)
  call MPI_Get_address(cvalue, displs(3), ierr)
  blocklens = 1
  types = (/ MPI_INTEGER, MPI_DOUBLE_PRECISION, MPI_CHARACTER /)
  call MPI_Type_create_struct(3, blocklens, displs, types, stype, ierr)
  call MPI_Type_commit(stype, ierr)
  call MPI_Bcast(MPI_BOTTOM, 1, stype, 0, MPI_COMM_WORLD, ierr)
  call check(ivalue == 42 .and. dvalue == 2.5d0 .and. cvalue == 'g', 'struct from MPI_BOTTOM', ivalue)
  call MPI_Type_free(stype, ierr)

  ! A 2x3 block of a 4x6 grid (Fortran order), sent to the next rank.
  do j = 1, 6
    do i = 1, 4
      grid(i, j) = 100 * rank + 10 * i + j
    end do
  end do
  call MPI_Type_create_subarray(2, (/ 4, 6 /), (/ 2, 3 /), (/ 1, 2 /), MPI_ORDER_FORTRAN, &
                                MPI_INTEGER, subtype, ierr)
  call MPI_Type_commit(subtype, ierr)
  call MPI_Type_size(subtype, i, ierr)
  call check(i == 24, 'subarray size', i)
  call MPI_Type_get_extent(subtype, lb, extent, ierr)
  call check(lb == 0 .and. extent == 96, 'subarray extent', int(extent))
  call MPI_Sendrecv(grid, 1, subtype, mod(rank + 1, n), 5, block, 6, MPI_INTEGER, &
                    mod(rank + n - 1, n), 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  do j = 1, 3
    do i = 1, 2
      call check(block(i, j) == 100 * mod(rank + n - 1, n) + 10 * (i + 1) + (j + 2), &
                 'subarray element', block(i, j))
    end do
  end do
  call MPI_Type_free(subtype, ierr)

  ! Cartesian topology: a periodic ring in dimension 1.
  dims = 0
  call MPI_Dims_create(n, 2, dims, ierr)
  call check(dims(1) * dims(2) == n .and. dims(1) >= dims(2), 'dims_create', dims(1))
  periods = (/ .true., .false. /)
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .false., cart, ierr)
  call MPI_Cart_coords(cart, rank, 2, coords, ierr)
  call MPI_Cart_rank(cart, coords, crank, ierr)
  call check(crank == rank, 'cart_rank of own coords', crank)
  call MPI_Cart_shift(cart, 0, 1, src, dst, ierr)
  call check(dst == mod(coords(1) + 1, dims(1)) * dims(2) + coords(2), 'cart_shift dest', dst)
  call MPI_Cart_shift(cart, 1, 1, src, dst, ierr)
  if (coords(2) == dims(2) - 1) call check(dst == MPI_PROC_NULL, 'non-periodic edge', dst)
  periods = .false.
  call MPI_Cart_get(cart, 2, dims, periods, coords, ierr)
  call check(periods(1) .and. .not. periods(2), 'cart_get periods (LOGICAL)', 0)
  remain = (/ .true., .false. /)
  call MPI_Cart_sub(cart, remain, sub, ierr)
  call MPI_Comm_size(sub, i, ierr)
  call check(i == dims(1), 'cart_sub size', i)
  call MPI_Comm_free(sub, ierr)
  call MPI_Comm_free(cart, ierr)

  ! Nonblocking: three receives from the left, completed by waitany, waitsome, waitall.
  do i = 1, 3
    call MPI_Irecv(bufs(i), 1, MPI_INTEGER, mod(rank + n - 1, n), i, MPI_COMM_WORLD, reqs(i), ierr)
  end do
  do i = 3, 1, -1
    call MPI_Send(1000 * i + rank, 1, MPI_INTEGER, mod(rank + 1, n), i, MPI_COMM_WORLD, ierr)
  end do
  call MPI_Waitany(3, reqs, idx, statuses(:, 1), ierr)
  call check(idx >= 1 .and. idx <= 3, 'waitany index is 1-based', idx)
  call check(statuses(MPI_TAG, 1) == idx, 'waitany status tag', statuses(MPI_TAG, 1))
  call check(reqs(idx) == MPI_REQUEST_NULL, 'waitany request', reqs(idx))
  call MPI_Waitsome(3, reqs, outcount, indices, statuses, ierr)
  call check(outcount >= 1, 'waitsome outcount', outcount)
  do i = 1, outcount
    call check(indices(i) >= 1 .and. indices(i) <= 3 .and. indices(i) /= idx, &
               'waitsome index is 1-based', indices(i))
    call check(statuses(MPI_TAG, i) == indices(i), 'waitsome status tag', statuses(MPI_TAG, i))
  end do
  statuses = -5
  call MPI_Waitall(3, reqs, statuses, ierr)
  do i = 1, 3
    call check(bufs(i) == 1000 * i + mod(rank + n - 1, n), 'irecv data', bufs(i))
    call check(reqs(i) == MPI_REQUEST_NULL, 'waitall request', reqs(i))
  end do
  call MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE, ierr)

  ! Collectives.
  allocate(all(n), counts(n), offs(n), recv(n * (n + 1) / 2))
  call MPI_Gather(rank * 3, 1, MPI_INTEGER, all, 1, MPI_INTEGER, n - 1, MPI_COMM_WORLD, ierr)
  if (rank == n - 1) then
    do i = 1, n
      call check(all(i) == 3 * (i - 1), 'gather', all(i))
    end do
  end if
  call MPI_Allgather(rank + 7, 1, MPI_INTEGER, all, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(all(n) == n + 6, 'allgather', all(n))
  ! Rank r contributes r + 1 copies of r.
  do i = 1, n
    counts(i) = i
    offs(i) = (i - 1) * i / 2
  end do
  all = rank
  call MPI_Allgatherv(all, rank + 1, MPI_INTEGER, recv, counts, offs, MPI_INTEGER, &
                      MPI_COMM_WORLD, ierr)
  call check(recv(size(recv)) == n - 1 .and. recv(1) == 0, 'allgatherv', recv(size(recv)))
  call MPI_Scatter(recv, 1, MPI_INTEGER, i, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check(i == recv(rank + 1), 'scatter', i)
  do i = 1, n
    all(i) = 10 * rank + i
  end do
  counts = 1
  call MPI_Alltoall(all, 1, MPI_INTEGER, offs, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do i = 1, n
    call check(offs(i) == 10 * (i - 1) + rank + 1, 'alltoall', offs(i))
  end do
  call MPI_Scan(rank + 1, i, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(i == (rank + 1) * (rank + 2) / 2, 'scan', i)
  all = 1
  call MPI_Reduce_scatter(all, i, counts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(i == n, 'reduce_scatter', i)
  call MPI_Reduce(rank, i, 1, MPI_INTEGER, MPI_MAX, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) call check(i == n - 1, 'reduce max', i)

  ! Reductions on Fortran types.
  z = dcmplx(dble(rank), -1d0)
  call MPI_Allreduce(MPI_IN_PLACE, z, 1, MPI_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(dble(z) == dble(n * (n - 1) / 2) .and. dimag(z) == -dble(n), 'double complex sum', 0)
  dpair = (/ dble(mod(rank + 1, n)), dble(rank) /)
  call MPI_Allreduce(MPI_IN_PLACE, dpair, 1, MPI_2DOUBLE_PRECISION, MPI_MINLOC, MPI_COMM_WORLD, ierr)
  call check(dpair(1) == 0d0 .and. dpair(2) == dble(n - 1), 'minloc 2double_precision', int(dpair(2)))
  rpair = (/ real(rank / 2), real(rank) /)
  call MPI_Allreduce(MPI_IN_PLACE, rpair, 1, MPI_2REAL, MPI_MAXLOC, MPI_COMM_WORLD, ierr)
  call check(rpair(1) == real((n - 1) / 2) .and. rpair(2) == real(2 * ((n - 1) / 2)), &
             'maxloc 2real (lowest index of the maximum)', int(rpair(2)))
  x = (/ 2d0, dble(rank + 1), 0.5d0 /)
  call MPI_Op_create(dmul, .true., op, ierr)
  call MPI_Op_commutative(op, flag, ierr)
  call check(flag, 'op_commutative', 0)
  call MPI_Allreduce(MPI_IN_PLACE, x, 3, MPI_DOUBLE_PRECISION, op, MPI_COMM_WORLD, ierr)
  d = 1d0
  do i = 1, n
    d = d * i
  end do
  call check(x(1) == 2d0 ** n .and. x(2) == d .and. x(3) == 0.5d0 ** n, 'user op product', 0)
  call MPI_Op_free(op, ierr)

  ! Info objects: keys and values are blank-padded both ways.
  call MPI_Info_create(info, ierr)
  call MPI_Info_set(info, 'stripe   ', '  4  ', ierr)
  call MPI_Info_get_nkeys(info, nkeys, ierr)
  call check(nkeys == 1, 'info nkeys', nkeys)
  call MPI_Info_get_nthkey(info, 0, key, ierr)
  call check(key == 'stripe', 'info nthkey', len_trim(key))
  value = 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'
  call MPI_Info_get(info, 'stripe', 30, value, flag, ierr)
  call check(flag .and. adjustl(value) == '4', 'info get', len_trim(value))
  call MPI_Info_get(info, 'none', 30, value, flag, ierr)
  call check(.not. flag, 'info get of a missing key', 0)
  call MPI_Info_free(info, ierr)
  call check(info == MPI_INFO_NULL, 'info_free', info)

  ! Attributes, names, errors.
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, tagub, flag, ierr)
  call check(flag .and. tagub >= 32767, 'MPI_TAG_UB', int(min(tagub, 1000000_MPI_ADDRESS_KIND)))
  call MPI_Type_get_name(MPI_INTEGER, tname, rlen, ierr)
  call check(tname == 'MPI_INTEGER' .and. rlen == 11, 'type name', rlen)
  call MPI_Type_get_name(MPI_DOUBLE_COMPLEX, tname, rlen, ierr)
  call check(tname == 'MPI_DOUBLE_COMPLEX', 'type name complex', rlen)
  call MPI_Type_size(MPI_DOUBLE_COMPLEX, i, ierr)
  call check(i == 16, 'double complex size', i)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_Send(i, 1, MPI_INTEGER, n + 5, 0, MPI_COMM_WORLD, ierr)
  call check(ierr /= MPI_SUCCESS, 'send to a rank beyond the communicator', ierr)
  call MPI_Error_class(ierr, i, ierr)
  call check(i == MPI_ERR_RANK, 'error class', i)
  call MPI_Get_version(i, j, ierr)
  call check(i == MPI_VERSION .and. j == MPI_SUBVERSION, 'get_version', i)
  d = MPI_Wtime()
  call check(MPI_Wtick() > 0d0 .and. MPI_Wtime() >= d, 'wtime', 0)

  call more_checks(rank, n)

  call MPI_Allreduce(nfail, i, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. i == 0) print '(A)', 'OK fortran90'
  call MPI_Finalize(ierr)
  if (nfail /= 0) call exit(1)
end program f90test

! Split communicators and groups, MPI_TESTANY / MPI_TESTSOME indices, a nonblocking
! allreduce, packing, an indexed type, MPI_ALLTOALLV / MPI_SCATTERV / MPI_EXSCAN, the library
! version string, a Fortran error handler.
subroutine more_checks(rank, n)
  use mpi
  use checks
  implicit none
  integer, intent(in) :: rank, n
  integer :: ierr, half, hrank, hsize, wgroup, hgroup, ranks(1), out(1), req, reqs(2), idx
  integer :: outcount, indices(2), sum, packed(16), pos, a(6), b(6), itype, eh, i, rlen
  integer :: scounts(64), sdispls(64), rcounts(64), rdispls(64), sbuf(64), rbuf(64)
  logical :: flag
  double precision :: t0
  character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: version
  external :: count_errors

  ! Odd and even ranks, ordered by descending world rank (the key).
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, half, ierr)
  call MPI_Comm_rank(half, hrank, ierr)
  call MPI_Comm_size(half, hsize, ierr)
  call check(hsize == (n + 1 - mod(rank, 2)) / 2, 'split size', hsize)
  call check(hrank == hsize - 1 - rank / 2, 'split rank ordered by key', hrank)
  call MPI_Comm_group(MPI_COMM_WORLD, wgroup, ierr)
  call MPI_Comm_group(half, hgroup, ierr)
  ranks(1) = 0
  call MPI_Group_translate_ranks(hgroup, 1, ranks, wgroup, out, ierr)
  ! The half's rank 0 (the lowest key) is the highest world rank of this parity.
  i = n - 1
  if (mod(i, 2) /= mod(rank, 2)) i = n - 2
  call check(out(1) == i, 'translate_ranks', out(1))
  call MPI_Group_free(hgroup, ierr)
  call MPI_Group_free(wgroup, ierr)
  call check(wgroup == MPI_GROUP_NULL, 'group_free', wgroup)
  call MPI_Comm_free(half, ierr)

  ! MPI_TESTANY and MPI_TESTSOME until done: 1-based indices.
  call MPI_Irecv(a, 1, MPI_INTEGER, rank, 8, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Irecv(a(2), 1, MPI_INTEGER, rank, 9, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Send(81, 1, MPI_INTEGER, rank, 9, MPI_COMM_WORLD, ierr)
  flag = .false.
  t0 = MPI_Wtime()
  do while (.not. flag .and. MPI_Wtime() - t0 < 60d0)
    call MPI_Testany(2, reqs, idx, flag, MPI_STATUS_IGNORE, ierr)
  end do
  call check(flag .and. idx == 2 .and. a(2) == 81, 'testany index 2', idx)
  call MPI_Send(80, 1, MPI_INTEGER, rank, 8, MPI_COMM_WORLD, ierr)
  outcount = 0
  do while (outcount == 0 .and. MPI_Wtime() - t0 < 60d0)
    call MPI_Testsome(2, reqs, outcount, indices, MPI_STATUSES_IGNORE, ierr)
  end do
  call check(outcount == 1 .and. indices(1) == 1 .and. a(1) == 80, 'testsome index 1', indices(1))
  call MPI_Testsome(2, reqs, outcount, indices, MPI_STATUSES_IGNORE, ierr)
  call check(outcount == MPI_UNDEFINED, 'testsome with no active request', outcount)

  ! A nonblocking allreduce.
  call MPI_Iallreduce(rank + 1, sum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call check(sum == n * (n + 1) / 2, 'iallreduce', sum)

  ! Pack two integers and a block of an indexed type, unpack them elsewhere.
  a = (/ 1, 2, 3, 4, 5, 6 /)
  call MPI_Type_indexed(2, (/ 1, 2 /), (/ 0, 3 /), MPI_INTEGER, itype, ierr)
  call MPI_Type_commit(itype, ierr)
  pos = 0
  call MPI_Pack(a, 2, MPI_INTEGER, packed, 64, pos, MPI_COMM_WORLD, ierr)
  call MPI_Pack(a, 1, itype, packed, 64, pos, MPI_COMM_WORLD, ierr)
  call check(pos == 20, 'pack position', pos)
  b = 0
  pos = 0
  call MPI_Unpack(packed, 64, pos, b, 5, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(all(b == (/ 1, 2, 1, 4, 5, 0 /)), 'unpack', b(3))
  call MPI_Type_free(itype, ierr)

  ! Rank r sends j + 1 integers r to rank j; scatterv from rank 0; exscan.
  if (n <= 8) then
    do i = 1, n
      scounts(i) = i
      sdispls(i) = (i - 1) * i / 2
      rcounts(i) = rank + 1
      rdispls(i) = (i - 1) * (rank + 1)
    end do
    sbuf = rank
    rbuf = -1
    call MPI_Alltoallv(sbuf, scounts, sdispls, MPI_INTEGER, rbuf, rcounts, rdispls, &
                       MPI_INTEGER, MPI_COMM_WORLD, ierr)
    do i = 1, n
      call check(rbuf((i - 1) * (rank + 1) + 1) == i - 1 .and. rbuf(i * (rank + 1)) == i - 1, &
                 'alltoallv', rbuf(i * (rank + 1)))
    end do
    do i = 1, 64
      sbuf(i) = i
    end do
    call MPI_Scatterv(sbuf, scounts, sdispls, MPI_INTEGER, rbuf, rank + 1, MPI_INTEGER, 0, &
                      MPI_COMM_WORLD, ierr)
    call check(rbuf(1) == rank * (rank + 1) / 2 + 1 .and. rbuf(rank + 1) == (rank + 1) * (rank + 2) / 2, &
               'scatterv', rbuf(1))
  end if
  sum = -1
  call MPI_Exscan(rank + 1, sum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank > 0) call check(sum == rank * (rank + 1) / 2, 'exscan', sum)

  ! The library version, blank-padded.
  call MPI_Get_library_version(version, rlen, ierr)
  call check(rlen > 0 .and. rlen < len(version), 'library version length', rlen)
  call check(version(rlen + 1:) == ' ' .and. index(version, char(0)) == 0, &
             'library version blank-padded', rlen)

  ! A Fortran error handler on a duplicate of MPI_COMM_WORLD.
  call MPI_Comm_dup(MPI_COMM_WORLD, half, ierr)
  call MPI_Comm_create_errhandler(count_errors, eh, ierr)
  call MPI_Comm_set_errhandler(half, eh, ierr)
  call MPI_Send(a, 1, MPI_INTEGER, n + 3, 0, half, ierr)
  call check(handled == 1 .and. last_code == ierr .and. ierr /= MPI_SUCCESS, 'Fortran handler', handled)
  call MPI_Errhandler_free(eh, ierr)
  call MPI_Comm_free(half, ierr)
end subroutine more_checks
