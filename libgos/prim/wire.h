// Bounds-checked byte encoding shared by the bootstrap protocol and the control messages
// of the primitives (docs/specs/). Little-endian, fixed-width integers, length-prefixed
// strings and byte blocks. Every Reader method fails cleanly on short or bad input: no
// decoder of network input may assert or read past the end. The codec itself is gos's one
// byte codec, gos/codec/bytes.h.
#ifndef GOS_PRIM_WIRE_H_
#define GOS_PRIM_WIRE_H_

#include "gos/codec/bytes.h"

namespace gos::prim::wire {

using Writer = codec::Writer;
using Reader = codec::Reader;

}  // namespace gos::prim::wire

#endif  // GOS_PRIM_WIRE_H_
