"""Whether a candidate is a phone number that libphonenumber (`phonenumbers`) calls valid, at a
fraction of `phonenumbers.parse`'s cost where the number reads plainly (`phone_quick`).

`tests/lib/test_redaction.py` compares `phone_quick` with `phonenumbers` on every region's example
numbers and thousands of others."""

from __future__ import annotations

import functools
import hashlib
import os
import re
from typing import Any, NamedTuple

import phonenumbers

_SEPARATORS = b" \t().-/+"


def digits_of(run: str) -> str:
    """The digits of a run of digits and separators (a phone number's, a card's): an ASCII run's in
    one `bytes.translate` (a fifth of `_NOT_DIGIT.sub`'s cost), others' by `str.replace`."""
    if run.isascii():
        return run.encode().translate(None, _SEPARATORS).decode()
    for separator in " \t().-/+":
        run = run.replace(separator, "")
    return run


@functools.cache
def national_lengths(region: str) -> frozenset[int]:
    """How many digits a number written nationally in `region` has, with its trunk prefix or
    without (libphonenumber's metadata: 10 and 11 in the US)."""
    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
    if metadata is None or metadata.general_desc is None:
        raise ValueError(f"phonenumbers knows no region {region!r}")
    lengths = set(metadata.general_desc.possible_length)
    prefix = len(metadata.national_prefix or "")
    return frozenset(lengths | {length + prefix for length in lengths})


# Whether a candidate is a valid number, kept by a keyed hash of it (a process keeps no phone
# number): a conversation sends its whole history again with each turn.
_PHONE_KEYED = hashlib.blake2b(digest_size=16, key=os.urandom(16))  # copied for each candidate
_phones_checked: dict[bytes, bool] = {}
PHONES_CHECKED_MAX = 8192


def phone_valid(candidate: str, region: str, digits: str) -> bool:
    """Whether `phonenumbers` reads the candidate (its digits given) as a valid number."""
    quick = phone_quick(candidate, region, digits)
    if quick is not None:
        return quick
    keyed = _PHONE_KEYED.copy()
    keyed.update(f"{region}:{candidate}".encode())
    key = keyed.digest()
    valid = _phones_checked.get(key)
    if valid is None:
        valid = phone_parsed_valid(candidate, region)
        if len(_phones_checked) >= PHONES_CHECKED_MAX:
            _phones_checked.clear()
        _phones_checked[key] = valid
    return valid


def phone_parsed_valid(candidate: str, region: str) -> bool:
    """`phonenumbers`' own answer (~50 µs): what `phone_quick` answers as, where it answers."""
    try:
        number = phonenumbers.parse(candidate, region)
    except phonenumbers.NumberParseException:
        return False
    if number.country_code is None:
        return False
    # The country code's main region first: one region's rules, where `is_valid_number` tries
    # each region of the code (25 for +1).
    main = phonenumbers.region_code_for_country_code(number.country_code)
    return phonenumbers.is_valid_number_for_region(number, main) or phonenumbers.is_valid_number(number)


_COUNTRY_CODES = frozenset(map(str, phonenumbers.COUNTRY_CODE_TO_REGION_CODE))


def phone_quick(candidate: str, region: str, digits: str | None = None) -> bool | None:
    """`phone_parsed_valid`'s answer without `phonenumbers.parse` (~50 µs) where the candidate
    reads plainly (None: ask `phonenumbers`): its digits split into the country code (after "+",
    else the region's) and the national number, which no national or international prefix
    starts, checked against the main region's patterns as `is_valid_number_for_region` does. A
    country code shared by several regions (+1) asks `phonenumbers` about a number invalid in
    its main region. `digits`: the candidate's, if counted already."""
    digits = digits_of(candidate) if digits is None else digits
    if not digits.isascii():
        return None  # phonenumbers reads other scripts' digits too
    if candidate[0] == "+":
        if digits[0] == "0":
            return None  # "+00...": phonenumbers reads an international prefix in it
        reading = _international_reading(digits[:3])
        if reading is None:
            return False  # phonenumbers: INVALID_COUNTRY_CODE
        national = digits[len(reading.code) :]
    else:
        reading, national = _national_reading(region), digits
        if digits.startswith(reading.code) or (reading.idd is not None and reading.idd.match(digits)):
            return None  # parse may read a country code in it
    if reading.patterns is None:
        return None
    if not 2 <= len(national) <= 17 or (reading.trunk is not None and reading.trunk.match(national)):
        return None  # parse may strip a national prefix
    if reading.patterns.valid(national):
        return True
    return False if reading.sole else None


