"""The external term format's tags and fixed-size fields, shared by the
encoder (:mod:`smp.wire.etf_encoder`) and the decoder
(:mod:`smp.wire.etf_decoder`): the version byte, one constant per tag
(the names of the VM's ``external.h``), and the ``struct`` formats of the
big-endian words the tags are followed by.  :mod:`smp.wire.etf` is the
codec's entry.
"""

from __future__ import annotations

import struct

VERSION = 131

# Tags.
NEW_FLOAT_EXT = 70
BIT_BINARY_EXT = 77
COMPRESSED = 80
ATOM_CACHE_REF = 82
NEW_PID_EXT = 88
NEW_PORT_EXT = 89
NEWER_REFERENCE_EXT = 90
SMALL_INTEGER_EXT = 97
INTEGER_EXT = 98
FLOAT_EXT = 99
ATOM_EXT = 100
REFERENCE_EXT = 101
PORT_EXT = 102
PID_EXT = 103
SMALL_TUPLE_EXT = 104
LARGE_TUPLE_EXT = 105
NIL_EXT = 106
STRING_EXT = 107
LIST_EXT = 108
BINARY_EXT = 109
SMALL_BIG_EXT = 110
LARGE_BIG_EXT = 111
NEW_FUN_EXT = 112
EXPORT_EXT = 113
NEW_REFERENCE_EXT = 114
SMALL_ATOM_EXT = 115
MAP_EXT = 116
FUN_EXT = 117
ATOM_UTF8_EXT = 118
SMALL_ATOM_UTF8_EXT = 119
V4_PORT_EXT = 120

_S_I = struct.Struct(">I")
_S_i = struct.Struct(">i")
_S_d = struct.Struct(">d")
_S_H = struct.Struct(">H")
_S_III = struct.Struct(">III")
_S_II = struct.Struct(">II")
_S_QI = struct.Struct(">QI")
_S_FUN = struct.Struct(">IB16sII")
