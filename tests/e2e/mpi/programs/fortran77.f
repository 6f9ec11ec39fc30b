! A Fortran 77 MPI program (include 'mpif.h'), self-checking like the C programs of this
! directory (check.h): every rank checks its answers, rank 0 prints "OK fortran77" when all
! ranks passed. Built with gos-fort; plain MPI, correct under Open MPI's mpifort too.
! Checks: LOGICAL results (MPI_INITIALIZED, MPI_IPROBE's flag, LAND on MPI_LOGICAL),
! MPI_ALLREDUCE with MPI_IN_PLACE, MPI_SENDRECV with a real status array (MPI_SOURCE,
! MPI_TAG, MPI_GET_COUNT) and with MPI_STATUS_IGNORE, a derived type (a row of a
! column-major matrix: MPI_TYPE_VECTOR), a reduction written in Fortran (MPI_OP_CREATE),
! MPI_COMPLEX sum, MAXLOC on MPI_2INTEGER, blank-padded strings (communicator name,
! processor name, error string), MPI_COMM_COMPARE.
      PROGRAM F77TEST
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER RANK, NPROCS, IERR, NFAIL, ALLFAIL, I, J, NEXT, PREV
      INTEGER STATUS(MPI_STATUS_SIZE), COUNT, DUP, RESULT, ROWTYPE
      INTEGER IVAL(3), JVAL(3), MYOP, REQ, PAIR(2), RLEN
      LOGICAL FLAG, LVAL
      DOUBLE PRECISION A(4,5), ROW(5), T0
      COMPLEX Z
      CHARACTER*(MPI_MAX_PROCESSOR_NAME) PNAME
      CHARACTER*(MPI_MAX_ERROR_STRING) ESTR
      CHARACTER*40 CNAME
      EXTERNAL IMAX
      COMMON /F77CHK/ NFAIL, RANK

      NFAIL = 0
      RANK = -1
      FLAG = .TRUE.
      CALL MPI_INITIALIZED(FLAG, IERR)
      CALL CHECK(.NOT. FLAG, 'initialized before MPI_INIT', 0)
      CALL MPI_INIT(IERR)
      CALL CHECK(IERR .EQ. MPI_SUCCESS, 'MPI_INIT ierr', IERR)
      CALL MPI_INITIALIZED(FLAG, IERR)
      CALL CHECK(FLAG, 'MPI_INITIALIZED after MPI_INIT', 0)
      CALL MPI_COMM_RANK(MPI_COMM_WORLD, RANK, IERR)
      CALL MPI_COMM_SIZE(MPI_COMM_WORLD, NPROCS, IERR)
      NEXT = MOD(RANK + 1, NPROCS)
      PREV = MOD(RANK + NPROCS - 1, NPROCS)

! Allreduce in place: sum of rank+1, max of rank, sum of 1.
      IVAL(1) = RANK + 1
      IVAL(2) = RANK
      IVAL(3) = 1
      CALL MPI_ALLREDUCE(MPI_IN_PLACE, IVAL, 1, MPI_INTEGER, MPI_SUM,
     &                   MPI_COMM_WORLD, IERR)
      CALL CHECK(IVAL(1) .EQ. NPROCS*(NPROCS+1)/2, 'in-place sum',
     &           IVAL(1))
      CALL CHECK(IVAL(2) .EQ. RANK, 'in place touched element 2',
     &           IVAL(2))

! Sendrecv around the ring, with a status array, then with MPI_STATUS_IGNORE.
      IVAL(1) = 100 + RANK
      IVAL(2) = 200 + RANK
      JVAL(1) = -1
      JVAL(2) = -1
      JVAL(3) = -1
      STATUS(MPI_SOURCE) = -7
      CALL MPI_SENDRECV(IVAL, 2, MPI_INTEGER, NEXT, 10 + RANK,
     &                  JVAL(2), 2, MPI_INTEGER, PREV, MPI_ANY_TAG,
     &                  MPI_COMM_WORLD, STATUS, IERR)
      CALL CHECK(STATUS(MPI_SOURCE) .EQ. PREV, 'status source',
     &           STATUS(MPI_SOURCE))
      CALL CHECK(STATUS(MPI_TAG) .EQ. 10 + PREV, 'status tag',
     &           STATUS(MPI_TAG))
      CALL MPI_GET_COUNT(STATUS, MPI_INTEGER, COUNT, IERR)
      CALL CHECK(COUNT .EQ. 2, 'get_count', COUNT)
      CALL CHECK(JVAL(1) .EQ. -1, 'sendrecv wrote before', JVAL(1))
      CALL CHECK(JVAL(2) .EQ. 100 + PREV, 'sendrecv data 1', JVAL(2))
      CALL CHECK(JVAL(3) .EQ. 200 + PREV, 'sendrecv data 2', JVAL(3))
      CALL MPI_SENDRECV(RANK, 1, MPI_INTEGER, PREV, 3, I, 1,
     &                  MPI_INTEGER, NEXT, 3, MPI_COMM_WORLD,
     &                  MPI_STATUS_IGNORE, IERR)
      CALL CHECK(I .EQ. NEXT, 'sendrecv status ignore', I)

! A row of a 4x5 column-major matrix: 5 elements 4 apart.
      DO 20 J = 1, 5
        DO 10 I = 1, 4
          A(I, J) = 10 * RANK + I + 100 * J
   10   CONTINUE
   20 CONTINUE
      CALL MPI_TYPE_VECTOR(5, 1, 4, MPI_DOUBLE_PRECISION, ROWTYPE,
     &                     IERR)
      CALL MPI_TYPE_COMMIT(ROWTYPE, IERR)
      CALL MPI_SENDRECV(A(2, 1), 1, ROWTYPE, NEXT, 4, ROW, 5,
     &                  MPI_DOUBLE_PRECISION, PREV, 4, MPI_COMM_WORLD,
     &                  STATUS, IERR)
      CALL MPI_GET_COUNT(STATUS, MPI_DOUBLE_PRECISION, COUNT, IERR)
      CALL CHECK(COUNT .EQ. 5, 'row count', COUNT)
      DO 30 J = 1, 5
        CALL CHECK(ROW(J) .EQ. DBLE(10 * PREV + 2 + 100 * J),
     &             'row element', J)
   30 CONTINUE
      CALL MPI_TYPE_FREE(ROWTYPE, IERR)
      CALL CHECK(ROWTYPE .EQ. MPI_DATATYPE_NULL, 'type_free', ROWTYPE)

! A reduction written in Fortran: element-wise maximum.
      CALL MPI_OP_CREATE(IMAX, .TRUE., MYOP, IERR)
      IVAL(1) = RANK
      IVAL(2) = -RANK
      IVAL(3) = MOD(RANK * 5, NPROCS)
      CALL MPI_ALLREDUCE(MPI_IN_PLACE, IVAL, 3, MPI_INTEGER, MYOP,
     &                   MPI_COMM_WORLD, IERR)
      CALL CHECK(IVAL(1) .EQ. NPROCS - 1, 'user op max', IVAL(1))
      CALL CHECK(IVAL(2) .EQ. 0, 'user op max 2', IVAL(2))
      CALL CHECK(IVAL(3) .EQ. NPROCS - 1 .OR. NPROCS .EQ. 5,
     &           'user op max 3', IVAL(3))
      CALL MPI_OP_FREE(MYOP, IERR)
      CALL CHECK(MYOP .EQ. MPI_OP_NULL, 'op_free', MYOP)

! Complex sum, MAXLOC on pairs, LAND on LOGICAL.
      Z = CMPLX(REAL(RANK), 1.0)
      CALL MPI_ALLREDUCE(MPI_IN_PLACE, Z, 1, MPI_COMPLEX, MPI_SUM,
     &                   MPI_COMM_WORLD, IERR)
      CALL CHECK(REAL(Z) .EQ. REAL(NPROCS * (NPROCS - 1) / 2),
     &           'complex sum real part', INT(REAL(Z)))
      CALL CHECK(AIMAG(Z) .EQ. REAL(NPROCS), 'complex sum imag part',
     &           INT(AIMAG(Z)))
      PAIR(1) = MOD(RANK, 2)
      PAIR(2) = RANK
      CALL MPI_ALLREDUCE(MPI_IN_PLACE, PAIR, 1, MPI_2INTEGER,
     &                   MPI_MAXLOC, MPI_COMM_WORLD, IERR)
      I = 0
      IF (NPROCS .GT. 1) I = 1
      CALL CHECK(PAIR(1) .EQ. I, 'maxloc value', PAIR(1))
      CALL CHECK(PAIR(2) .EQ. I, 'maxloc index (lowest rank)', PAIR(2))
      LVAL = RANK .GE. 0
      CALL MPI_ALLREDUCE(MPI_IN_PLACE, LVAL, 1, MPI_LOGICAL, MPI_LAND,
     &                   MPI_COMM_WORLD, IERR)
      CALL CHECK(LVAL, 'LAND of all true', 0)
      LVAL = RANK .EQ. NPROCS - 1
      CALL MPI_ALLREDUCE(MPI_IN_PLACE, LVAL, 1, MPI_LOGICAL, MPI_LAND,
     &                   MPI_COMM_WORLD, IERR)
      CALL CHECK(LVAL .EQV. (NPROCS .EQ. 1), 'LAND of one true', 0)

! MPI_IPROBE's flag: a message to itself, probed until it is there.
      CALL MPI_ISEND(RANK, 1, MPI_INTEGER, RANK, 77, MPI_COMM_WORLD,
     &               REQ, IERR)
      FLAG = .FALSE.
      T0 = MPI_WTIME()
   40 CALL MPI_IPROBE(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, FLAG,
     &                STATUS, IERR)
      IF (.NOT. FLAG .AND. MPI_WTIME() - T0 .LT. 60.0D0) GOTO 40
      CALL CHECK(FLAG, 'iprobe flag', 0)
      CALL CHECK(STATUS(MPI_SOURCE) .EQ. RANK, 'iprobe source',
     &           STATUS(MPI_SOURCE))
      CALL MPI_RECV(I, 1, MPI_INTEGER, RANK, 77, MPI_COMM_WORLD,
     &              MPI_STATUS_IGNORE, IERR)
      CALL MPI_WAIT(REQ, MPI_STATUS_IGNORE, IERR)
      CALL CHECK(REQ .EQ. MPI_REQUEST_NULL, 'wait request', REQ)
      CALL MPI_IPROBE(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, FLAG,
     &                MPI_STATUS_IGNORE, IERR)
      CALL CHECK(.NOT. FLAG, 'iprobe flag after receive', 0)

! Communicator compare, names, processor name, error string.
      CALL MPI_COMM_DUP(MPI_COMM_WORLD, DUP, IERR)
      CALL MPI_COMM_COMPARE(MPI_COMM_WORLD, DUP, RESULT, IERR)
      CALL CHECK(RESULT .EQ. MPI_CONGRUENT, 'compare dup', RESULT)
      CALL MPI_COMM_SET_NAME(DUP, 'f77 dup   ', IERR)
      CNAME = 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'
      CALL MPI_COMM_GET_NAME(DUP, CNAME, RLEN, IERR)
      CALL CHECK(RLEN .EQ. 7, 'name length (trailing blanks cut)', RLEN)
      CALL CHECK(CNAME .EQ. 'f77 dup', 'name blank-padded', 0)
      CALL CHECK(CNAME(8:40) .EQ. ' ', 'name padded with blanks', 0)
      CALL MPI_COMM_FREE(DUP, IERR)
      CALL CHECK(DUP .EQ. MPI_COMM_NULL, 'comm_free', DUP)
      CALL MPI_GET_PROCESSOR_NAME(PNAME, RLEN, IERR)
      CALL CHECK(RLEN .GT. 0, 'processor name length', RLEN)
      CALL CHECK(LEN_TRIM(PNAME) .EQ. RLEN, 'processor name padding',
     &           LEN_TRIM(PNAME))
      CALL CHECK(INDEX(PNAME, CHAR(0)) .EQ. 0, 'NUL in processor name',
     &           0)
      CALL MPI_ERROR_STRING(MPI_ERR_TRUNCATE, ESTR, RLEN, IERR)
      CALL CHECK(RLEN .GT. 0 .AND. LEN_TRIM(ESTR) .EQ. RLEN,
     &           'error string', RLEN)
      CALL CHECK(INDEX(ESTR, CHAR(0)) .EQ. 0, 'NUL in error string', 0)

! Every rank's outcome.
      CALL MPI_ALLREDUCE(NFAIL, ALLFAIL, 1, MPI_INTEGER, MPI_SUM,
     &                   MPI_COMM_WORLD, IERR)
      IF (RANK .EQ. 0 .AND. ALLFAIL .EQ. 0) PRINT '(A)', 'OK fortran77'
      CALL MPI_FINALIZE(IERR)
      CALL MPI_FINALIZED(FLAG, IERR)
      CALL CHECK(FLAG, 'MPI_FINALIZED', 0)
      IF (NFAIL .NE. 0) CALL EXIT(1)
      END

      SUBROUTINE CHECK(COND, WHAT, VALUE)
      LOGICAL COND
      CHARACTER*(*) WHAT
      INTEGER VALUE, NFAIL, RANK
      COMMON /F77CHK/ NFAIL, RANK
      IF (.NOT. COND) THEN
        NFAIL = NFAIL + 1
        PRINT '(A, I0, A, A, A, I0)', 'FAIL fortran77 rank ', RANK,
     &        ': ', WHAT, ': ', VALUE
      END IF
      END

      SUBROUTINE IMAX(INVEC, INOUTVEC, LEN, DATATYPE)
      INTEGER LEN, DATATYPE, I
      INTEGER INVEC(LEN), INOUTVEC(LEN)
      DO 10 I = 1, LEN
        INOUTVEC(I) = MAX(INVEC(I), INOUTVEC(I))
   10 CONTINUE
      END
