r"""Sensitive values in text, found and replaced by typed placeholders before anything is stored.

Six kinds (`ENTITIES`): e-mail addresses; phone numbers, which `phonenumbers` (the Python port
of Google's libphonenumber) decides are valid for their region; payment card numbers (a card
network's prefix and length, Luhn-checked); IBANs (mod-97 checksum); IPv4 and IPv6 addresses
(as `ipaddress` decides, without its cost: tests compare the two); secrets (`KEYS` and
`SECRETS`: provider and cloud keys, bearer and basic credentials, this playground's `pgk_` keys,
private-key blocks, `password=`-style values).
Each value becomes `<kind:xxxx>`, four hex digits of a hash of the value keyed by the
redaction's salt: one `Redaction` per usage record, so a value repeated in a request reads the
same wherever it stands in it, and since the salt is never kept nobody can hash guesses to
match a placeholder.

Speed (`benchmarks/redaction.py`): Python's `re` scans about 30 MB/s with a character class
first and hundreds with a literal, so each kind is looked for from a literal or from one cheap
pass: "@" for e-mail; provider keys at the start of each long run of key characters (the text
mapped by `str.translate`, then `str.find`); other secrets from a literal start (found with
`str.find`, then matched there); two colons for IPv6; and in one scan for runs of seven or more
digit-ish characters (in the text's shape, `_RUN_SHAPES`: a literal "0" is found faster than
`\d`), cards, IPv4 addresses, phone numbers and the IBANs around them. Each run's digits are
counted once and decide what reads it: digits alone are one card or one phone number whole (no
regex), digits in groups of 13 to 19 one card candidate, and only a run with three dots is read
for IPv4; a run that an IBAN, a card or an address covers is not read for the kinds that would
lose to it (`_numbers`). Only candidates whose digit count suits the region are phone-checked,
and one that reads plainly (`phones.phone_quick`) against libphonenumber's patterns for its
region, without `phonenumbers.parse` (~50 µs a number); IPv4 and IPv6 addresses without
`ipaddress` (`checks`). Per value, what remains is Python's own cost (2-4 µs each: the checks,
the placeholder's keyed hash, the ordering); see docs/guide/data-governance.md. Imports nothing
of Django: the record writer (`playground.usage.storage`) runs it.

Parts: this module finds the values and replaces them; `checks` tells a card, an IBAN or an IP
address from what only looks like one; `phones` decides phone numbers.
"""

from __future__ import annotations

import bisect
import hashlib
import operator
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .checks import card_lengths, card_number, iban_valid, ipv4_valid, ipv6_valid, luhn_valid
from .phones import digits_of, national_lengths, phone_valid

__all__ = [
    "CARD",
    "EMAIL",
    "ENTITIES",
    "IBAN",
    "IP",
    "KEYS",
    "PHONE",
    "PLACEHOLDER",
    "SECRET",
    "SECRETS",
    "Redaction",
    "card_number",
    "iban_valid",
    "luhn_valid",
    "new_salt",
]

EMAIL = "email"
PHONE = "phone"
CARD = "card"
IBAN = "iban"
IP = "ip"
SECRET = "secret"  # noqa: S105 (the name of a kind, not a secret)
# Where two finds overlap, the kind listed first wins: a key holding digits stays a secret, an
# IBAN's or an address's digits are not a card or a phone number.
ENTITIES = (SECRET, EMAIL, IBAN, CARD, IP, PHONE)
RANK = {kind: i for i, kind in enumerate(ENTITIES)}
PLACEHOLDER = re.compile(r"<(" + "|".join(ENTITIES) + r"):[0-9a-f]{4}>")


