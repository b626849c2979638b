#!/usr/bin/env python3
"""Prints one JSON line about a PNG file: its size, how many distinct colours
it has and the share of its pixels that are not white, so that a test (or
scripts/screenshots.sh) can tell a rendered page from a blank one.

usage: png_summary.py FILE
Reads 8-bit greyscale, RGB and RGBA PNGs (what browsers write for screenshots);
exits 1 naming the file and what is wrong for anything else."""
import json
import struct
import sys
import zlib


def fail(path, what):
    sys.stderr.write("%s: %s\n" % (path, what))
    sys.exit(1)


def chunks(data, path):
    offset = 8
    while offset + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        if len(body) != length:
            fail(path, "chunk %r runs past the end of the file" % kind)
        yield kind, body
        offset += 12 + length


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def unfilter(raw, width, height, channels, path):
    stride = width * channels
    rows, previous, offset = [], bytearray(stride), 0
    for _ in range(height):
        if offset + 1 + stride > len(raw):
            fail(path, "image data ends early")
        kind, line = raw[offset], bytearray(raw[offset + 1:offset + 1 + stride])
        offset += 1 + stride
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            upper_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                line[i] = (line[i] + paeth(left, up, upper_left)) & 255
            elif kind != 0:
                fail(path, "unknown filter type %d" % kind)
        rows.append(line)
        previous = line
    return rows


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        sys.exit(2)
    path = sys.argv[1]
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path, "not a PNG file")
    header, idat = None, b""
    for kind, body in chunks(data, path):
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    if header is None:
        fail(path, "no IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace != 0:
        fail(path, "only 8-bit, non-interlaced greyscale, RGB or RGBA is read "
             "(depth %d, colour type %d, interlace %d)" % (depth, colour, interlace))
    rows = unfilter(zlib.decompress(idat), width, height, channels, path)
    colours, non_white = set(), 0
    for line in rows:
        for x in range(width):
            pixel = bytes(line[x * channels:x * channels + min(channels, 3)])
            colours.add(pixel)
            if any(v < 250 for v in pixel):
                non_white += 1
    print(json.dumps({"width": width, "height": height, "colours": len(colours),
                      "non_white_share": non_white / float(width * height)}))


if __name__ == "__main__":
    main()
