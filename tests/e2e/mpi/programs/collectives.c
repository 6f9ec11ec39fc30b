/* collectives: every collective of the subset, checked against a serial reference that each
 * rank computes by itself (every rank's contribution is a formula of its rank):
 *  - Reduce (root rotating) and Allreduce with every predefined op on every basic datatype it
 *    applies to (arithmetic ops: integers and floating point; logical: integers; bitwise:
 *    integers and MPI_BYTE), and MAXLOC/MINLOC on the pair types;
 *  - Bcast, Gather(v), Scatter(v), Allgather(v), Alltoall(v) with int, double and char, from
 *    every root, with gaps in the v-displacements that must stay untouched;
 *  - Barrier: ranks released by it left it no earlier than the last rank entered it.
 * Values are small integers, so floating-point sums are exact in any order. The value ranges
 * keep every reduction within the smallest type up to 25 ranks. */
#include <stddef.h>
#include <time.h>

#include "check.h"

enum { kCount = 37 };

typedef enum {
  kSChar,
  kUChar,
  kShort,
  kUShort,
  kInt,
  kUnsigned,
  kLong,
  kULong,
  kLongLong,
  kFloat,
  kDouble,
  kByte,
  kChar
} Kind;

typedef struct {
  MPI_Datatype type;
  const char* name;
  Kind kind;
} TypeInfo;

static int IsUnsigned(Kind k) {
  return k == kUChar || k == kUShort || k == kUnsigned || k == kULong || k == kByte;
}
static int IsInteger(Kind k) { return k != kFloat && k != kDouble && k != kByte && k != kChar; }

static void Store(Kind k, void* buf, size_t i, long long v) {
  switch (k) {
    case kSChar:
      ((signed char*)buf)[i] = (signed char)v;
      break;
    case kUChar:
      ((unsigned char*)buf)[i] = (unsigned char)v;
      break;
    case kByte:
      ((unsigned char*)buf)[i] = (unsigned char)v;
      break;
    case kChar:
      ((char*)buf)[i] = (char)v;
      break;
    case kShort:
      ((short*)buf)[i] = (short)v;
      break;
    case kUShort:
      ((unsigned short*)buf)[i] = (unsigned short)v;
      break;
    case kInt:
      ((int*)buf)[i] = (int)v;
      break;
    case kUnsigned:
      ((unsigned*)buf)[i] = (unsigned)v;
      break;
    case kLong:
      ((long*)buf)[i] = (long)v;
      break;
    case kULong:
      ((unsigned long*)buf)[i] = (unsigned long)v;
      break;
    case kLongLong:
      ((long long*)buf)[i] = v;
      break;
    case kFloat:
      ((float*)buf)[i] = (float)v;
      break;
    case kDouble:
      ((double*)buf)[i] = (double)v;
      break;
  }
}

static double Load(Kind k, const void* buf, size_t i) {
  switch (k) {
    case kSChar:
      return ((const signed char*)buf)[i];
    case kUChar:
      return ((const unsigned char*)buf)[i];
    case kByte:
      return ((const unsigned char*)buf)[i];
    case kChar:
      return ((const char*)buf)[i];
    case kShort:
      return ((const short*)buf)[i];
    case kUShort:
      return ((const unsigned short*)buf)[i];
    case kInt:
      return ((const int*)buf)[i];
    case kUnsigned:
      return ((const unsigned*)buf)[i];
    case kLong:
      return (double)((const long*)buf)[i];
    case kULong:
      return (double)((const unsigned long*)buf)[i];
    case kLongLong:
      return (double)((const long long*)buf)[i];
    case kFloat:
      return ((const float*)buf)[i];
    case kDouble:
      return ((const double*)buf)[i];
  }
  return 0;
}

typedef enum { kArith, kLogic, kBit } OpClass;
typedef struct {
  MPI_Op op;
  const char* name;
  OpClass cls;
} OpInfo;

static int Applies(const OpInfo* o, Kind k) {
  switch (o->cls) {
    case kArith:
      return k != kByte && k != kChar;
    case kLogic:
      return IsInteger(k);
    case kBit:
      return IsInteger(k) || k == kByte;
  }
  return 0;
}

