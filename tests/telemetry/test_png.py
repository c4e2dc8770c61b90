"""Stdlib PNG: round trip, signature and chunk integrity, refused inputs."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from palletizer.telemetry import RunWriter, TelemetryError, decode_png, encode_png


def _image(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize('shape', [(1, 1), (5, 8), (48, 64)])
def test_encode_then_decode_gives_the_same_pixels(shape):
    img = _image(*shape, seed=sum(shape))
    np.testing.assert_array_equal(decode_png(encode_png(img)), img)


def test_header_declares_8_bit_rgb_of_the_image_size():
    data = encode_png(_image(7, 11))
    assert data[:8] == b'\x89PNG\r\n\x1a\n' and data[12:16] == b'IHDR'
    assert struct.unpack('>IIBBBBB', data[16:29]) == (11, 7, 8, 2, 0, 0, 0)
    assert data.endswith(b'IEND' + struct.pack('>I', zlib.crc32(b'IEND')))


def test_flat_regions_compress_well():
    img = np.zeros((120, 160, 3), np.uint8)
    img[40:80] = (200, 120, 40)
    assert len(encode_png(img)) < img.size / 50


def test_a_corrupted_chunk_fails_its_crc():
    data = bytearray(encode_png(_image(6, 6)))
    data[45] ^= 0xFF  # inside the IDAT data
    with pytest.raises(TelemetryError, match='fails its CRC'):
        decode_png(bytes(data))


@pytest.mark.parametrize(
    'bad', [np.zeros((4, 4), np.uint8), np.zeros((4, 4, 4), np.uint8), np.zeros((4, 4, 3))]
)
def test_encode_refuses_anything_but_rgb_uint8(bad):
    with pytest.raises(TelemetryError, match=r'expected a non-empty \(H, W, 3\) uint8'):
        encode_png(bad)


def test_decode_refuses_non_png_bytes():
    with pytest.raises(TelemetryError, match='not a PNG'):
        decode_png(b'GIF89a' + bytes(40))


def test_run_writer_accepts_the_encoded_snapshot(tmp_path):
    with RunWriter(tmp_path, '20260509-073525') as w:
        w.begin(3)
        path = w.snapshot(0, 'side', encode_png(_image(9, 16)))
        w.abort()
    assert decode_png(path.read_bytes()).shape == (9, 16, 3)
