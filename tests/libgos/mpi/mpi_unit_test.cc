// The MPI subset. Pure parts: datatype layout and packing, counts, op/type validity,
// Comm_split grouping and context derivation. With gos_rank (GOS_MPI_LOOPBACK): the MPI calls
// end to end in forked ranks served by a minimal nodeagent in the test process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gos/bcs/channel.h"
#include "gos/gos.h"
#include "libgos/mpi/comm_logic.h"
#include "libgos/mpi/datatype.h"
#include "mpi.h"

namespace gos::mpi {
namespace {

TEST(MpiDatatype, BasicSizesMatchC) {
  EXPECT_EQ(BasicTypeSize(GOS_INT), sizeof(int));
  EXPECT_EQ(BasicTypeSize(GOS_DOUBLE), sizeof(double));
  EXPECT_EQ(BasicTypeSize(GOS_LONG_DOUBLE), sizeof(long double));
  struct DoubleInt {
    double d;
    int i;
  };
  struct ShortInt {
    short s;
    int i;
  };
  EXPECT_EQ(BasicTypeSize(GOS_DOUBLE_INT), sizeof(DoubleInt));
  EXPECT_EQ(BasicTypeSize(GOS_SHORT_INT), sizeof(ShortInt));
  EXPECT_EQ(BasicTypeSize(GOS_2INT), 2 * sizeof(int));
  EXPECT_EQ(BasicTypeSize(GOS_TYPE_COUNT), 0u);
  EXPECT_EQ(BasicType(-1), nullptr);
  ASSERT_NE(BasicType(GOS_INT), nullptr);
  EXPECT_TRUE(BasicType(GOS_INT)->contiguous);
}

TEST(MpiDatatype, HandlesAreGosEnumsPlusOne) {
  EXPECT_EQ(MPI_DOUBLE - 1, GOS_DOUBLE);
  EXPECT_EQ(MPI_LONG_LONG_INT, MPI_LONG_LONG);
  EXPECT_EQ(MPI_2INT - 1, GOS_2INT);
  EXPECT_EQ(MPI_BAND - 1, GOS_BAND);
}

TEST(MpiDatatype, ContiguousOfBasicIsContiguous) {
  auto t = MakeContiguous(5, BasicType(GOS_INT));
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->contiguous);
  EXPECT_EQ(t->size, 5 * sizeof(int));
  EXPECT_EQ(t->extent(), static_cast<ptrdiff_t>(5 * sizeof(int)));
}

TEST(MpiDatatype, VectorLayoutAndPackUnpack) {
  // Column 1 of a 4x3 row-major int matrix: 4 blocks of 1, stride 3.
  auto col = MakeVector(4, 1, 3, BasicType(GOS_INT));
  ASSERT_NE(col, nullptr);
  EXPECT_FALSE(col->contiguous);
  EXPECT_EQ(col->size, 4 * sizeof(int));
  EXPECT_EQ(col->lb, 0);
  EXPECT_EQ(col->extent(), static_cast<ptrdiff_t>(10 * sizeof(int)));  // (3*3 + 1) ints

  std::vector<int> m(12);
  std::iota(m.begin(), m.end(), 0);
  std::vector<int> packed(4, -1);
  Pack(m.data() + 1, 1, *col, packed.data());
  EXPECT_EQ(packed, (std::vector<int>{1, 4, 7, 10}));

  std::vector<int> out(12, -1);
  Unpack(packed.data(), packed.size() * sizeof(int), 1, *col, out.data() + 1);
  EXPECT_EQ(out, (std::vector<int>{-1, 1, -1, -1, 4, -1, -1, 7, -1, -1, 10, -1}));
}

TEST(MpiDatatype, BlocksOfMixedTypesPackInBlockOrderAndSkipGaps) {
  struct S {
    double d;
    char c;  // then padding
    int i[2];
  };
  auto t = MakeBlocks({{offsetof(S, d), 1, BasicType(GOS_DOUBLE)},
                       {offsetof(S, c), 1, BasicType(GOS_CHAR)},
                       {offsetof(S, i), 2, BasicType(GOS_INT)}},
                      /*pad=*/true);
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->contiguous);  // the padding after c
  EXPECT_EQ(t->size, sizeof(double) + 1 + 2 * sizeof(int));
  EXPECT_EQ(t->lb, 0);
  // The data ends with i[1] at 20; padded to the alignment of double, as C does: 24.
  EXPECT_EQ(t->extent(), static_cast<ptrdiff_t>(sizeof(S)));
  EXPECT_EQ(MakeBlocks(t->blocks)->extent(), 20);  // unpadded (hindexed-like)
  auto resized = MakeResized(t, 0, sizeof(S) + 8);
  ASSERT_NE(resized, nullptr);
  EXPECT_EQ(resized->extent(), static_cast<ptrdiff_t>(sizeof(S) + 8));
  EXPECT_EQ(resized->size, t->size);

  // Two elements of the resized type: element 1 starts sizeof(S) + 8 bytes after element 0.
  std::vector<char> mem(2 * (sizeof(S) + 8), 0);
  S a{1.5, 'x', {7, 8}}, b{2.5, 'y', {9, 10}};
  std::memcpy(mem.data(), &a, sizeof a);
  std::memcpy(mem.data() + sizeof(S) + 8, &b, sizeof b);
  std::vector<char> packed(2 * t->size);
  Pack(mem.data(), 2, *resized, packed.data());
  std::vector<char> out(mem.size(), 'z');
  Unpack(packed.data(), packed.size(), 2, *resized, out.data());
  S a2, b2;
  std::memcpy(&a2, out.data(), sizeof a2);
  std::memcpy(&b2, out.data() + sizeof(S) + 8, sizeof b2);
  EXPECT_EQ(a2.d, 1.5);
  EXPECT_EQ(a2.c, 'x');
  EXPECT_EQ(a2.i[1], 8);
  EXPECT_EQ(b2.d, 2.5);
  EXPECT_EQ(b2.i[0], 9);
  EXPECT_EQ(out[offsetof(S, c) + 1], 'z');  // padding untouched
  EXPECT_EQ(out[sizeof(S) + 3], 'z');       // the 8 resized bytes untouched

  // Blocks that tile [0, size) in order are one contiguous run; out of order they are not.
  auto run = MakeBlocks({{0, 2, BasicType(GOS_INT)}, {2 * sizeof(int), 1, BasicType(GOS_INT)}});
  ASSERT_NE(run, nullptr);
  EXPECT_TRUE(run->contiguous);
  auto swapped = MakeBlocks({{sizeof(int), 1, BasicType(GOS_INT)}, {0, 1, BasicType(GOS_INT)}});
  ASSERT_NE(swapped, nullptr);
  EXPECT_FALSE(swapped->contiguous);
  std::vector<int> two = {5, 6}, packed2(2);
  Pack(two.data(), 1, *swapped, packed2.data());
  EXPECT_EQ(packed2, (std::vector<int>{6, 5}));
  EXPECT_EQ(MakeBlocks({{0, -1, BasicType(GOS_INT)}}), nullptr);
}

TEST(MpiDatatype, VectorBlocksAndCountStepByExtent) {
  // 2 blocks of 2 doubles, stride 3: data at 0,1,3,4; extent 5 doubles.
  auto v = MakeVector(2, 2, 3, BasicType(GOS_DOUBLE));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->extent(), static_cast<ptrdiff_t>(5 * sizeof(double)));
  std::vector<double> src(10);
  std::iota(src.begin(), src.end(), 0.0);
  // Two elements: the second starts one extent (5 doubles) later.
  std::vector<double> packed(8);
  Pack(src.data(), 2, *v, packed.data());
  EXPECT_EQ(packed, (std::vector<double>{0, 1, 3, 4, 5, 6, 8, 9}));
  std::vector<double> back(10, -1);
  Unpack(packed.data(), packed.size() * sizeof(double), 2, *v, back.data());
  EXPECT_EQ(back, (std::vector<double>{0, 1, -1, 3, 4, 5, 6, -1, 8, 9}));
}

