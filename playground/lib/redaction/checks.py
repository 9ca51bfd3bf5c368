"""The checks that tell a value from what only looks like one: card networks and the Luhn
checksum, IBANs' mod-97, IPv4 and IPv6 addresses as `ipaddress` reads them (tests compare the two)."""

from __future__ import annotations

import functools
import re
import string

_LUHN_DOUBLED = str.maketrans("0123456789", "0246813579")  # 2d, or 2d - 9 from 10 on
_IBAN_LETTERS = str.maketrans({char: str(int(char, 36)) for char in string.ascii_letters})
_NOT_DIGIT = re.compile(r"\D")


def luhn_valid(digits: str) -> bool:
    if digits.isascii():  # the sum of the digits, each second one from the right doubled
        doubled = digits[-2::-2].translate(_LUHN_DOUBLED).encode()
        return (sum(digits[-1::-2].encode()) + sum(doubled) - 48 * len(digits)) % 10 == 0
    total = 0
    for position, char in enumerate(reversed(digits)):
        digit = ord(char) - 48
        if position % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def card_network(digits: str) -> bool:
    """Whether the number has the prefix and length of a card network (Visa, Mastercard, Amex,
    Discover, JCB, Diners, UnionPay, Maestro): a Luhn-valid run of digits alone is one in ten."""
    n, two, three, four = len(digits), int(digits[:2]), int(digits[:3]), int(digits[:4])
    return (
        (digits[0] == "4" and n in (13, 16, 19))
        or ((51 <= two <= 55 or 2221 <= four <= 2720) and n == 16)
        or (two in (34, 37) and n == 15)
        or ((four == 6011 or two == 65 or 644 <= three <= 649) and 16 <= n <= 19)
        or (3528 <= four <= 3589 and 16 <= n <= 19)
        or ((two in (36, 38, 39) or 300 <= three <= 305) and 14 <= n <= 19)
        or (two == 62 and 16 <= n <= 19)
        or (two in (50, 56, 57, 58, 67) and 12 <= n <= 19)
    )


def card_number(candidate: str) -> bool:
    digits = _NOT_DIGIT.sub("", candidate)
    return 13 <= len(digits) <= 19 and card_network(digits) and luhn_valid(digits)


def iban_valid(candidate: str) -> bool:
    """ISO 13616: country and check digits moved to the end, letters read as 10-35, mod 97 is 1."""
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    account = compact[4:]
    if not account.isdigit():  # `translate` with letters' two digits is slow: only if needed
        account = account.translate(_IBAN_LETTERS)
    return int(account + compact[:2].translate(_IBAN_LETTERS) + compact[2:4]) % 97 == 1


@functools.cache
def card_lengths(first_four: str) -> frozenset[int]:
    """The lengths of the card numbers a network has that start with these four digits."""
    return frozenset(n for n in range(13, 20) if card_network(first_four + "0" * (n - 4)))


_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"  # 0-255, no leading zero
_IPV4_VALID = re.compile(rf"(?:{_OCTET}\.){{3}}{_OCTET}")


def ipv4_valid(candidate: str) -> bool:
    """`ipaddress.IPv4Address`'s answer at a tenth of its cost: four dotted ASCII numbers of one
    to three digits, none over 255, no leading zero."""
    return _IPV4_VALID.fullmatch(candidate) is not None


_HEXTETS = frozenset("0123456789abcdefABCDEF:")


def ipv6_valid(candidate: str) -> bool:
    """`ipaddress.IPv6Address`'s answer (without a scope) at a fifth of its cost: hextets of one
    to four hex digits, the last two maybe an IPv4 address; eight of them, or fewer and one "::"
    standing for the rest."""
    if "." in candidate:
        candidate, _, ipv4 = candidate.rpartition(":")
        if not ipv4_valid(ipv4):
            return False
        candidate += ":0:0"
    parts = candidate.split(":")
    if not 3 <= len(parts) <= 9 or not _HEXTETS.issuperset(candidate) or max(map(len, parts)) > 4:
        return False
    inner = parts[1:-1]
    if "" not in inner:
        return len(parts) == 8 and parts[0] != "" and parts[-1] != ""
    skip = inner.index("") + 1
    return (
        inner.count("") == 1
        and (parts[0] != "" or skip == 1)
        and (parts[-1] != "" or skip == len(parts) - 2)
        and len(parts) - 1 - (parts[0] == "") - (parts[-1] == "") <= 7
    )