# Keys with a provider's prefix, each a run of 15 or more characters of [A-Za-z0-9_-] (a JWT's
# first part): `_secrets` finds such runs in one pass and checks only their starts.
KEYS: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = (
    (("pgk_",), re.compile(r"pgk_[A-Za-z0-9_-]{16,}")),  # this playground's API keys
    (
        ("sk-",),
        re.compile(r"sk-(?:ant-|proj-|svcacct-|admin-|or-)?[A-Za-z0-9_-]{20,}"),
    ),  # OpenAI, Anthropic...
    (("sk_live_", "sk_test_", "rk_live_", "rk_test_"), re.compile(r"[sr]k_(?:live|test)_\w{16,}")),  # Stripe
    (("AKIA", "ASIA", "ABIA", "ACCA"), re.compile(r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b")),  # AWS key ids
    (
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{22,}"),
    ),
    (("glpat-",), re.compile(r"glpat-[\w-]{20,}")),  # GitLab
    (("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"), re.compile(r"xox[abposr]-[\w-]{10,}")),  # Slack
    (("AIza",), re.compile(r"AIza[\w-]{35}")),  # Google
    (("hf_",), re.compile(r"hf_[A-Za-z0-9]{30,}")),  # Hugging Face
    (("eyJ",), re.compile(r"eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}")),  # a JWT
)
KEY_STARTS = tuple(start for starts, _ in KEYS for start in starts)
KEY_RUN = 15
_KEY_CHARS = str.maketrans(
    {chr(i): "k" if chr(i).isascii() and (chr(i).isalnum() or chr(i) in "_-") else " " for i in range(128)}
)


@dataclass(frozen=True)
class SecretPattern:
    """A secret found by what precedes it or starts it: `pattern` is matched where one of
    `starts` (lower-case) begins; `group` is the part replaced (0: all of it)."""

    starts: tuple[str, ...]
    pattern: re.Pattern[str]
    group: int = 0


# Each start costs a `str.find` over the text, the bulk of looking for these: few and long.
SECRETS = (
    SecretPattern(
        ("-----begin ",),
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*)",  # unterminated: to the end
            re.DOTALL,
        ),
    ),
    SecretPattern(("hooks.slack.com/",), re.compile(r"hooks\.slack\.com/services/[\w/-]+")),
    SecretPattern(
        ("bearer", "basic"), re.compile(r"(?i:bearer|basic)\s+([A-Za-z0-9._~+/-]{16,}=*)"), group=1
    ),
    # The value of a name that says it is secret: `password: ...`, `"api_key": "..."`,
    # `AWS_SECRET_ACCESS_KEY=...`, `db_password=...`, `x-api-key: ...`.
    SecretPattern(
        ("passw", "pwd", "secret", "api", "token"),
        re.compile(
            r"(?i:passw(?:or)?d|pwd|secret|api[_-]?key|token)[\w-]*[\"']?\s*[:=]\s*[\"']?([^\s\"',;<>]{8,})"
        ),
        group=1,
    ),
)

_DOMAIN = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*"
    r"\.[A-Za-z]{2,63}\b"
)
_LOCAL_REVERSED = re.compile(r"[A-Za-z0-9._%+-]{1,64}")
# Seven or more characters of digits and the separators numbers are written with, from a digit
# to a digit: where cards, IPv4 addresses, phone numbers and IBANs' digits are. At most 48 at
# once, so a long table of figures costs its length, not its square.
_DIGIT_RUN = re.compile(r"\d[\d \t().\-/]{5,46}\d")
# The same on ASCII text, in its shape: digits "0", separators "s", the rest "x" (one
# `bytes.translate`), where the search for a literal "0" runs three times as fast as for `\d`.
_DIGIT_RUN_SHAPE = re.compile(rb"0[0s]{5,46}0")
_RUN_SHAPES = bytes(
    b"0"[0] if char in "0123456789" else b"s"[0] if char in " \t().-/" else b"x"[0]
    for char in map(chr, range(256))
)
_GROUPED = re.compile(r"\d+(?:[ -]\d+)*")  # digits in groups, one space or dash between
_CARD = re.compile(r"(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?!\d|\.\d)")
# `\b[A-Z]{2}\d{2}...`, its `\b` looked at behind the first capital: a pattern that starts with a
# character class is searched for that class in C, one that starts with `\b` is tried everywhere.
_IBAN = re.compile(r"[A-Z](?<=\b[A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]){11,30}\b")
IBAN_BEFORE_DIGITS = 12  # "GB82 WEST 1234...": its first run of digits starts 10 characters in
# What may be a phone number, for `phonenumbers` to decide: international (+44 20 7946 0958), an
# area code in brackets ((415) 555-2671), groups (030 1234 5678, 415.555.2671), or 8-12 digits.
_PHONE = re.compile(
    r"(?<![\d+.])(?:"
    r"\+\d{1,3}(?:[ .\-]?\(?\d{1,5}\)?){1,5}"
    r"|\(\d{2,5}\)[ .\-]?\d{2,5}(?:[ .\-]?\d{2,5}){0,2}"
    r"|\d{2,5}(?:[ .\-]\d{2,8}){1,3}"
    r"|\d{8,12}"
    r")(?![\d.]\d|\d)"
)
MIN_PHONE_DIGITS = 7
PHONE_LEAD = "+("  # may stand just before a run of digits
_IPV6_COLONS = re.compile(r":[0-9A-Fa-f]{0,4}:")
_IPV6_LEFT_REVERSED = re.compile(r"[0-9A-Fa-f:]{0,40}")
_IPV6_RIGHT = re.compile(r"[0-9A-Fa-f:]*(?:\d{1,3}(?:\.\d{1,3}){3})?")
_WORD = re.compile(r"\w")
_SPAN = re.Match.span