TEST(MpiDatatype, NestedVectorOfVector) {
  // Inner: 2 ints with a gap (stride 2) -> data at 0, 2; extent 3 ints.
  auto inner = MakeVector(2, 1, 2, BasicType(GOS_INT));
  // Outer: 3 inner elements contiguous by extent (stride 1 extent = 3 ints), then a gap:
  // 2 blocks of 1 inner, stride 2 inner extents (6 ints).
  auto outer = MakeVector(2, 1, 2, inner);
  ASSERT_NE(outer, nullptr);
  EXPECT_FALSE(outer->contiguous);
  EXPECT_EQ(outer->size, 4 * sizeof(int));
  // Blocks at 0 and 6 ints; each spans 3 ints: extent 9 ints.
  EXPECT_EQ(outer->extent(), static_cast<ptrdiff_t>(9 * sizeof(int)));
  std::vector<int> src(9);
  std::iota(src.begin(), src.end(), 100);
  std::vector<int> packed(4);
  Pack(src.data(), 1, *outer, packed.data());
  EXPECT_EQ(packed, (std::vector<int>{100, 102, 106, 108}));
  std::vector<int> back(9, 0);
  Unpack(packed.data(), 4 * sizeof(int), 1, *outer, back.data());
  EXPECT_EQ(back, (std::vector<int>{100, 0, 102, 0, 0, 0, 106, 0, 108}));

  // A contiguous of a non-contiguous type stays non-contiguous and packs both copies.
  auto two = MakeContiguous(2, inner);
  EXPECT_FALSE(two->contiguous);
  std::vector<int> p2(4);
  Pack(src.data(), 1, *two, p2.data());
  EXPECT_EQ(p2, (std::vector<int>{100, 102, 103, 105}));
}

TEST(MpiDatatype, NestedContiguousStaysContiguous) {
  auto a = MakeContiguous(3, BasicType(GOS_SHORT));
  auto b = MakeContiguous(4, a);
  auto c = MakeVector(2, 2, 2, b);  // stride == blocklen: no gaps
  EXPECT_TRUE(a->contiguous);
  EXPECT_TRUE(b->contiguous);
  EXPECT_TRUE(c->contiguous);
  EXPECT_EQ(c->size, 2 * 2 * 4 * 3 * sizeof(short));
}

TEST(MpiDatatype, UnpackOfShortMessageWritesOnlyWhatArrived) {
  auto col = MakeVector(4, 1, 2, BasicType(GOS_INT));
  std::vector<int> packed = {7, 8, 9, 10};
  std::vector<int> out(8, 0);
  Unpack(packed.data(), 2 * sizeof(int), 1, *col, out.data());
  EXPECT_EQ(out, (std::vector<int>{7, 0, 8, 0, 0, 0, 0, 0}));
}

TEST(MpiDatatype, NegativeStrideHasLowerBoundBelowZero) {
  auto v = MakeVector(3, 1, -2, BasicType(GOS_INT));
  EXPECT_EQ(v->lb, -4 * static_cast<ptrdiff_t>(sizeof(int)));
  EXPECT_EQ(v->ub, static_cast<ptrdiff_t>(sizeof(int)));
  EXPECT_FALSE(v->contiguous);
  std::vector<int> src = {0, 1, 2, 3, 4};
  std::vector<int> packed(3);
  Pack(src.data() + 4, 1, *v, packed.data());
  EXPECT_EQ(packed, (std::vector<int>{4, 2, 0}));
}

TEST(MpiDatatype, RejectsNegativeCounts) {
  EXPECT_EQ(MakeVector(-1, 1, 1, BasicType(GOS_INT)), nullptr);
  EXPECT_EQ(MakeVector(1, -1, 1, BasicType(GOS_INT)), nullptr);
  EXPECT_EQ(MakeContiguous(2, nullptr), nullptr);
}

// MPI_Get_elements: basic elements in whole elements, then in a partial one, packed order.
TEST(MpiDatatype, ElementsOfCountsBasicElementsOfPartialElements) {
  // { double; char; int[2] }: 4 basic elements, 8 + 1 + 8 = 17 bytes of data.
  auto s = MakeBlocks(
      {{0, 1, BasicType(GOS_DOUBLE)}, {8, 1, BasicType(GOS_CHAR)}, {12, 2, BasicType(GOS_INT)}});
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->size, 17u);
  EXPECT_EQ(ElementsOf(0, *s, -1), 0);
  EXPECT_EQ(ElementsOf(2 * 17, *s, -1), 8);
  EXPECT_EQ(ElementsOf(17 + 8, *s, -1), 5);          // + the double
  EXPECT_EQ(ElementsOf(17 + 8 + 1 + 4, *s, -1), 7);  // + double, char, one int
  EXPECT_EQ(ElementsOf(17 + 3, *s, -1), -1);         // ends inside the double
  // A vector of 3 blocks of 2 ints: 6 basic elements; 5 ints arrived.
  auto v = MakeVector(3, 2, 4, BasicType(GOS_INT));
  EXPECT_EQ(ElementsOf(5 * sizeof(int), *v, -1), 5);
  EXPECT_EQ(ElementsOf(5 * sizeof(int) + 1, *v, -1), -1);
  // A basic type: the same as the count.
  EXPECT_EQ(ElementsOf(12 * sizeof(double), *BasicType(GOS_DOUBLE), -1), 12);
}

// MPI_Type_get_true_extent: the data's span, not the (resized) bounds.
TEST(MpiDatatype, TrueBoundsSpanTheDataOnly) {
  const ptrdiff_t i = sizeof(int);
  using Bounds = std::pair<ptrdiff_t, ptrdiff_t>;
  EXPECT_EQ(TrueBounds(*BasicType(GOS_INT)), Bounds(0, i));
  // 3 blocks of 2 ints, stride 4: the last int is element 9.
  EXPECT_EQ(TrueBounds(*MakeVector(3, 2, 4, BasicType(GOS_INT))), Bounds(0, 10 * i));
  // A negative stride reaches below the start.
  EXPECT_EQ(TrueBounds(*MakeVector(3, 1, -2, BasicType(GOS_INT))), Bounds(-4 * i, i));
  // Resized bounds do not count; a displaced block does.
  auto resized = MakeResized(BasicType(GOS_INT), -4, 16);
  ASSERT_NE(resized, nullptr);
  EXPECT_EQ(resized->lb, -4);
  EXPECT_EQ(TrueBounds(*resized), Bounds(0, i));
  auto blocks = MakeBlocks({{8, 2, BasicType(GOS_INT)}, {32, 1, BasicType(GOS_DOUBLE)}});
  EXPECT_EQ(TrueBounds(*blocks), Bounds(8, 40));
  // Two of the resized int, 16 bytes apart: data at 0..4 and 16..20.
  EXPECT_EQ(TrueBounds(*MakeContiguous(2, resized)), Bounds(0, 16 + i));
  EXPECT_EQ(TrueBounds(*MakeContiguous(0, BasicType(GOS_INT))), Bounds(0, 0));
}

TEST(MpiDatatype, CountOf) {
  EXPECT_EQ(CountOf(12, *BasicType(GOS_INT), MPI_UNDEFINED), 3);
  EXPECT_EQ(CountOf(13, *BasicType(GOS_INT), MPI_UNDEFINED), MPI_UNDEFINED);
  EXPECT_EQ(CountOf(0, *BasicType(GOS_DOUBLE), MPI_UNDEFINED), 0);
  auto col = MakeVector(4, 1, 3, BasicType(GOS_INT));
  EXPECT_EQ(CountOf(32, *col, MPI_UNDEFINED), 2);  // counts elements of the derived type
  EXPECT_EQ(CountOf(8, *col, MPI_UNDEFINED), MPI_UNDEFINED);
  auto empty = MakeContiguous(0, BasicType(GOS_INT));
  EXPECT_EQ(CountOf(0, *empty, MPI_UNDEFINED), 0);
}

