# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""OpenPGP public keys in pure Python, no gpg on the host or the controller (private to gpufleet.node).

The primary keys' fingerprints of a key file (ASCII-armored or binary), ASCII armor both ways, the fingerprints
users give normalised, and the checks of a repository key's settings. Packet format: RFC 4880 (section 4.2),
armor: section 6, v4 fingerprints: section 12.2.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import re
import struct

ARMOR_BEGIN = '-----BEGIN PGP PUBLIC KEY BLOCK-----'
ARMOR_END = '-----END PGP PUBLIC KEY BLOCK-----'
SECRET_KEY, PUBLIC_KEY, SECRET_SUBKEY, USER_ID = 5, 6, 7, 13
KEY_URL_SCHEMES = ('https://', 'file://')
FINGERPRINT_RE = re.compile(r'^[0-9A-F]{40}$')
# A value with a scheme names a URL; an armored key starts with '-', a path on the host with '/'.
URL_RE = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:')
FINGERPRINT_HELP = "40 hex characters (spaces allowed), the fingerprint of the key's primary key (gpg --show-keys)"


class OpenPGPError(ValueError):
    """The data is not an OpenPGP public key this module can read; the message says why."""


def _bytes(data):
    return data.encode('utf-8') if not isinstance(data, bytes) else data


def crc24(data):
    """The armor checksum of ``data`` (RFC 4880, 6.1)."""
    crc = 0xB704CE
    for byte in bytearray(data):
        crc ^= byte << 16
        for _bit in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def is_armored(data):
    return _bytes(data).lstrip().startswith(b'-----BEGIN PGP')


def armor(binary):
    """Binary OpenPGP data as an ASCII-armored public key block with its checksum line."""
    text = base64.b64encode(binary).decode('ascii')
    lines = [text[start:start + 64] for start in range(0, len(text), 64)]
    checksum = base64.b64encode(struct.pack('>I', crc24(binary))[1:]).decode('ascii')
    return '\n'.join([ARMOR_BEGIN, ''] + lines + ['=' + checksum, ARMOR_END]) + '\n'


def dearmor(data):
    """The binary packets of every public key block of ASCII-armored text, each block's checksum checked."""
    lines = iter(_bytes(data).decode('ascii', 'replace').splitlines())
    blocks = [_block(lines) for line in lines if line.strip() == ARMOR_BEGIN]
    if not blocks:
        raise OpenPGPError('no "%s" line' % ARMOR_BEGIN)
    return b''.join(blocks)


def _block(lines):
    """One armored block's data: armor headers up to the first empty line, base64, an optional checksum line."""
    in_headers, encoded, checksum = True, [], None
    for line in (raw.strip() for raw in lines):
        if line == ARMOR_END:
            return _decode(''.join(encoded), checksum)
        if in_headers and (not line or ':' in line):
            in_headers = bool(line)
        elif line.startswith('=') and len(line) == 5:
            checksum = line[1:]
        elif line:
            in_headers = False
            encoded.append(line)
    raise OpenPGPError('the armor has no "%s" line' % ARMOR_END)


def _decode(encoded, checksum):
    try:
        data = base64.b64decode(encoded.encode('ascii'), validate=True)
        expected = base64.b64decode(checksum.encode('ascii'), validate=True) if checksum else None
    except (binascii.Error, ValueError):
        raise OpenPGPError('the armor holds characters that are not base64')
    if expected is not None and expected != struct.pack('>I', crc24(data))[1:]:
        raise OpenPGPError('the armor checksum (=%s) does not match its data: the key is damaged' % checksum)
    return data


def packets(binary):
    """(tag, body) of each packet of binary OpenPGP data, old and new packet formats."""
    data, pos = bytearray(binary), 0
    while pos < len(data):
        header = data[pos]
        if not header & 0x80:
            raise OpenPGPError('byte %d is not an OpenPGP packet header' % pos)
        try:
            if header & 0x40:
                body, pos = _new_format_body(data, pos + 1)
                yield header & 0x3F, body
            else:
                body, pos = _old_format_body(data, pos + 1, header & 0x03)
                yield (header >> 2) & 0x0F, body
        except (IndexError, struct.error):
            raise OpenPGPError('the data ends inside a packet: the key is truncated')


def _take(data, pos, length):
    if pos + length > len(data):
        raise IndexError(pos + length)
    return bytes(data[pos:pos + length]), pos + length