# A find: (start, end, kind). A plain tuple: one is made for every candidate, and a NamedTuple's
# constructor (a Python function) costs ten times as much.
Found = tuple[int, int, str]


def _secrets(text: str, lower: str) -> Iterator[Found]:
    yield from _keys(text)
    for secret in SECRETS:
        for start in secret.starts:
            at = lower.find(start)
            while at != -1:
                match = secret.pattern.match(text, at)
                if match is not None:
                    yield (match.start(secret.group), match.end(secret.group), SECRET)
                at = lower.find(start, match.end() if match is not None else at + 1)


def _keys(text: str) -> Iterator[Found]:
    """Provider keys, checked at the start of each run of KEY_RUN or more key characters (found
    in one pass over the text mapped to "k" and " ")."""
    runs = text.translate(_KEY_CHARS)
    long = "k" * KEY_RUN
    at = runs.find(long)
    while at != -1:
        end = runs.find(" ", at)
        end = len(runs) if end == -1 else end
        if text.startswith(KEY_STARTS, at):
            for starts, pattern in KEYS:
                match = pattern.match(text, at) if text.startswith(starts, at) else None
                if match is not None:
                    yield (at, match.end(), SECRET)
                    end = max(end, match.end())
                    break
        at = runs.find(long, end)


def _emails(text: str, lower: str) -> Iterator[Found]:
    at = text.find("@")
    while at != -1:
        domain = _DOMAIN.match(text, at + 1)
        local = _LOCAL_REVERSED.match(text[max(0, at - 64) : at][::-1])
        if domain is not None and local is not None:
            start = at - local.end()
            while text[start] == ".":  # a local part does not start with a dot
                start += 1
            if start < at:
                yield (start, domain.end(), EMAIL)
        at = text.find("@", at + 1)


def _numbers(text: str, *, region: str, assumed: list[Found] | None) -> list[Found]:
    """Cards, IPv4 addresses, phone numbers and IBANs, each in or around a run of digits: one
    pass over the runs, each classified by its digits and separators before any other regex
    reads it (a run of digits alone is at most one card or one phone number, whole).

    A run that an IBAN, a card or an IPv4 address covers whole is not read for the kinds after
    it in `ENTITIES` (they would lose to it) if `assumed` is a list: the covering find is added
    to it, and `Redaction._found` reads the text again without this if one of them is not kept
    (a secret or an e-mail address over it)."""
    lengths = national_lengths(region)
    fewest = min(lengths)
    found: list[Found] = []

    def covered(since: int, start: int, end: int) -> bool:
        """Whether a find added from `since` on covers the run, which then needs no more checks."""
        if assumed is None or len(found) == since:
            return False
        for each in found[since:]:
            if each[0] <= start and end <= each[1]:
                assumed.append(each)
                return True
        return False

    for start, end, digits in _digit_runs(text):
        if start and text[start - 1] in PHONE_LEAD:
            start -= 1
        value = text[start:end]
        before = max(0, start - IBAN_BEFORE_DIGITS)
        if not text[before:start].islower():  # an IBAN starts with two capitals
            since = len(found)
            for match in _IBAN.finditer(text, before, end + 34):
                _shortened(match.group(), match.start(), IBAN, iban_valid, found)
            if covered(since, start, end):
                continue
        if digits == len(value):
            if 13 <= digits <= 19 and digits in card_lengths(value[:4]) and luhn_valid(value):
                found.append((start, end, CARD))
            elif 8 <= digits <= 12 and digits in lengths and phone_valid(value, region, value):
                found.append((start, end, PHONE))
            continue
        since = len(found)
        if 13 <= digits <= 19 and _GROUPED.fullmatch(value):  # "4111 1111 1111 1111"
            _card(value, start, digits_of(value), found)  # `_CARD`'s one match there: the run
        elif digits >= 13:
            _cards(value, start, found)
        if value.count(".") >= 3:
            for match in _IPV4.finditer(value):
                if ipv4_valid(match.group()):
                    found.append((start + match.start(), start + match.end(), IP))
        if (digits >= fewest or (value[0] == "+" and digits >= MIN_PHONE_DIGITS)) and not covered(
            since, start, end
        ):
            _phones(value, start, found, digits_of(value), region=region, lengths=lengths)
    return found