TEST(MpiDatatype, FlattenGivesBasicRunsInPackedOrderMergingAdjacentOnes) {
  const ptrdiff_t i = sizeof(int);
  // Contiguous ints merge into one run, over elements too.
  EXPECT_EQ(Flatten(3, *MakeContiguous(4, BasicType(GOS_INT))),
            (std::vector<FlatRun>{{0, GOS_INT, 12}}));
  EXPECT_EQ(Flatten(0, *BasicType(GOS_INT)), std::vector<FlatRun>{});
  // A column of a 4x3 matrix: one int per row; the second element starts one extent (10 ints)
  // later, so its first int (at 10) does not merge with the first element's last (at 9).
  auto col = MakeVector(4, 1, 3, BasicType(GOS_INT));
  EXPECT_EQ(Flatten(2, *col), (std::vector<FlatRun>{{0, GOS_INT, 1},
                                                    {3 * i, GOS_INT, 1},
                                                    {6 * i, GOS_INT, 1},
                                                    {9 * i, GOS_INT, 2},
                                                    {13 * i, GOS_INT, 1},
                                                    {16 * i, GOS_INT, 1},
                                                    {19 * i, GOS_INT, 1}}));
  // Mixed types in block order (not address order), negative displacements kept.
  auto mixed = MakeBlocks({{8, 1, BasicType(GOS_DOUBLE)}, {-4, 2, BasicType(GOS_INT)}});
  EXPECT_EQ(Flatten(1, *mixed), (std::vector<FlatRun>{{8, GOS_DOUBLE, 1}, {-4, GOS_INT, 2}}));
  // Every run's values add up to the packed size.
  auto nested = MakeVector(3, 2, 5, MakeResized(mixed, -8, 32));
  size_t bytes = 0;
  for (const FlatRun& r : Flatten(2, *nested)) bytes += r.n * BasicTypeSize(r.basic);
  EXPECT_EQ(bytes, PackedSize(2, *nested));
}

TEST(MpiOps, Validity) {
  EXPECT_TRUE(OpValid(GOS_SUM, GOS_DOUBLE));
  EXPECT_TRUE(OpValid(GOS_SUM, GOS_UINT64));
  EXPECT_TRUE(OpValid(GOS_MAX, GOS_LONG_DOUBLE));
  EXPECT_FALSE(OpValid(GOS_SUM, GOS_BYTE));
  EXPECT_FALSE(OpValid(GOS_SUM, GOS_C_BOOL));
  EXPECT_FALSE(OpValid(GOS_BAND, GOS_DOUBLE));
  EXPECT_FALSE(OpValid(GOS_BXOR, GOS_FLOAT));
  EXPECT_TRUE(OpValid(GOS_BAND, GOS_BYTE));
  EXPECT_TRUE(OpValid(GOS_BOR, GOS_UNSIGNED));
  EXPECT_TRUE(OpValid(GOS_LAND, GOS_C_BOOL));
  EXPECT_TRUE(OpValid(GOS_LXOR, GOS_INT));
  EXPECT_FALSE(OpValid(GOS_LOR, GOS_DOUBLE));
  EXPECT_TRUE(OpValid(GOS_MINLOC, GOS_DOUBLE_INT));
  EXPECT_TRUE(OpValid(GOS_MAXLOC, GOS_2INT));
  EXPECT_FALSE(OpValid(GOS_MINLOC, GOS_DOUBLE));
  EXPECT_FALSE(OpValid(GOS_SUM, GOS_2INT));
  EXPECT_FALSE(OpValid(GOS_OP_COUNT, GOS_INT));
  EXPECT_FALSE(OpValid(GOS_SUM, GOS_TYPE_COUNT));
  // Every (op, type) pair with a pair type is valid exactly for MINLOC / MAXLOC.
  for (int op = 0; op < GOS_OP_COUNT; ++op) {
    for (int t = GOS_FLOAT_INT; t <= GOS_LONG_DOUBLE_INT; ++t) {
      EXPECT_EQ(OpValid(op, t), op == GOS_MINLOC || op == GOS_MAXLOC) << op << " " << t;
    }
  }
}

TEST(MpiCommSplit, GroupsByColorOrdersByKeyThenRank) {
  // parent rank:  0       1       2       3       4        5
  std::vector<SplitEntry> e = {{1, 5}, {0, 0}, {1, 5}, {0, -1}, {1, 0}, {MPI_UNDEFINED, 0}};
  EXPECT_EQ(SplitMembers(e, 0, MPI_UNDEFINED), (std::vector<int>{4, 0, 2}));
  EXPECT_EQ(SplitMembers(e, 2, MPI_UNDEFINED), (std::vector<int>{4, 0, 2}));
  EXPECT_EQ(SplitMembers(e, 1, MPI_UNDEFINED), (std::vector<int>{3, 1}));
  EXPECT_TRUE(SplitMembers(e, 5, MPI_UNDEFINED).empty());
  EXPECT_TRUE(SplitMembers(e, 6, MPI_UNDEFINED).empty());
}

TEST(MpiCommSplit, AllSameKeyKeepsParentOrder) {
  std::vector<SplitEntry> e(7, SplitEntry{3, 42});
  std::vector<int> want(7);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(SplitMembers(e, 3, MPI_UNDEFINED), want);
}

TEST(MpiGroupRanges, ExpandsTripletsInOrder) {
  std::vector<int> r;
  const int ranges[][3] = {{6, 2, -2}, {1, 7, 6}, {3, 3, 1}};
  ASSERT_TRUE(ExpandRanges(3, ranges, 8, &r));
  EXPECT_EQ(r, (std::vector<int>{6, 4, 2, 1, 7, 3}));
  r.clear();
  const int last_not_reached[][3] = {{0, 6, 4}};  // 0, 4: the stride steps over 6
  ASSERT_TRUE(ExpandRanges(1, last_not_reached, 8, &r));
  EXPECT_EQ(r, (std::vector<int>{0, 4}));
}

TEST(MpiGroupRanges, RejectsBadTriplets) {
  std::vector<int> r;
  const int zero_stride[][3] = {{0, 3, 0}};
  const int outside[][3] = {{0, 8, 1}};
  const int away[][3] = {{5, 1, 1}};
  const int twice[][3] = {{0, 4, 2}, {2, 3, 1}};
  EXPECT_FALSE(ExpandRanges(1, zero_stride, 8, &r));
  EXPECT_FALSE(ExpandRanges(1, outside, 8, &r));
  EXPECT_FALSE(ExpandRanges(1, away, 8, &r));
  EXPECT_FALSE(ExpandRanges(2, twice, 8, &r));
  EXPECT_FALSE(ExpandRanges(-1, nullptr, 8, &r));
}

TEST(MpiCommCreateGroup, KeyDependsOnMembersTheirOrderAndTag) {
  const std::vector<int> a = {0, 2, 4}, b = {4, 2, 0};
  EXPECT_EQ(GroupKey(a, 7), GroupKey(std::vector<int>{0, 2, 4}, 7));
  EXPECT_NE(GroupKey(a, 7), GroupKey(b, 7));
  EXPECT_NE(GroupKey(a, 7), GroupKey(a, 8));
  EXPECT_NE(GroupKey(a, 0), GroupKey(std::vector<int>{0, 2}, 0));
}

