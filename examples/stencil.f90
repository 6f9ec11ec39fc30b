! A 5-point Jacobi stencil on an nx x ny grid in Fortran 90 (use mpi): rows are split into
! blocks over the ranks; each step exchanges the halo rows with the neighbours by
! MPI_SENDRECV of a derived type (a row of the column-major array: MPI_TYPE_VECTOR), and
! every `report` steps MPI_ALLREDUCE gives the largest change. At the end rank 0 gathers the
! grid (MPI_GATHERV) and prints a weighted checksum, summed in grid order, so that it is the
! same, bit for bit, whatever the number of ranks.
!
!   stencil [nx ny steps report [serial]]      (defaults 96 64 400 100)
!
! With `serial`, rank 0 also runs the whole iteration alone on the full grid (plain loops,
! no MPI) and prints its checksum too: an independent check of the parallel answer.
! Output (rank 0):
!   stencil: 96x64 grid, 400 steps, 4 ranks
!   step 100 maxdelta=...
!   checksum=<ES24.16> maxdelta=<ES24.16>
!   serial checksum=<ES24.16>          (with `serial`)
program stencil
  use mpi
  implicit none
  integer :: nx = 96, ny = 64, steps = 400, report = 100
  logical :: serial = .false.
  integer :: rank, nprocs, ierr, nl, i0, up, down, rowtype, step, i, j, k, r
  integer :: status(MPI_STATUS_SIZE)
  integer, allocatable :: counts(:), displs(:)
  double precision, allocatable :: u(:, :), v(:, :), mine(:), whole(:)
  double precision :: delta, maxdelta, checksum
  character(len=32) :: arg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  if (command_argument_count() >= 4) then
    call get_command_argument(1, arg)
    read (arg, *) nx
    call get_command_argument(2, arg)
    read (arg, *) ny
    call get_command_argument(3, arg)
    read (arg, *) steps
    call get_command_argument(4, arg)
    read (arg, *) report
  end if
  if (command_argument_count() >= 5) then
    call get_command_argument(5, arg)
    serial = arg == 'serial'
  end if
  if (nx < nprocs .or. ny < 1 .or. steps < 0 .or. report < 1) then
    if (rank == 0) print '(A)', 'stencil: need nx >= ranks, ny >= 1, steps >= 0, report >= 1'
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if

  ! Rows i0 .. i0 + nl - 1 of 1 .. nx are this rank's; local row k is global row i0 + k - 1,
  ! rows 0 and nl + 1 the halos (or the fixed boundary rows 0 and nx + 1).
  nl = nx / nprocs
  i0 = rank * nl + 1 + min(rank, mod(nx, nprocs))
  if (rank < mod(nx, nprocs)) nl = nl + 1
  up = rank - 1
  down = rank + 1
  if (up < 0) up = MPI_PROC_NULL
  if (down >= nprocs) down = MPI_PROC_NULL
  allocate(u(0:nl + 1, 0:ny + 1), v(0:nl + 1, 0:ny + 1))
  do j = 0, ny + 1
    do k = 0, nl + 1
      u(k, j) = boundary(i0 + k - 1, j)
    end do
  end do
  v = u
  call MPI_Type_vector(ny + 2, 1, nl + 2, MPI_DOUBLE_PRECISION, rowtype, ierr)
  call MPI_Type_commit(rowtype, ierr)
  if (rank == 0) print '(A, I0, A, I0, A, I0, A, I0, A)', 'stencil: ', nx, 'x', ny, ' grid, ', &
      steps, ' steps, ', nprocs, ' ranks'

  maxdelta = 0d0
  do step = 1, steps
    ! Halos: the first row goes up while the row below arrives, then the other way.
    call MPI_Sendrecv(u(1, 0), 1, rowtype, up, 1, u(nl + 1, 0), 1, rowtype, down, 1, &
                      MPI_COMM_WORLD, status, ierr)
    call MPI_Sendrecv(u(nl, 0), 1, rowtype, down, 2, u(0, 0), 1, rowtype, up, 2, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    delta = 0d0
    do j = 1, ny
      do k = 1, nl
        v(k, j) = 0.25d0 * (u(k - 1, j) + u(k + 1, j) + u(k, j - 1) + u(k, j + 1))
        delta = max(delta, abs(v(k, j) - u(k, j)))
      end do
    end do
    u(1:nl, 1:ny) = v(1:nl, 1:ny)
    if (mod(step, report) == 0 .or. step == steps) then
      call MPI_Allreduce(delta, maxdelta, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
      if (rank == 0 .and. mod(step, report) == 0) print '(A, I0, A, ES24.16E3)', 'step ', step, &
          ' maxdelta=', maxdelta
    end if
  end do
  call MPI_Type_free(rowtype, ierr)

  ! The grid on rank 0, row by row, for a checksum in grid order.
  allocate(mine(nl * ny), counts(nprocs), displs(nprocs), whole(nx * ny))
  do k = 1, nl
    mine((k - 1) * ny + 1:k * ny) = u(k, 1:ny)
  end do
  call MPI_Gather(nl * ny, 1, MPI_INTEGER, counts, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    displs(1) = 0
    do r = 2, nprocs
      displs(r) = displs(r - 1) + counts(r - 1)
    end do
  end if
  call MPI_Gatherv(mine, nl * ny, MPI_DOUBLE_PRECISION, whole, counts, displs, &
                   MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    checksum = 0d0
    do i = 1, nx
      do j = 1, ny
        checksum = checksum + whole((i - 1) * ny + j) * weight(i, j)
      end do
    end do
    print '(A, ES24.16E3, A, ES24.16E3)', 'checksum=', checksum, ' maxdelta=', maxdelta
    if (serial) print '(A, ES24.16E3)', 'serial checksum=', serial_checksum()
  end if
  call MPI_Finalize(ierr)

contains

  ! The fixed values: 1 on the left edge, rising along the top edge, 0 elsewhere.
  double precision function boundary(i, j)
    integer, intent(in) :: i, j
    boundary = 0d0
    if (j == 0) boundary = 1d0
    if (i == 0 .and. j > 0) boundary = dble(j) / dble(ny + 1)
  end function boundary

  double precision function weight(i, j)
    integer, intent(in) :: i, j
    weight = dble(i) + 1d-3 * dble(j)
  end function weight

  ! The same iteration on the whole grid in one process.
  double precision function serial_checksum()
    double precision, allocatable :: a(:, :), b(:, :)
    integer :: s, ii, jj
    allocate(a(0:nx + 1, 0:ny + 1), b(0:nx + 1, 0:ny + 1))
    do jj = 0, ny + 1
      do ii = 0, nx + 1
        a(ii, jj) = boundary(ii, jj)
      end do
    end do
    b = a
    do s = 1, steps
      do jj = 1, ny
        do ii = 1, nx
          b(ii, jj) = 0.25d0 * (a(ii - 1, jj) + a(ii + 1, jj) + a(ii, jj - 1) + a(ii, jj + 1))
        end do
      end do
      a(1:nx, 1:ny) = b(1:nx, 1:ny)
    end do
    serial_checksum = 0d0
    do ii = 1, nx
      do jj = 1, ny
        serial_checksum = serial_checksum + a(ii, jj) * weight(ii, jj)
      end do
    end do
  end function serial_checksum
end program stencil
