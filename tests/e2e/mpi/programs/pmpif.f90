! The Fortran program a PMPI tool counts (tests/e2e/mpi/pmpif_counter.c, as pmpi.c for C).
! Every rank makes, in all: MPI_INIT 1, MPI_COMM_RANK 1, MPI_COMM_SIZE 1, MPI_SEND 1,
! MPI_RECV 1, MPI_ISEND 2, MPI_IRECV 2, MPI_WAIT 1, MPI_WAITALL 1, MPI_SENDRECV 1,
! MPI_ALLREDUCE 2, MPI_BCAST 1, MPI_BARRIER 1, MPI_TYPE_VECTOR 1, MPI_TYPE_COMMIT 1,
! MPI_TYPE_FREE 1, MPI_REQUEST_FREE 1, MPI_WTIME 1, MPI_FINALIZE 1: 22 calls (and MPI_PROBE
! and MPI_GET_COUNT 0: the tool counts them too, to show that MPI's own use of them is not
! seen). Prints "OK pmpif".
program pmpif
  use mpi
  implicit none
  integer :: rank, n, ierr, next, prev, a(4), b(4), req, reqs(2), vec, total, i
  double precision :: t

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  next = mod(rank + 1, n)
  prev = mod(rank + n - 1, n)
  t = MPI_Wtime()
  a = rank
  ! Blocking: even ranks send first (a ring of two or more), the sendrecv the other way.
  if (mod(rank, 2) == 0) then
    call MPI_Send(a, 4, MPI_INTEGER, next, 1, MPI_COMM_WORLD, ierr)
    call MPI_Recv(b, 4, MPI_INTEGER, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  else
    call MPI_Recv(b, 4, MPI_INTEGER, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Send(a, 4, MPI_INTEGER, next, 1, MPI_COMM_WORLD, ierr)
  end if
  total = 0
  if (b(1) /= prev) total = 1
  call MPI_Sendrecv(a, 4, MPI_INTEGER, prev, 2, b, 4, MPI_INTEGER, next, 2, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
  if (b(4) /= next) total = total + 1
  ! Nonblocking.
  call MPI_Irecv(b, 1, MPI_INTEGER, prev, 3, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(a, 1, MPI_INTEGER, next, 3, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call MPI_Irecv(b(2), 1, MPI_INTEGER, next, 4, MPI_COMM_WORLD, req, ierr)
  call MPI_Isend(a, 1, MPI_INTEGER, prev, 4, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call MPI_Request_free(reqs(1), ierr)
  if (b(1) /= prev .or. b(2) /= next) total = total + 1
  ! A derived type: every other element.
  call MPI_Type_vector(2, 1, 2, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  a = (/ 1, 2, 3, 4 /) * (rank + 1)
  if (rank == 0) a = (/ 7, 0, 9, 0 /)
  call MPI_Bcast(a, 1, vec, 0, MPI_COMM_WORLD, ierr)
  if (a(1) /= 7 .or. a(3) /= 9) total = total + 1
  call MPI_Type_free(vec, ierr)
  call MPI_Allreduce(MPI_IN_PLACE, a, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  i = total
  call MPI_Allreduce(i, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (total /= 0) print '(A, I0, A, I0)', 'FAIL pmpif rank ', rank, ': ', total
  if (rank == 0 .and. total == 0) print '(A)', 'OK pmpif'
  call MPI_Finalize(ierr)
end program pmpif