TEST(MpiTopology, DimsCreateIsBalancedNonIncreasingAndKeepsGivenEntries) {
  auto dims = [](int n, std::vector<int> d) { return DimsCreate(n, d) ? d : std::vector<int>{-1}; };
  EXPECT_EQ(dims(6, {0, 0}), (std::vector<int>{3, 2}));
  EXPECT_EQ(dims(12, {0, 0}), (std::vector<int>{4, 3}));
  EXPECT_EQ(dims(16, {0, 0}), (std::vector<int>{4, 4}));
  EXPECT_EQ(dims(7, {0, 0}), (std::vector<int>{7, 1}));
  EXPECT_EQ(dims(24, {0, 0, 0}), (std::vector<int>{4, 3, 2}));
  EXPECT_EQ(dims(16, {0, 2, 0}), (std::vector<int>{4, 2, 2}));
  EXPECT_EQ(dims(1, {0, 0, 0}), (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(dims(6, {3, 2}), (std::vector<int>{3, 2}));
  EXPECT_EQ(dims(7, {0, 2}), (std::vector<int>{-1}));  // 7 is not a multiple of 2
  EXPECT_EQ(dims(6, {4, 0}), (std::vector<int>{-1}));
  EXPECT_EQ(dims(6, {3, 3}), (std::vector<int>{-1}));  // all given, product 9
  EXPECT_EQ(dims(6, {-1, 0}), (std::vector<int>{-1}));
  EXPECT_EQ(dims(0, {0}), (std::vector<int>{-1}));
}

TEST(MpiTopology, DimsCreateFindsTheClosestFactorsNotAGreedySplit) {
  auto dims = [](int n, std::vector<int> d) { return DimsCreate(n, d) ? d : std::vector<int>{-1}; };
  // Handing out prime factors largest first gives 12 x 6, 28 x 18, 30 x 18.
  EXPECT_EQ(dims(72, {0, 0}), (std::vector<int>{9, 8}));
  EXPECT_EQ(dims(504, {0, 0}), (std::vector<int>{24, 21}));
  EXPECT_EQ(dims(540, {0, 0}), (std::vector<int>{27, 20}));
  EXPECT_EQ(dims(100, {0, 0, 0}), (std::vector<int>{5, 5, 4}));
  // Equal spreads (21 - 15 = 20 - 14): the larger smallest factor, as MPICH answers.
  EXPECT_EQ(dims(5040, {0, 0, 0}), (std::vector<int>{21, 16, 15}));
  EXPECT_EQ(dims(2 * 504, {2, 0, 0}), (std::vector<int>{2, 24, 21}));
  EXPECT_EQ(dims(1, {}), (std::vector<int>{}));  // 0 dimensions: valid, nothing to fill
  // A large prime and a large power of two stay quick.
  EXPECT_EQ(dims(2147483647, {0, 0}), (std::vector<int>{2147483647, 1}));
  EXPECT_EQ(dims(1 << 30, {0, 0, 0}), (std::vector<int>{1024, 1024, 1024}));
}

TEST(MpiTopology, CartRanksCoordsAndShiftsAreRowMajorWithPeriodicWrap) {
  Cart c{{3, 4}, {true, false}};  // 12 ranks: rank = x * 4 + y
  EXPECT_EQ(c.Size(), 12);
  for (int r = 0; r < 12; ++r) {
    std::vector<int> xy = CartCoords(c, r);
    EXPECT_EQ(xy, (std::vector<int>{r / 4, r % 4}));
    EXPECT_EQ(CartRank(c, xy), r);
  }
  EXPECT_EQ(CartRank(c, std::vector<int>{-1, 2}), 2 * 4 + 2);  // x wraps
  EXPECT_EQ(CartRank(c, std::vector<int>{4, 0}), 4);
  EXPECT_EQ(CartRank(c, std::vector<int>{0, 4}), -1);  // y does not
  EXPECT_EQ(CartRank(c, std::vector<int>{0, -1}), -1);
  EXPECT_EQ(CartRank(c, std::vector<int>{0}), -1);  // wrong number of coordinates
  // Rank 5 = (1, 1).
  EXPECT_EQ(CartShift(c, 5, 0, 1), (std::pair<int, int>{1, 9}));
  EXPECT_EQ(CartShift(c, 5, 0, 2), (std::pair<int, int>{9, 1}));  // (-1+3)%3 = 2, (1+2)%3 = 0
  EXPECT_EQ(CartShift(c, 5, 1, 1), (std::pair<int, int>{4, 6}));
  EXPECT_EQ(CartShift(c, 4, 1, 1), (std::pair<int, int>{-1, 5}));  // the left edge
  EXPECT_EQ(CartShift(c, 7, 1, 1), (std::pair<int, int>{6, -1}));  // the right edge
  EXPECT_EQ(CartShift(c, 5, 1, -1), (std::pair<int, int>{6, 4}));
}

TEST(MpiTopology, CartNeighborsAreSourceThenDestinationPerDimension) {
  Cart c{{3, 4}, {true, false}};
  EXPECT_EQ(CartNeighbors(c, 5), (std::vector<int>{1, 9, 4, 6}));     // (1, 1)
  EXPECT_EQ(CartNeighbors(c, 0), (std::vector<int>{8, 4, -1, 1}));    // x wraps, y's left edge
  EXPECT_EQ(CartNeighbors(c, 11), (std::vector<int>{7, 3, 10, -1}));  // y's right edge
  // A periodic dimension of 2 has one neighbour twice, one of 1 the rank itself.
  Cart ring{{2, 1}, {true, true}};
  EXPECT_EQ(CartNeighbors(ring, 0), (std::vector<int>{1, 1, 0, 0}));
  Cart line{{1}, {false}};
  EXPECT_EQ(CartNeighbors(line, 0), (std::vector<int>{-1, -1}));
}

TEST(MpiTopology, CartSubGroupsByDroppedCoordsAndRanksByKeptOnes) {
  Cart c{{2, 3, 4}, {true, false, true}};  // rank = (x * 3 + y) * 4 + z
  // Keep y: sub-grids are the (x, z) lines, 8 of them, each 3 ranks ordered by y.
  const std::vector<int> keep_y = {0, 1, 0};
  std::map<int, std::vector<int>> groups;  // color -> ranks by key
  for (int r = 0; r < c.Size(); ++r) {
    CartSubResult sub = CartSub(c, r, keep_y);
    const std::vector<int> xyz = CartCoords(c, r);
    EXPECT_EQ(sub.color, xyz[0] * 4 + xyz[2]) << r;
    EXPECT_EQ(sub.key, xyz[1]) << r;
    EXPECT_EQ(sub.sub.dims, (std::vector<int>{3}));
    EXPECT_EQ(sub.sub.periods, (std::vector<bool>{false}));
    auto& g = groups[sub.color];
    if (g.size() <= static_cast<size_t>(sub.key)) g.resize(static_cast<size_t>(sub.key) + 1, -1);
    g[static_cast<size_t>(sub.key)] = r;
  }
  EXPECT_EQ(groups.size(), 8u);
  EXPECT_EQ(groups[1 * 4 + 2], (std::vector<int>{14, 18, 22}));  // x = 1, z = 2
  // Keep x and z: 3 planes of 2 x 4; rank 17 = (1, 1, 1) is key 1 * 4 + 1 in plane y = 1.
  CartSubResult xz = CartSub(c, 17, std::vector<int>{1, 0, 1});
  EXPECT_EQ(xz.color, 1);
  EXPECT_EQ(xz.key, 5);
  EXPECT_EQ(xz.sub.dims, (std::vector<int>{2, 4}));
  EXPECT_EQ(xz.sub.periods, (std::vector<bool>{true, true}));
  EXPECT_EQ(CartCoords(xz.sub, xz.key), (std::vector<int>{1, 1}));
  // Keep none: each rank alone, a 0-dimensional grid of size 1.
  CartSubResult none = CartSub(c, 17, std::vector<int>{0, 0, 0});
  EXPECT_EQ(none.color, 17);
  EXPECT_EQ(none.key, 0);
  EXPECT_TRUE(none.sub.dims.empty());
  EXPECT_EQ(none.sub.Size(), 1);
  // Keep all: one grid, the same ranks.
  CartSubResult all = CartSub(c, 17, std::vector<int>{1, 1, 1});
  EXPECT_EQ(all.color, 0);
  EXPECT_EQ(all.key, 17);
  EXPECT_EQ(all.sub.dims, c.dims);
}

TEST(MpiContext, DeterministicReservedFreeAndDistinct) {
  const uint64_t a = DeriveContext(GOS_CTX_WORLD, 0, kDupSalt);
  EXPECT_EQ(a, DeriveContext(GOS_CTX_WORLD, 0, kDupSalt));
  std::set<uint64_t> seen = {GOS_CTX_WORLD, GOS_CTX_SELF};
  // Children of world and of its children, over serials and colors: all distinct, valid.
  std::vector<uint64_t> parents = {GOS_CTX_WORLD, GOS_CTX_SELF, a};
  for (uint64_t p : parents) {
    for (uint64_t serial = 0; serial < 50; ++serial) {
      for (uint64_t salt : {uint64_t{0}, uint64_t{1}, uint64_t{7}, kDupSalt}) {
        const uint64_t c = DeriveContext(p, serial, salt);
        EXPECT_EQ(c & GOS_CTX_COLLECTIVE_BIT, 0u);
        EXPECT_GT(c, 2u);
        seen.insert(c);
      }
    }
  }
  // 3 parents x 50 serials x 4 salts, plus world and self; `a` is among the derived ones.
  EXPECT_EQ(seen.size(), 3u * 50u * 4u + 2u);
  EXPECT_NE(DeriveContext(GOS_CTX_WORLD, 1, 0), DeriveContext(GOS_CTX_WORLD, 0, 1));
}

}  // namespace

#ifdef GOS_MPI_LOOPBACK
// ---------------------------------------------------------------------------------------------
// The MPI library end to end: N forked ranks, each with a real channel, served by a minimal
// nodeagent in the test process (matching in arrival order, data moved with
// process_vm_readv/writev). It stands in for the real nodeagent so that the library's calls are
// checked on real gos_rank.

namespace loopback {

using bcs::Completion;
using bcs::Descriptor;
using bcs::Op;

struct Channel {
  std::string path;
  void* base = nullptr;
  bcs::ChannelHeader* h = nullptr;
  pid_t pid = -1;
  int status = -1;  // wait status once exited
  std::vector<Completion> out;
};

struct Pending {
  int rank;
  Descriptor d;
};

class Agent {
 public:
  explicit Agent(int n) : ch_(static_cast<size_t>(n)) {
    static int counter = 0;
    for (int r = 0; r < n; ++r) {
      Channel& c = ch_[static_cast<size_t>(r)];
      c.path = "/dev/shm/gos-mpitest-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
      const int fd = open(c.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      EXPECT_GE(fd, 0);
      EXPECT_EQ(ftruncate(fd, bcs::kChannelBytes), 0);
      c.base = mmap(nullptr, bcs::kChannelBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      c.h = static_cast<bcs::ChannelHeader*>(c.base);
      c.h->magic = bcs::kChannelMagic;
      c.h->version = bcs::kChannelVersion;
      c.h->rank = static_cast<uint32_t>(r);
      c.h->size = static_cast<uint32_t>(n);
      c.h->job = 1;
      c.h->bytes = bcs::kChannelBytes;
    }
  }
  ~Agent() {
    for (Channel& c : ch_) {
      if (c.pid > 0 && c.status < 0) kill(c.pid, SIGKILL);
      munmap(c.base, bcs::kChannelBytes);
      unlink(c.path.c_str());
    }
  }

  // Forks every rank into body(rank) and serves them until all exit; returns exit codes
  // (-1 for a rank killed at the deadline).
  std::vector<int> Run(const std::function<int(int)>& body) {
    fflush(stdout);
    fflush(stderr);
    const int n = static_cast<int>(ch_.size());
    for (int r = 0; r < n; ++r) {
      const pid_t pid = fork();
      if (pid == 0) {
        setenv("GOS_CHANNEL", ch_[static_cast<size_t>(r)].path.c_str(), 1);
        setenv("GOS_RANK", std::to_string(r).c_str(), 1);
        setenv("GOS_SIZE", std::to_string(n).c_str(), 1);
        _exit(body(r));
      }
      ch_[static_cast<size_t>(r)].pid = pid;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    int alive = n;
    while (alive > 0) {
      Serve();
      for (Channel& c : ch_) {
        if (c.status >= 0) continue;
        int st = 0;
        if (waitpid(c.pid, &st, WNOHANG) == c.pid) {
          c.status = st;
          --alive;
        }
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "ranks did not finish in time";
        for (Channel& c : ch_) {
          if (c.status < 0) {
            kill(c.pid, SIGKILL);
            waitpid(c.pid, &c.status, 0);
          }
        }
        break;
      }
      timespec ts{0, 100'000};
      nanosleep(&ts, nullptr);
    }
    std::vector<int> codes;
    for (const Channel& c : ch_) {
      codes.push_back(WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1);
    }
    return codes;
  }

 private:
  static bool Matches(const Descriptor& recv, const Pending& send) {
    return send.d.context == recv.context &&
           (recv.peer == bcs::kAnySource || recv.peer == send.rank) &&
           (recv.tag == bcs::kAnyTag || recv.tag == send.d.tag);
  }

  void Complete(int rank, const Descriptor& d, int32_t error, uint64_t len = 0, int32_t source = -1,
                int32_t tag = -1, uint32_t flags = 0) {
    Completion c;
    c.req = d.req;
    c.len = len;
    c.source = source;
    c.tag = tag;
    c.error = error;
    c.flags = flags;
    ch_[static_cast<size_t>(rank)].out.push_back(c);
  }

  // Copies [src_addr, +len) of rank `from` to [dst_addr, +len) of rank `to`.
  void Move(int from, uint64_t src_addr, int to, uint64_t dst_addr, uint64_t len) {
    if (len == 0) return;
    std::vector<char> tmp(len);
    iovec local{tmp.data(), len};
    iovec remote{reinterpret_cast<void*>(src_addr), len};
    EXPECT_EQ(process_vm_readv(ch_[static_cast<size_t>(from)].pid, &local, 1, &remote, 1, 0),
              static_cast<ssize_t>(len));
    remote.iov_base = reinterpret_cast<void*>(dst_addr);
    EXPECT_EQ(process_vm_writev(ch_[static_cast<size_t>(to)].pid, &local, 1, &remote, 1, 0),
              static_cast<ssize_t>(len));
  }

  void Serve() {
    // Take every rank's new descriptors, in rank order.
    for (size_t r = 0; r < ch_.size(); ++r) {
      bcs::ChannelHeader* h = ch_[r].h;
      const uint64_t head = h->desc_head.load(std::memory_order_acquire);
      uint64_t tail = h->desc_tail.load(std::memory_order_relaxed);
      for (; tail != head; ++tail) {
        const Descriptor d = bcs::DescRing(ch_[r].base)[tail % bcs::kDescSlots];
        Take(static_cast<int>(r), d);
      }
      h->desc_tail.store(tail, std::memory_order_release);
    }
    Match();
    for (Channel& c : ch_) {
      if (c.out.empty()) continue;
      uint64_t head = c.h->compl_head.load(std::memory_order_relaxed);
      size_t i = 0;
      for (; i < c.out.size() &&
             head - c.h->compl_tail.load(std::memory_order_acquire) < bcs::kComplSlots;
           ++i, ++head) {
        bcs::ComplRing(c.base)[head % bcs::kComplSlots] = c.out[i];
      }
      c.out.erase(c.out.begin(), c.out.begin() + static_cast<ptrdiff_t>(i));
      c.h->compl_head.store(head, std::memory_order_release);
      c.h->wake.fetch_add(1, std::memory_order_release);
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&c.h->wake), FUTEX_WAKE, INT_MAX, nullptr,
              nullptr, 0);
    }
  }

  void Take(int rank, const Descriptor& d) {
    switch (static_cast<Op>(d.op)) {
      case Op::kSend:
        sends_.push_back({rank, d});
        break;
      case Op::kRecv:
        recvs_.push_back({rank, d});
        break;
      case Op::kProbe:
        probes_.push_back({rank, d});
        break;
      case Op::kBarrier:
      case Op::kBcast: {
        auto& group = colls_[{d.context, d.tag}];
        group.push_back({rank, d});
        if (group.size() < d.group_size) break;
        for (const Pending& p : group) {
          int32_t err = bcs::kOk;
          uint64_t len = p.d.len;
          if (static_cast<Op>(d.op) == Op::kBcast && p.rank != p.d.peer) {
            const Pending* root = nullptr;
            for (const Pending& q : group) {
              if (q.rank == q.d.peer) root = &q;
            }
            EXPECT_NE(root, nullptr);
            len = std::min(root->d.len, p.d.len);
            if (root->d.len > p.d.len) err = bcs::kErrTruncate;
            Move(root->rank, root->d.addr, p.rank, p.d.addr, len);
          }
          Complete(p.rank, p.d, err, len);
        }
        colls_.erase({d.context, d.tag});
        break;
      }
      default:
        Complete(rank, d, bcs::kErrArg);
    }
  }

  void Match() {
    for (auto r = recvs_.begin(); r != recvs_.end();) {
      auto s = std::find_if(sends_.begin(), sends_.end(), [&](const Pending& p) {
        return p.d.peer == r->rank && Matches(r->d, p);
      });
      if (s == sends_.end()) {
        ++r;
        continue;
      }
      const uint64_t len = std::min(s->d.len, r->d.len);
      Move(s->rank, s->d.addr, r->rank, r->d.addr, len);
      Complete(r->rank, r->d, s->d.len > r->d.len ? bcs::kErrTruncate : bcs::kOk, len, s->rank,
               s->d.tag);
      Complete(s->rank, s->d, bcs::kOk, s->d.len);
      sends_.erase(s);
      r = recvs_.erase(r);
    }
    for (auto p = probes_.begin(); p != probes_.end();) {
      auto s = std::find_if(sends_.begin(), sends_.end(), [&](const Pending& q) {
        return q.d.peer == p->rank && Matches(p->d, q);
      });
      if (s != sends_.end()) {
        Complete(p->rank, p->d, bcs::kOk, s->d.len, s->rank, s->d.tag, bcs::kComplFound);
      } else if (p->d.flags & bcs::kFlagNonBlocking) {
        Complete(p->rank, p->d, bcs::kOk);
      } else {
        ++p;
        continue;
      }
      p = probes_.erase(p);
    }
  }

  std::vector<Channel> ch_;
  std::deque<Pending> sends_;  // unmatched, in arrival order
  std::deque<Pending> recvs_;  // posted, in arrival order
  std::deque<Pending> probes_;
  std::map<std::pair<uint64_t, int32_t>, std::vector<Pending>> colls_;
};

// Rank-side check: on failure print where and leave the rank with exit code 2.
#define RANK_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "rank check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      _exit(2);                                                                       \
    }                                                                                 \
  } while (0)

std::vector<int> RunRanks(int n, const std::function<int(int)>& body) {
  Agent agent(n);
  return agent.Run(body);
}

TEST(MpiLoopback, PointToPointDerivedTypesAndCompletion) {
  auto codes = RunRanks(4, [](int) {
    MPI_Init(nullptr, nullptr);
    int rank = -1;
    int size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    RANK_CHECK(size == 4);
    const int next = (rank + 1) % size;
    const int prev = (rank + size - 1) % size;

    // Sendrecv around the ring; a status reports source, tag and count.
    int out[3] = {rank, rank * 10, rank * 100};
    int in[3] = {0, 0, 0};
    MPI_Status st;
    MPI_Sendrecv(out, 3, MPI_INT, next, 5, in, 3, MPI_INT, prev, 5, MPI_COMM_WORLD, &st);
    RANK_CHECK(in[0] == prev && in[2] == prev * 100);
    RANK_CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 5);
    int count = -1;
    MPI_Get_count(&st, MPI_INT, &count);
    RANK_CHECK(count == 3);
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    RANK_CHECK(count == MPI_UNDEFINED || count == 1);  // 12 bytes: not whole doubles

    // MPI_PROC_NULL completes at once with an empty status.
    MPI_Send(out, 3, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
    MPI_Recv(in, 3, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st);
    RANK_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
    MPI_Get_count(&st, MPI_INT, &count);
    RANK_CHECK(count == 0);

    // A column of a 4x4 matrix sent as a vector type, received as 4 contiguous ints and
    // back into a column.
    MPI_Datatype col;
    MPI_Type_vector(4, 1, 4, MPI_INT, &col);
    MPI_Type_commit(&col);
    int m[16];
    for (int i = 0; i < 16; ++i) m[i] = rank * 1000 + i;
    int got[4] = {0, 0, 0, 0};
    MPI_Request reqs[2];
    MPI_Irecv(got, 4, MPI_INT, prev, 6, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(m + 2, 1, col, next, 6, MPI_COMM_WORLD, &reqs[1]);
    MPI_Status sts[2];
    MPI_Waitall(2, reqs, sts);
    RANK_CHECK(reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL);
    for (int i = 0; i < 4; ++i) RANK_CHECK(got[i] == prev * 1000 + 2 + 4 * i);
    int back[16] = {0};
    MPI_Request r;
    MPI_Irecv(back + 1, 1, col, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r);
    MPI_Send(got, 4, MPI_INT, next, 8, MPI_COMM_WORLD);
    MPI_Wait(&r, &st);
    RANK_CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 8);
    MPI_Get_count(&st, col, &count);
    RANK_CHECK(count == 1);
    // `got` of prev holds the column of prev's predecessor.
    const int prev2 = (prev + size - 1) % size;
    for (int i = 0; i < 4; ++i) RANK_CHECK(back[1 + 4 * i] == prev2 * 1000 + 2 + 4 * i);
    RANK_CHECK(back[0] == 0 && back[2] == 0);
    MPI_Type_free(&col);
    RANK_CHECK(col == MPI_DATATYPE_NULL);

    // Waitany / Testall / Waitsome on receives that complete in a known order.
    if (rank == 0) {
      int vals[3] = {-1, -1, -1};
      MPI_Request rs[3];
      for (int i = 0; i < 3; ++i) {
        MPI_Irecv(&vals[i], 1, MPI_INT, i + 1, 9, MPI_COMM_WORLD, &rs[i]);
      }
      int flag = 1;
      MPI_Testall(3, rs, &flag, MPI_STATUSES_IGNORE);
      RANK_CHECK(flag == 0 || vals[0] == 1);
      MPI_Barrier(MPI_COMM_WORLD);  // the senders post only after this
      int index = -1;
      MPI_Waitany(3, rs, &index, &st);
      RANK_CHECK(index >= 0 && index < 3 && rs[index] == MPI_REQUEST_NULL);
      RANK_CHECK(st.MPI_SOURCE == index + 1 && vals[index] == index + 1);
      int done = 1;
      while (done < 3) {
        int outcount = 0;
        int idx[3];
        MPI_Waitsome(3, rs, &outcount, idx, MPI_STATUSES_IGNORE);
        RANK_CHECK(outcount >= 1);
        done += outcount;
      }
      int outcount = 0;
      int idx[3];
      MPI_Waitsome(3, rs, &outcount, idx, MPI_STATUSES_IGNORE);
      RANK_CHECK(outcount == MPI_UNDEFINED);
      MPI_Testany(3, rs, &index, &flag, MPI_STATUS_IGNORE);
      RANK_CHECK(flag == 1 && index == MPI_UNDEFINED);
      RANK_CHECK(vals[0] == 1 && vals[1] == 2 && vals[2] == 3);
    } else {
      MPI_Barrier(MPI_COMM_WORLD);
      MPI_Ssend(&rank, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
    }

    // Probe then receive exactly the probed size.
    if (rank == 1) {
      double d[5] = {1, 2, 3, 4, 5};
      MPI_Send(d, 5, MPI_DOUBLE, 2, 11, MPI_COMM_WORLD);
    } else if (rank == 2) {
      MPI_Probe(MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, MPI_DOUBLE, &count);
      RANK_CHECK(st.MPI_SOURCE == 1 && count == 5);
      double d[5] = {0};
      MPI_Recv(d, count, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      RANK_CHECK(d[4] == 5.0);
      int flag = 1;
      MPI_Iprobe(MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &flag, &st);
      RANK_CHECK(flag == 0);
    }
    MPI_Finalize();
    int fin = 0;
    MPI_Finalized(&fin);
    RANK_CHECK(fin == 1);
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0, 0}));
}

TEST(MpiLoopback, TruncationReturnsWithErrorsReturnAndIsFatalByDefault) {
  auto codes = RunRanks(2, [](int) {
    MPI_Init(nullptr, nullptr);
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int four[4] = {1, 2, 3, 4};
    int two[2] = {0, 0};
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    RANK_CHECK(eh == MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rank == 0) {
      MPI_Send(four, 4, MPI_INT, 1, 3, MPI_COMM_WORLD);
    } else {
      MPI_Status st;
      st.MPI_ERROR = MPI_SUCCESS;
      const int err = MPI_Recv(two, 2, MPI_INT, 0, 3, MPI_COMM_WORLD, &st);
      RANK_CHECK(err == MPI_ERR_TRUNCATE);
      RANK_CHECK(st.MPI_ERROR == MPI_ERR_TRUNCATE);
      RANK_CHECK(two[0] == 1 && two[1] == 2);
      char text[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(err, text, &len);
      RANK_CHECK(std::string(text) == "message truncated" && len == 17);
      // Argument errors come back too.
      RANK_CHECK(MPI_Send(four, 1, MPI_INT, 7, 0, MPI_COMM_WORLD) == MPI_ERR_RANK);
      RANK_CHECK(MPI_Send(four, -1, MPI_INT, 0, 0, MPI_COMM_WORLD) == MPI_ERR_COUNT);
      RANK_CHECK(MPI_Allreduce(four, two, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD) == MPI_ERR_OP);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    // Fatal by default: rank 1's truncated receive ends the process with code 1.
    if (rank == 0) {
      MPI_Send(four, 4, MPI_INT, 1, 4, MPI_COMM_WORLD);
      MPI_Finalize();
      return 0;
    }
    MPI_Recv(two, 2, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return 0;  // not reached
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 1}));
}

TEST(MpiLoopback, CollectivesAndCommunicators) {
  auto codes = RunRanks(4, [](int) {
    int provided = -1;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    RANK_CHECK(provided == MPI_THREAD_FUNNELED);
    int rank = -1;
    int n = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    double v[2] = {0, 0};
    if (rank == 2) v[0] = 3.5, v[1] = -1;
    MPI_Bcast(v, 2, MPI_DOUBLE, 2, MPI_COMM_WORLD);
    RANK_CHECK(v[0] == 3.5 && v[1] == -1);

    long mine = rank + 1;
    long sum = 0;
    MPI_Reduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, 1, MPI_COMM_WORLD);
    if (rank == 1) RANK_CHECK(sum == 10);
    long prod = mine;
    MPI_Allreduce(MPI_IN_PLACE, &prod, 1, MPI_LONG, MPI_PROD, MPI_COMM_WORLD);
    RANK_CHECK(prod == 24);
    struct {
      double value;
      int index;
    } loc = {static_cast<double>((rank * 3) % 4), rank}, best;
    MPI_Allreduce(&loc, &best, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    RANK_CHECK(best.value == 3 && best.index == 1);

    // Gather / Scatter / Allgather / Alltoall(v).
    int all[4] = {-1, -1, -1, -1};
    int me = rank * rank;
    MPI_Gather(&me, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) RANK_CHECK(all[1] == 1 && all[3] == 9);
    int piece = -1;
    int src[4] = {40, 41, 42, 43};
    MPI_Scatter(src, 1, MPI_INT, &piece, 1, MPI_INT, 3, MPI_COMM_WORLD);
    RANK_CHECK(piece == 40 + rank);
    int ag[4] = {-1, -1, -1, -1};
    ag[rank] = 7 * rank;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ag, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < 4; ++i) RANK_CHECK(ag[i] == 7 * i);
    int a2a_out[4];
    int a2a_in[4];
    for (int i = 0; i < 4; ++i) a2a_out[i] = rank * 10 + i;
    MPI_Alltoall(a2a_out, 1, MPI_INT, a2a_in, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < 4; ++i) RANK_CHECK(a2a_in[i] == i * 10 + rank);
    // Gatherv: rank i contributes i+1 ints; root packs them from offset 0 with no gaps.
    int gv_send[4] = {rank, rank, rank, rank};
    int gv_recv[10];
    int counts[4] = {1, 2, 3, 4};
    int displs[4] = {0, 1, 3, 6};
    MPI_Gatherv(gv_send, rank + 1, MPI_INT, gv_recv, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
      RANK_CHECK(gv_recv[0] == 0 && gv_recv[2] == 1 && gv_recv[5] == 2 && gv_recv[9] == 3);
    // Alltoallv: rank r sends j+1 copies of r to rank j.
    int sc[4], sd[4], rc[4], rd[4];
    int sb[10], rb[16];
    for (int j = 0, off = 0; j < 4; ++j) {
      sc[j] = j + 1;
      sd[j] = off;
      for (int k = 0; k < j + 1; ++k) sb[off + k] = rank;
      off += j + 1;
      rc[j] = rank + 1;
      rd[j] = 4 * j;
    }
    MPI_Alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, MPI_COMM_WORLD);
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < rank + 1; ++k) RANK_CHECK(rb[4 * j + k] == j);
    }

    // Comm_split by parity, keys reversing the order; collectives inside the halves.
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    int hr = -1;
    int hs = -1;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    RANK_CHECK(hs == 2);
    RANK_CHECK(hr == (rank >= 2 ? 0 : 1));
    int hsum = 0;
    MPI_Allreduce(&rank, &hsum, 1, MPI_INT, MPI_SUM, half);
    RANK_CHECK(hsum == (rank % 2 == 0 ? 2 : 4));
    int peer = -1;
    MPI_Sendrecv(&rank, 1, MPI_INT, 1 - hr, 0, &peer, 1, MPI_INT, 1 - hr, 0, half,
                 MPI_STATUS_IGNORE);
    RANK_CHECK(peer == (rank % 2 == 0 ? 2 - rank : 4 - rank));
    // A dup is a separate context: a message on it does not match a receive on the parent.
    MPI_Comm dup;
    MPI_Comm_dup(half, &dup);
    int x = -1;
    int y = -1;
    MPI_Request rq[2];
    MPI_Irecv(&x, 1, MPI_INT, 1 - hr, 0, half, &rq[0]);
    MPI_Irecv(&y, 1, MPI_INT, 1 - hr, 0, dup, &rq[1]);
    int on_dup = 100 + rank;
    int on_half = 200 + rank;
    MPI_Send(&on_dup, 1, MPI_INT, 1 - hr, 0, dup);
    MPI_Send(&on_half, 1, MPI_INT, 1 - hr, 0, half);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    RANK_CHECK(x == 200 + peer && y == 100 + peer);
    MPI_Barrier(dup);
    MPI_Comm none;
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &none);
    RANK_CHECK((rank == 0) == (none == MPI_COMM_NULL));
    if (none != MPI_COMM_NULL) {
      int s = 0;
      MPI_Comm_size(none, &s);
      RANK_CHECK(s == 3);
      MPI_Comm_free(&none);
    }
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
    RANK_CHECK(half == MPI_COMM_NULL);
    MPI_Finalize();
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0, 0}));
}

