#!/usr/bin/python3
"""pymongo's encoding of the BSON values bson_value_types_test writes with pmrkit.

Prints one line per case, "<name> <hex of the encoded document>", each document encoded by
pymongo's `bson` module (Debian's python3-pymongo, so run it with /usr/bin/python3), which
shares no code with libbson. The C++ test encodes the case of the same name with
pmrkit::bson::document and compares byte for byte; the names must match one to one.
"""
import struct

import bson
from bson import Code, Decimal128, MaxKey, MinKey, ObjectId, Regex, SON, Timestamp


def decimal_from_halves(high, low):
    return Decimal128.from_bid(struct.pack("<QQ", low, high))


CASES = [
    ("decimal_1.5", {"v": Decimal128("1.5")}),
    ("decimal_1.50", {"v": Decimal128("1.50")}),
    ("decimal_-0", {"v": Decimal128("-0")}),
    ("decimal_-0.001234", {"v": Decimal128("-0.001234")}),
    ("decimal_1E+3", {"v": Decimal128("1E+3")}),
    ("decimal_34_digits", {"v": Decimal128("1234567890123456789012345678901234")}),
    ("decimal_smallest", {"v": Decimal128("1E-6176")}),
    ("decimal_largest", {"v": Decimal128("9.999999999999999999999999999999999E+6144")}),
    ("decimal_Infinity", {"v": Decimal128("Infinity")}),
    ("decimal_-Infinity", {"v": Decimal128("-Infinity")}),
    ("decimal_NaN", {"v": Decimal128("NaN")}),
    ("decimal_halves", {"v": decimal_from_halves(0x3040000000000000, 0x000000000000000F)}),
    ("regex_no_options", {"v": Regex("^a", "")}),
    ("regex_i", {"v": Regex("^a", "i")}),
    ("regex_all_unsorted", {"v": Regex("a.b+\\d", "xusmli")}),
    ("regex_repeated", {"v": Regex("[x]", "mim")}),
    ("regex_empty_pattern", {"v": Regex("", "s")}),
    ("timestamp_5_7", {"v": Timestamp(5, 7)}),
    ("timestamp_max", {"v": Timestamp(2**32 - 1, 2**32 - 1)}),
    ("min_key", {"v": MinKey()}),
    ("max_key", {"v": MaxKey()}),
    ("code", {"v": Code("function(){}")}),
    ("code_empty", {"v": Code("")}),
    ("code_utf8", {"v": Code("return 'Zoë';")}),
    ("array_empty", {"v": []}),
    ("array_mixed", {"v": [1, "two", {"k": "v"}, [3, [4]], None]}),
    ("object_id_lower", {"v": ObjectId("65a1b2c3d4e5f60718293a4b")}),
    ("object_id_upper", {"v": ObjectId("65A1B2C3D4E5F60718293A4B")}),
    # Every new type inside an array (keys written as indexes) and a nested document.
    ("in_array", SON([("a", [Decimal128("2.5"), Regex("x", "i"), Timestamp(1, 2), MinKey(),
                              MaxKey(), Code("f()"), [7], ObjectId("000102030405060708090a0b")]),
                      ("d", SON([("m", MaxKey()), ("t", Timestamp(9, 0))]))])),
]


def main():
    for name, document in CASES:
        print(name, bson.BSON.encode(document).hex())


if __name__ == "__main__":
    main()
