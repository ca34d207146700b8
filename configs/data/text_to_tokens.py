#!/usr/bin/env python3
"""Byte-level tokenizer: writes a text file's bytes (token id = byte value, 0-255) as a
TZTOKENS uint16 token file (layout in engine/data/token_data.h).

    python3 configs/data/text_to_tokens.py configs/data/tiny_corpus.txt configs/data/tiny_corpus.u16
"""
import struct
import sys


def main(src: str, dst: str) -> None:
    data = open(src, "rb").read()
    header = b"TZTOKENS" + struct.pack("<IIQQ", 1, 2, len(data), 0)
    with open(dst, "wb") as out:
        out.write(header)
        out.write(b"".join(struct.pack("<H", b) for b in data))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: text_to_tokens.py INPUT.txt OUTPUT.u16")
    main(sys.argv[1], sys.argv[2])
