#!/usr/bin/python3
"""An OP_MSG decoder independent of pmrkit and libbson, for bson_insert_test.

Parses the message header and sections as the OP_MSG specification lays them out, checks the
lengths it reads, decodes every document with pymongo's `bson` module (Debian's
python3-pymongo, so run it with /usr/bin/python3) and prints one line per fact, documents as
canonical extended JSON, for the C++ test to compare. Exits non-zero with a message on
anything malformed.
"""
import struct
import sys

import bson
from bson import json_util


def dumps(doc):
    return json_util.dumps(doc, json_options=json_util.CANONICAL_JSON_OPTIONS)


def fail(message):
    print("error " + message)
    sys.exit(1)


def main(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 21:
        fail("shorter than header + flagBits + a section")
    length, request_id, response_to, op_code = struct.unpack_from("<iiii", data, 0)
    (flags,) = struct.unpack_from("<I", data, 16)
    print("messageLength %d" % length)
    print("bytes %d" % len(data))
    print("requestID %d" % request_id)
    print("responseTo %d" % response_to)
    print("opCode %d" % op_code)
    print("flagBits %d" % flags)
    if length != len(data):
        fail("messageLength disagrees with the file")
    end = len(data) - (4 if flags & 1 else 0)
    pos = 20
    while pos < end:
        kind = data[pos]
        pos += 1
        if kind == 0:
            (size,) = struct.unpack_from("<i", data, pos)
            if size < 5 or pos + size > end:
                fail("body overruns the message")
            print("body " + dumps(bson.BSON(data[pos:pos + size]).decode()))
            pos += size
        elif kind == 1:
            (size,) = struct.unpack_from("<i", data, pos)
            section_end = pos + size
            if size < 5 or section_end > end:
                fail("sequence overruns the message")
            nul = data.index(b"\0", pos + 4, section_end)
            identifier = data[pos + 4:nul].decode("utf-8")
            docs = bson.decode_all(data[nul + 1:section_end])
            print("sequence %s size %d count %d" % (identifier, size, len(docs)))
            for doc in docs:
                print("document " + dumps(doc))
            pos = section_end
        else:
            fail("section kind %d" % kind)
    if pos != end:
        fail("sections end at %d, the message at %d" % (pos, end))
    print("end")


if __name__ == "__main__":
    main(sys.argv[1])