// Attribute callbacks: counted per keyval in a log the rank checks.
struct AttrLog {
  int copies = 0, deletes = 0;
  std::vector<long> deleted;  // values, in delete order
};
int CountingCopy(MPI_Comm, int, void* extra, void* in, void* out, int* flag) {
  auto* log = static_cast<AttrLog*>(extra);
  ++log->copies;
  *static_cast<void**>(out) = reinterpret_cast<void*>(reinterpret_cast<long>(in) + 100);
  *flag = 1;
  return MPI_SUCCESS;
}
int CountingDelete(MPI_Comm, int, void* value, void* extra) {
  auto* log = static_cast<AttrLog*>(extra);
  ++log->deletes;
  log->deleted.push_back(reinterpret_cast<long>(value));
  return MPI_SUCCESS;
}
int FailingCopy(MPI_Comm, int, void*, void*, void*, int*) { return MPI_ERR_OTHER; }

TEST(MpiLoopback, AttributeCallbacksOnDupFreeDeleteAndReplace) {
  auto codes = RunRanks(1, [](int) {
    MPI_Init(nullptr, nullptr);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    AttrLog log, plain_log;
    int counted = MPI_KEYVAL_INVALID, plain = MPI_KEYVAL_INVALID, dup_fn = MPI_KEYVAL_INVALID;
    RANK_CHECK(MPI_Comm_create_keyval(CountingCopy, CountingDelete, &counted, &log) == 0);
    RANK_CHECK(MPI_Keyval_create(MPI_NULL_COPY_FN, CountingDelete, &plain, &plain_log) == 0);
    RANK_CHECK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &dup_fn, nullptr) ==
               0);
    RANK_CHECK(counted != plain && plain != dup_fn && counted != MPI_KEYVAL_INVALID);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    void* got = nullptr;
    int flag = -1;
    RANK_CHECK(MPI_Comm_get_attr(comm, counted, &got, &flag) == 0 && flag == 0);
    RANK_CHECK(MPI_Comm_set_attr(comm, counted, reinterpret_cast<void*>(1L)) == 0);
    RANK_CHECK(MPI_Attr_put(comm, plain, reinterpret_cast<void*>(2L)) == 0);
    RANK_CHECK(MPI_Comm_set_attr(comm, dup_fn, reinterpret_cast<void*>(3L)) == 0);
    RANK_CHECK(MPI_Comm_get_attr(comm, counted, &got, &flag) == 0 && flag == 1 &&
               got == reinterpret_cast<void*>(1L));
    // Replacing runs the delete callback on the old value.
    RANK_CHECK(MPI_Comm_set_attr(comm, counted, reinterpret_cast<void*>(4L)) == 0);
    RANK_CHECK(log.deletes == 1 && log.deleted.back() == 1);
    // Dup: the counted key is copied (+100), the null copy is not, MPI_COMM_DUP_FN as it is.
    MPI_Comm dup;
    RANK_CHECK(MPI_Comm_dup(comm, &dup) == 0);
    RANK_CHECK(log.copies == 1);
    RANK_CHECK(MPI_Comm_get_attr(dup, counted, &got, &flag) == 0 && flag == 1 &&
               got == reinterpret_cast<void*>(104L));
    RANK_CHECK(MPI_Attr_get(dup, plain, &got, &flag) == 0 && flag == 0);
    RANK_CHECK(MPI_Comm_get_attr(dup, dup_fn, &got, &flag) == 0 && flag == 1 &&
               got == reinterpret_cast<void*>(3L));
    // Delete, then free: each remaining attribute's delete callback runs once.
    RANK_CHECK(MPI_Attr_delete(comm, plain) == 0);
    RANK_CHECK(plain_log.deletes == 1 && plain_log.deleted.back() == 2);
    RANK_CHECK(MPI_Comm_get_attr(comm, plain, &got, &flag) == 0 && flag == 0);
    RANK_CHECK(MPI_Comm_delete_attr(comm, plain) == 0);  // not set: nothing to do
    RANK_CHECK(plain_log.deletes == 1);
    RANK_CHECK(MPI_Comm_free(&comm) == 0);
    RANK_CHECK(log.deletes == 2 && log.deleted.back() == 4);
    // A freed keyval takes no new attributes but its stored ones live on.
    const int counted_copy = counted;
    RANK_CHECK(MPI_Comm_free_keyval(&counted) == 0 && counted == MPI_KEYVAL_INVALID);
    RANK_CHECK(MPI_Comm_set_attr(dup, counted_copy, nullptr) == MPI_ERR_KEYVAL);
    RANK_CHECK(MPI_Comm_get_attr(dup, counted_copy, &got, &flag) == 0 && flag == 1);
    RANK_CHECK(MPI_Comm_free(&dup) == 0);
    RANK_CHECK(log.deletes == 3 && log.deleted.back() == 104);
    // Predefined and unknown keyvals.
    RANK_CHECK(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, nullptr) == MPI_ERR_KEYVAL);
    RANK_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, 12345, &got, &flag) == MPI_ERR_KEYVAL);
    RANK_CHECK(MPI_Keyval_free(&plain) == 0 && MPI_Keyval_free(&plain) == MPI_ERR_KEYVAL);
    // A failing copy callback fails the dup and leaves MPI_COMM_NULL.
    int failing = MPI_KEYVAL_INVALID;
    MPI_Comm_create_keyval(FailingCopy, nullptr, &failing, nullptr);
    MPI_Comm_set_attr(MPI_COMM_WORLD, failing, nullptr);
    MPI_Comm bad = MPI_COMM_WORLD;
    RANK_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &bad) == MPI_ERR_OTHER && bad == MPI_COMM_NULL);
    MPI_Comm_delete_attr(MPI_COMM_WORLD, failing);
    // MPI_COMM_SELF's attributes are deleted at MPI_Finalize, the last set first.
    AttrLog self_log;
    int at_exit = MPI_KEYVAL_INVALID, at_exit2 = MPI_KEYVAL_INVALID;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, CountingDelete, &at_exit, &self_log);
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, CountingDelete, &at_exit2, &self_log);
    MPI_Comm_set_attr(MPI_COMM_SELF, at_exit2, reinterpret_cast<void*>(7L));
    MPI_Comm_set_attr(MPI_COMM_SELF, at_exit, reinterpret_cast<void*>(8L));
    MPI_Finalize();
    RANK_CHECK((self_log.deleted == std::vector<long>{8, 7}));
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0}));
}