def _digit_runs(text: str) -> list[tuple[int, int, int]]:
    """The spans of `_DIGIT_RUN`'s matches, and how many digits each holds (a list built in one
    comprehension: a generator's resumption per run cost more)."""
    if not text.isascii():
        return [(*run.span(), len(digits_of(run.group()))) for run in _DIGIT_RUN.finditer(text)]
    shape = text.encode().translate(_RUN_SHAPES)
    spans = map(_SPAN, _DIGIT_RUN_SHAPE.finditer(shape))
    return [(start, end, shape.count(b"0", start, end)) for start, end in spans]


def _phones(
    value: str, offset: int, found: list[Found], figures: str, *, region: str, lengths: frozenset[int]
) -> None:
    """Phone numbers in a run (`value`, its digits `figures`)."""
    for match in _PHONE.finditer(value):
        candidate = match.group()
        digits = figures if len(candidate) == len(value) else digits_of(candidate)
        if (8 <= len(digits) <= 15 if candidate[0] == "+" else len(digits) in lengths) and phone_valid(
            candidate, region, digits
        ):
            found.append((offset + match.start(), offset + match.end(), PHONE))


def _cards(value: str, offset: int, found: list[Found]) -> None:
    """`card_number`'s finds."""
    for match in _CARD.finditer(value):
        candidate = match.group()
        _card(candidate, offset + match.start(), digits_of(candidate), found)


def _card(candidate: str, offset: int, digits: str, found: list[Found]) -> None:
    """A match of `_CARD` (its `digits` given), or its longest valid start in whole groups, if
    a card: its network looked up once from its first four digits."""
    lengths = card_lengths(digits[:4])
    if not lengths:  # no network's numbers start so, however long
        return
    if len(digits) in lengths and luhn_valid(digits):
        found.append((offset, offset + len(candidate), CARD))
        return

    def valid(start: str) -> bool:
        digits = digits_of(start)
        return len(digits) in lengths and luhn_valid(digits)

    cut = max(candidate.rfind(" "), candidate.rfind("-"))
    if cut > 0:
        _shortened(candidate[:cut], offset, CARD, valid, found)


def _shortened(
    candidate: str, offset: int, kind: str, valid: Callable[[str], bool], found: list[Found]
) -> None:
    """The candidate (at `offset`) if valid, else its longest valid start in whole groups (cut at
    a space or a dash), added to `found`: a figure or word written after a card or an IBAN joins
    the match."""
    end = len(candidate)
    while end > 0:
        if valid(candidate[:end]):
            found.append((offset, offset + end, kind))
            return
        end = max(candidate.rfind(" ", 0, end), candidate.rfind("-", 0, end))