/* Rank r's element i for op o on a type of kind k. */
static long long Gen(const OpInfo* o, Kind k, int r, int i) {
  const int u = IsUnsigned(k);
  if (o->op == MPI_SUM) return (i * 7 + r * 3) % 11 - (u ? 0 : 5);
  if (o->op == MPI_PROD) {
    const int m = (i + r) % 7;
    return m == 0 ? 2 : (m == 3 && !u ? -1 : 1);
  }
  if (o->op == MPI_MAX || o->op == MPI_MIN) return (i * 13 + r * 29) % 23 - (u ? 0 : 11);
  if (o->cls == kLogic) {
    if (i % 4 == 0) return 1 + r % 3; /* all true */
    if (i % 4 == 1) return 0;         /* all false */
    return (i + r) % 3 == 0 ? 0 : 2;
  }
  return (i * 37 + r * 101 + 13) & 0x7f;
}

static long long Combine(const OpInfo* o, long long a, long long b) {
  if (o->op == MPI_SUM) return a + b;
  if (o->op == MPI_PROD) return a * b;
  if (o->op == MPI_MAX) return a > b ? a : b;
  if (o->op == MPI_MIN) return a < b ? a : b;
  if (o->op == MPI_LAND) return a && b;
  if (o->op == MPI_LOR) return a || b;
  if (o->op == MPI_LXOR) return !a != !b;
  if (o->op == MPI_BAND) return a & b;
  if (o->op == MPI_BOR) return a | b;
  return a ^ b; /* MPI_BXOR */
}

/* Logical ops compare truth values (MPI says "true", Open MPI writes 1). */
static int Wrong(const OpInfo* o, double got, long long want) {
  return o->cls == kLogic ? (got != 0) != (want != 0) : got != (double)want;
}