// Fortran's datatypes in the C library (ftype.cc): sizes and names; reductions as the C twin
// (MPI_INTEGER), by the library (complex sums and products, MINLOC / MAXLOC on the pairs, the
// lowest index on a tie), refused where MPI refuses them (SUM on MPI_LOGICAL); and the
// Fortran status conversion, byte counts beyond 32 bits included.
TEST(MpiLoopback, FortranDatatypesReduceAndStatusesConvert) {
  auto codes = RunRanks(3, [](int) {
    MPI_Init(nullptr, nullptr);
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int size = 0;
    MPI_Type_size(MPI_DOUBLE_COMPLEX, &size);
    RANK_CHECK(size == 16);
    MPI_Type_size(MPI_2INTEGER, &size);
    RANK_CHECK(size == 8);
    MPI_Type_size(MPI_LOGICAL, &size);
    RANK_CHECK(size == 4);
    char name[MPI_MAX_OBJECT_NAME];
    int len = 0;
    MPI_Type_get_name(MPI_2DOUBLE_PRECISION, name, &len);
    RANK_CHECK(std::string(name) == "MPI_2DOUBLE_PRECISION" && len == 21);

    int i = rank + 1;
    MPI_Allreduce(MPI_IN_PLACE, &i, 1, MPI_INTEGER, MPI_PROD, MPI_COMM_WORLD);
    RANK_CHECK(i == 6);
    float z[2] = {1.0f * static_cast<float>(rank), 1.0f};  // rank + i
    float sum[2] = {0, 0};
    MPI_Allreduce(z, sum, 1, MPI_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
    RANK_CHECK(sum[0] == 3.0f && sum[1] == 3.0f);
    double w[2] = {static_cast<double>(rank + 1), 1.0};  // (1+i)(2+i)(3+i) = 0 + 10i
    MPI_Allreduce(MPI_IN_PLACE, w, 1, MPI_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD);
    RANK_CHECK(w[0] == 0.0 && w[1] == 10.0);
    float pair[2] = {rank == 0 ? 5.0f : 7.0f, static_cast<float>(rank)};  // ranks 1, 2 tie
    MPI_Allreduce(MPI_IN_PLACE, pair, 1, MPI_2REAL, MPI_MAXLOC, MPI_COMM_WORLD);
    RANK_CHECK(pair[0] == 7.0f && pair[1] == 1.0f);
    double dpair[2] = {static_cast<double>(3 - rank), static_cast<double>(rank)};
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : dpair, rank == 0 ? dpair : nullptr, 1,
               MPI_2DOUBLE_PRECISION, MPI_MINLOC, 0, MPI_COMM_WORLD);
    if (rank == 0) RANK_CHECK(dpair[0] == 1.0 && dpair[1] == 2.0);
    int truth = rank != 1;
    MPI_Allreduce(MPI_IN_PLACE, &truth, 1, MPI_LOGICAL, MPI_LOR, MPI_COMM_WORLD);
    RANK_CHECK(truth == 1);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    RANK_CHECK(MPI_Allreduce(MPI_IN_PLACE, &truth, 1, MPI_LOGICAL, MPI_SUM, MPI_COMM_WORLD) ==
               MPI_ERR_OP);
    RANK_CHECK(MPI_Allreduce(MPI_IN_PLACE, z, 1, MPI_COMPLEX, MPI_MAX, MPI_COMM_WORLD) ==
               MPI_ERR_OP);

    MPI_Status st{};
    st.MPI_SOURCE = 2;
    st.MPI_TAG = 9;
    st.gos_bytes = (size_t{5} << 32) + 12;
    MPI_Fint f[MPI_F_STATUS_SIZE];
    MPI_Status_c2f(&st, f);
    RANK_CHECK(f[MPI_F_SOURCE] == 2 && f[MPI_F_TAG] == 9 && f[MPI_F_ERROR] == st.MPI_ERROR);
    MPI_Status back{};
    MPI_Status_f2c(f, &back);
    MPI_Count elements = 0;
    MPI_Get_elements_x(&back, MPI_INTEGER, &elements);
    RANK_CHECK(elements == ((MPI_Count{5} << 32) + 12) / 4);
    MPI_Finalize();
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0}));
}

}  // namespace loopback
#endif  // GOS_MPI_LOOPBACK

}  // namespace gos::mpi