def _ipv6(text: str, lower: str) -> Iterator[Found]:
    """IPv6 addresses, found from two colons close together. Loopback's and a slice's few digits
    (`::1`, `x[1::2]`) are no address worth a placeholder: one needs a group of 3+ hex digits."""
    position = 0 if text.count(":") >= 2 else len(text)
    while (hit := _IPV6_COLONS.search(text, position)) is not None:
        before = text[max(0, hit.start() - 40) : hit.start()][::-1]
        left = hit.start() - _matched_length(_IPV6_LEFT_REVERSED, before, 0)
        right = hit.start() + _matched_length(_IPV6_RIGHT, text, hit.start())
        position = max(right, hit.end())
        if (left and _WORD.match(text, left - 1)) or _WORD.match(text, right):
            continue  # part of a word: `std::vector`, a hash
        candidate = text[left:right]
        if max(map(len, candidate.split(":"))) >= 3 and ipv6_valid(candidate):
            yield (left, right, IP)


def _matched_length(pattern: re.Pattern[str], text: str, at: int) -> int:
    """How many characters from `at` a pattern that may match nothing matches."""
    match = pattern.match(text, at)
    return match.end() - at if match is not None else 0


def _lower(text: str) -> str:
    """`text` lower-cased, character for character (a few characters lower to two: İ)."""
    lower = text.lower()
    return (
        lower if len(lower) == len(text) else "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    )


def _kept(candidates: list[Found]) -> list[Found]:
    """What to replace, in order and without overlaps: the kind listed first in `ENTITIES` wins."""
    if not candidates:
        return []
    candidates.sort()  # by start: apart, as they mostly are, all of them are kept
    starts, ends, _ = zip(*candidates, strict=True)
    if all(map(operator.le, ends, starts[1:])) and all(map(operator.lt, starts, ends)):
        return candidates
    candidates.sort(key=lambda each: (RANK[each[2]], each[0], -each[1]))
    kept_starts: list[int] = []  # of `kept`, which stays in order and without overlaps
    kept: list[Found] = []
    for each in candidates:
        start, end, _ = each
        i = bisect.bisect_right(kept_starts, start)
        overlaps = (i and kept[i - 1][1] > start) or (i < len(kept) and kept[i][0] < end)
        if start < end and not overlaps:
            kept_starts.insert(i, start)
            kept.insert(i, each)
    return kept


Finder = Callable[[str, str], Iterable[Found]]
FINDERS: tuple[Finder, ...] = (_secrets, _emails, _ipv6)  # and `_numbers`, with the region


def new_salt() -> bytes:
    """A salt of its own: placeholders nobody else's redaction reproduces."""
    return os.urandom(16)


@dataclass
class Redaction:
    """One record's redaction: its salt, and how many values of each kind it replaced (a value
    repeated counts each time). `text` and `value` (every string of a JSON value) replace."""

    phone_region: str = "US"  # how a phone number written without its country code is read
    salt: bytes = field(default_factory=new_salt)
    counts: Counter[str] = field(default_factory=Counter)
    _keyed: hashlib.blake2b = field(init=False, repr=False)  # keyed by the salt once, then copied
    _hashed: dict[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)  # by value

    def __post_init__(self) -> None:
        self._keyed = hashlib.blake2b(digest_size=2, key=self.salt)

    def text(self, text: str) -> str:
        found = self._found(text)
        if not found:
            return text
        parts: list[str] = []
        append = parts.append
        at = 0
        hashed, keyed = self._hashed, self._keyed
        for start, end, kind in found:
            value = text[start:end]
            hexed = hashed.get(value)
            if hexed is None:  # the value's keyed hash, made once per redaction (inline: ~0.2 µs less)
                digest = keyed.copy()
                digest.update(value.encode("utf-8", "surrogatepass"))
                hexed = hashed[value] = digest.hexdigest()
            append(text[at:start])
            append(f"<{kind}:{hexed}>")
            at = end
        append(text[at:])
        self.counts.update(map(operator.itemgetter(2), found))
        return "".join(parts)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        return value

    def _found(self, text: str) -> list[Found]:
        """What to replace, in order and without overlaps: the kind listed first in `ENTITIES` wins."""
        if len(text) < 7:  # the shortest entity: 1.1.1.1
            return []
        lower = _lower(text)
        candidates = [each for finder in FINDERS for each in finder(text, lower)]
        assumed: list[Found] = []
        numbers = _numbers(text, region=self.phone_region, assumed=assumed)
        kept = _kept(candidates + numbers)
        if assumed and not set(assumed).issubset(kept):
            kept = _kept(candidates + _numbers(text, region=self.phone_region, assumed=None))
        return kept