static void TestReductions(void) {
  const TypeInfo types[] = {
      {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", kSChar},
      {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", kUChar},
      {MPI_SHORT, "MPI_SHORT", kShort},
      {MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", kUShort},
      {MPI_INT, "MPI_INT", kInt},
      {MPI_UNSIGNED, "MPI_UNSIGNED", kUnsigned},
      {MPI_LONG, "MPI_LONG", kLong},
      {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", kULong},
      {MPI_LONG_LONG, "MPI_LONG_LONG", kLongLong},
      {MPI_FLOAT, "MPI_FLOAT", kFloat},
      {MPI_DOUBLE, "MPI_DOUBLE", kDouble},
      {MPI_BYTE, "MPI_BYTE", kByte},
  };
  const OpInfo ops[] = {
      {MPI_SUM, "MPI_SUM", kArith},   {MPI_PROD, "MPI_PROD", kArith}, {MPI_MAX, "MPI_MAX", kArith},
      {MPI_MIN, "MPI_MIN", kArith},   {MPI_LAND, "MPI_LAND", kLogic}, {MPI_LOR, "MPI_LOR", kLogic},
      {MPI_LXOR, "MPI_LXOR", kLogic}, {MPI_BAND, "MPI_BAND", kBit},   {MPI_BOR, "MPI_BOR", kBit},
      {MPI_BXOR, "MPI_BXOR", kBit},
  };
  int combo = 0;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t) {
    const TypeInfo* ty = &types[t];
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; ++o) {
      const OpInfo* op = &ops[o];
      if (!Applies(op, ty->kind)) continue;
      unsigned char in[kCount * 8], out[kCount * 8];
      long long ref[kCount];
      for (int i = 0; i < kCount; ++i) {
        Store(ty->kind, in, (size_t)i, Gen(op, ty->kind, g_rank, i));
        ref[i] = Gen(op, ty->kind, 0, i);
        for (int r = 1; r < g_size; ++r) ref[i] = Combine(op, ref[i], Gen(op, ty->kind, r, i));
      }
      memset(out, 0xa5, sizeof out);
      MPI_Allreduce(in, out, kCount, ty->type, op->op, MPI_COMM_WORLD);
      int bad = 0, first = -1;
      for (int i = 0; i < kCount; ++i) {
        const int wrong = Wrong(op, Load(ty->kind, out, (size_t)i), ref[i]);
        if (wrong && first < 0) first = i;
        bad += wrong;
      }
      CHECK(bad == 0, "Allreduce %s %s: %d of %d wrong, e.g. [%d] = %g, expected %lld", ty->name,
            op->name, bad, kCount, first, first < 0 ? 0 : Load(ty->kind, out, (size_t)first),
            first < 0 ? 0 : ref[first]);
      bad = 0;
      for (int i = 0; i < kCount; ++i) {
        bad += Load(ty->kind, in, (size_t)i) != (double)Gen(op, ty->kind, g_rank, i);
      }
      CHECK(bad == 0, "Allreduce %s %s changed the send buffer", ty->name, op->name);

      const int root = combo++ % g_size;
      memset(out, 0xa5, sizeof out);
      MPI_Reduce(in, out, kCount, ty->type, op->op, root, MPI_COMM_WORLD);
      if (g_rank == root) {
        bad = 0;
        for (int i = 0; i < kCount; ++i) bad += Wrong(op, Load(ty->kind, out, (size_t)i), ref[i]);
        CHECK(bad == 0, "Reduce %s %s to root %d: %d of %d wrong", ty->name, op->name, root, bad,
              kCount);
      }
    }
  }
}

typedef struct {
  float v;
  int k;
} FloatInt;
typedef struct {
  double v;
  int k;
} DoubleInt;
typedef struct {
  long v;
  int k;
} LongInt;
typedef struct {
  int v;
  int k;
} TwoInt;
typedef struct {
  short v;
  int k;
} ShortInt;

static int LocValue(int r, int i) { return (i * 5 + r * 11) % 7 - 3; /* ties on purpose */ }

static void TestLoc(void) {
  const struct {
    MPI_Datatype type;
    const char* name;
    Kind kind;
    size_t size, index_offset;
  } pairs[] = {
      {MPI_FLOAT_INT, "MPI_FLOAT_INT", kFloat, sizeof(FloatInt), offsetof(FloatInt, k)},
      {MPI_DOUBLE_INT, "MPI_DOUBLE_INT", kDouble, sizeof(DoubleInt), offsetof(DoubleInt, k)},
      {MPI_LONG_INT, "MPI_LONG_INT", kLong, sizeof(LongInt), offsetof(LongInt, k)},
      {MPI_2INT, "MPI_2INT", kInt, sizeof(TwoInt), offsetof(TwoInt, k)},
      {MPI_SHORT_INT, "MPI_SHORT_INT", kShort, sizeof(ShortInt), offsetof(ShortInt, k)},
  };
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; ++p) {
    for (int is_max = 0; is_max < 2; ++is_max) {
      unsigned char in[kCount * 16], out[kCount * 16];
      memset(in, 0, sizeof in);
      for (int i = 0; i < kCount; ++i) {
        unsigned char* e = in + (size_t)i * pairs[p].size;
        Store(pairs[p].kind, e, 0, LocValue(g_rank, i));
        const int k = g_rank * 10 + 1; /* the "location": not simply the rank */
        memcpy(e + pairs[p].index_offset, &k, sizeof k);
      }
      const MPI_Op op = is_max ? MPI_MAXLOC : MPI_MINLOC;
      for (int all = 0; all < 2; ++all) {
        const int root = (int)(p % (size_t)g_size);
        memset(out, 0, sizeof out);
        if (all) {
          MPI_Allreduce(in, out, kCount, pairs[p].type, op, MPI_COMM_WORLD);
        } else {
          MPI_Reduce(in, out, kCount, pairs[p].type, op, root, MPI_COMM_WORLD);
          if (g_rank != root) continue;
        }
        int bad = 0;
        for (int i = 0; i < kCount; ++i) {
          /* The best value; on ties the lowest location (MPI's rule). */
          int best = 0;
          for (int r = 1; r < g_size; ++r) {
            if (is_max ? LocValue(r, i) > LocValue(best, i) : LocValue(r, i) < LocValue(best, i)) {
              best = r;
            }
          }
          const unsigned char* e = out + (size_t)i * pairs[p].size;
          int k;
          memcpy(&k, e + pairs[p].index_offset, sizeof k);
          bad += Load(pairs[p].kind, e, 0) != (double)LocValue(best, i) || k != best * 10 + 1;
        }
        CHECK(bad == 0, "%s %s %s: %d of %d wrong", all ? "Allreduce" : "Reduce",
              is_max ? "MPI_MAXLOC" : "MPI_MINLOC", pairs[p].name, bad, kCount);
      }
    }
  }
}

/* Element i of what rank r contributes in the data-movement collectives. */
static long long Val(int r, int i) { return (r * 31 + i * 7) % 100; }
static int Cnt(int r) { return r % 3 + 1; }
enum { kSentinel = 111 };

static void TestMovement(void) {
  const TypeInfo types[] = {{MPI_INT, "MPI_INT", kInt},
                            {MPI_DOUBLE, "MPI_DOUBLE", kDouble},
                            {MPI_CHAR, "MPI_CHAR", kChar}};
  const int n = g_size;
  int* counts = malloc(sizeof(int) * (size_t)n);
  int* displs = malloc(sizeof(int) * (size_t)n);
  int total = 0; /* v-layout: block r at displs[r], one sentinel element after each block */
  for (int r = 0; r < n; ++r) {
    counts[r] = Cnt(r);
    displs[r] = total;
    total += counts[r] + 1;
  }
  const size_t cap = (size_t)(total + 8 * n + 128) * sizeof(double);
  unsigned char* a = malloc(cap);
  unsigned char* b = malloc(cap);
  int* sc = malloc(sizeof(int) * (size_t)n);
  int* sd = malloc(sizeof(int) * (size_t)n);
  int* rc = malloc(sizeof(int) * (size_t)n);
  int* rd = malloc(sizeof(int) * (size_t)n);
  for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t) {
    const Kind k = types[t].kind;
    const MPI_Datatype ty = types[t].type;
    const char* tn = types[t].name;
    int bad;
    for (int root = 0; root < n; ++root) {
      /* Bcast of 100 elements */
      for (int i = 0; i < 100; ++i) Store(k, a, (size_t)i, g_rank == root ? Val(root, i) : 0);
      MPI_Bcast(a, 100, ty, root, MPI_COMM_WORLD);
      bad = 0;
      for (int i = 0; i < 100; ++i) bad += Load(k, a, (size_t)i) != (double)Val(root, i);
      CHECK(bad == 0, "Bcast %s from %d: %d wrong", tn, root, bad);

      /* Gather, 5 each */
      for (int i = 0; i < 5; ++i) Store(k, a, (size_t)i, Val(g_rank, i));
      for (int i = 0; i < 5 * n; ++i) Store(k, b, (size_t)i, kSentinel);
      MPI_Gather(a, 5, ty, b, 5, ty, root, MPI_COMM_WORLD);
      if (g_rank == root) {
        bad = 0;
        for (int r = 0; r < n; ++r) {
          for (int i = 0; i < 5; ++i) bad += Load(k, b, (size_t)(r * 5 + i)) != (double)Val(r, i);
        }
        CHECK(bad == 0, "Gather %s to %d: %d wrong", tn, root, bad);
      }

      /* Gatherv: Cnt(r) from rank r at displs[r]; the gaps stay untouched */
      for (int i = 0; i < Cnt(g_rank); ++i) Store(k, a, (size_t)i, Val(g_rank, i));
      for (int i = 0; i < total; ++i) Store(k, b, (size_t)i, kSentinel);
      MPI_Gatherv(a, Cnt(g_rank), ty, b, counts, displs, ty, root, MPI_COMM_WORLD);
      if (g_rank == root) {
        bad = 0;
        for (int r = 0; r < n; ++r) {
          for (int i = 0; i < counts[r]; ++i) {
            bad += Load(k, b, (size_t)(displs[r] + i)) != (double)Val(r, i);
          }
          bad += Load(k, b, (size_t)(displs[r] + counts[r])) != kSentinel;
        }
        CHECK(bad == 0, "Gatherv %s to %d: %d wrong", tn, root, bad);
      }

      /* Scatter, 5 each: block r is Val(r + root, i) */
      if (g_rank == root) {
        for (int r = 0; r < n; ++r) {
          for (int i = 0; i < 5; ++i) Store(k, a, (size_t)(r * 5 + i), Val(r + root, i));
        }
      }
      for (int i = 0; i < 6; ++i) Store(k, b, (size_t)i, kSentinel);
      MPI_Scatter(a, 5, ty, b, 5, ty, root, MPI_COMM_WORLD);
      bad = 0;
      for (int i = 0; i < 5; ++i) bad += Load(k, b, (size_t)i) != (double)Val(g_rank + root, i);
      bad += Load(k, b, 5) != kSentinel;
      CHECK(bad == 0, "Scatter %s from %d: %d wrong", tn, root, bad);

      /* Scatterv */
      if (g_rank == root) {
        for (int r = 0; r < n; ++r) {
          for (int i = 0; i < counts[r]; ++i) {
            Store(k, a, (size_t)(displs[r] + i), Val(r + root, i));
          }
        }
      }
      for (int i = 0; i < 4; ++i) Store(k, b, (size_t)i, kSentinel);
      MPI_Scatterv(a, counts, displs, ty, b, Cnt(g_rank), ty, root, MPI_COMM_WORLD);
      bad = 0;
      for (int i = 0; i < Cnt(g_rank); ++i) {
        bad += Load(k, b, (size_t)i) != (double)Val(g_rank + root, i);
      }
      bad += Load(k, b, (size_t)Cnt(g_rank)) != kSentinel;
      CHECK(bad == 0, "Scatterv %s from %d: %d wrong", tn, root, bad);
    }

    /* Allgather, 3 each */
    for (int i = 0; i < 3; ++i) Store(k, a, (size_t)i, Val(g_rank, i));
    MPI_Allgather(a, 3, ty, b, 3, ty, MPI_COMM_WORLD);
    bad = 0;
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < 3; ++i) bad += Load(k, b, (size_t)(r * 3 + i)) != (double)Val(r, i);
    }
    CHECK(bad == 0, "Allgather %s: %d wrong", tn, bad);

    /* Allgatherv */
    for (int i = 0; i < Cnt(g_rank); ++i) Store(k, a, (size_t)i, Val(g_rank, i));
    for (int i = 0; i < total; ++i) Store(k, b, (size_t)i, kSentinel);
    MPI_Allgatherv(a, Cnt(g_rank), ty, b, counts, displs, ty, MPI_COMM_WORLD);
    bad = 0;
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < counts[r]; ++i) {
        bad += Load(k, b, (size_t)(displs[r] + i)) != (double)Val(r, i);
      }
      bad += Load(k, b, (size_t)(displs[r] + counts[r])) != kSentinel;
    }
    CHECK(bad == 0, "Allgatherv %s: %d wrong", tn, bad);

    /* Alltoall: 2 elements from r to q, Val(r * n + q, i) */
    for (int q = 0; q < n; ++q) {
      for (int i = 0; i < 2; ++i) Store(k, a, (size_t)(q * 2 + i), Val(g_rank * n + q, i));
    }
    MPI_Alltoall(a, 2, ty, b, 2, ty, MPI_COMM_WORLD);
    bad = 0;
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < 2; ++i) {
        bad += Load(k, b, (size_t)(r * 2 + i)) != (double)Val(r * n + g_rank, i);
      }
    }
    CHECK(bad == 0, "Alltoall %s: %d wrong", tn, bad);

    /* Alltoallv: (r + q) % 3 elements from r to q (some none), sent packed, received with a
     * sentinel after each block */
    int so = 0, ro = 0;
    for (int q = 0; q < n; ++q) {
      sc[q] = (g_rank + q) % 3;
      sd[q] = so;
      so += sc[q];
      rc[q] = (q + g_rank) % 3;
      rd[q] = ro;
      ro += rc[q] + 1;
    }
    for (int q = 0; q < n; ++q) {
      for (int i = 0; i < sc[q]; ++i) Store(k, a, (size_t)(sd[q] + i), Val(g_rank * n + q, i));
    }
    for (int i = 0; i < ro; ++i) Store(k, b, (size_t)i, kSentinel);
    MPI_Alltoallv(a, sc, sd, ty, b, rc, rd, ty, MPI_COMM_WORLD);
    bad = 0;
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < rc[r]; ++i) {
        bad += Load(k, b, (size_t)(rd[r] + i)) != (double)Val(r * n + g_rank, i);
      }
      bad += Load(k, b, (size_t)(rd[r] + rc[r])) != kSentinel;
    }
    CHECK(bad == 0, "Alltoallv %s: %d wrong", tn, bad);
  }
  free(sc);
  free(sd);
  free(rc);
  free(rd);
  free(a);
  free(b);
  free(counts);
  free(displs);
}

/* Rank 0 enters the second of two barriers 200 ms late; everyone else must wait for it. The
 * bound (100 ms) leaves room for ranks released late from the first barrier. */
static void TestBarrier(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  if (g_rank == 0) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double waited = MPI_Wtime() - t0;
  CHECK(waited >= 0.1, "left the barrier after %.3f s, before rank 0 (200 ms late) entered",
        waited);
}

int main(int argc, char** argv) {
  StartTest(&argc, &argv, "collectives");
  TestReductions();
  TestLoc();
  TestMovement();
  TestBarrier();
  return FinishTest();
}