class _Reading(NamedTuple):
    """How `phone_quick` reads a number of one country code, written in one way: worked out
    once per code and region, as each is the same for all of its numbers."""

    code: str  # the country code's digits
    idd: re.Pattern[str] | None  # the international prefix where a number is written nationally
    trunk: re.Pattern[str] | None  # the national prefix of the region it is read in
    patterns: _PhonePatterns | None  # the code's main region's (None: unknown or non-geographic)
    sole: bool  # the only region of its code


def _reading(code: int, region: str | None) -> _Reading:
    """A number of country code `code`, written nationally in `region` or internationally (None)."""
    main = phonenumbers.region_code_for_country_code(code)
    if main in (phonenumbers.UNKNOWN_REGION, phonenumbers.REGION_CODE_FOR_NON_GEO_ENTITY):
        return _Reading(str(code), None, None, None, sole=False)
    read_as = _phone_patterns(region or main)
    return _Reading(
        str(code),
        read_as.international_prefix if region else None,
        read_as.national_prefix,
        _phone_patterns(main),
        sole=len(phonenumbers.COUNTRY_CODE_TO_REGION_CODE[code]) == 1,
    )


@functools.cache
def _international_reading(start: str) -> _Reading | None:
    """The reading of a number written "+" and these (three) digits first: its country code's
    (codes are prefix-free); None: no country code starts so."""
    code = next((start[:n] for n in (1, 2, 3) if start[:n] in _COUNTRY_CODES), "")
    return _reading(int(code), None) if code else None


@functools.cache
def _national_reading(region: str) -> _Reading:
    return _reading(phonenumbers.country_code_for_region(region), region)


class _PhonePatterns(NamedTuple):
    international_prefix: re.Pattern[str] | None
    national_prefix: re.Pattern[str] | None  # for parsing
    # By length: the general pattern (in a lookahead) and those of each type of number, in one.
    numbers: dict[int, re.Pattern[str]]

    def valid(self, national: str) -> bool:
        """libphonenumber's `_number_type_helper(national) != UNKNOWN`."""
        numbers = self.numbers.get(len(national))
        return numbers is not None and numbers.fullmatch(national) is not None


@functools.cache
def _phone_patterns(region: str) -> _PhonePatterns:
    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
    if metadata is None or metadata.general_desc is None:
        raise ValueError(f"phonenumbers knows no region {region!r}")

    def compiled(pattern: str | None) -> re.Pattern[str] | None:
        return re.compile(pattern) if pattern else None

    def desc(each: Any) -> tuple[frozenset[int], re.Pattern[str] | None]:
        return frozenset(each.possible_length or ()), compiled(each.national_number_pattern)

    kinds = [
        metadata.premium_rate,
        metadata.toll_free,
        metadata.shared_cost,
        metadata.voip,
        metadata.personal_number,
        metadata.pager,
        metadata.uan,
        metadata.voicemail,
        metadata.fixed_line,
    ]
    if not metadata.same_mobile_and_fixed_line_pattern:
        kinds.append(metadata.mobile)
    descs = [desc(each) for each in kinds if each is not None]
    general_lengths, general = desc(metadata.general_desc)
    numbers = {
        n: re.compile(
            f"(?=(?:{general.pattern})\\Z)(?:" + "|".join(f"(?:{p.pattern})" for p in alternatives) + ")"
        )
        for n in range(2, 18)
        if general is not None
        and (not general_lengths or n in general_lengths)
        and (alternatives := [p for lengths, p in descs if p is not None and (not lengths or n in lengths)])
    }
    return _PhonePatterns(
        compiled(metadata.international_prefix), compiled(metadata.national_prefix_for_parsing), numbers
    )