def _old_format_body(data, pos, length_type):
    if length_type == 3:
        return bytes(data[pos:]), len(data)
    size, code = ((1, '>B'), (2, '>H'), (4, '>I'))[length_type]
    (length,) = struct.unpack(code, bytes(data[pos:pos + size]))
    return _take(data, pos + size, length)


def _new_format_body(data, pos):
    """A new-format packet's body, partial body lengths joined."""
    body = b''
    while True:
        first = data[pos]
        if first < 192:
            return _joined(body, _take(data, pos + 1, first))
        if first < 224:
            return _joined(body, _take(data, pos + 2, ((first - 192) << 8) + data[pos + 1] + 192))
        if first == 255:
            return _joined(body, _take(data, pos + 5, struct.unpack('>I', bytes(data[pos + 1:pos + 5]))[0]))
        part, pos = _take(data, pos + 1, 1 << (first & 0x1F))
        body += part


def _joined(body, taken):
    return body + taken[0], taken[1]


def v4_fingerprint(body):
    """The fingerprint of a version 4 public key packet's body: SHA-1 over 0x99, the body's length and the body."""
    version = bytearray(body[:1])[0] if body else 0
    if version != 4:
        raise OpenPGPError('a version %d primary key: only version 4 keys are supported' % version)
    return hashlib.sha1(b'\x99' + struct.pack('>H', len(body)) + body).hexdigest().upper()


def public_keys(data):
    """Each primary key of an OpenPGP public key file (armored or binary), in file order, as
    ``{'fingerprint': ..., 'user_ids': [...]}``. Subkeys and signatures are not keys of their own."""
    binary = dearmor(data) if is_armored(data) else _bytes(data)
    keys = []
    for tag, body in packets(binary):
        if tag in (SECRET_KEY, SECRET_SUBKEY):
            raise OpenPGPError('it holds a secret key: give the public key only (gpg --export)')
        if tag == PUBLIC_KEY:
            keys.append({'fingerprint': v4_fingerprint(body), 'user_ids': []})
        elif tag == USER_ID and keys:
            keys[-1]['user_ids'].append(body.decode('utf-8', 'replace'))
    if not keys:
        raise OpenPGPError('it holds no OpenPGP public key')
    return keys


def fingerprints(data):
    """The primary keys' fingerprints of an OpenPGP public key file, in file order."""
    return [key['fingerprint'] for key in public_keys(data)]


def normalize_fingerprint(value):
    """``'eb69 3B30 ...'`` -> ``'EB693B30...'``; OpenPGPError unless 40 hex characters remain."""
    text = re.sub(r'\s+', '', str(value or '')).upper()
    if not FINGERPRINT_RE.match(text):
        raise OpenPGPError("'%s' is not %s" % (value, FINGERPRINT_HELP))
    return text


def key_url(value):
    """``value`` when it names a URL (it has a scheme), else '' (a key given inline or as a path on the host), as
    nvidia_driver tells its signing key settings apart."""
    return value if URL_RE.match(str(value or '')) else ''


def key_source_problems(url_var, url, fingerprint_var, fingerprint, required=True):
    """What is wrong with a repository key's settings, one message per problem ([] when nothing is).

    ``url`` ('' when the key is given otherwise) must be an https:// or file:// URL; ``fingerprint`` (a string, or a
    list of them for a file of several keys) must be 40 hex characters, spaces allowed, and is needed when
    ``required``.
    """
    problems = []
    if url and (not str(url).startswith(KEY_URL_SCHEMES) or re.search(r'\s', str(url))):
        problems.append("%s is '%s': expected an https:// or file:// URL without spaces (a key fetched over plain"
                        " http:// or another scheme could be swapped on the way)." % (url_var, url))
    values = fingerprint if isinstance(fingerprint, (list, tuple)) else [fingerprint]
    given = [value for value in values if str(value or '').strip()]
    if not given and required:
        problems.append("%s is '%s': expected %s." % (fingerprint_var, fingerprint or '', FINGERPRINT_HELP))
    for value in given:
        if not FINGERPRINT_RE.match(re.sub(r'\s+', '', str(value)).upper()):
            problems.append("%s is '%s': expected %s." % (fingerprint_var, value, FINGERPRINT_HELP))
    return problems


def describe(keys):
    """``FINGERPRINT (user id, ...)`` of each key, joined with ``, ``."""
    return ', '.join('%s (%s)' % (key['fingerprint'], '; '.join(key['user_ids']) or 'no user id') for key in keys)
